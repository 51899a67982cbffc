"""Numerical guards shared by every learner: a non-finite step changes nothing.

The original trainer learned the hard way that one NaN written into the weights poisons
every later forward pass on every bot. So a step whose loss or gradient is NaN, Inf or
absurdly large is skipped entirely — parameters, Adam moments and step counts all stay
as they were — and counted, so the trainer can refuse to publish and roll back after
repeated skips. The decision stays on the device (no host sync), so it also works inside
a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["adam_step_unless", "step_is_finite"]


def step_is_finite(loss: Tensor, params: Iterable[Tensor], max_norm: float = 1e15) -> tuple[Tensor, Tensor]:
    """(ok, grad_norm): ``ok`` is a 0-dim bool tensor, true when the loss and the gradients'
    total norm are finite and the norm is at most ``max_norm``."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=loss.device)
    ok = torch.isfinite(loss) & torch.isfinite(norm) & (norm <= max_norm)
    return ok, norm


def adam_step_unless(optimizer: torch.optim.Adam, skip: Tensor) -> None:
    """``optimizer.step()``, except that where ``skip`` (a 0-dim bool tensor) is true nothing changes.

    No parameter, no moment and no step count moves, and the decision never leaves the
    device (no sync), so it can sit inside a CUDA graph. This is fused Adam's own skip
    input, the one :class:`torch.amp.GradScaler` drives after finding inf/NaN gradients
    (``optimizer.found_inf``): the kernel returns early when it reads 1, and the step
    counts' increment is subtracted back. It only exists for ``fused=True`` (on the CPU too).
    """
    assert all(group["fused"] for group in optimizer.param_groups), "found_inf skips only fused Adam"
    optimizer.found_inf = skip.to(torch.float32)  # type: ignore[attr-defined]
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf  # type: ignore[attr-defined]
