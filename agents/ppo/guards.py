"""The PPO step's guards in torch: the reference the compiled guards (:mod:`agents.ppo.guard_kernel`) are tested against.

Between the gradients and Adam: drop a downward log-std gradient at the floor, take the gradient
norm, decide whether the step is safe, clip. After Adam: clamp the raw log-std into its bounds.
A NaN/Inf loss, or a gradient norm that is NaN, Inf or above ``skip_grad_norm``, skips the step
entirely: a no-op is safer than writing NaN into weights, which corrupts every later inference on
every bot. The decision is a device flag (``ok``), never read back here, so the guards can sit
inside a CUDA graph; whoever runs Adam decides how a skip acts (:mod:`agents.ppo.steps`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["GuardLimits", "clamp_log_std_where", "gate_log_std_floor", "guard_gradients"]


class GuardLimits(NamedTuple):
    """The guards' bounds (a :class:`agents.ppo.PPOConfig`'s fields of the same names)."""

    log_std_min: float
    max_grad_norm: float
    skip_grad_norm: float
    clip_per_network: bool


def gate_log_std_floor(log_std: Tensor, floor: float) -> None:
    """At the floor, drop gradient that would push the log-std further down.

    The seed zeroed the whole gradient there; we keep the upward part so a std that
    touched the floor can still recover (a zero gradient made the floor absorbing).
    Gradient descent moves against the gradient, so "down" is a positive gradient.
    """
    grad = log_std.grad
    if grad is not None:
        at_floor = log_std.detach() <= floor
        grad.copy_(torch.where(at_floor, grad.clamp(max=0.0), grad))


def guard_gradients(
    loss_ok: Tensor, groups: list[list[Tensor]], log_std: Tensor, limits: GuardLimits
) -> tuple[Tensor, Tensor]:
    """Gate the log-std floor, decide and clip: ``(ok, grad_norm)``, both 0-dim tensors on the device.

    ``groups`` are the gradients the clip acts on, each clipped on its own norm: both networks as one
    (the seed's) or one group per network. The skip decision reads the joint norm either way, made
    from the groups' norms rather than a second pass over the gradients. ``loss_ok``: the loss was finite.
    """
    gate_log_std_floor(log_std, limits.log_std_min)
    norms = [torch.linalg.vector_norm(g[0]) if len(g) == 1 else torch.nn.utils.get_total_norm(g) for g in groups]
    grad_norm = norms[0] if len(groups) == 1 else torch.linalg.vector_norm(torch.stack(norms))
    ok = torch.isfinite(grad_norm) & (grad_norm <= limits.skip_grad_norm) & loss_ok
    # Clipping a skipped step's gradients (by a NaN or huge norm) is harmless: no Adam step reads them.
    # The coefficient is clip_grads_with_norm_'s: max_norm / (norm + 1e-6), at most 1.
    for group, norm in zip(groups, norms, strict=True):
        torch._foreach_mul_(group, torch.clamp(limits.max_grad_norm / (norm + 1e-6), max=1.0))
    return ok, grad_norm


@torch.no_grad()
def clamp_log_std_where(ok: Tensor, log_std: Tensor, low: float, high: float) -> None:
    """Where ``ok``, clamp the raw log-std parameter into [low, high]: it may not drift past the bounds."""
    log_std.copy_(torch.where(ok, log_std.clamp(low, high), log_std))
