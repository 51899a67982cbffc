"""numba kernels of the scripted tank bots: ``make_scripted(name, n, engine="numba")``.

Why: a league seats four scripted bots on changing subsets of a learning bot's 128 matches, and
each of their numpy ``act`` calls is ~60 ufunc calls on arrays of 10-60 rows: per-call overhead,
not arithmetic, and about as much of the bot's tick as the compiled engine itself. Here each bot
is one loop over its rows with every intermediate a scalar.

The kernels are :mod:`arena.games.tank.scripted`'s numpy code rewritten per row with the **same
float operations in the same order** (``View``'s columns, ``_drive``, ``_gun_turn``, ``_fire``,
``next_velocity``), so both play the same game bit for bit; ``tests/arena/games/tank/test_scripted_kernels.py``
plays seeded battles with both and asserts equal trajectories. The one function that is not the
C library's in numpy is ``arctan2`` (a SIMD routine on AVX-512 machines; the C library's
``atan2`` differed in the last bit for 8% of the observations' angles here, and a gun turn then
came out 1e-14 instead of 0). So the kernels take their angles from numpy in two steps:
:func:`angle_inputs` writes the (y, x) pairs of the seven angles a row needs, the caller runs
``np.arctan2`` over them, and the bot's kernel reads the results. Tracker's aim, which needs its
lead first, is a third step (:func:`tracker_lead`, ``np.arctan2``, :func:`tracker_fire`).

The bots' random draws (Walker's and Tracker's direction at a round start, Tracker's flips)
stay in numpy, from the bot's own generator in the same order, and reach the kernels as arrays.
Kernels are ``@njit(cache=True)``: compiled once per machine (a few seconds), then loaded from
numba's cache next to this file. The bots reach them through :mod:`arena.games.tank.scripted_compiled`,
and only when a bot is built with ``engine="numba"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from .rules import TankRules

__all__ = [
    "ANGLES",
    "LEAD",
    "PARAMS",
    "angle_inputs",
    "rule_params",
    "spinner_act",
    "tracker_fire",
    "tracker_lead",
    "walker_act",
]

PARAMS: tuple[str, ...] = (
    "width",
    "height",
    "max_speed",
    "start_energy",
    "start_heat",  # start_gun_heat
    "max_distance",
    "accel",
    "decel",
    "turn",  # max_turn_rate
    "turn_speed",  # turn_rate_speed_factor
    "gun_turn",  # max_gun_turn_rate
    "min_power",  # min_bullet_power
    "max_power",  # max_bullet_power
    "radius",  # tank_radius
    "speed_base",  # bullet_speed_base
    "speed_factor",  # bullet_speed_factor
)
"""The rules as one float64 vector, in this order (:func:`rule_params`)."""
(
    WIDTH,
    HEIGHT,
    MAX_SPEED,
    START_ENERGY,
    START_HEAT,
    MAX_DISTANCE,
    ACCEL,
    DECEL,
    TURN,
    TURN_SPEED,
    GUN_TURN,
    MIN_POWER,
    MAX_POWER,
    RADIUS,
    SPEED_BASE,
    SPEED_FACTOR,
) = range(len(PARAMS))

ANGLES: tuple[str, ...] = ("heading", "gun", "enemy", "enemy_heading", "gun_bearing", "fire_tolerance", "centre")
"""The angles :func:`angle_inputs` prepares for every row, in this order (radians, from ``np.arctan2``):
the body's heading; the gun, the enemy's direction and the enemy's heading relative to the body; the
gun's bearing to the enemy; half the angle a hull's width spans at the enemy's distance (``_fire``);
the direction to the field's centre (Tracker)."""
HEADING, GUN, ENEMY, ENEMY_HEADING, GUN_BEARING, FIRE_TOLERANCE, CENTRE = range(len(ANGLES))

