"""Learning bots in worker processes: each plays its matches in its own interpreter (own GIL).

In one process the bots' Python (game step, policy, batching) competes with the trainer
thread for the GIL. A worker process is still an ordinary websocket bot of the server; it
reports finished rounds to the parent through a queue, batched every quarter second.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import queue
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .play import MatchLog, RoundResult

if TYPE_CHECKING:
    from ..league import LeagueSpec

__all__ = ["WorkerPool"]

REPORT_EVERY = 0.25
"""Seconds between a worker's reports to the parent."""


def _worker_main(
    url: str,
    opponents: list[str],
    n_matches: int,
    max_ticks: int,
    token: str | None,
    seed: int,
    name: str,
    stop: Any,
    reports: Any,
    index: int = 0,
    league: LeagueSpec | None = None,
    royale_matches: int | None = None,
    turns_per_s: float | None = None,
) -> None:
    from ..games.tank.engine import TankRules
    from ..royale.seats import RoyaleMatchError
    from ..royale.train import play_with_royale_opponents
    from .play import play_learning_bot

    pending: list[RoundResult] = []
    ticks = 0
    last = time.monotonic()
    cpu_at_first_tick: float | None = None  # start-up (imports, connect) is not the bot's cost per tick

    def cpu() -> float:
        return time.process_time() - (cpu_at_first_tick or time.process_time())

    def report(results: list[RoundResult], step_ticks: int) -> None:
        nonlocal ticks, last, cpu_at_first_tick
        if cpu_at_first_tick is None:
            cpu_at_first_tick = time.process_time()
        pending.extend(results)
        ticks += step_ticks
        if time.monotonic() - last >= REPORT_EVERY:
            reports.put((index, list(pending), ticks, cpu()))
            pending.clear()
            ticks, last = 0, time.monotonic()

    rules = TankRules(max_ticks=max_ticks)

    def play(mix: list[str], matches: int, hooks: dict[str, Any]) -> None:
        play_learning_bot(
            url,
            mix,
            n_matches=matches,
            stop=stop,
            rules=rules,
            token=token,
            seed=seed,
            name=name,
            report=report,
            league=None if league is None else functools.partial(league.build, worker=index),
            **hooks,
        )

    def say(message: str) -> None:
        print(f"arena train: {message}", file=sys.stderr, flush=True)

    def size(mix: list[str]) -> int:
        return n_matches if royale_matches is None else royale_matches * len(mix)

    try:
        play_with_royale_opponents(opponents, size, rules, play, say, None if turns_per_s is None else _pacer(turns_per_s))
    except RoyaleMatchError as exc:  # only the league's Tank Royale share runs Tank Royale bots in a worker
        say(f"{exc}; the league goes on without Tank Royale bots")
    except KeyboardInterrupt:
        pass  # the parent handles Ctrl-C and stops us through the event
    finally:
        reports.put((index, list(pending), ticks, cpu()))


def _pacer(turns_per_s: float) -> Callable[[object], None]:
    """A ``watch`` hook that holds the battle to ``turns_per_s`` steps a second (sleeping, not spinning).

    Why: Tank Royale bots answer in lockstep as fast as they can, and each official-API Python bot
    costs ~0.8 ms of CPU a turn; unpaced, two of them and their worker took ~40% of the learner's
    throughput on 2 cores. Paced, their share of the machine is what the pace says.
    """
    period = 1.0 / turns_per_s
    due = time.monotonic()

    def watch(_battle: object) -> None:
        nonlocal due
        due = max(due + period, time.monotonic() - period)  # no catching up after a stall
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    return watch


class WorkerPool:
    """``n`` bot processes (spawned, so no state is inherited from the server process)."""

    def __init__(
        self,
        n: int,
        url: str,
        opponents: list[str],
        n_matches: int,
        max_ticks: int,
        token: str | None,
        seed: int,
        league: LeagueSpec | None = None,
        name: str = "tank",
        royale_matches: int | None = None,
        turns_per_s: float | None = None,
    ) -> None:
        """``royale_matches``: the league's Tank Royale share, ``opponents`` all ``royale:PATH`` and that many
        matches against each (one bot process per match, booted by the worker), at most ``turns_per_s``."""
        context = mp.get_context("spawn")
        self.stop = context.Event()
        self.reports: Any = context.Queue()
        self.processes = [
            context.Process(
                target=_worker_main,
                args=(
                    url,
                    opponents,
                    n_matches,
                    max_ticks,
                    token,
                    seed * 1000 + i,
                    f"{name}{i}",
                    self.stop,
                    self.reports,
                    i,
                    league,
                    royale_matches,
                    turns_per_s,
                ),
                name=f"arena-worker-{name}{i}",
                daemon=True,
            )
            for i in range(n)
        ]
        self.cpu_seconds = [0.0] * n
        """Each worker's CPU seconds (all its threads) since its first tick, as of its latest report."""

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.processes)

    def failed(self) -> list[int]:
        """Exit codes of workers that ended with an error."""
        return [p.exitcode for p in self.processes if p.exitcode not in (None, 0)]  # type: ignore[misc]

    def collect(self, log: MatchLog) -> None:
        """Move every report received so far into ``log`` (non-blocking)."""
        while True:
            try:
                index, results, ticks, cpu_seconds = self.reports.get_nowait()
            except queue.Empty:
                return
            self.cpu_seconds[index] = cpu_seconds
            log.add(results, ticks)

    def close(self, log: MatchLog, timeout: float = 30.0) -> None:
        """Stop every worker, join it, and collect its last reports."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0.1, deadline - time.monotonic()))
            self.collect(log)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        self.collect(log)
        with contextlib.suppress(Exception):
            self.reports.close()
            self.reports.join_thread()
