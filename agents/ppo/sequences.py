"""PPO's step for a recurrent actor: minibatches of chunks of consecutive rows, backpropagated through time.

Why chunks: a recurrent actor's output at a step depends on every step before it in the episode. Each
row carries the state its bot acted from, so a chunk of ``sequence_length`` consecutive rows of one
segment is unrolled from the state its first row carries, and the loss's gradient flows back through
the whole chunk (truncated BPTT with stored states, as R2D2 and CleanRL's recurrent PPO do). A
segment never crosses an episode's end, so neither does a chunk: no reset inside one. A segment's
last chunk may be shorter; it is padded to the chunk's length with rows that weigh nothing in any
term, so every minibatch is one ``(chunks, sequence_length)`` block.

The loss is :func:`agents.ppo.loss.minibatch_loss`'s, term for term, with every mean taken over the
real rows only; the guards, Adam and the statistics are the reference step's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from ..networks import Actor, Critic, MixedActor, masked_categorical
from .batch import Minibatch
from .config import PPOConfig
from .guards import clamp_log_std_where, guard_gradients
from .loss import loss_terms

if TYPE_CHECKING:
    from .steps import StepParts

__all__ = ["SequenceStep", "chunk_layout", "sequence_loss"]


def chunk_layout(lengths: NDArray[np.int64], length: int) -> Tensor:
    """Row indices of every chunk, (chunks, ``length``): each segment's rows cut in order, -1 padding a short last chunk.

    ``lengths`` are the rollout's segments' row counts, their rows laid out one segment after another.
    """
    chunks: list[NDArray[np.int64]] = []
    start = 0
    for steps in lengths.tolist():
        rows = np.arange(start, start + steps)
        pad = (-steps) % length
        chunks.append(np.concatenate([rows, np.full(pad, -1)]).reshape(-1, length))
        start += steps
    if not chunks:
        return torch.zeros((0, length), dtype=torch.long)
    return torch.from_numpy(np.concatenate(chunks))


def sequence_loss(actor: Actor, critic: Critic, batch: Minibatch, real: Tensor, cfg: PPOConfig) -> dict[str, Tensor]:
    """:func:`agents.ppo.loss.minibatch_loss` over chunks of ``cfg.sequence_length`` rows, each mean over ``real`` rows."""
    weight = real.to(batch.adv.dtype)
    count = weight.sum().clamp(min=1.0)

    def mean(x: Tensor) -> Tensor:
        return (x * weight).sum() / count

    obs, actions, old_logp, adv, ret = batch
    if cfg.advantage_norm == "minibatch":
        centered = (adv - mean(adv)) * weight
        var = mean(centered.pow(2))
        adv = torch.where(var < 1e-8, centered, centered * torch.rsqrt(var + 1e-8))
    out = actor.forward_chunks(obs, cfg.sequence_length)
    new_logp = actor.log_prob_at(out, actions)[0]
    log_ratio = torch.where(real, new_logp - old_logp, 0.0).clamp(-cfg.max_log_ratio, cfg.max_log_ratio)
    ratio = log_ratio.exp()
    surr = torch.min(ratio * adv, ratio.clamp(1.0 - cfg.clip_epsilon, 1.0 + cfg.clip_epsilon) * adv)
    policy_loss = -mean(surr)
    value_loss = mean((critic(obs) - ret).pow(2))
    log_std = actor.clamped_log_std()
    gated = torch.where(actor.log_std.detach() >= cfg.log_std_max, log_std.detach(), log_std)
    entropy = (gated + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum()
    mean_out = out
    if isinstance(actor, MixedActor):
        mean_out, logits = actor.split_output(out)
        _, dact, mask = actor.split_actions(actions)
        entropy = entropy + mean(masked_categorical(logits, dact, mask, actor.branches).entropy)
    loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
    mean_excess = mean((mean_out.abs() - cfg.mean_bound).clamp(min=0.0).pow(2).sum(dim=-1))
    if cfg.mean_bound_coef > 0:
        loss = loss + cfg.mean_bound_coef * mean_excess
    with torch.no_grad():
        approx_kl = mean((ratio - 1.0) - log_ratio)
        clip_fraction = mean(((ratio - 1.0).abs() > cfg.clip_epsilon).to(weight.dtype))
    return loss_terms(loss, policy_loss, value_loss, entropy, approx_kl, clip_fraction, mean_excess)


class SequenceStep:
    """A recurrent actor's step: ``idx`` is (chunks, sequence_length) rows of the rollout, -1 for padding.

    Gradients through autograd (the reference), then the reference step's guards, Adam only when they
    found the step safe, the log-std clamp and the statistics.
    """

    def __init__(self, parts: StepParts) -> None:
        self.parts, self.limits = parts, parts.limits

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        parts, cfg = self.parts, self.parts.config
        flat = idx.reshape(-1)
        real = flat >= 0
        rows = rollout.index_select(0, flat.clamp(min=0)) * real[:, None].to(rollout.dtype)  # padding: zeros
        terms = sequence_loss(parts.actor, parts.critic, parts.minibatch(rows), real, cfg)
        parts.optimizer.zero_grad(set_to_none=True)
        terms["loss"].backward()  # type: ignore[no-untyped-call]
        groups = [[g for p in net.parameters() if (g := p.grad) is not None] for net in parts.nets]
        groups = groups if cfg.clip_per_network else [groups[0] + groups[1]]
        log_std = parts.actor.log_std
        ok, grad_norm = guard_gradients(torch.isfinite(terms["loss"]), groups, log_std, self.limits)
        if ok:
            parts.optimizer.step()
        clamp_log_std_where(ok, log_std, cfg.log_std_min, cfg.log_std_max)
        parts.totals.add_step(ok, {key: value.detach() for key, value in terms.items()}, grad_norm)
