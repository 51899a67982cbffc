"""The PPO learner's compiled loops, compiled (or loaded from numba's disk cache) in one call.

Why: the CPU step calls three numba loops (the loss, :mod:`agents.ppo.loss_kernel`; the guards,
:mod:`agents.ppo.guard_kernel`; GAE, :func:`agents.common.compute_gae_flat`), each compiled on first
use. The first compile on a machine takes a few seconds; ``arena train`` calls :func:`compile_all`
before its budget's clock starts, so the first update neither spends the budget nor holds the
trainer thread on it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import common
from ..common import compute_gae_flat
from . import guard_kernel, loss_kernel

__all__ = ["compile_all", "dispatchers"]


def compile_all() -> float:
    """Compile every loop of the PPO step in the layouts the step calls it with; the seconds it took."""
    started = time.perf_counter()
    loss_kernel.compile_kernel()
    guard_kernel.compile_kernel()
    steps = np.zeros(3, np.float32)
    compute_gae_flat(steps, steps, np.array([2, 1], np.int64), np.zeros(2, np.float32))
    return time.perf_counter() - started


def dispatchers() -> list[Any]:
    """numba's dispatchers of the three loops compiled so far: their ``stats`` say what came from the disk cache."""
    return [d for d in (loss_kernel._compiled, guard_kernel._compiled, common._gae) if d is not None]
