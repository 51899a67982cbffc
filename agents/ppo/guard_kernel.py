"""The PPO step's guards after the gradients, as one compiled loop over the flat gradient buffer.

Why: between the gradients and Adam the written-out step gates the log-std at its floor, takes
each network's gradient norm, decides whether the step is safe, clips, and adds the minibatch's
statistics to the update's totals. In torch that is some thirty calls on tensors of a few
thousand floats, each costing more in dispatch than in arithmetic. Here it is one numba call over
the buffer every ``.grad`` is a view of (:class:`agents.ppo.fused.FlatGradients`), compiled on
first use and cached on disk.

The guards are the reference ones, :mod:`agents.ppo.guards`, line for line, with their edge cases:
the floor gate drops only a positive (downward) gradient and leaves a NaN a NaN; a NaN or infinite
loss or norm, or a norm above ``skip_grad_norm``, makes the step not ok; the clip coefficient is
``max_norm / (norm + 1e-6)`` at most 1, applied even to a skipped step (no Adam reads it).
Norms sum their squares in float64, where torch sums float32: the two agree to float32's
precision (``tests/agents/ppo/test_guard_kernel.py`` holds them against each other).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .guards import GuardLimits
from .stats import STEP_STATS, TOTALS

__all__ = ["compile_kernel", "guard_and_clip"]


def _kernel(
    grads: NDArray[Any],
    split: int,
    log_std: NDArray[Any],
    loss: float,
    stats: NDArray[np.float64],
    limits: NDArray[np.float64],
    totals: NDArray[np.float64],
) -> bool:
    floor, max_norm, skip_norm, per_network = limits[0], limits[1], limits[2], limits[3] > 0.0
    # The floor gate: the log-std's gradient is the buffer's first entries.
    for j in range(log_std.shape[0]):
        if log_std[j] <= floor and grads[j] > 0.0:
            grads[j] = 0.0
    actor_sq = critic_sq = 0.0
    for i in range(split):
        g = float(grads[i])
        actor_sq += g * g
    for i in range(split, grads.shape[0]):
        g = float(grads[i])
        critic_sq += g * g
    norm = math.sqrt(actor_sq + critic_sq)
    ok = math.isfinite(loss) and math.isfinite(norm) and norm <= skip_norm
    # The clip coefficient max_norm / (norm + 1e-6), at most 1: each network's own norm, or the joint one.
    actor_c = max_norm / ((math.sqrt(actor_sq) if per_network else norm) + 1e-6)
    critic_c = max_norm / ((math.sqrt(critic_sq) if per_network else norm) + 1e-6)
    if not actor_c >= 1.0:  # below 1, or NaN (applied, as torch's clamp keeps a NaN)
        c = np.float32(actor_c)
        for i in range(split):
            grads[i] *= c
    if not critic_c >= 1.0:
        c = np.float32(critic_c)
        for i in range(split, grads.shape[0]):
            grads[i] *= c
    # TOTALS: the terms (STEP_STATS without its last entry, the loss), grad_norm, applied, skipped.
    terms = stats.shape[0] - 1
    if ok:
        for k in range(terms):
            totals[k] += stats[k]
        totals[terms] += norm
        totals[terms + 1] += 1.0
    else:
        totals[terms + 2] += 1.0
    return ok


_compiled: Callable[..., bool] | None = None


def guard_and_clip(
    grads: NDArray[Any],
    split: int,
    log_std: NDArray[Any],
    loss: float,
    stats: NDArray[np.float64],
    limits: NDArray[np.float64],
    totals: NDArray[np.float64],
) -> bool:
    """Gate, guard and clip the flat gradient ``grads`` in place; True when the step may be taken.

    ``grads`` is the actor's gradients (the log-std's first) then the critic's from ``split``;
    ``log_std`` the raw parameter; ``stats`` a :data:`agents.ppo.stats.STEP_STATS` vector (its loss is
    not read: ``loss`` is); ``limits`` an :class:`agents.ppo.guards.GuardLimits` as float64. ``totals``,
    a :data:`agents.ppo.stats.TOTALS` vector, gets the step's terms, its norm and one ``applied`` added
    when the step is ok; else one ``skipped``.
    """
    global _compiled
    if _compiled is None:
        from numba import njit  # here, not at import: a process that never trains never loads numba

        _compiled = njit(cache=True, nogil=True)(_kernel)
    return bool(_compiled(grads, split, log_std, loss, stats, limits, totals))


def compile_kernel() -> float:
    """Compile (or load from numba's cache) the float32 kernel on a tiny buffer; the seconds it took."""
    started = time.perf_counter()
    grads, log_std = np.zeros(4, np.float32), np.zeros(1, np.float32)
    limits = np.array(GuardLimits(-3.0, 1.0, 1e6, True), dtype=np.float64)
    guard_and_clip(grads, 2, log_std, 0.0, np.zeros(len(STEP_STATS)), limits, np.zeros(len(TOTALS)))
    return time.perf_counter() - started