R2D = 180.0 / math.pi
"""numpy's ``degrees``: one multiplication by this constant (``npy_rad2deg``)."""
D2R = math.pi / 180.0
"""numpy's ``radians`` (``npy_deg2rad``)."""

_JIT: dict[str, Any] = {"cache": True, "error_model": "numpy", "_nrt": False}
"""As the engine's kernels: cached on disk, numpy's division semantics, no reference counting."""
_kernel = njit(nogil=True, **_JIT)
_inline = njit(inline="always", **_JIT)


def rule_params(rules: TankRules) -> NDArray[np.float64]:
    """The rules the scripted bots read, as the kernels' float64 vector (``PARAMS`` order)."""
    r = rules
    values = (
        r.width, r.height, r.max_speed, r.start_energy, r.start_gun_heat, r.max_distance, r.acceleration,
        r.deceleration, r.max_turn_rate, r.turn_rate_speed_factor, r.max_gun_turn_rate, r.min_bullet_power,
        r.max_bullet_power, r.tank_radius, r.bullet_speed_base, r.bullet_speed_factor,
    )  # fmt: skip
    return np.array([float(v) for v in values], np.float64)


# ── scalar helpers (numpy's element-wise semantics) ─────────────────────────────────────────────


@_inline
def _clip(value: float, low: float, high: float) -> float:
    """``geometry.clip``: ``minimum(maximum(value, low), high)``."""
    if value < low:
        value = low
    if value > high:
        value = high
    return value


@_inline
def _rel(angle: float) -> float:
    """``(angle + 180) % 360 - 180`` with numpy's (and Python's) float remainder."""
    return (angle + 180.0) % 360.0 - 180.0


@_inline
def _next_velocity(p: Any, velocity: float, target: float) -> float:
    """``rules.next_velocity`` for one tank."""
    max_speed = p[MAX_SPEED]
    target = _clip(target, -max_speed, max_speed)
    delta = target - velocity
    speeding_up = (velocity == 0) or (velocity > 0 and delta >= 0) or (velocity < 0 and delta < 0)
    limit = p[ACCEL] if speeding_up else p[DECEL]
    return _clip(velocity + _clip(delta, -limit, limit), -max_speed, max_speed)


@_inline
def _drive(p: Any, heading: float, velocity: float, desired: float, speed: float) -> tuple[float, float]:
    """``ScriptedBot._drive``: (velocity action, body turn action) toward the absolute heading ``desired``."""
    err = _rel(desired - heading)
    back = abs(err) > 90.0
    if back:
        err = _rel(err - 180.0)
    if abs(err) > 45.0:
        speed = min(speed, 2.0)
    a0 = (-1.0 if back else 1.0) * speed / p[MAX_SPEED]
    v_next = _next_velocity(p, velocity, a0 * p[MAX_SPEED])
    rate = p[TURN] - p[TURN_SPEED] * abs(v_next)
    return a0, _clip(err / rate, -1.0, 1.0)


@_inline
def _gun_turn(p: Any, gun: float, velocity: float, aim: float, a0: float, a1: float) -> float:
    """``ScriptedBot._gun_turn``: the gun turn that brings the gun onto ``aim`` (the body's turn carries it)."""
    v_next = _next_velocity(p, velocity, a0 * p[MAX_SPEED])
    body = a1 * (p[TURN] - p[TURN_SPEED] * abs(v_next))
    return _clip((_rel(aim - gun) - body) / p[GUN_TURN], -1.0, 1.0)


@_inline
def _fire(p: Any, power: float, aim_error: float, has_enemy: bool, tolerance: float, heat: float, energy: float) -> float:
    """``ScriptedBot._fire``: ``power``'s level when aimed within ``tolerance`` degrees and the gun is cold, else -1."""
    power = _clip(power, p[MIN_POWER], p[MAX_POWER])
    tol = tolerance
    ok = has_enemy and abs(aim_error) <= tol and heat <= 0.0 and energy > power + 0.1
    level = (power - p[MIN_POWER]) / (p[MAX_POWER] - p[MIN_POWER])
    return max(level, 1e-6) if ok else -1.0


