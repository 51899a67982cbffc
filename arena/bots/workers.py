"""Learning bots in worker processes: each plays its matches in its own interpreter (own GIL).

In one process the bots' Python (game step, policy, batching) competes with the trainer
thread for the GIL. A worker process is still an ordinary websocket bot of the server; it
reports finished rounds to the parent through a queue, batched every quarter second, and ends
by itself when the parent dies, however it dies (:func:`~arena.bots.parent_watch.die_with_parent`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import sys
import time
from typing import Any

from .learning_bot import run_learning_bot
from .parent_watch import Parent, die_with_parent
from .play import MatchLog, RoundResult
from .spec import LearningBotSpec

__all__ = ["WorkerPool"]

REPORT_EVERY = 0.25
"""Seconds between a worker's reports to the parent."""


def _worker_main(spec: LearningBotSpec, stop: Any, reports: Any, parent: Parent) -> None:
    """A worker process: play ``spec`` until ``stop``, reporting rounds, ticks and CPU to the parent (ending with it)."""
    die_with_parent(parent)
    from ..royale.seats import RoyaleMatchError

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
            reports.put((spec.index, list(pending), ticks, cpu()))
            pending.clear()
            ticks, last = 0, time.monotonic()

    def say(message: str) -> None:
        print(f"arena train: {message}", file=sys.stderr, flush=True)

    try:
        run_learning_bot(spec, stop, say, report=report)
    except RoyaleMatchError as exc:  # only the league's Tank Royale share runs Tank Royale bots in a worker
        say(f"{exc}; the league goes on without Tank Royale bots")
    except KeyboardInterrupt:
        pass  # the parent handles Ctrl-C and stops us through the event
    finally:
        reports.put((spec.index, list(pending), ticks, cpu()))


class WorkerPool:
    """``n`` bot processes (spawned, so no state is inherited from the server process), bot ``i`` playing ``spec.nth(i)``."""

    def __init__(self, spec: LearningBotSpec, n: int) -> None:
        self._context = mp.get_context("spawn")
        self._spec = spec
        self.stop = self._context.Event()
        self.reports: Any = self._context.Queue()
        self.processes: list[Any] = []
        """Filled by :meth:`start`."""
        self.cpu_seconds = [0.0] * n
        """Each worker's CPU seconds (all its threads) since its first tick, as of its latest report."""

    def start(self) -> None:
        """Start the workers (from any thread: each one ends by itself when this process dies, not this thread)."""
        parent = Parent.here()  # made here: which thread starts them decides how they watch this process
        spec = self._spec
        self.processes = [
            self._context.Process(
                target=_worker_main,
                args=(spec.nth(i), self.stop, self.reports, parent),
                name=f"arena-worker-{spec.name}{i}",
                daemon=True,
            )
            for i in range(len(self.cpu_seconds))
        ]
        for process in self.processes:
            process.start()

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.processes)

    def failed(self) -> list[int]:
        """Exit codes of workers that ended with an error."""
        return [p.exitcode for p in self.processes if p.exitcode not in (None, 0)]  # type: ignore[misc]

    def errors(self) -> list[BaseException]:
        """What went wrong, one error a failed worker (read after :meth:`close`)."""
        return [RuntimeError(f"worker exited with code {code}") for code in self.failed()]

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
