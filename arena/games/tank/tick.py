"""One numpy step's working values, handed from phase to phase.

:meth:`TankBattle.step <arena.games.tank.engine.TankBattle.step>` (numpy) runs the tick as phases, in the
order of the compiled step (guns, drive and walls, rams, bullets, the end of the tick, the StepInfo), and
the bullet phase lives in ``bullets.py``. What one phase leaves for the next (where the tanks went, who is
still alive, the score each earned) travels in a :class:`Tick`, made fresh for every step: the compiled
step keeps the same values in registers and its scratch arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .events import BulletEvents

__all__ = ["Tick"]

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]


@dataclass(eq=False, slots=True)
class Tick:
    """The working values of one numpy step: arrays ``(M, T)`` unless noted.

    Until the end of the tick the battle's state holds the positions and velocities from before the drive;
    the new ones are here (``x``, ``y``, ``v``) and the last phase writes them.
    """

    actions: F64
    """(M, T, ACT_DIM) the actions as read (:func:`~arena.games.tank.actions.read_actions`)."""
    running: B8
    """(M,) the matches not over: the only ones the tick changes."""
    all_running: bool
    """No match is over (the common case: some masks are then skipped)."""
    live: B8
    """The tanks that act this tick: alive, in a running match."""
    energy0: F64
    """Energy at the start of the tick (StepInfo's energy change)."""
    record: bool
    """Whether the events are recorded (``TankBattle.record_events``)."""
    score_delta: F64
    """Score each tank earned this tick (bullets, rams, survival)."""
    dealt_delta: F64
    """Damage each tank dealt this tick (bullets and rams)."""

    # Set by the phases, in the tick's order.
    body: F64 = field(init=False)
    """Turns this tick (degrees): the body's, the gun's own, the radar's own, and the gun's in all."""
    gun: F64 = field(init=False)
    radar: F64 = field(init=False)
    gun_abs: F64 = field(init=False)
    x: F64 = field(init=False)
    """Positions after the drive, the walls and the rams."""
    y: F64 = field(init=False)
    v: F64 = field(init=False)
    """Velocities after the drive, the walls and the rams."""
    hit_wall: B8 = field(init=False)
    alive_now: B8 = field(init=False)
    """Alive so far this tick (energy above 0)."""
    bumped: B8 = field(init=False)
    """(M,) matches with a collision this tick."""
    hit_match: B8 | None = None
    """(M,) matches with a bullet hit this tick (None: no hit anywhere)."""
    died: B8 = field(init=False)

    # With ``record`` only: what the events are built from (see StepEvents).
    sweep: F64 | None = None
    """The radar's turn this tick."""
    scanned: B8 | None = None
    """(M, T, T) [scanner, scanned]."""
    fired: BulletEvents | None = None
    rams: tuple[NDArray[np.intp], B8, B8] | None = None
    """``(rows, coll, rams)``: the matches with a collision, their colliding pairs and rams [attacker, victim]."""
    clashes: tuple[BulletEvents, BulletEvents] | None = None
    """The two bullets of every bullet-bullet collision."""
    bullets: tuple[BulletEvents, BulletEvents, tuple[BulletEvents, BulletEvents]] | None = None
    """``(hits, walls, clashes)``: the bullets that hit a tank, left the field, or met a bullet."""
