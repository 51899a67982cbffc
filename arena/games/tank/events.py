"""What one step did, as plain records: :class:`StepInfo` for learners, :class:`StepEvents` for Tank Royale.

Kept apart from the engine's physics because they are read by other people: the records' field
docs are the contract with the code that consumes a step (reward functions, the league, the Tank
Royale bridge in ``arena.royale``, the tests), and belong in one short file of their own. They
hold arrays and compute nothing heavy: :meth:`StepInfo.reward_terms` only stacks columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["BulletEvents", "StepEvents", "StepInfo"]


@dataclass
class StepInfo:
    """What one :meth:`~arena.games.tank.engine.TankBattle.step` did, per match ``[M]`` and per tank ``[M, T]``."""

    energy_delta: NDArray[np.float32]
    """(M, T) this tank's energy change this tick (firing costs, damage, energy returns, zap)."""
    enemy_energy_delta: NDArray[np.float32]
    """(M, T) sum of all enemies' energy changes this tick (1v1: the enemy's), whatever caused them."""
    damage_dealt: NDArray[np.float32]
    """(M, T) energy this tank took from its enemies this tick: its bullets' damage plus its rams'."""
    enemy_distance: NDArray[np.float32]
    """(M, T) distance to the nearest living enemy after the tick (max_distance if none)."""
    max_distance: float
    """The field diagonal (1000 for 800 x 600)."""
    gun_bearing_abs: NDArray[np.float32]
    """(M, T) |angle between gun heading and the linear-targeting intercept of the nearest enemy|
    (see ``lead_bearing_*`` in OBS_FIELDS), degrees in [0, 180] (180 if none). The seed leaves
    the bearing's target to the bot; the intercept is what a hit needs (head-on for a still tank)."""
    alive: NDArray[np.bool_]
    """(M, T) alive after this tick."""
    died: NDArray[np.bool_]
    """(M, T) died during this tick."""
    round_over: NDArray[np.bool_]
    """(M,) at most one tank left (terminal) or the tick cap reached (truncated)."""
    truncated: NDArray[np.bool_]
    """(M,) round_over because of the tick cap: a truncation, not a terminal."""
    scores: NDArray[np.float32]
    """(M, T) cumulative Robocode-style round score so far (final when round_over)."""
    winner: NDArray[np.int64]
    """(M,) index of the last survivor; -1 while running, if nobody survived or if truncated."""
    events: StepEvents | None = None
    """What happened, tank by tank and bullet by bullet, when the battle's ``record_events`` is on (else None)."""

    def reward_terms(self) -> NDArray[np.float32]:
        """(M, T, 5): energy_delta, -damage_dealt, enemy_distance, max_distance, gun_bearing_abs.

        Column 1, the seed's "enemy energy delta", is the energy *this tank* took from its
        enemies, not their raw energy change: the raw change also counts each enemy's own
        firing costs, so a learner paid for it learns to dodge and let a trigger-happy enemy
        shoot itself empty. Trained 10 minutes against ``tracker`` that way, the policy never
        fired (its fire action stayed below 0), beat tracker 97.5% and won 4.5% against
        ``sitting``, bleeding to death on a wall; with damage dealt, 98.5% and 71.5% (docs/arena.md).
        """
        out = np.empty((*self.energy_delta.shape, 5), np.float32)
        out[..., 0] = self.energy_delta
        out[..., 1] = -self.damage_dealt
        out[..., 2] = self.enemy_distance
        out[..., 3] = self.max_distance
        out[..., 4] = self.gun_bearing_abs
        return out


@dataclass
class BulletEvents:
    """Bullets that did something this tick, one entry per bullet (1-D arrays of equal length).

    ``slot`` indexes the battle's bullet arrays (``bullet_*[match, slot]``); ``x``/``y`` is where
    the bullet was at the end of its move this tick. ``victim`` and ``damage`` are set for hits
    (-1 and 0 otherwise).
    """

    match: NDArray[np.intp]
    slot: NDArray[np.intp]
    owner: NDArray[np.intp]
    power: NDArray[np.float64]
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    heading: NDArray[np.float64]
    victim: NDArray[np.intp]
    damage: NDArray[np.float64]

    @classmethod
    def empty(cls) -> BulletEvents:
        i, f = np.zeros(0, np.intp), np.zeros(0)
        return cls(i, i, i, f, f, f, f, i, f)

    def __len__(self) -> int:
        return len(self.match)


@dataclass
class StepEvents:
    """Everything one step did that a Tank Royale bot hears about (``TankBattle.record_events``).

    Computed only when asked for, so the training loop pays nothing for it. The per-tank
    turn figures are what the tank actually applied this tick (degrees, positive = left):
    ``body_turn`` after the speed-dependent limit, ``gun_turn`` and ``radar_turn`` relative to
    what carries them, and ``radar_sweep`` the radar's total rotation: the arc its scan covered.
    """

    body_turn: NDArray[np.float64]
    """(M, T) body turn applied this tick."""
    gun_turn: NDArray[np.float64]
    """(M, T) gun turn applied on top of the body's (before ``turn_coupling``)."""
    radar_turn: NDArray[np.float64]
    """(M, T) radar turn applied on top of the gun's (before ``turn_coupling``)."""
    radar_sweep: NDArray[np.float64]
    """(M, T) total change of the radar heading this tick: the scanned arc ends at the new radar heading."""
    hit_wall: NDArray[np.bool_]
    """(M, T) the tank hit a wall this tick."""
    collided: NDArray[np.bool_]
    """(M, T, T) tanks i and j collided this tick (symmetric)."""
    rammed: NDArray[np.bool_]
    """(M, T, T) [rammer, victim]: i moved into j (Tank Royale's ``isRamming``) in a collision this tick."""
    scanned: NDArray[np.bool_]
    """(M, T, T) [scanner, scanned]: j's circle was inside i's radar sweep (range ``radar_range``) this tick."""
    fired: BulletEvents
    """Bullets fired this tick (at the tank's centre, along the gun heading)."""
    bullet_hits: BulletEvents
    """Bullets that hit a tank (``victim``, ``damage``)."""
    bullet_walls: BulletEvents
    """Bullets that left the field."""
    bullet_bullets: tuple[BulletEvents, BulletEvents]
    """Pairs of bullets that destroyed each other (``TankRules.bullet_collisions``): entry k of both."""
