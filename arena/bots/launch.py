"""Start a run's learning bots from one :class:`~arena.bots.spec.LearningBotSpec`: threads or worker processes.

``arena train`` asks :func:`launch_bots` for its bots and gets one handle either way: bot threads of
its own process (:class:`BotThreads`) or worker processes (:class:`~arena.bots.workers.WorkerPool`,
each with its own GIL). Both play :func:`~arena.bots.learning_bot.run_learning_bot`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..defaults import Layout
from .learning_bot import run_learning_bot
from .play import MatchLog
from .spec import LearningBotSpec
from .workers import WorkerPool

__all__ = ["BotThreads", "LaunchedBots", "launch_bots"]


class LaunchedBots(Protocol):
    """A run's learning bots, wherever they run."""

    stop: Any
    """Set it to stop every bot."""

    @property
    def cpu_seconds(self) -> list[float] | None:
        """Each bot's CPU seconds since its first tick (worker processes only: threads share the server's)."""

    def alive(self) -> bool: ...

    def collect(self, log: MatchLog) -> None:
        """Move the rounds finished so far into ``log`` (worker processes report them; threads log directly)."""

    def close(self, log: MatchLog) -> None:
        """Stop and join every bot, collecting what they still had to report."""

    def errors(self) -> list[BaseException]:
        """Why bots ended early (read after :meth:`close`)."""


class BotThreads:
    """``n`` bots as threads of this process, bot ``i`` playing ``spec.nth(i)``; the first one feeds ``view``."""

    cpu_seconds: list[float] | None = None

    def __init__(self, spec: LearningBotSpec, n: int, log: MatchLog, say: Callable[[str], None], view: Any = None) -> None:
        self.stop = threading.Event()
        self._errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                run_learning_bot(spec.nth(i), self.stop, say, log=log, view=view if i == 0 else None)
            except BaseException as exc:  # reported once by the caller; the other bots stop too
                self._errors.append(exc)
                self.stop.set()

        self._threads = [threading.Thread(target=run, args=(i,), name=f"bot-{i}", daemon=True) for i in range(n)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def collect(self, log: MatchLog) -> None:
        pass  # the threads add their rounds to the log themselves

    def close(self, log: MatchLog, timeout: float = 30.0) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout)

    def errors(self) -> list[BaseException]:
        return list(self._errors)


def launch_bots(
    spec: LearningBotSpec, layout: Layout, log: MatchLog, say: Callable[[str], None], view: Any = None
) -> LaunchedBots:
    """Start ``layout``'s bots (worker processes or threads), every one from ``spec``, and return their handle."""
    bots: BotThreads | WorkerPool = (
        WorkerPool(spec, layout.workers) if layout.workers else BotThreads(spec, layout.bots, log, say, view)
    )
    bots.start()
    return bots
