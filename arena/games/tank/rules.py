"""The rules of the tank game: every constant in one validated, frozen dataclass, and the formulas built on them.

Kept apart from the engine because it is a different job, and the one most code needs: the CLI,
the league, the Tank Royale bridge and the scripted bots build a :class:`TankRules` or read its
fields far more often than they step a battle. Defaults are Robocode's; docs/arena.md gives
every constant's source.

The formulas (:func:`bullet_speed`, :func:`bullet_damage`, ...) are the readable, scalar-or-array
form of the rules, for the scripted bots and the tests. :meth:`TankBattle.step
<arena.games.tank.engine.TankBattle.step>` inlines the same arithmetic rather than calling them,
to spare a call per phase on its hot path: a change to a rule changes both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from .geometry import clip

__all__ = [
    "DEFAULT_RULES",
    "TankRules",
    "bullet_damage",
    "bullet_speed",
    "gun_heat_after_firing",
    "max_turn_rate",
    "next_velocity",
    "wall_damage",
]

_BOOL_RULES = frozenset({"bullet_collisions"})


@dataclass(frozen=True)
class TankRules:
    """Every constant of the game. Defaults are Robocode's (see docs/arena.md for sources)."""

    width: float = 800.0
    """Battlefield width (units); Tank Royale default arena 800."""
    height: float = 600.0
    """Battlefield height (units); Tank Royale default arena 600."""
    tank_radius: float = 18.0
    """A tank is a circle of this radius for hits, walls and rams (Tank Royale bounding circle 36/2)."""
    start_energy: float = 100.0
    """Energy at round start (Robocode 100)."""
    max_speed: float = 8.0
    """Maximum |velocity| in units/tick (Robocode 8)."""
    acceleration: float = 1.0
    """Velocity gain per tick when speeding up (Robocode 1)."""
    deceleration: float = 2.0
    """Velocity loss per tick when braking (Robocode 2)."""
    max_turn_rate: float = 10.0
    """Body turn limit at standstill, deg/tick (Robocode 10)."""
    turn_rate_speed_factor: float = 0.75
    """Body turn limit is max_turn_rate - this * |v| (Robocode 0.75)."""
    max_gun_turn_rate: float = 20.0
    """Gun turn limit relative to the body, deg/tick (Robocode 20)."""
    max_radar_turn_rate: float = 45.0
    """Radar turn limit relative to the gun, deg/tick (Robocode 45)."""
    min_bullet_power: float = 0.1
    """Smallest fire power (Robocode 0.1)."""
    max_bullet_power: float = 3.0
    """Largest fire power (Robocode 3)."""
    bullet_speed_base: float = 20.0
    """Bullet speed is base - factor * power (Robocode 20 - 3p)."""
    bullet_speed_factor: float = 3.0
    """See bullet_speed_base."""
    bullet_damage_factor: float = 4.0
    """Bullet damage is factor * p + bonus * max(p - 1, 0) (Robocode 4p + 2(p - 1))."""
    bullet_damage_bonus: float = 2.0
    """See bullet_damage_factor."""
    bullet_energy_return: float = 3.0
    """A hit gives the shooter this * power energy back (Robocode 3p)."""
    gun_heat_base: float = 1.0
    """Gun heat after firing is base + factor * power (Robocode 1 + p/5)."""
    gun_heat_factor: float = 0.2
    """See gun_heat_base."""
    gun_cooling_rate: float = 0.1
    """Gun heat lost per tick (Robocode / Tank Royale default 0.1)."""
    start_gun_heat: float = 3.0
    """Gun heat at round start (Robocode 3.0)."""
    wall_damage_factor: float = 0.5
    """Wall damage is max(factor * |v| - offset, 0) (Robocode |v|/2 - 1)."""
    wall_damage_offset: float = 1.0
    """See wall_damage_factor."""
    ram_damage: float = 0.6
    """Damage each tank takes when two tanks collide (Robocode 0.6)."""
    max_ticks: int = 2000
    """Tick cap of a round; reaching it is a truncation, not a terminal."""
    inactivity_ticks: int = 450
    """Ticks without any bullet hit or ram after which the inactivity zap starts (Robocode 450)."""
    inactivity_zap: float = 0.1
    """Energy every living tank loses per tick while the match is inactive (Robocode 0.1)."""
    bullets_per_tank: int = 8
    """Bullet slots per tank (capacity of a match = this * n_tanks); a shot with no free slot is skipped."""
    spawn_cell: float = 50.0
    """Start positions: one tank per random cell of a grid of cells at least this big (Tank Royale 50)."""
    score_survival: float = 50.0
    """Points to every living tank per enemy death (Robocode 50)."""
    score_last_survivor: float = 10.0
    """Points per enemy to the last survivor (Robocode 10)."""
    score_bullet_damage: float = 1.0
    """Points per point of bullet damage dealt (Robocode 1)."""
    bonus_bullet_kill: float = 0.2
    """Fraction of all bullet damage dealt to a tank that its bullet-killer gets (Robocode 20%)."""
    score_ram_damage: float = 2.0
    """Points per point of ram damage dealt (Robocode 2)."""
    bonus_ram_kill: float = 0.3
    """Fraction of all ram damage dealt to a tank that its ram-killer gets (Robocode 30%)."""
    radar_range: float = 1200.0
    """How far a radar sweep sees (Tank Royale ``RADAR_RADIUS``); used by the scan events (``record_events``)."""
    bullet_collisions: bool = False
    """Bullets whose paths cross in a tick destroy each other (Robocode and Tank Royale). Off by default so that
    the learning arena stays as it was trained; the Tank Royale endpoint (``arena.royale``) turns it on."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _BOOL_RULES:
                if not isinstance(value, bool):
                    raise ValueError(f"TankRules.{f.name} must be a bool, got {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"TankRules.{f.name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"TankRules.{f.name} must be finite, got {value!r}")
            if value < 0:
                raise ValueError(f"TankRules.{f.name} must be >= 0, got {value!r}")
        positive = (
            "width",
            "height",
            "tank_radius",
            "start_energy",
            "max_speed",
            "acceleration",
            "deceleration",
            "min_bullet_power",
            "max_bullet_power",
            "bullet_speed_base",
            "gun_cooling_rate",
            "max_ticks",
            "inactivity_ticks",
            "bullets_per_tank",
            "spawn_cell",
            "radar_range",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"TankRules.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("max_ticks", "inactivity_ticks", "bullets_per_tank"):
            if not isinstance(getattr(self, name), int):
                raise ValueError(f"TankRules.{name} must be an int, got {getattr(self, name)!r}")
        if self.max_bullet_power < self.min_bullet_power:
            raise ValueError(
                f"TankRules.max_bullet_power ({self.max_bullet_power}) must be >= min_bullet_power ({self.min_bullet_power})"
            )
        if self.bullet_speed_base - self.bullet_speed_factor * self.max_bullet_power <= 0:
            raise ValueError("TankRules.bullet_speed_factor makes bullets of max_bullet_power stand still or go backwards")
        if self.max_turn_rate - self.turn_rate_speed_factor * self.max_speed < 0:
            raise ValueError("TankRules.turn_rate_speed_factor makes the body turn limit negative at max_speed")
        if self.spawn_cell < 2 * self.tank_radius:
            raise ValueError(f"TankRules.spawn_cell ({self.spawn_cell}) must be >= 2 * tank_radius")
        if self.width < self.spawn_cell or self.height < self.spawn_cell:
            raise ValueError("TankRules.width and height must be >= spawn_cell")

    @property
    def max_distance(self) -> float:
        """The field diagonal (1000 for 800 x 600): the largest possible distance."""
        return math.hypot(self.width, self.height)

    @property
    def spawn_cells(self) -> int:
        """Number of start cells, an upper bound on the number of tanks."""
        return int(self.width // self.spawn_cell) * int(self.height // self.spawn_cell)


DEFAULT_RULES: TankRules = TankRules()
"""Robocode's rules, one shared instance: the default argument wherever rules are optional (frozen, so sharing is safe)."""


