"""The PPO minibatch step's maths written out: both networks' pass, the clipped surrogate, their backward.

Why: a PPO minibatch step on the CPU is mostly the two MLPs' matrix products, and the rest
is per-call overhead around them: two graphs of autograd nodes, the autograd engine walking
them, a skinny ``rows x width -> 1`` value head sent through a general matrix product, separate
first layers for two networks that read the same observations. Here:

- both networks' first layers are one product (the weights stacked, ``obs @ [W_actor; W_critic]^T``),
  since both read the same rows;
- the activations are applied in place and kept for the backward (tanh's derivative is
  ``1 - y^2``, ReLU's ``y > 0``: the outputs are enough, no inputs are saved);
- the critic's 1-wide head is a matrix-vector product, its backward an outer product;
- the backward is the chain rule written out: per layer one product for the weight
  gradient and one for the input's, and none for the observations (they need no gradient).

:func:`ppo_gradients` (and :func:`write_ppo_gradients`, the step's own form) runs the whole minibatch
this way with no autograd at all, the loss and its gradients in one compiled loop
(:mod:`agents.ppo.loss_kernel`), and writes every gradient into its parameter's ``.grad``: the
CPU's written-out step (``bench/learner.py`` measures it against the autograd reference).
:func:`fused_surrogate` wraps the same functions as two autograd nodes for CUDA, where the captured
graph already removes the per-call overhead the written-out step saves.

The maths is :mod:`agents.ppo.loss`'s, the reference, to float32 rounding
(``tests/agents/ppo/test_fused.py`` compares values and every gradient in float64, at every kink of
the surrogate), so every guard of the step reads the same numbers on either path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from ..networks import Actor, Critic, GaussianActor, MixedActor
from .batch import Minibatch
from .config import PPOConfig
from .loss import SurrogateTerms
from .loss_kernel import NO_BRANCHES, LossWeights, loss_and_head_gradients
from .stats import STEP_STATS

__all__ = [
    "FlatGradients",
    "MlpActor",
    "actor_critic_forward",
    "actor_critic_pass",
    "clipped_surrogate",
    "fused_surrogate",
    "learner_parameters",
    "ppo_gradients",
    "write_ppo_gradients",
]


_MINUS_ONE = torch.tensor(-1.0)

MlpActor = GaussianActor | MixedActor
"""An actor the written-out step computes: an MLP on the observation itself (no conv torso, no recurrent core),
whose head is the Gaussian's mean, or the mixed actor's mean then its branches' logits."""


def _activate_(z: Tensor, activation: str, doubled: bool = False) -> Tensor:
    """The activation in place on a fresh pre-activation (tanh as 2 sigmoid(2z) - 1: see ``FastTanh``).

    ``doubled``: ``z`` is already 2z (the layer's weights and bias were doubled, which is exact). The
    last two operations are one, ``-1 + 2 s`` (``add`` with ``alpha``): one pass over the block
    instead of two, and the same float, since doubling is exact.
    """
    if activation == "tanh":
        sigmoid = torch.sigmoid_(z if doubled else z.mul_(2.0))
        return torch.add(_MINUS_ONE, sigmoid, alpha=2.0, out=sigmoid)
    return torch.relu_(z)


def _activation_backward(grad: Tensor, out: Tensor, activation: str) -> Tensor:
    """d(loss)/d(pre-activation) from d(loss)/d(output) and the output alone."""
    if activation == "tanh":
        return torch.ops.aten.tanh_backward(grad, out)  # type: ignore[no-any-return]
    return torch.ops.aten.threshold_backward(grad, out, 0.0)  # type: ignore[no-any-return]


# ── both networks ─────────────────────────────────────────────────────────────


class _Activations(NamedTuple):
    """What the backward needs of a forward: each hidden layer's output, per network."""

    actor: list[Tensor]
    critic: list[Tensor]


