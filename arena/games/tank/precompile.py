"""Every numba kernel of the tank game compiled (or loaded from numba's disk cache) in one call.

Why: the engine's kernels (:mod:`arena.games.tank.kernels`) and the scripted bots'
(:mod:`arena.games.tank.scripted_kernels`, :mod:`arena.games.tank.drawn_kernel`) each compile on first use,
10-20 s the first time on a machine. ``arena compile`` and ``arena train`` call :func:`compile_all` before
anything is timed; it plays a tiny battle and every bot through the same code a run calls, so each kernel
is compiled for the very argument types the run hands it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import drawn_kernel, kernels, scripted_kernels
from .actions import ACT_DIM
from .compiled import KERNELS, SCRIPTED_KERNELS
from .engine import TankBattle
from .roster import EXTRA_SCRIPTED, SCRIPTED, make_scripted

__all__ = ["compile_all", "dispatchers", "kernel_stats"]


def compile_all(drawn: bool = True) -> float:
    """Compile (or load from numba's cache) every kernel, the engine's and the scripted bots', on a tiny battle.

    ``drawn``: the population's kernel too (a run compiles it only when it plays ``drawn``). Returns the seconds
    it took: 10-20 s the first time on a machine, well under a second from the cache.
    """
    t0 = time.perf_counter()
    battle = TankBattle(1, 2, engine="numba")
    battle.step(np.zeros((1, 2, ACT_DIM)))
    obs = battle.observe()
    for name in (*SCRIPTED, *EXTRA_SCRIPTED) if drawn else SCRIPTED:
        make_scripted(name, 1, engine="numba").act(obs[:, 1])
    return time.perf_counter() - t0


def dispatchers(drawn: bool = True) -> list[Any]:
    """numba's dispatchers of the kernels :func:`compile_all` compiles: their ``stats`` say what came from the cache."""
    found = [getattr(kernels, name) for name in KERNELS] + [getattr(scripted_kernels, name) for name in SCRIPTED_KERNELS]
    return [*found, drawn_kernel.drawn_act] if drawn else found


def kernel_stats() -> dict[str, Any]:
    """numba's compile statistics of each kernel (``cache_hits`` / ``cache_misses`` by signature), for the tests."""
    return {d.__name__: d.stats for d in dispatchers()}
