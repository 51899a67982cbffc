"""One learning bot, whole: what a bot thread, a worker process and ``arena worker`` all play from.

The thread of ``arena train``, its worker processes and ``arena worker`` play the same bot, so it
is one frozen, picklable record: a worker process receives it as is, and the n-th bot of a run is
``spec.nth(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..games.tank.engines import ENGINES, EngineName
from ..games.tank.rules import TankRules

__all__ = ["LeagueBuilder", "LearningBotSpec"]


class LeagueBuilder(Protocol):
    """What a learning bot needs of a league (``arena.league.LeagueSpec`` is one): its opponents for a battle.

    A protocol, not the class: the league plays bots (``arena.bots.play``), so naming it here would tie the
    two packages in a circle.
    """

    def build(self, n_matches: int, seed: int, worker: int = 0, engine: EngineName = "numpy") -> Any:
        """The opponents of ``n_matches`` matches (an ``arena.bots.play.OpponentPool``), scripted bots on ``engine``."""


@dataclass(frozen=True)
class LearningBotSpec:
    """A learning websocket bot playing tank 0 of ``n_matches`` 1v1 matches.

    ``opponents`` is the fixed mix (scripted names, policy files, ``royale:PATH``), spread over
    the matches round-robin, unless ``league`` builds the opponents instead. ``royale_matches``
    marks the league's Tank Royale share: ``opponents`` are then all ``royale:PATH`` and each gets
    that many matches, played at most ``turns_per_s`` turns a second.
    """

    url: str
    opponents: tuple[str, ...] = ("sitting",)
    n_matches: int = 16
    max_ticks: int = 2000
    token: str | None = None
    seed: int = 0
    name: str = "tank"
    league: LeagueBuilder | None = None
    rounds: int | None = None
    """Stop after this many finished rounds (None: until stopped)."""
    index: int = 0
    """This bot's place among the run's bots (its league state and seed follow it)."""
    royale_matches: int | None = None
    turns_per_s: float | None = None
    observation: str = "full"
    """What the learner sees: ``full`` (perfect information) or ``radar`` (its enemy from its own radar's scans,
    :mod:`arena.games.tank.radar`); the opponents always play from the full observation."""
    engine: EngineName = "numpy"
    """The tank engine the bot's battle and its scripted opponents run on: "numpy" or the compiled "numba"
    (``TankBattle(engine=...)``, ``make_scripted(..., engine=...)``; the same game bit for bit)."""

    def __post_init__(self) -> None:
        problems = []
        if not self.opponents and self.league is None:
            problems.append("a learning bot needs opponents or a league")
        for name in ("n_matches", "max_ticks"):
            if not getattr(self, name) >= 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.royale_matches is not None and not self.royale_matches >= 1:
            problems.append(f"royale_matches must be >= 1, got {self.royale_matches}")
        if self.observation not in ("full", "radar"):
            problems.append(f"observation must be full or radar, got {self.observation!r}")
        if self.engine not in ENGINES:
            problems.append(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if self.turns_per_s is not None and not self.turns_per_s > 0:
            problems.append(f"turns_per_s must be > 0, got {self.turns_per_s}")
        if problems:
            raise ValueError("invalid LearningBotSpec: " + "; ".join(problems))

    @property
    def rules(self) -> TankRules:
        return TankRules(max_ticks=self.max_ticks)

    def nth(self, index: int) -> LearningBotSpec:
        """The ``index``-th bot of a run from this one: its own seed, name and league slot."""
        return replace(self, seed=self.seed * 1000 + index, name=f"{self.name}{index}", index=index)

    def matches_for(self, mix: list[str]) -> int:
        """Matches for the opponent ``mix`` left after boot failures (the Tank Royale share: per bot)."""
        return self.n_matches if self.royale_matches is None else self.royale_matches * len(mix)