def _networks_forward(
    activation: str, obs: Tensor, actor: Sequence[Tensor], critic: Sequence[Tensor]
) -> tuple[Tensor, Tensor, _Activations]:
    """(mean, value, activations) of two MLPs given as ``[W0, b0, W1, b1, ...]`` with equal hidden widths."""
    layers = len(actor) // 2
    width = actor[0].shape[0]
    bias, weight = torch.cat([actor[1], critic[1]]), torch.cat([actor[0], critic[0]])
    doubled = activation == "tanh"  # tanh needs 2z: doubling the stacked copies costs less than doubling the output
    if doubled:
        bias.mul_(2.0)
        weight.mul_(2.0)
    first = _activate_(torch.addmm(bias, obs, weight.t()), activation, doubled)
    a_outs, c_outs = [first[:, :width]], [first[:, width:]]
    for i in range(1, layers - 1):
        a_outs.append(_activate_(torch.addmm(actor[2 * i + 1], a_outs[-1], actor[2 * i].t()), activation))
        c_outs.append(_activate_(torch.addmm(critic[2 * i + 1], c_outs[-1], critic[2 * i].t()), activation))
    # Computed as (W h^T)^T: a product a few columns wide runs faster with the rows as its long side.
    mean = torch.addmm(actor[-1].unsqueeze(1), actor[-2], a_outs[-1].t()).t()
    value = torch.mv(c_outs[-1], critic[-2][0]).add_(critic[-1])
    return mean, value, _Activations(a_outs, c_outs)


def _networks_backward(
    activation: str,
    obs: Tensor,
    outs: _Activations,
    params: tuple[Sequence[Tensor], Sequence[Tensor]],
    grad_mean: Tensor,
    grad_value: Tensor,
    grads: tuple[Sequence[Tensor], Sequence[Tensor]],
) -> None:
    """Write d(loss)/d(each weight and bias) into ``grads`` (shaped as ``params``), from d(loss)/d(mean, value)."""
    (actor, critic), (a_grads, c_grads), (a_outs, c_outs) = params, grads, outs
    layers = len(actor) // 2
    # The heads: the actor's a matrix product, the critic's a matrix-vector one.
    torch.mm(grad_mean.t(), a_outs[-1], out=a_grads[-2])
    torch.sum(grad_mean, 0, out=a_grads[-1])
    torch.mv(c_outs[-1].t(), grad_value, out=c_grads[-2][0])
    torch.sum(grad_value, 0, keepdim=True, out=c_grads[-1])
    a_back = grad_mean.mm(actor[-2])
    c_back = torch.outer(grad_value, critic[-2][0])
    # Hidden layers, last to second: through the activation, then the linear map.
    for i in range(layers - 2, 0, -1):
        a_pre = _activation_backward(a_back, a_outs[i], activation)
        c_pre = _activation_backward(c_back, c_outs[i], activation)
        torch.mm(a_pre.t(), a_outs[i - 1], out=a_grads[2 * i])
        torch.sum(a_pre, 0, out=a_grads[2 * i + 1])
        torch.mm(c_pre.t(), c_outs[i - 1], out=c_grads[2 * i])
        torch.sum(c_pre, 0, out=c_grads[2 * i + 1])
        a_back, c_back = a_pre.mm(actor[2 * i]), c_pre.mm(critic[2 * i])
    # The shared first layer: the observations need no gradient, only the weights do.
    a_pre = _activation_backward(a_back, a_outs[0], activation)
    c_pre = _activation_backward(c_back, c_outs[0], activation)
    # As obs^T a_pre, transposed into place: with the inputs as the short side the product runs faster.
    a_grads[0].copy_(obs.t().mm(a_pre).t())
    torch.sum(a_pre, 0, out=a_grads[1])
    c_grads[0].copy_(obs.t().mm(c_pre).t())
    torch.sum(c_pre, 0, out=c_grads[1])


