"""Record a match as it is played: the ``play_match`` observer that produces a :class:`Recording`.

Separate from the format (:mod:`arena.replay.recording`) because it is the only part that runs
inside a match: ``arena match --record`` imports it, and it must stay cheap per tick (packed
integer arrays, no per-frame dicts kept) so that recording does not slow the match down.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.frames import frame, header
from ..games.tank.rules import TankRules
from .recording import BULLET_FIELDS, FORMAT, TANK_FIELDS, VERSION, Recording

__all__ = ["Recorder"]


def _centi(value: float) -> int:
    """A frame value as integer hundredths, the unit the file stores (exact, see the format's docstring)."""
    # A frame value is already rounded to 2 decimals: value * 100 is within 1e-9 of an integer.
    return round(value * 100)


class Recorder:
    """Collects the frames and actions of one arena, tick by tick (a ``play_match`` observer).

    Pass it as ``play_match(..., n_matches=1, observer=recorder)``; then call
    :meth:`recording`. One arena, because the engine's random stream is shared by the
    matches it holds: rounds played side by side can only be replayed together.
    Memory: packed integer arrays, not frame dicts (1v1: about 100 bytes a tick plus 20 a bullet).
    """

    def __init__(
        self, names: Sequence[str], seed: int, rules: TankRules, bots: Sequence[dict[str, Any]] | None = None
    ) -> None:
        self.names = [str(n) for n in names]
        self.seed = int(seed)
        self.rules = rules
        self.bots = [dict(b) for b in bots] if bots is not None else [{"name": n} for n in self.names]
        if len(self.bots) != len(self.names):
            raise ValueError(f"need one bot description per name, got {len(self.bots)} for {len(self.names)}")
        self._header: dict[str, Any] | None = None
        self._round = array("i")
        self._tick = array("i")
        self._over = array("b")
        self._winner = array("b")
        self._tanks = array("i")
        self._bullet_count = array("H")
        self._bullets = array("i")
        self._actions = array("f")

    @property
    def frames(self) -> int:
        """Frames recorded so far."""
        return len(self._tick)

    def round_started(self, battle: TankBattle, matches: NDArray[np.bool_]) -> None:
        """Record the first frame (tick 0) of a new round."""
        if battle.n_matches != 1:
            raise ValueError(f"a Recorder records one arena (play_match with n_matches=1), got {battle.n_matches}")
        if self._header is None:
            self._header = header(battle, self.names)
        if bool(np.asarray(matches)[0]):
            self._add(frame(battle, 0), np.zeros((battle.n_tanks, ACT_DIM), np.float32))

    def ticked(self, battle: TankBattle, actions: NDArray[np.float32]) -> None:
        """Record the frame after a step and the actions that produced it."""
        if self._header is None:
            raise RuntimeError("round_started() must come first")
        if self._over and self._over[-1]:
            return  # the round already ended: play_match steps a frozen arena only after its last round
        self._add(frame(battle, 0), np.asarray(actions, np.float32)[0])

    def _add(self, snap: dict[str, Any], actions: NDArray[np.float32]) -> None:
        """Append one frame to the packed columns (the layout of :class:`Recording`, tanks not yet delta-coded)."""
        self._round.append(snap["round"])
        self._tick.append(snap["tick"])
        self._over.append(int(snap["over"]))
        self._winner.append(snap["winner"])
        for tank in snap["tanks"]:
            self._tanks.extend([_centi(v) for v in tank[:6]])
            self._tanks.append(tank[6])
        self._bullet_count.append(len(snap["bullets"]))
        for bullet in snap["bullets"]:
            self._bullets.extend([_centi(v) for v in bullet[:4]])
            self._bullets.append(bullet[4])
        self._actions.frombytes(np.ascontiguousarray(actions, np.float32).tobytes())

    def recording(self, result: dict[str, Any] | None = None) -> Recording:
        """Everything recorded so far, with the match's result table (if given) in the metadata."""
        if self._header is None or not self._tick:
            raise ValueError("nothing recorded yet")
        n, t = len(self._tick), len(self.names)
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "header": self._header,
            "seed": self.seed,
            "rules": dataclasses.asdict(self.rules),
            "bots": self.bots,
            "result": result,
        }
        return Recording(
            meta=meta,
            round=np.frombuffer(self._round, np.int32).copy(),
            tick=np.frombuffer(self._tick, np.int32).copy(),
            over=np.frombuffer(self._over, np.int8).astype(bool),
            winner=np.frombuffer(self._winner, np.int8).copy(),
            tanks=np.frombuffer(self._tanks, np.int32).reshape(n, t, TANK_FIELDS).copy(),
            bullet_count=np.frombuffer(self._bullet_count, np.uint16).copy(),
            bullets=np.frombuffer(self._bullets, np.int32).reshape(-1, BULLET_FIELDS).copy(),
            actions=np.frombuffer(self._actions, np.float32).reshape(n, t, ACT_DIM).copy(),
        )
