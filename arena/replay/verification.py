"""Check a recording by re-simulation: the engine, fed the recorded actions, must redraw every frame.

Why this is possible at all: the engine is deterministic (randomness only in ``reset``, from
the seed), so a recording's seed, rules and actions fully determine its frames. A difference
means an engine change altered some rule's outcome, or a damaged or forged file; either way the
first differing frame is what a person needs to see, so :func:`verify` stops there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..games.tank.engine import TankBattle
from ..games.tank.frames import frame
from .recording import Recording

__all__ = ["Mismatch", "Verification", "resimulate", "verify"]


def resimulate(recording: Recording) -> Iterator[dict[str, Any]]:
    """Replay the recorded actions in a fresh engine and yield its frames, one per recorded frame.

    A recorded tick-0 frame after the first is a new round: the engine is reset there, as
    ``play_match`` did, so its random stream (start positions) follows the original.
    """
    battle = TankBattle(1, len(recording.names), recording.rules, seed=recording.seed)
    for i in range(recording.n_frames):
        if recording.tick[i] == 0:
            if i > 0:
                battle.reset()
        else:
            battle.step(recording.actions[i][None])
        yield frame(battle, 0)


@dataclass(frozen=True)
class Mismatch:
    """The first frame where the re-simulation departs from the recording."""

    index: int
    recorded: dict[str, Any]
    replayed: dict[str, Any]

    def describe(self) -> str:
        """One line: where, which key, both values."""
        where = f"round {self.recorded['round']} tick {self.recorded['tick']} (frame {self.index})"
        for key in self.recorded:
            if self.recorded[key] != self.replayed.get(key):
                return f"{where}: {key} recorded {self.recorded[key]!r}, replayed {self.replayed.get(key)!r}"
        return f"{where}: frames differ"


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found."""

    frames: int
    """Frames compared (all of them when there is no mismatch)."""
    rounds: int
    """Rounds in the recording."""
    mismatch: Mismatch | None
    """The first departure, ``None`` when there is none."""

    @property
    def ok(self) -> bool:
        """Every recorded frame came back exactly."""
        return self.mismatch is None


def verify(recording: Recording) -> Verification:
    """Re-simulate the whole recording and compare every frame exactly (stops at the first difference)."""
    checked = 0
    for i, replayed in enumerate(resimulate(recording)):
        recorded = recording.frame(i)
        if replayed != recorded:
            return Verification(checked, len(recording.rounds), Mismatch(i, recorded, replayed))
        checked += 1
    return Verification(checked, len(recording.rounds), None)
