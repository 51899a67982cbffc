"""Scripted tank opponents on the same observation/action interface as a learned policy.

Every bot maps observations ``(N, OBS_DIM)`` of the ``N`` tanks it drives to actions
``(N, ACT_DIM)``; it may keep a little per-tank state, cleared by :meth:`ScriptedBot.reset`
for the tanks that start a new round. Levels of challenge (see the cross table in
docs/arena.md, :mod:`arena.games.tank.tournament`): ``sitting`` < ``spinner`` ~ ``walker`` < ``tracker``.

* ``sitting``: never moves, turns or fires.
* ``spinner``: drives in a tight circle (velocity 5, full left turn: Robocode's
  SpinBot) and fires power 1.5 whenever its gun is pointed at the enemy (head-on aim).
* ``walker``: Robocode's "Walls": drives to a wall, then follows the perimeter (a
  direction drawn per round), braking and turning at the corners; head-on aim, power 2.
* ``tracker``: closes in to about 200 units, then orbits the enemy (perpendicular
  movement, random direction changes, reversing away from walls), aims with linear
  targeting (lead the target by its heading and velocity for the bullet's flight
  time) and fires harder the closer it is (power 450 / distance in [1, 3]).

This module holds the bots' numpy code, the reference. A bot built with ``engine="numba"`` hands its
parameters and state to :class:`~arena.games.tank.scripted_compiled.CompiledActs` instead, which runs
the same arithmetic as kernels. The bots by name are in :mod:`arena.games.tank.roster`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from .actions import ACT_DIM
from .engines import ENGINES, EngineName
from .geometry import clip
from .observation import OBS_DIM
from .rules import DEFAULT_RULES, TankRules, next_velocity

if TYPE_CHECKING:
    from .scripted_compiled import CompiledActs

__all__ = ["ScriptedBot", "Sitting", "Spinner", "Tracker", "View", "Walker"]


class View:
    """Observation columns de-normalized back to game units (degrees, absolute angles)."""

    def __init__(self, obs: NDArray[np.float32], rules: TankRules) -> None:
        o = np.asarray(obs, np.float64)
        if o.ndim != 2 or o.shape[1] != OBS_DIM:
            raise ValueError(f"obs must have shape (N, {OBS_DIM}), got {o.shape}")
        self.x = (o[:, 0] + 1.0) * 0.5 * rules.width
        self.y = (o[:, 1] + 1.0) * 0.5 * rules.height
        self.heading = np.degrees(np.arctan2(o[:, 2], o[:, 3]))
        self.velocity = o[:, 4] * rules.max_speed
        self.energy = o[:, 5] * rules.start_energy
        self.gun = self.heading + np.degrees(np.arctan2(o[:, 6], o[:, 7]))  # absolute gun heading
        self.gun_heat = o[:, 8] * rules.start_gun_heat
        self.has_enemy = o[:, 22] > 0
        self.enemy_dir = self.heading + np.degrees(np.arctan2(o[:, 9], o[:, 10]))  # absolute
        self.enemy_distance = o[:, 11] * rules.max_distance
        self.enemy_energy = o[:, 12] * rules.start_energy
        self.enemy_heading = self.heading + np.degrees(np.arctan2(o[:, 13], o[:, 14]))
        self.enemy_velocity = o[:, 15] * rules.max_speed
        self.gun_bearing = np.degrees(np.arctan2(o[:, 16], o[:, 17]))  # enemy direction - gun heading


def _rel(angle: NDArray[np.float64]) -> NDArray[np.float64]:
    return (angle + 180.0) % 360.0 - 180.0


class ScriptedBot:
    """Base class: drives ``n`` tanks from their observations.

    ``engine="numba"`` computes the same actions with :class:`~arena.games.tank.scripted_compiled.CompiledActs`
    (one compiled loop over the rows instead of ~60 numpy calls); its random draws stay here, from the same
    generator.
    """

    name: ClassVar[str] = "base"

    def __init__(self, n: int, seed: int = 0, rules: TankRules = DEFAULT_RULES, engine: EngineName = "numpy") -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        self.n = int(n)
        self.rules = rules
        self.rng = np.random.default_rng(seed)
        self.engine: EngineName = engine
        self._compiled: CompiledActs | None = None
        if engine == "numba":
            from .scripted_compiled import CompiledActs  # imports numba, which the numpy bots never need

            self._compiled = CompiledActs(self.n, rules)

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        """Actions (N, ACT_DIM) in [-1, 1] for observations (N, OBS_DIM).

        ``view`` (if given) is ``View(obs, rules)`` already computed. ``rows`` (if given) says
        which of the bot's ``n`` tanks ``obs`` holds (``len(rows)`` of them): a league seats a bot
        on a changing subset of its matches, and numpy's cost grows with the rows.
        """
        raise NotImplementedError

    def _state(self, values: NDArray[np.float64], rows: NDArray[np.intp] | None) -> NDArray[np.float64]:
        return values if rows is None else values[rows]

    def _store(self, values: NDArray[np.float64], new: NDArray[np.float64], rows: NDArray[np.intp] | None) -> None:
        if rows is None:
            values[:] = new
        else:
            values[rows] = new

    def reset(self, mask: NDArray[np.bool_]) -> None:
        """A new round starts for the tanks in ``mask`` (shape (n,)): clear their state."""

    # --- helpers shared by the bots ---------------------------------------------------------------

    def _drive(
        self, view: View, desired: NDArray[np.float64], speed: NDArray[np.float64] | float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Target velocity and body turn actions to move along the absolute heading ``desired``.

        Drives backwards when that needs less turning ("back-as-front"), and slows down
        while the heading error is large.
        """
        r = self.rules
        err = _rel(desired - view.heading)
        back = np.abs(err) > 90.0
        err = np.where(back, _rel(err - 180.0), err)
        speed = np.where(np.abs(err) > 45.0, np.minimum(speed, 2.0), speed)
        a0 = np.where(back, -1.0, 1.0) * speed / r.max_speed
        v_next = next_velocity(view.velocity, a0 * r.max_speed, r)
        rate = r.max_turn_rate - r.turn_rate_speed_factor * np.abs(v_next)
        a1 = clip(err / rate, -1.0, 1.0)
        return a0, a1

    def _gun_turn(
        self, view: View, aim: NDArray[np.float64], a0: NDArray[np.float64], a1: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Gun turn action bringing the gun onto the absolute direction ``aim`` (the body turn carries the gun)."""
        r = self.rules
        v_next = next_velocity(view.velocity, a0 * r.max_speed, r)
        body = a1 * (r.max_turn_rate - r.turn_rate_speed_factor * np.abs(v_next))
        return clip((_rel(aim - view.gun) - body) / r.max_gun_turn_rate, -1.0, 1.0)

    def _fire(self, power: NDArray[np.float64] | float, aim_error: NDArray[np.float64], view: View) -> NDArray[np.float64]:
        """Fire action: ``power`` when the gun is within a hull's width of ``aim`` and the gun is cold, else hold."""
        r = self.rules
        power = clip(power, r.min_bullet_power, r.max_bullet_power)
        tol = np.degrees(np.arctan2(0.8 * r.tank_radius, np.maximum(view.enemy_distance, 1.0)))
        ok = view.has_enemy & (np.abs(aim_error) <= tol) & (view.gun_heat <= 0.0) & (view.energy > power + 0.1)
        level = (power - r.min_bullet_power) / (r.max_bullet_power - r.min_bullet_power)
        return np.where(ok, np.maximum(level, 1e-6), -1.0)

    def _pack(self, *cols: NDArray[np.float64] | float) -> NDArray[np.float32]:
        n = max(np.size(c) for c in cols)
        out = np.zeros((n, ACT_DIM), np.float32)
        for k, c in enumerate(cols):
            out[:, k] = c
        return clip(out, -1.0, 1.0)


class Sitting(ScriptedBot):
    """Never moves, turns or fires."""

    name = "sitting"

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        shape = np.shape(obs)
        if len(shape) != 2 or shape[1] != OBS_DIM:
            raise ValueError(f"obs must have shape (N, {OBS_DIM}), got {shape}")
        return np.zeros((shape[0], ACT_DIM), np.float32)


class Spinner(ScriptedBot):
    """Circles (velocity 5, full left turn) and fires power 1.5 when the gun points at the enemy."""

    name = "spinner"
    speed = 5.0
    power = 1.5

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        if self._compiled is not None:
            return self._compiled.spinner(obs, rows, self.speed, self.power)
        view = view or View(obs, self.rules)
        a0 = np.full(len(obs), self.speed / self.rules.max_speed)
        a1 = np.ones(len(obs))
        a2 = self._gun_turn(view, view.enemy_dir, a0, a1)
        a3 = self._fire(self.power, view.gun_bearing, view)
        return self._pack(a0, a1, a2, a3, 1.0)


class Walker(ScriptedBot):
    """Robocode's "Walls": reach a wall, follow the perimeter, shoot head-on (power 2) when aimed."""

    name = "walker"
    margin = 40.0  # centre distance from the wall it follows
    near = 75.0  # a wall this close counts as "reached" (anticipates corners)
    power = 2.0

    def __init__(self, n: int, seed: int = 0, rules: TankRules = DEFAULT_RULES, engine: EngineName = "numpy") -> None:
        super().__init__(n, seed, rules, engine)
        self.direction = np.ones(n)  # +1 counter-clockwise, -1 clockwise
        self.cooldown = np.zeros(n)  # ticks before it may reverse again
        self.reset(np.ones(n, bool))

    def reset(self, mask: NDArray[np.bool_]) -> None:
        mask = np.asarray(mask, bool)
        self.direction[mask] = np.where(self.rng.random(int(mask.sum())) < 0.5, 1.0, -1.0)
        self.cooldown[mask] = 0.0

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        if self._compiled is not None:
            return self._compiled.walker(obs, rows, self.direction, self.cooldown, self.margin, self.near, self.power)
        r = self.rules
        view = view or View(obs, r)
        direction, cooldown = self._state(self.direction, rows), self._state(self.cooldown, rows)
        # An enemy blocking the way (as Walls' onHitRobot): reverse along the perimeter.
        travel = view.heading + np.where(view.velocity < 0, 180.0, 0.0)
        blocking = (
            view.has_enemy
            & (view.enemy_distance < 2 * r.tank_radius + 14.0)
            & (np.abs(_rel(view.enemy_dir - travel)) < 80.0)
            & (cooldown <= 0)
        )
        direction = np.where(blocking, -direction, direction)
        self._store(self.direction, direction, rows)
        self._store(self.cooldown, np.where(blocking, 20.0, cooldown - 1.0), rows)
        # Wall order counter-clockwise: south, east, north, west; CCW travel headings 0, 90, 180, 270.
        dist = np.stack([view.y, r.width - view.x, r.height - view.y, view.x], axis=1)
        near = dist < self.near
        ccw = direction > 0
        prev_near = np.roll(near, 1, axis=1)  # predecessor wall (CCW order) near
        next_near = np.roll(near, -1, axis=1)
        prio = near * (1 + np.where(ccw[:, None], prev_near, next_near))
        wall = np.argmax(prio, axis=1)
        on_wall = near.any(axis=1)
        base = wall * 90.0 + np.where(ccw, 0.0, 180.0)
        d = dist[np.arange(len(obs)), wall]
        # Keep the track: the followed wall is on the right (CCW) or on the left (CW).
        corr = clip(0.8 * (d - self.margin), -25.0, 25.0)
        follow = base - direction * corr
        nearest = np.argmin(dist, axis=1)
        to_wall = nearest * 90.0 + 270.0  # outward normal of the nearest wall
        desired = np.where(on_wall, follow, to_wall)
        a0, a1 = self._drive(view, desired, r.max_speed)
        # Brake hard at corners: while the heading error is big, stand and turn.
        err = np.abs(_rel(desired - view.heading))
        err = np.minimum(err, 180.0 - err)
        a0 = np.where(err > 30.0, 0.0, a0)
        a2 = self._gun_turn(view, view.enemy_dir, a0, a1)
        a3 = self._fire(self.power, view.gun_bearing, view)
        return self._pack(a0, a1, a2, a3, 1.0)


class Tracker(ScriptedBot):
    """Closes in, orbits at ~200 units, linear targeting, power by distance."""

    name = "tracker"
    preferred = 200.0
    flip_prob = 0.02  # per tick chance to reverse the orbit direction

    def __init__(self, n: int, seed: int = 0, rules: TankRules = DEFAULT_RULES, engine: EngineName = "numpy") -> None:
        super().__init__(n, seed, rules, engine)
        self.direction = np.ones(n)
        self.reset(np.ones(n, bool))

    def reset(self, mask: NDArray[np.bool_]) -> None:
        mask = np.asarray(mask, bool)
        self.direction[mask] = np.where(self.rng.random(int(mask.sum())) < 0.5, 1.0, -1.0)

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        if self._compiled is not None:
            return self._compiled.tracker(obs, rows, self.direction, self.rng, self.flip_prob, self.preferred)
        r = self.rules
        view = view or View(obs, r)
        d = view.enemy_distance
        # Movement: toward the enemy when far, perpendicular at the preferred distance, away when close.
        direction = self._state(self.direction, rows)
        direction = np.where(self.rng.random(len(obs)) < self.flip_prob, -direction, direction)
        offset = 90.0 - clip((d - self.preferred) * 0.25, -30.0, 70.0)
        margin = r.tank_radius + 30.0

        def blocked(heading: NDArray[np.float64]) -> NDArray[np.bool_]:
            hr = np.radians(heading)
            px = view.x + 110.0 * np.cos(hr)
            py = view.y + 110.0 * np.sin(hr)
            return (px < margin) | (px > r.width - margin) | (py < margin) | (py > r.height - margin)

        want = view.enemy_dir + direction * offset
        other = view.enemy_dir - direction * offset
        b_want, b_other = blocked(want), blocked(other)
        flip = b_want & ~b_other
        self._store(self.direction, np.where(flip, -direction, direction), rows)
        desired = np.where(flip, other, want)
        centre = np.degrees(np.arctan2(0.5 * r.height - view.y, 0.5 * r.width - view.x))
        desired = np.where(b_want & b_other, centre, desired)
        desired = np.where(view.has_enemy, desired, centre)
        a0, a1 = self._drive(view, desired, r.max_speed)

        # Gun: linear targeting with power by distance.
        power = clip(450.0 / np.maximum(d, 1.0), 1.0, r.max_bullet_power)
        power = np.where(view.energy < 15.0, np.minimum(power, 1.0), power)
        speed = r.bullet_speed_base - r.bullet_speed_factor * power
        er = np.radians(view.enemy_dir)
        ex = view.x + d * np.cos(er)
        ey = view.y + d * np.sin(er)
        hr = np.radians(view.enemy_heading)
        vx = view.enemy_velocity * np.cos(hr)
        vy = view.enemy_velocity * np.sin(hr)
        px, py = ex, ey
        rad = r.tank_radius
        for _ in range(4):
            t = np.hypot(px - view.x, py - view.y) / speed + 1.0
            px = clip(ex + vx * t, rad, r.width - rad)
            py = clip(ey + vy * t, rad, r.height - rad)
        aim = np.degrees(np.arctan2(py - view.y, px - view.x))
        a2 = self._gun_turn(view, aim, a0, a1)
        a3 = self._fire(power, _rel(aim - view.gun), view)
        return self._pack(a0, a1, a2, a3, 1.0)