class _ActorCritic(torch.autograd.Function):
    """(mean, value) of a Gaussian actor's MLP and a critic's, as one autograd node."""

    @staticmethod
    def forward(ctx: Any, activation: str, obs: Tensor, *params: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        half = len(params) // 2
        mean, value, outs = _networks_forward(activation, obs, params[:half], params[half:])
        ctx.activation, ctx.hidden = activation, len(outs.actor)
        ctx.save_for_backward(obs, *outs.actor, *outs.critic, *params)
        return mean, value

    @staticmethod
    def backward(ctx: Any, grad_mean: Tensor | None, grad_value: Tensor | None) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        obs, *rest = ctx.saved_tensors
        hidden = ctx.hidden
        outs = _Activations(rest[:hidden], rest[hidden : 2 * hidden])
        params = rest[2 * hidden :]
        half = len(params) // 2
        if grad_mean is None:
            grad_mean = torch.zeros(obs.shape[0], params[half - 1].shape[0], dtype=obs.dtype, device=obs.device)
        if grad_value is None:
            grad_value = torch.zeros(obs.shape[0], dtype=obs.dtype, device=obs.device)
        grads = [torch.empty_like(p) for p in params]
        pair = (params[:half], params[half:])
        _networks_backward(ctx.activation, obs, outs, pair, grad_mean, grad_value, (grads[:half], grads[half:]))
        return (None, None, *grads)


def _linear_parameters(net: nn.Sequential) -> list[Tensor]:
    return [t for m in net if isinstance(m, nn.Linear) for t in (m.weight, m.bias)]


def actor_critic_forward(actor: GaussianActor, critic: Critic, obs: Tensor) -> tuple[Tensor, Tensor]:
    """``(actor(obs), critic(obs))`` as one autograd node (see the module docstring).

    Needs equal hidden widths and activations in both networks (a :class:`agents.ppo.PPOAgent`'s
    always are: one ``hidden`` and one ``activation`` build both) and at least one hidden layer.
    """
    mean: Tensor
    value: Tensor
    mean, value = _ActorCritic.apply(  # type: ignore[no-untyped-call]
        actor.activation, obs, *_linear_parameters(actor.net), *_linear_parameters(critic.net)
    )
    return mean, value


def actor_critic_pass(actor: MlpActor, critic: Critic, obs: Tensor, rows: int) -> tuple[Tensor, Tensor]:
    """``(actor(obs), critic(obs))`` without gradient, ``rows`` rows at a time (a minibatch's worth).

    Why in pieces: a minibatch's activations stay in cache between the layers; a whole rollout's do not.
    """
    actor_params, critic_params = _linear_parameters(actor.net), _linear_parameters(critic.net)
    with torch.no_grad():
        pieces = [_networks_forward(actor.activation, part, actor_params, critic_params)[:2] for part in obs.split(rows)]
    return torch.cat([mean for mean, _ in pieces]), torch.cat([value for _, value in pieces])


# ── the clipped surrogate ─────────────────────────────────────────────────────


class _Surrogate(NamedTuple):
    policy_loss: Tensor
    value_loss: Tensor
    approx_kl: Tensor
    clip_fraction: Tensor
    saved: tuple[Tensor, Tensor, Tensor, Tensor, Tensor]
    """(z, z^2, 1/std, d objective / d ratio per row, value error): what the backward reads."""


def _surrogate_forward(
    mean: Tensor, log_std: Tensor, value: Tensor, batch: Minibatch, clip_epsilon: float, max_log_ratio: float
) -> _Surrogate:
    """The losses, statistics and saved tensors of :class:`_ClippedSurrogate` (its docstring says what)."""
    _, actions, old_logp, adv, ret = batch
    inv_std = torch.exp(-log_std)
    z = (actions - mean).mul_(inv_std)
    z_sq = z * z
    log_norm = log_std.sum() + 0.5 * math.log(2.0 * math.pi) * log_std.shape[0]
    raw = z_sq.sum(1).mul_(-0.5).sub_(log_norm).sub_(old_logp)
    log_ratio = raw.clamp(-max_log_ratio, max_log_ratio)
    ratio = log_ratio.exp()
    clipped = ratio.clamp(1.0 - clip_epsilon, 1.0 + clip_epsilon)
    surr1, surr2 = ratio * adv, clipped * adv
    policy_loss = torch.minimum(surr1, surr2).mean().neg()
    error = value - ret
    value_loss = error.square().mean()
    with torch.no_grad():
        approx_kl = (ratio - 1.0).sub_(log_ratio).mean()  # http://joschu.net/blog/kl-approx.html
        clip_fraction = (ratio - 1.0).abs_().gt_(clip_epsilon).float().mean()
    # d(objective)/d(ratio) per row, as autograd's minimum and clamp give it.
    in_range = (ratio == clipped).to(ratio.dtype)
    weight = torch.where(surr1 < surr2, 1.0, torch.where(surr1 > surr2, in_range, 0.5 * (1.0 + in_range)))
    d_ratio = torch.where(log_ratio == raw, weight.mul_(adv).mul_(ratio), 0.0)
    return _Surrogate(policy_loss, value_loss, approx_kl, clip_fraction, (z, z_sq, inv_std, d_ratio, error))


def _surrogate_backward(
    saved: tuple[Tensor, ...], grad_policy: Tensor | float, grad_value_loss: Tensor | float
) -> tuple[Tensor, Tensor, Tensor]:
    """d(loss)/d(mean, log_std, value) given d(loss)/d(policy loss) and d(loss)/d(value loss)."""
    z, z_sq, inv_std, d_ratio, error = saved
    rows = z.shape[0]
    grad_logp = d_ratio * (-grad_policy / rows)  # policy_loss = -mean(objective)
    grad_mean = (z * grad_logp.unsqueeze(1)).mul_(inv_std)  # d logp / d mean = z / std
    grad_log_std = torch.mv(z_sq.t(), grad_logp).sub_(grad_logp.sum())  # d logp / d log_std = z^2 - 1
    grad_value = error * (grad_value_loss * (2.0 / rows))
    return grad_mean, grad_log_std, grad_value


class _ClippedSurrogate(torch.autograd.Function):
    """PPO's clipped surrogate and squared value error from (mean, log-std, value), in one node.

    Forward, per row: the Gaussian log-density of the action, ``log_ratio`` = new - old log-prob
    clamped to ±``max_log_ratio``, ``ratio`` = exp of it, the clipped objective
    ``min(ratio A, clip(ratio, 1 ± eps) A)`` and ``(value - return)^2``; means over rows.

    Backward follows autograd's own rules at every kink, so the two agree exactly in float64:
    the log-ratio clamp passes gradient only inside its bounds (a NaN or ±inf old log-prob
    gets none, as ``clamp`` gives), the ratio clamp only inside [1 - eps, 1 + eps], and where
    both surrogate terms are equal ``minimum`` gives each half.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, mean: Tensor, log_std: Tensor, value: Tensor, batch: Minibatch, clip_epsilon: float, max_log_ratio: float
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        out = _surrogate_forward(mean, log_std, value, batch, clip_epsilon, max_log_ratio)
        ctx.save_for_backward(*out.saved)
        ctx.mark_non_differentiable(out.approx_kl, out.clip_fraction)
        return out.policy_loss, out.value_loss, out.approx_kl, out.clip_fraction

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_policy: Tensor, grad_value_loss: Tensor, _kl: Tensor, _clip: Tensor
    ) -> tuple[Tensor | None, ...]:
        grad_mean, grad_log_std, grad_value = _surrogate_backward(ctx.saved_tensors, grad_policy, grad_value_loss)
        return grad_mean, grad_log_std, grad_value, None, None, None


def clipped_surrogate(
    mean: Tensor, log_std: Tensor, value: Tensor, batch: Minibatch, clip_epsilon: float, max_log_ratio: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(policy loss, value loss, approx. KL, clip fraction) of one minibatch: see :class:`_ClippedSurrogate`.

    ``log_std`` is the clamped log-std the actor acts with; ``batch.obs`` is not read (``mean`` and
    ``value`` are the networks' outputs for it). The KL and clip fraction carry no gradient.
    """
    out: tuple[Tensor, Tensor, Tensor, Tensor] = _ClippedSurrogate.apply(  # type: ignore[no-untyped-call]
        mean, log_std, value, batch, clip_epsilon, max_log_ratio
    )
    return out


def fused_surrogate(actor: Actor, critic: Critic, batch: Minibatch, log_std: Tensor, cfg: PPOConfig) -> SurrogateTerms:
    """:func:`agents.ppo.loss.reference_surrogate` as two autograd nodes: both networks' pass, then the surrogate."""
    assert isinstance(actor, GaussianActor), "the fused surrogate holds the Gaussian's log-density"
    mean, value = actor_critic_forward(actor, critic, batch.obs)
    policy_loss, value_loss, approx_kl, clip_fraction = clipped_surrogate(
        mean, log_std, value, batch, cfg.clip_epsilon, cfg.max_log_ratio
    )
    return SurrogateTerms(mean, policy_loss, value_loss, approx_kl, clip_fraction)


# ── the whole minibatch without autograd ──────────────────────────────────────


class FlatGradients:
    """Every parameter's ``.grad`` as a view of one buffer: the actor's first, then the critic's.

    Why: the step's guards read each network's gradient norm and clip it, which over a dozen
    separate tensors is a dozen small kernels and Python around them; over one contiguous
    range per network it is one. The backward writes straight into the views, so nothing is
    zeroed or accumulated. ``attach`` re-points any ``.grad`` that something else replaced
    (``zero_grad(set_to_none=True)``, a dtype change) and rebuilds the buffer when the
    parameters' dtype or device changed.
    """

    def __init__(self, actor: MlpActor, critic: Critic) -> None:
        self.params = learner_parameters(actor, critic)
        self.branches = np.array(actor.branches, dtype=np.int64) if isinstance(actor, MixedActor) else NO_BRANCHES
        split = 1 + len(_linear_parameters(actor.net))  # the log-std and the actor's layers
        self.actor_params, self.critic_params = self.params[:split], self.params[split:]
        self._views: list[Tensor] = []
        self.buffer = torch.empty(0)
        self.actor = self.critic = self.buffer

    def attach(self) -> None:
        """Make each parameter's ``.grad`` its view of the buffer (cheap when it already is)."""
        first = self.params[0]
        if self.buffer.dtype != first.dtype or self.buffer.device != first.device or not self._views:
            self.buffer = torch.zeros(sum(p.numel() for p in self.params), dtype=first.dtype, device=first.device)
            self._views, start = [], 0
            for p in self.params:
                self._views.append(self.buffer[start : start + p.numel()].view_as(p))
                start += p.numel()
            split = sum(p.numel() for p in self.actor_params)
            self.actor, self.critic = self.buffer[:split], self.buffer[split:]
        for p, view in zip(self.params, self._views, strict=True):
            if p.grad is not view:
                p.grad = view

    def views(self) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """(log-std's gradient, the actor net's weight and bias gradients, the critic's)."""
        n = len(self.actor_params)
        return self._views[0], self._views[1:n], self._views[n:]


def learner_parameters(actor: Actor, critic: Critic) -> list[Tensor]:
    """Every trained tensor in one order: the log-std, the actor's layers, the critic's.

    The order of :class:`FlatGradients`' buffer and of the gradients the learner ranks average.
    """
    return [actor.log_std, *_linear_parameters(actor.net), *_linear_parameters(critic.net)]


def ppo_gradients(
    actor: MlpActor, critic: Critic, grads: FlatGradients, batch: Minibatch, weights: LossWeights
) -> dict[str, Tensor]:
    """One minibatch's loss terms, and every parameter's gradient of the loss written into its ``.grad``.

    The loss is :func:`agents.ppo.loss.minibatch_loss` (the advantages taken as given), the entropy gated
    per dimension at the log-std ceiling; the log-std's clamp passes gradient only inside its bounds, as
    ``clamp`` does. Returned values (:data:`agents.ppo.stats.STEP_STATS`) carry no gradient.
    """
    stats = torch.empty(len(STEP_STATS), dtype=torch.float64)
    write_ppo_gradients(actor, critic, grads, batch, weights, stats)
    return dict(zip(STEP_STATS, stats.unbind(), strict=True))


def write_ppo_gradients(
    actor: MlpActor, critic: Critic, grads: FlatGradients, batch: Minibatch, weights: LossWeights, stats: Tensor
) -> None:
    """:func:`ppo_gradients` with the statistics written into ``stats`` (float64, :data:`agents.ppo.stats.STEP_STATS`).

    The step's own form: its statistics land in a vector it keeps, read by the guards' kernel,
    so no tensor is made per term.
    """
    obs, actions, old_logp, adv, ret = batch
    with torch.no_grad():
        grads.attach()
        log_std_grad, actor_grads, critic_grads = grads.views()
        actor_params, critic_params = grads.actor_params[1:], grads.critic_params
        mean, value, outs = _networks_forward(actor.activation, obs, actor_params, critic_params)
        grad_mean, grad_value = torch.empty_like(mean), torch.empty_like(value)
        loss_and_head_gradients(
            mean.numpy(),
            actor.log_std.detach().numpy(),
            value.numpy(),
            (actions.numpy(), old_logp.numpy(), adv.numpy(), ret.numpy()),
            weights,
            (grad_mean.numpy(), grad_value.numpy(), log_std_grad.numpy()),
            stats.numpy(),
            grads.branches,
        )
        _networks_backward(
            actor.activation, obs, outs, (actor_params, critic_params), grad_mean, grad_value, (actor_grads, critic_grads)
        )