# --- the formulas: the rules in readable form, for the scripted bots and the tests ---------------


def bullet_speed(power: NDArray[np.float64] | float, rules: TankRules = DEFAULT_RULES) -> NDArray[np.float64] | float:
    """Bullet speed for a fire power: 20 - 3 * power."""
    return rules.bullet_speed_base - rules.bullet_speed_factor * power


def bullet_damage(power: NDArray[np.float64] | float, rules: TankRules = DEFAULT_RULES) -> NDArray[np.float64] | float:
    """Bullet damage for a fire power: 4 * power + 2 * max(power - 1, 0)."""
    return rules.bullet_damage_factor * power + rules.bullet_damage_bonus * np.maximum(np.subtract(power, 1.0), 0.0)


def gun_heat_after_firing(power: NDArray[np.float64] | float, rules: TankRules = DEFAULT_RULES) -> NDArray[np.float64] | float:
    """Gun heat right after firing: 1 + power / 5."""
    return rules.gun_heat_base + rules.gun_heat_factor * power


def wall_damage(velocity: NDArray[np.float64] | float, rules: TankRules = DEFAULT_RULES) -> NDArray[np.float64] | float:
    """Damage of hitting a wall at a velocity: max(|v| / 2 - 1, 0)."""
    return np.maximum(rules.wall_damage_factor * np.abs(velocity) - rules.wall_damage_offset, 0.0)


def max_turn_rate(velocity: NDArray[np.float64] | float, rules: TankRules = DEFAULT_RULES) -> NDArray[np.float64] | float:
    """Body turn limit (deg/tick) at a velocity: 10 - 0.75 * |v|."""
    return rules.max_turn_rate - rules.turn_rate_speed_factor * np.minimum(np.abs(velocity), rules.max_speed)


def next_velocity(
    velocity: NDArray[np.float64], target: NDArray[np.float64], rules: TankRules = DEFAULT_RULES
) -> NDArray[np.float64]:
    """Velocity after one tick of driving toward ``target`` (Tank Royale's ``calcNewBotSpeed``).

    Speeding up away from 0 (or starting from 0) changes the velocity by at most
    ``acceleration``; braking (moving toward 0 or reversing) by at most ``deceleration``.
    The result is clipped to ``[-max_speed, max_speed]``.
    """
    velocity = np.asarray(velocity, np.float64)
    target = clip(np.asarray(target, np.float64), -rules.max_speed, rules.max_speed)
    delta = target - velocity
    speeding_up = (velocity == 0) | ((velocity > 0) & (delta >= 0)) | ((velocity < 0) & (delta < 0))
    limit = np.where(speeding_up, rules.acceleration, rules.deceleration)
    return clip(velocity + clip(delta, -limit, limit), -rules.max_speed, rules.max_speed)
