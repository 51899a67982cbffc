"""Play one learning bot from its spec: boot its Tank Royale opponents, pace them, hand the rest to the game loop.

The one body a bot thread (:class:`arena.bots.launch.BotThreads`) and a worker process
(:mod:`arena.bots.workers`) both run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .play import MatchLog, RoundResult, play_learning_bot
from .spec import LearningBotSpec

__all__ = ["pacer", "run_learning_bot"]


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

    watch = view if spec.turns_per_s is None else pacer(spec.turns_per_s)
    play_with_royale_opponents(spec.opponents, spec.matches_for, spec.rules, play, say, watch)


def pacer(turns_per_s: float) -> Callable[[object], None]:
    """A ``watch`` hook that holds the battle to ``turns_per_s`` steps a second (sleeping, not spinning).

    Why: Tank Royale bots answer in lockstep as fast as they can, and each official-API Python bot
    costs far more CPU a turn than the arena's own bots; unpaced, they take the learner's core
    (docs/royale.md). Paced, their share of the machine is what the pace says.
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
