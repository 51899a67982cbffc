"""``arena match``'s plan: every flag checked once, into one frozen record the match reads.

:meth:`MatchPlan.from_flags` is the only reader of the parsed flags. It refuses a bad combination
before a round is played (one line, exit 2) and names each ``--bot`` as the results will. The match
(:mod:`arena.commands.match_run`) then reads the plan, never the flags.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .options import SCRIPTED_NAMES, check_scripted_name, is_scripted_name

if TYPE_CHECKING:
    from ..games.tank.engines import EngineName
    from ..games.tank.rules import TankRules

__all__ = ["MatchBot", "MatchPlan", "RoyaleSettings"]

BotKind = Literal["scripted", "royale", "policy"]
"""What a ``--bot`` is: a scripted bot by name, a Tank Royale bot (``royale:PATH``) or a policy file."""


@dataclass(frozen=True)
class MatchBot:
    """One ``--bot``: its name in the results (unique: a mirror match's second copy is ``NAME#2``), its kind, its text."""

    name: str
    kind: BotKind
    spec: str


@dataclass(frozen=True)
class RoyaleSettings:
    """How a match meets its Tank Royale bots (``royale:PATH`` bots, or ``--royale-port``)."""

    port: int | None
    """``--royale-port``: wait there for bots started by hand; None: boot each ``royale:PATH`` here."""
    turn_timeout_ms: float | None
    """The longest a turn waits for the bots' intents (None: Tank Royale's standard)."""
    logs: Path | None
    """Where the booted bots' output is kept (None: deleted after the match)."""


@dataclass(frozen=True)
class MatchPlan:
    """One ``arena match``, decided."""

    bots: tuple[MatchBot, ...]
    rounds: int
    ticks_per_round: int
    seed: int
    engine: EngineName
    """The battle's and the scripted bots' tank engine (a Tank Royale match ticks in numpy: its events need it)."""
    deterministic: bool
    """Trained policies act with their mean action instead of sampling as in training."""
    json: bool
    rate: bool
    """A round-robin of every pair instead, rated by a Bradley-Terry fit (Elo)."""
    record: Path | None
    royale: RoyaleSettings | None
    """How the Tank Royale bots are met; None when the match has none."""

    @property
    def n_matches(self) -> int:
        """Rounds side by side: one arena when recording (a recording replays only rounds played one after another)
        or with Tank Royale bots, else up to 50."""
        return 1 if self.record is not None or self.royale is not None else min(50, self.rounds)

    @property
    def rules(self) -> TankRules:
        """The round's rules: Tank Royale's with Tank Royale bots, else the arena's, with the tick cap."""
        if self.royale is not None:
            from ..royale.match import royale_rules

            return royale_rules(self.ticks_per_round)
        from ..games.tank.rules import TankRules

        return TankRules(max_ticks=self.ticks_per_round)

    @classmethod
    def from_flags(cls, flags: argparse.Namespace) -> MatchPlan:
        """The plan of ``arena match``'s parsed ``flags`` (read, never written).

        Raises:
            ValueError, FileNotFoundError: a flag or a combination the match cannot use (one line for the user).
        """
        from ..royale.seats import RoyaleBotSpec

        specs: list[str] = flags.bot
        royale = any(RoyaleBotSpec.matches(spec) for spec in specs) or flags.royale_port is not None
        if not 2 <= len(specs) <= 8:
            raise ValueError(f"give 2 to 8 --bot, got {len(specs)}")
        if flags.turn_timeout_ms is not None and not royale:
            raise ValueError("--turn-timeout-ms applies to Tank Royale bots only (royale:PATH or --royale-port)")
        if flags.record is not None and not flags.record.parent.is_dir():  # before a long match, not after
            raise FileNotFoundError(f"--record {flags.record}: no directory {flags.record.parent}")
        if flags.royale_logs is not None and (not royale or flags.royale_port is not None):
            raise ValueError("--royale-logs keeps the output of booted Tank Royale bots (royale:PATH, without --royale-port)")
        bots = _bots(specs)
        if flags.rate and (royale or flags.record is not None):
            raise ValueError("--rate plays the built-in arena's bots and policy files, without --record or royale:PATH")
        settings = RoyaleSettings(flags.royale_port, flags.turn_timeout_ms, flags.royale_logs) if royale else None
        return cls(
            bots=bots,
            rounds=flags.rounds,
            ticks_per_round=flags.ticks_per_round,
            seed=flags.seed,
            engine=flags.engine,  # numba importable: checked by the command line (arena/cli.py)
            deterministic=flags.deterministic,
            json=flags.json,
            rate=flags.rate,
            record=flags.record,
            royale=settings,
        )


def _bots(specs: list[str]) -> tuple[MatchBot, ...]:
    """Each ``--bot`` checked and named: a scripted name, ``royale:PATH`` or an existing policy file.

    Raises:
        ValueError: a ``--bot`` is none of those.
    """
    from ..royale.seats import RoyaleBotSpec

    bots: list[MatchBot] = []
    for i, spec in enumerate(specs):
        kind: BotKind = "scripted" if is_scripted_name(spec) else "royale" if RoyaleBotSpec.matches(spec) else "policy"
        if kind == "scripted":
            check_scripted_name(spec)
        if kind == "policy" and not Path(spec).exists():
            raise ValueError(
                f"unknown bot {spec!r}: choose from {', '.join(SCRIPTED_NAMES)}, a policy file (a checkpoint, a run "
                "directory or an exported weights file) or royale:PATH"
            )
        name = spec if kind == "scripted" else Path(spec.removeprefix("royale:")).name or spec
        if name in (bot.name for bot in bots):  # the same bot twice (a mirror match): tell the rows apart
            name = f"{name}#{i + 1}"
        bots.append(MatchBot(name, kind, spec))
    return tuple(bots)
