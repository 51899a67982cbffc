"""Start a run's learning bots from one :class:`~arena.bots.spec.LearningBotSpec`: threads or worker processes.

``arena train`` asks :func:`launch_bots` for its bots and gets one handle either way: bot threads of
its own process (:class:`BotThreads`) or worker processes (:class:`~arena.bots.workers.WorkerPool`,
each with its own GIL). Both play :func:`~arena.bots.learning_bot.run_learning_bot`. The reach game's
bots are :class:`BotThreads` too, each playing :func:`arena.games.reach.play_reach`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
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
    """``n`` bots as daemon threads of this process, bot ``i`` running ``play(i, stop)``.

    One handle for any game's bots: the tank's learning bots (:func:`launch_bots`) and ``arena train
    --game reach``'s. The first bot that raises sets ``stop``, so the others end too; what each bot's
    ``play`` returned is in :attr:`results` (reach: its games, for the summary).
    """

    cpu_seconds: list[float] | None = None
    """Threads share the process's CPU time with the server: nothing of their own to report."""

    def __init__(self, n: int, play: Callable[[int, threading.Event], Any]) -> None:
        self.stop = threading.Event()
        self.results: dict[int, Any] = {}
        """Bot index → what its ``play`` returned (bots that raised have no entry)."""
        self._play = play
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"bot-{i}", daemon=True) for i in range(n)]

    def _run(self, i: int) -> None:
        try:
            self.results[i] = self._play(i, self.stop)
        except BaseException as exc:  # reported once by the caller; the other bots stop too
            self._errors.append(exc)
            self.stop.set()

    def start(self) -> BotThreads:
        for thread in self._threads:
            thread.start()
        return self

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
    if layout.workers:
        pool = WorkerPool(spec, layout.workers)
        pool.start()
        return pool
    return BotThreads(layout.bots, partial(_learning_bot, spec, log, say, view)).start()


def _learning_bot(
    spec: LearningBotSpec, log: MatchLog, say: Callable[[str], None], view: Any, i: int, stop: threading.Event
) -> None:
    """Bot thread ``i`` of a run: ``spec.nth(i)`` played into the run's ``log``; the first bot feeds ``view``."""
    run_learning_bot(spec.nth(i), stop, say, log=log, view=view if i == 0 else None)