@_inline
def _pack(out: Any, i: int, a0: float, a1: float, a2: float, a3: float) -> None:
    """``ScriptedBot._pack``: float32 actions clipped to [-1, 1] (the radar column is always 1)."""
    out[i, 0] = np.float32(_clip(a0, -1.0, 1.0))
    out[i, 1] = np.float32(_clip(a1, -1.0, 1.0))
    out[i, 2] = np.float32(_clip(a2, -1.0, 1.0))
    out[i, 3] = np.float32(_clip(a3, -1.0, 1.0))
    out[i, 4] = np.float32(1.0)


_PAIRS = ((2, 3), (6, 7), (9, 10), (13, 14), (16, 17))
"""The observation's (sin, cos) columns of the first five ``ANGLES``."""


@_kernel
def angle_inputs(p: Any, obs: Any, ys: Any, xs: Any) -> None:  # pragma: no cover - compiled
    """The (y, x) arguments of ``np.arctan2`` for every row's ``ANGLES``, as ``View`` and the bots compute them."""
    for i in range(obs.shape[0]):
        for k in range(5):
            ys[i, k] = np.float64(obs[i, _PAIRS[k][0]])
            xs[i, k] = np.float64(obs[i, _PAIRS[k][1]])
        ys[i, FIRE_TOLERANCE] = 0.8 * p[RADIUS]
        xs[i, FIRE_TOLERANCE] = max(np.float64(obs[i, 11]) * p[MAX_DISTANCE], 1.0)
        ys[i, CENTRE] = 0.5 * p[HEIGHT] - (np.float64(obs[i, 1]) + 1.0) * 0.5 * p[HEIGHT]
        xs[i, CENTRE] = 0.5 * p[WIDTH] - (np.float64(obs[i, 0]) + 1.0) * 0.5 * p[WIDTH]


@_inline
def _angle(angles: Any, i: int, k: int) -> float:
    """Row ``i``'s angle ``k`` in degrees (numpy's ``degrees``)."""
    return angles[i, k] * R2D


@_inline
def _position(p: Any, obs: Any, i: int) -> tuple[float, float]:
    """``View``'s (x, y) of row ``i``."""
    return (np.float64(obs[i, 0]) + 1.0) * 0.5 * p[WIDTH], (np.float64(obs[i, 1]) + 1.0) * 0.5 * p[HEIGHT]


@_inline
def _own_view(p: Any, obs: Any, angles: Any, i: int) -> tuple[float, float, float, float, float, np.bool_, float]:
    """``View``'s columns every bot reads, of row ``i``: (heading, velocity, energy, gun, gun heat, has enemy,
    enemy direction), angles absolute and in degrees."""
    heading = _angle(angles, i, HEADING)
    velocity = np.float64(obs[i, 4]) * p[MAX_SPEED]
    energy = np.float64(obs[i, 5]) * p[START_ENERGY]
    gun = heading + _angle(angles, i, GUN)
    heat = np.float64(obs[i, 8]) * p[START_HEAT]
    has_enemy = np.float64(obs[i, 22]) > 0
    enemy_dir = heading + _angle(angles, i, ENEMY)
    return heading, velocity, energy, gun, heat, has_enemy, enemy_dir


# ── the bots ────────────────────────────────────────────────────────────────────────────────────


@_kernel
def spinner_act(p: Any, obs: Any, angles: Any, speed: float, power: float, out: Any) -> None:  # pragma: no cover - compiled
    """``Spinner.act``: circle at ``speed`` turning full left, fire ``power`` head-on when aimed."""
    for i in range(obs.shape[0]):
        _, velocity, energy, gun, heat, has_enemy, enemy_dir = _own_view(p, obs, angles, i)
        bearing = _angle(angles, i, GUN_BEARING)
        a0 = speed / p[MAX_SPEED]
        a1 = 1.0
        a2 = _gun_turn(p, gun, velocity, enemy_dir, a0, a1)
        a3 = _fire(p, power, bearing, has_enemy, _angle(angles, i, FIRE_TOLERANCE), heat, energy)
        _pack(out, i, a0, a1, a2, a3)


