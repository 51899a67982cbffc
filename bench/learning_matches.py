"""How ``bench/learning.py`` and its parts run the ``arena`` command line: from the measured source, with a log.

Every figure of the learning benchmark comes from the real CLI in a subprocess (``arena train``, ``arena
match``, ``arena league``), run from the code measured (:data:`SOURCE`, a clean export of a commit unless
asked otherwise: ``bench.provenance``). A failed match is recorded, not raised past the seed: the
benchmark counts it as a match lost and goes on with the others.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence

from bench.provenance import Source, arena_command

__all__ = ["STARTED", "ArenaError", "arena", "log", "match", "pct", "use_source", "win_rates"]

STARTED = time.monotonic()

SOURCE: Source | None = None
"""The code measured: a clean export of a commit (or, asked for, the working tree), run as ``arena``."""


def use_source(source: Source) -> None:
    """Run every later ``arena`` command from ``source``."""
    global SOURCE
    SOURCE = source


def log(message: str) -> None:
    """One progress line on stderr, with the minutes and seconds since the benchmark started."""
    elapsed = int(time.monotonic() - STARTED)
    print(f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


class ArenaError(RuntimeError):
    """An ``arena`` command failed: its exit code and the end of its stderr."""


def arena(*args: str, timeout: float = 1800.0) -> str:
    """Run ``arena ARGS`` from :data:`SOURCE`; its stdout, or ArenaError with the last 500 characters of its stderr."""
    assert SOURCE is not None, "use_source() first"
    try:
        result = subprocess.run(
            [*arena_command(SOURCE), *args], capture_output=True, text=True, timeout=timeout, env=SOURCE.env()
        )
    except subprocess.TimeoutExpired as exc:
        tail = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise ArenaError(f"arena {args[0]} timed out after {timeout:.0f} s: {tail.strip()[-500:]}") from None
    if result.returncode != 0:
        raise ArenaError(f"arena {args[0]} exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return result.stdout


def match(bot: str, opponent: str, rounds: int, seed: int, deterministic: bool = False) -> float:
    """The first bot's win rate against ``opponent`` (draws are no wins)."""
    flags = ["--deterministic"] if deterministic else []
    out = json.loads(
        arena("match", "--bot", bot, "--bot", opponent, "--rounds", str(rounds), "--seed", str(seed), "--json", *flags)
        .strip()
        .splitlines()[-1]
    )
    return out["bots"][0]["wins"] / out["rounds"]


def win_rates(
    bot: str,
    label: str,
    opponents: Sequence[str] | dict[str, str],
    rounds: int,
    seed: int,
    errors: list[str],
    deterministic: bool = False,
) -> dict[str, float | None]:
    """Win rates against each opponent (a name, or name → ``--bot`` value). A failed match is None here, its
    error goes to ``errors``; the aggregate counts it as a match lost (0%)."""
    bots = opponents if isinstance(opponents, dict) else {name: name for name in opponents}
    how = "mean action" if deterministic else "sampled"
    log(f"  {label} ({how}), {rounds} rounds against each of {', '.join(bots)}")
    rates: dict[str, float | None] = {}
    for name, opponent in bots.items():
        try:
            rates[name] = match(bot, opponent, rounds, seed, deterministic)
        except (ArenaError, ValueError, KeyError, IndexError) as exc:
            rates[name] = None
            errors.append(f"{label} vs {name}: {exc}")
            log(f"    vs {name}: failed: {str(exc)[-200:]}")
    log(f"    {label} ({how}): " + ", ".join(f"{k} {pct(v)}" for k, v in rates.items()))
    return rates
