"""PPO's minibatch loss in torch autograd: the reference every other implementation is tested against.

Paper: https://arxiv.org/abs/1707.06347 (clipped surrogate). The loss is
``policy_loss + value_coef * value_loss - entropy_coef * entropy (+ mean_bound_coef * mean_excess)``:
the clipped surrogate on a log-ratio clamped to ±``max_log_ratio``, the squared value error, the
Gaussian entropy gated per dimension at the log-std ceiling, and the optional mean-bound penalty.
With discrete branches (:class:`agents.networks.MixedActor`) the entropy adds the masked categoricals'
and the penalty reads the continuous part's mean; only this module's form knows them.

The surrogate and value error (:data:`Surrogate`) come in two forms: :func:`reference_surrogate` on
the plain modules, here, and :func:`agents.ppo.fused.fused_surrogate`, the same maths as two
hand-differentiated autograd nodes. The CPU's written-out step computes the whole loss and its
gradients in :mod:`agents.ppo.loss_kernel`. ``tests/agents/ppo/test_fused.py`` holds both against
this module in float64, at every kink.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from ..networks import Actor, Critic, MixedActor, masked_categorical
from .batch import Minibatch
from .config import PPOConfig
from .stats import TERMS

__all__ = ["Surrogate", "SurrogateTerms", "loss_terms", "minibatch_loss", "reference_surrogate", "renormalize"]


class SurrogateTerms(NamedTuple):
    """A surrogate's output: the actor's mean (the penalty reads it), the two losses and two statistics."""

    mean: Tensor
    policy_loss: Tensor
    value_loss: Tensor
    approx_kl: Tensor
    clip_fraction: Tensor


Surrogate = Callable[[Actor, Critic, Minibatch, Tensor, PPOConfig], SurrogateTerms]
"""``(actor, critic, batch, clamped log-std, config) -> terms``: the clipped surrogate and value loss of a minibatch."""


def renormalize(adv: Tensor) -> Tensor:
    """One minibatch's advantages normalized with the seed's variance guard, branch-free (CUDA graphs).

    Below a variance of 1e-8 they are only centered: dividing float32 noise by its own tiny
    std amplifies it 1e4x (see ``agents.common.normalize_advantages``).
    """
    centered = adv - adv.mean()
    var = centered.pow(2).mean()
    return torch.where(var < 1e-8, centered, centered * torch.rsqrt(var + 1e-8))


def reference_surrogate(actor: Actor, critic: Critic, batch: Minibatch, log_std: Tensor, cfg: PPOConfig) -> SurrogateTerms:
    """The clipped surrogate and value loss on the plain modules (``log_std`` unused: the actor clamps its own).

    The terms' ``mean`` is the actor's whole output: a :class:`MixedActor`'s logits follow its mean.
    """
    obs, actions, old_logp, adv, ret = batch
    mean = actor(obs)
    new_logp = actor.log_prob_at(mean, actions)[0]
    log_ratio = (new_logp - old_logp).clamp(-cfg.max_log_ratio, cfg.max_log_ratio)
    ratio = log_ratio.exp()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1.0 - cfg.clip_epsilon, 1.0 + cfg.clip_epsilon) * adv
    policy_loss = -torch.min(surr1, surr2).mean()
    value_loss = (critic(obs) - ret).pow(2).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()  # http://joschu.net/blog/kl-approx.html
        clip_fraction = ((ratio - 1.0).abs() > cfg.clip_epsilon).float().mean()
    return SurrogateTerms(mean, policy_loss, value_loss, approx_kl, clip_fraction)


def minibatch_loss(
    actor: Actor, critic: Critic, batch: Minibatch, cfg: PPOConfig, surrogate: Surrogate = reference_surrogate
) -> dict[str, Tensor]:
    """The minibatch's ``loss`` (with its autograd graph) and its terms (:data:`agents.ppo.stats.TERMS`, detached)."""
    if cfg.advantage_norm == "minibatch":
        batch = batch._replace(adv=renormalize(batch.adv))
    log_std = actor.clamped_log_std()
    mean, policy_loss, value_loss, approx_kl, clip_fraction = surrogate(actor, critic, batch, log_std, cfg)
    # entropy bonus, gated per dimension at the log-std ceiling so it cannot push std up forever
    at_ceiling = actor.log_std.detach() >= cfg.log_std_max
    gated = torch.where(at_ceiling, log_std.detach(), log_std)
    entropy = (gated + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum()
    if isinstance(actor, MixedActor):
        mean, discrete_entropy = _discrete_part(actor, mean, batch.actions)
        entropy = entropy + discrete_entropy
    # the value loss with the seed's coefficient
    loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
    if cfg.mean_bound_coef > 0:  # on the fused nodes autograd adds its gradient to the node's mean output
        mean_excess = (mean.abs() - cfg.mean_bound).clamp(min=0.0).pow(2).sum(dim=-1).mean()
        loss = loss + cfg.mean_bound_coef * mean_excess
    else:
        mean_excess = torch.zeros((), device=mean.device)
    return loss_terms(loss, policy_loss, value_loss, entropy, approx_kl, clip_fraction, mean_excess)


def loss_terms(loss: Tensor, *terms: Tensor) -> dict[str, Tensor]:
    """The loss (with its graph) and :data:`agents.ppo.stats.TERMS`, in that order, detached: what a step reports."""
    return {"loss": loss, **{name: term.detach() for name, term in zip(TERMS, terms, strict=True)}}


def _discrete_part(actor: MixedActor, out: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """(the continuous part's mean, the masked categoricals' entropy averaged over the rows) of ``out``.

    Not gated: a categorical's entropy is bounded (log of its legal actions), so it cannot run away as a std can.
    """
    mean, logits = actor.split_output(out)
    _, dact, mask = actor.split_actions(actions)
    return mean, masked_categorical(logits, dact, mask, actor.branches).entropy.mean()