@_kernel
def walker_act(
    p: Any,
    obs: Any,
    angles: Any,
    rows: Any,
    direction: Any,
    cooldown: Any,
    margin: float,
    near_wall: float,
    power: float,
    out: Any,
) -> None:  # pragma: no cover - compiled
    """``Walker.act``: reach a wall, follow the perimeter (reverse when blocked), brake at corners, fire head-on.

    ``rows[i]`` is the tank of ``obs[i]`` in the bot's state arrays ``direction`` and ``cooldown`` (updated in place).
    """
    width, height, radius = p[WIDTH], p[HEIGHT], p[RADIUS]
    for i in range(obs.shape[0]):
        t = rows[i]
        x, y = _position(p, obs, i)
        heading, velocity, energy, gun, heat, has_enemy, enemy_dir = _own_view(p, obs, angles, i)
        distance = np.float64(obs[i, 11]) * p[MAX_DISTANCE]
        bearing = _angle(angles, i, GUN_BEARING)
        # An enemy blocking the way: reverse along the perimeter.
        travel = heading + (180.0 if velocity < 0 else 0.0)
        d_i, c_i = direction[t], cooldown[t]
        blocking = has_enemy and distance < 2 * radius + 14.0 and abs(_rel(enemy_dir - travel)) < 80.0 and c_i <= 0
        if blocking:
            d_i = -d_i
        direction[t] = d_i
        cooldown[t] = 20.0 if blocking else c_i - 1.0
        # Walls counter-clockwise: south, east, north, west.
        dist = (y, width - x, height - y, x)
        ccw = d_i > 0
        wall, best, on_wall, nearest = 0, -1, False, 0
        for k in range(4):
            near = dist[k] < near_wall
            on_wall = on_wall or near
            neighbour = dist[(k + 3) % 4] < near_wall if ccw else dist[(k + 1) % 4] < near_wall
            prio = (1 + (1 if neighbour else 0)) if near else 0
            if prio > best:  # argmax: the first of equal priorities
                wall, best = k, prio
            if dist[k] < dist[nearest]:  # argmin: the first of equal distances
                nearest = k
        if on_wall:
            base = wall * 90.0 + (0.0 if ccw else 180.0)
            corr = _clip(0.8 * (dist[wall] - margin), -25.0, 25.0)
            desired = base - d_i * corr
        else:
            desired = nearest * 90.0 + 270.0  # outward normal of the nearest wall
        a0, a1 = _drive(p, heading, velocity, desired, p[MAX_SPEED])
        err = abs(_rel(desired - heading))
        err = min(err, 180.0 - err)
        if err > 30.0:  # brake hard at corners: stand and turn
            a0 = 0.0
        a2 = _gun_turn(p, gun, velocity, enemy_dir, a0, a1)
        a3 = _fire(p, power, bearing, has_enemy, _angle(angles, i, FIRE_TOLERANCE), heat, energy)
        _pack(out, i, a0, a1, a2, a3)


@_inline
def _blocked(p: Any, x: float, y: float, heading: float, margin: float) -> bool:
    """``Tracker.act``'s ``blocked``: 110 units along ``heading`` is within ``margin`` of a wall."""
    hr = heading * D2R
    px = x + 110.0 * math.cos(hr)
    py = y + 110.0 * math.sin(hr)
    return px < margin or px > p[WIDTH] - margin or py < margin or py > p[HEIGHT] - margin


LEAD = ("a0", "a1", "power")
"""What :func:`tracker_lead` hands :func:`tracker_fire` per row, in ``lead``'s columns."""


