"""Gradients averaged over learner ranks: one flat all-reduce per gradient step.

With several learner processes (``torch.distributed``), each rank trains on its own bots'
rollout and every gradient step must move all ranks' weights the same way, so that they
keep publishing the same policy. DDP would do this with bucketed hooks during the backward
pass; the tank's PPO networks have about 12,000 parameters, so one all-reduce of all
gradients flattened into one tensor costs one round trip instead of a bucket each, and it
keeps the numerical guard exact: the flag that a rank's loss was not finite travels in the
same tensor, so every rank skips the same steps (a NaN gradient anywhere becomes a NaN
gradient everywhere by itself; a NaN loss with finite gradients would not).

All ranks then hold bit-identical gradients: the ring all-reduce hands every rank the same
sums, and the division by the world size is the same float operation everywhere. With
identical starting weights and optimizer state (the trainer broadcasts rank 0's), the
weights stay bit-identical.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["CollectiveFailed", "GradientAverager", "GradientSync"]

GradientSync = Callable[[Sequence[Tensor], Tensor], Tensor]
"""``(params, loss_finite) -> every rank's loss finite``, averaging ``params``' gradients on the way."""


class CollectiveFailed(RuntimeError):
    """The gradient all-reduce failed: another rank died (its sockets closed) or hung past the timeout."""


class GradientAverager:
    """Averages gradients in place over the ranks of a process group (the default one if None).

    Call it on every rank with the same parameters, in the same order, the same number of
    times: a rank that skips a call leaves the others waiting until the group's timeout.
    ``seconds`` and ``calls`` add up the all-reduce's cost (the figure ``bench/distributed.py``
    reports per update).
    """

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, params: Sequence[Tensor], loss_finite: Tensor) -> Tensor:
        """Replace each parameter's gradient by the mean over ranks; True (a 0-dim bool tensor) when
        every rank's loss was finite. A parameter without a gradient counts as a zero gradient."""
        start = time.perf_counter()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flag = (~loss_finite).to(grads[0].dtype).reshape(1)
        flat = torch.cat([*(g.reshape(-1) for g in grads), flag])
        try:
            dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
        except RuntimeError as exc:  # gloo reports a dead peer as a plain RuntimeError
            raise CollectiveFailed(str(exc)) from exc
        nonfinite_ranks = flat[-1].clone()
        flat.div_(self.world_size)
        offset = 0
        for param, grad in zip(params, grads, strict=True):
            count = grad.numel()
            averaged = flat[offset : offset + count].view_as(grad)
            if param.grad is None:
                param.grad = averaged.clone()
            else:
                param.grad.copy_(averaged)
            offset += count
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return nonfinite_ranks == 0
