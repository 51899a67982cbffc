"""``arena compile``: every numba kernel into numba's cache, so later runs (a container's) start without compiling.

Also the compile step ``arena train`` takes before its budget's clock starts (:func:`compile_kernels`):
numba compiles the kernels once, then every process loads them from its disk cache. Both say where
the kernels were cached, or that nothing could be (:func:`arena.numba_cache.report`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .. import numba_cache

__all__ = ["add_parser", "compile_kernels", "run"]


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena compile`` to the subcommands of ``arena``."""
    commands.add_parser(
        "compile",
        help="compile the numba kernels into numba's cache, so later runs start without compiling",
        description=(
            "Compile PPO's step kernels, the tank engine and the scripted bots (numba) into numba's disk cache and "
            "say where: NUMBA_CACHE_DIR if set, else numba's own place (next to the sources, or ~/.cache/numba), "
            "else a private folder in the temp directory. A container image runs it at build time. numba's cache is "
            "keyed by CPU: a machine with another CPU compiles once more. Exit 1 when nothing could be cached."
        ),
        epilog="example: NUMBA_CACHE_DIR=/opt/arena/numba-cache arena compile",
    )


def compile_kernels(ppo: bool, tank: bool, drawn: bool = True) -> tuple[str, bool] | None:
    """Compile (or load from the cache) PPO's kernels and/or the tank engine's and scripted bots' (with ``drawn``, the
    population's too: ``arena compile`` always, a run only when it plays ``drawn``).

    Returns the line that says what happened and whether the kernels are cached; None when neither is asked for.
    """
    parts: list[str] = []
    dispatchers: list[Any] = []
    since, started = time.time(), time.perf_counter()
    if ppo:  # the CPU step's loss, guards and GAE (agents/ppo/kernels.py)
        from agents.ppo import kernels as ppo_kernels

        ppo_kernels.compile_all()
        dispatchers += ppo_kernels.dispatchers()
        parts.append("PPO's step kernels")
    if tank:
        from ..games.tank import precompile

        precompile.compile_all(drawn)
        dispatchers += precompile.dispatchers(drawn)
        parts.append("the tank engine and the scripted bots")
    if not parts:
        return None
    return numba_cache.report(", ".join(parts), dispatchers, since, time.perf_counter() - started)


def run(args: argparse.Namespace) -> int:
    """``arena compile``: every kernel compiled into numba's cache; exit 1 when nothing could be cached."""
    result = compile_kernels(ppo=True, tank=True)
    assert result is not None
    line, cached = result
    if not cached:
        print(f"arena compile: error: {line}", file=sys.stderr)
        return 1
    print(f"arena compile: {line}")
    return 0