@_kernel
def tracker_lead(
    p: Any,
    obs: Any,
    angles: Any,
    rows: Any,
    direction: Any,
    draws: Any,
    flip_prob: float,
    preferred: float,
    lead: Any,
    aim_y: Any,
    aim_x: Any,
) -> None:  # pragma: no cover - compiled
    """``Tracker.act`` up to its aim: close in, orbit at ``preferred`` units, lead the target linearly.

    ``draws[i]`` is the uniform draw that flips ``obs[i]``'s orbit when below ``flip_prob``; ``rows[i]`` its
    tank in ``direction`` (updated in place). Writes the movement actions and the bullet power into ``lead``
    and the (y, x) of the aim's ``np.arctan2`` into ``aim_y``, ``aim_x``.
    """  # fmt: skip
    width, height, radius = p[WIDTH], p[HEIGHT], p[RADIUS]
    margin = radius + 30.0
    for i in range(obs.shape[0]):
        t = rows[i]
        x, y = _position(p, obs, i)
        heading, velocity, energy, _, _, has_enemy, enemy_dir = _own_view(p, obs, angles, i)
        d = np.float64(obs[i, 11]) * p[MAX_DISTANCE]
        enemy_heading = heading + _angle(angles, i, ENEMY_HEADING)
        enemy_velocity = np.float64(obs[i, 15]) * p[MAX_SPEED]
        # Movement: toward the enemy when far, perpendicular at the preferred distance, away when close.
        d_i = direction[t]
        if draws[i] < flip_prob:
            d_i = -d_i
        offset = 90.0 - _clip((d - preferred) * 0.25, -30.0, 70.0)
        want = enemy_dir + d_i * offset
        other = enemy_dir - d_i * offset
        b_want = _blocked(p, x, y, want, margin)
        b_other = _blocked(p, x, y, other, margin)
        flip = b_want and not b_other
        direction[t] = -d_i if flip else d_i
        desired = other if flip else want
        centre = _angle(angles, i, CENTRE)
        if b_want and b_other:
            desired = centre
        if not has_enemy:
            desired = centre
        a0, a1 = _drive(p, heading, velocity, desired, p[MAX_SPEED])
        # Gun: linear targeting with power by distance.
        power = _clip(450.0 / max(d, 1.0), 1.0, p[MAX_POWER])
        if energy < 15.0:
            power = min(power, 1.0)
        speed = p[SPEED_BASE] - p[SPEED_FACTOR] * power
        er = enemy_dir * D2R
        ex = x + d * math.cos(er)
        ey = y + d * math.sin(er)
        hr = enemy_heading * D2R
        vx = enemy_velocity * math.cos(hr)
        vy = enemy_velocity * math.sin(hr)
        px, py = ex, ey
        for _ in range(4):
            flight = math.hypot(px - x, py - y) / speed + 1.0
            px = _clip(ex + vx * flight, radius, width - radius)
            py = _clip(ey + vy * flight, radius, height - radius)
        lead[i, 0], lead[i, 1], lead[i, 2] = a0, a1, power
        aim_y[i] = py - y
        aim_x[i] = px - x


@_kernel
def tracker_fire(p: Any, obs: Any, angles: Any, aim: Any, lead: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``Tracker.act`` from its aim (``aim[i]``: ``np.arctan2`` of :func:`tracker_lead`'s pair): gun turn, fire, actions."""
    for i in range(obs.shape[0]):
        _, velocity, energy, gun, heat, has_enemy, _ = _own_view(p, obs, angles, i)
        a0, a1, power = lead[i, 0], lead[i, 1], lead[i, 2]
        aim_deg = aim[i] * R2D
        a2 = _gun_turn(p, gun, velocity, aim_deg, a0, a1)
        a3 = _fire(p, power, _rel(aim_deg - gun), has_enemy, _angle(angles, i, FIRE_TOLERANCE), heat, energy)
        _pack(out, i, a0, a1, a2, a3)
