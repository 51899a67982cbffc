"""Start a run's learning bots from one :class:`~arena.bots.spec.LearningBotSpec`: threads or worker processes.

``arena train`` asks :func:`launch_bots` for its bots and gets one handle either way: bot threads of
its own process (:class:`BotThreads`) or worker processes (:class:`~arena.bots.workers.WorkerPool`,
each with its own GIL). Both play :func:`run_learning_bot`, the one place that boots a spec's Tank
Royale opponents and hands the rest to :func:`~arena.bots.play.play_learning_bot`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from ..defaults import Layout
from .play import MatchLog, RoundResult, play_learning_bot
from .spec import LearningBotSpec
from .workers import WorkerPool, _pacer

__all__ = ["BotThreads", "LaunchedBots", "launch_bots", "run_learning_bot"]


def run_learning_bot(
    spec: LearningBotSpec,
    stop: Any,
    say: Callable[[str], None],
    log: MatchLog | None = None,
    report: Callable[[list[RoundResult], int], None] | None = None,
    view: Callable[[Any], None] | None = None,
) -> None:
    """Play ``spec`` until ``stop`` is set, its ``royale:PATH`` opponents booted first.

    A Tank Royale bot that fails to boot is dropped and said through ``say`` (the others play on);
    ``view`` sees the battle after every tick (the dashboard's match view); the league's Tank
    Royale share is held to ``spec.turns_per_s``.

    Raises:
        RoyaleMatchError: every Tank Royale opponent failed to boot and nothing is left to play.
    """
    from ..royale.train import play_with_royale_opponents

    def play(mix: list[str], n_matches: int, hooks: dict[str, Any]) -> None:
        play_learning_bot(replace(spec, opponents=tuple(mix), n_matches=n_matches), stop, log, report, **hooks)

    watch = view if spec.turns_per_s is None else _pacer(spec.turns_per_s)
    play_with_royale_opponents(spec.opponents, spec.matches_for, spec.rules, play, say, watch)


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
