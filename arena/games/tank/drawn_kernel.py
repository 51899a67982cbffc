"""The per-row logic of the ``drawn`` scripted bot (:mod:`arena.games.tank.drawn`), written once for both engines.

Each row plays the movement family, targeting family and fire-power rule it drew at its round start
(``prm``'s columns, :data:`PARAMS`), keeping a little state between ticks (``st``, :data:`STATE`).
``engine="numba"`` runs :func:`drawn_act` compiled; ``engine="numpy"`` runs ``drawn_act.py_func``, the
same code as plain Python, so there is no second implementation to keep equal. That is also why the
angles come from ``math.atan2`` here, not numpy's (``scripted_kernels`` routes them through numpy only
to match the numpy bots bit for bit), and distances from ``math.sqrt``, not ``math.hypot`` (Python's
own algorithm, not the C library's that numba calls). Random draws stay in numpy: the caller hands
each tick's uniforms in ``draws``, so both engines consume the same stream.

The helpers are this module's own copies of ``scripted_kernels``' (same semantics): numba's on-disk
cache checks only the file a function is defined in, so a helper inlined from another module could
go stale in the cache.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from .scripted_kernels import (
    ACCEL,
    DECEL,
    GUN_TURN,
    HEIGHT,
    MAX_DISTANCE,
    MAX_POWER,
    MAX_SPEED,
    MIN_POWER,
    RADIUS,
    SPEED_BASE,
    SPEED_FACTOR,
    START_ENERGY,
    START_HEAT,
    TURN,
    TURN_SPEED,
    WIDTH,
)

__all__ = ["DRAWS", "MOVEMENTS", "PARAMS", "POWER_RULES", "STATE", "TARGETINGS", "drawn_act"]

MOVEMENTS: tuple[str, ...] = (
    "still", "circling", "orbiting", "oscillating", "random", "stop_and_go", "walls", "corners", "ramming",
)  # fmt: skip
"""The movement families, in the order of their ids in ``prm[:, MOVE]``."""
STILL, CIRCLING, ORBITING, OSCILLATING, RANDOM, STOP_AND_GO, WALLS, CORNERS, RAMMING = range(len(MOVEMENTS))
TARGETINGS: tuple[str, ...] = ("none", "head_on", "linear", "circular", "random_offset")
"""The targeting families, in the order of their ids in ``prm[:, TARGET]``."""
NONE, HEAD_ON, LINEAR, CIRCULAR, RANDOM_OFFSET = range(len(TARGETINGS))
POWER_RULES: tuple[str, ...] = ("fixed", "distance", "energy")
"""The fire-power rules, in the order of their ids in ``prm[:, POWER_RULE]``."""
FIXED, BY_DISTANCE, BY_ENERGY = range(len(POWER_RULES))

PARAMS: tuple[str, ...] = (
    "move", "target", "power_rule", "speed", "turn", "distance", "period", "flip", "change", "stop", "go",
    "margin", "corner", "switch", "direction", "lead", "spread", "power", "power_k", "power_min", "power_max",
    "power_per_energy", "tolerance",
)  # fmt: skip
"""A row's drawn parameters, ``prm``'s columns (``drawn.DrawnRanges`` documents each)."""
(
    MOVE, TARGET, POWER_RULE, SPEED, TURN_SHARE, DISTANCE, PERIOD, FLIP, CHANGE, STOP, GO, MARGIN, CORNER, SWITCH,
    DIRECTION, LEAD, SPREAD, POWER, POWER_K, POWER_MIN, POWER_MAX, POWER_PER_ENERGY, TOLERANCE,
) = range(len(PARAMS))  # fmt: skip

STATE: tuple[str, ...] = (
    "direction", "timer", "cooldown", "corner", "want_heading", "want_speed", "seen", "last_heading", "omega",
    "last_energy", "offset", "idle",
)  # fmt: skip
"""A row's state between ticks, ``st``'s columns: orbit/wall direction (+1 left, -1 right), a countdown
(oscillation, stop-and-go's move, corner switch), walls' reversal cooldown, the corner held, the random walk's
heading and speed, whether the enemy was seen last tick, its heading then, its turn rate (deg/tick), its energy
then, random-offset targeting's offset (deg), ticks stood still (stop-and-go)."""
S_DIR, S_TIMER, S_COOLDOWN, S_CORNER, S_WANT_HEADING, S_WANT_SPEED, S_SEEN, S_LAST_HEADING, S_OMEGA = range(9)
S_LAST_ENERGY, S_OFFSET, S_IDLE = range(9, len(STATE))

DRAWS = 4
"""Uniforms a row takes each tick (``draws``' columns): orbit flip / random-walk change / stop-and-go side;
random walk heading; random walk speed; random-offset targeting's next offset."""

R2D = 180.0 / math.pi
D2R = math.pi / 180.0
_JIT: dict[str, Any] = {"cache": True, "error_model": "numpy", "_nrt": False}
_kernel = njit(nogil=True, **_JIT)
_inline = njit(inline="always", **_JIT)


# ── scalar helpers (scripted_kernels' semantics) ─────────────────────────────────────────────────


@_inline
def _clip(value: float, low: float, high: float) -> float:
    if value < low:
        value = low
    if value > high:
        value = high
    return value


@_inline
def _rel(angle: float) -> float:
    """An angle difference in [-180, 180)."""
    return (angle + 180.0) % 360.0 - 180.0


@_inline
def _turn_rate(p: Any, velocity: float, a0: float) -> float:
    """The body's turn limit (deg/tick) next tick, when ``a0`` sets the target velocity (``rules.next_velocity``)."""
    max_speed = p[MAX_SPEED]
    target = _clip(a0 * max_speed, -max_speed, max_speed)
    delta = target - velocity
    speeding_up = (velocity == 0) or (velocity > 0 and delta >= 0) or (velocity < 0 and delta < 0)
    limit = p[ACCEL] if speeding_up else p[DECEL]
    v_next = _clip(velocity + _clip(delta, -limit, limit), -max_speed, max_speed)
    return p[TURN] - p[TURN_SPEED] * abs(v_next)


@_inline
def _drive(p: Any, heading: float, velocity: float, desired: float, speed: float) -> tuple[float, float]:
    """``ScriptedBot._drive``: (velocity, body turn) actions along ``desired``, back-as-front, slow while turning."""
    err = _rel(desired - heading)
    back = abs(err) > 90.0
    if back:
        err = _rel(err - 180.0)
    if abs(err) > 45.0:
        speed = min(speed, 2.0)
    a0 = (-1.0 if back else 1.0) * speed / p[MAX_SPEED]
    return a0, _clip(err / _turn_rate(p, velocity, a0), -1.0, 1.0)


@_inline
def _blocked(p: Any, x: float, y: float, heading: float) -> bool:
    """Tracker's look-ahead: 110 units along ``heading`` is within 30 units of a wall's reach."""
    margin = p[RADIUS] + 30.0
    px = x + 110.0 * math.cos(heading * D2R)
    py = y + 110.0 * math.sin(heading * D2R)
    return px < margin or px > p[WIDTH] - margin or py < margin or py > p[HEIGHT] - margin


# ── movement ────────────────────────────────────────────────────────────────────────────────────


@_inline
def _sideways(
    p: Any, x: float, y: float, heading: float, velocity: float, enemy_dir: float, d: float, prm_t: Any, st_t: Any
) -> tuple[float, float]:
    """Orbit the enemy in ``st_t``'s direction, closing in or backing off toward the drawn distance; turn
    back from walls (the other way round, else toward the centre)."""
    direction = st_t[S_DIR]
    offset = 90.0 - _clip((d - prm_t[DISTANCE]) * 0.25, -30.0, 70.0)
    want = enemy_dir + direction * offset
    other = enemy_dir - direction * offset
    b_want = _blocked(p, x, y, want)
    b_other = _blocked(p, x, y, other)
    desired = want
    if b_want and b_other:
        desired = math.atan2(0.5 * p[HEIGHT] - y, 0.5 * p[WIDTH] - x) * R2D
    elif b_want:
        st_t[S_DIR] = -direction
        desired = other
    return _drive(p, heading, velocity, desired, prm_t[SPEED])


@_inline
def _walls(
    p: Any, x: float, y: float, heading: float, velocity: float, enemy_dir: float, d: float, prm_t: Any, st_t: Any
) -> tuple[float, float]:
    """Walker's perimeter run at the drawn margin and speed, reversing when the enemy blocks the way."""
    width, height = p[WIDTH], p[HEIGHT]
    margin = prm_t[MARGIN]
    near_wall = margin + 35.0
    direction, cooldown = st_t[S_DIR], st_t[S_COOLDOWN]
    travel = heading + (180.0 if velocity < 0 else 0.0)
    if d < 2 * p[RADIUS] + 14.0 and abs(_rel(enemy_dir - travel)) < 80.0 and cooldown <= 0:
        direction = -direction
        cooldown = 20.0
    else:
        cooldown -= 1.0
    st_t[S_DIR], st_t[S_COOLDOWN] = direction, cooldown
    dist = (y, width - x, height - y, x)  # walls counter-clockwise: south, east, north, west
    ccw = direction > 0
    wall, best, on_wall, nearest = 0, -1, False, 0
    for k in range(4):
        near = dist[k] < near_wall
        on_wall = on_wall or near
        neighbour = dist[(k + 3) % 4] < near_wall if ccw else dist[(k + 1) % 4] < near_wall
        prio = (2 if neighbour else 1) if near else 0
        if prio > best:
            wall, best = k, prio
        if dist[k] < dist[nearest]:
            nearest = k
    if on_wall:
        desired = wall * 90.0 + (0.0 if ccw else 180.0) - direction * _clip(0.8 * (dist[wall] - margin), -25.0, 25.0)
    else:
        desired = nearest * 90.0 + 270.0  # outward normal of the nearest wall
    a0, a1 = _drive(p, heading, velocity, desired, prm_t[SPEED])
    err = abs(_rel(desired - heading))
    if min(err, 180.0 - err) > 30.0:  # brake at corners: stand and turn
        a0 = 0.0
    return a0, a1


@_inline
def _corners(p: Any, x: float, y: float, heading: float, velocity: float, prm_t: Any, st_t: Any) -> tuple[float, float]:
    """Drive to the corner held (``margin`` from both walls) and stop there; move on to the next corner
    (in the drawn direction) every ``switch`` ticks unless ``switch`` is 0."""
    if prm_t[SWITCH] > 0:
        st_t[S_TIMER] -= 1.0
        if st_t[S_TIMER] <= 0:
            st_t[S_CORNER] = (st_t[S_CORNER] + (1.0 if st_t[S_DIR] > 0 else 3.0)) % 4.0
            st_t[S_TIMER] = prm_t[SWITCH]
    corner = int(st_t[S_CORNER])  # 0 south-west, 1 south-east, 2 north-east, 3 north-west
    margin = prm_t[MARGIN]
    cx = margin if corner == 0 or corner == 3 else p[WIDTH] - margin
    cy = margin if corner < 2 else p[HEIGHT] - margin
    dx, dy = cx - x, cy - y
    dist = math.sqrt(dx * dx + dy * dy)
    if dist < 2.0:
        return 0.0, 0.0
    return _drive(p, heading, velocity, math.atan2(dy, dx) * R2D, min(prm_t[SPEED], 0.5 * dist))


# ── targeting ───────────────────────────────────────────────────────────────────────────────────


@_inline
def _aim(
    p: Any,
    x: float,
    y: float,
    enemy_dir: float,
    d: float,
    e_heading: float,
    e_velocity: float,
    bullet_speed: float,
    prm_t: Any,
    st_t: Any,
) -> float:
    """The absolute direction to aim at by the row's targeting family (not ``NONE``)."""
    target = int(prm_t[TARGET])
    if target == HEAD_ON:
        return enemy_dir
    if target == RANDOM_OFFSET:
        return enemy_dir + st_t[S_OFFSET]
    low, high_x, high_y = p[RADIUS], p[WIDTH] - p[RADIUS], p[HEIGHT] - p[RADIUS]
    ex = x + d * math.cos(enemy_dir * D2R)
    ey = y + d * math.sin(enemy_dir * D2R)
    vx = e_velocity * math.cos(e_heading * D2R)
    vy = e_velocity * math.sin(e_heading * D2R)
    px, py = ex, ey
    if target == LINEAR:  # straight on at its velocity for the bullet's flight time (tracker's lead)
        for _ in range(4):
            flight = math.sqrt((px - x) * (px - x) + (py - y) * (py - y)) / bullet_speed + 1.0
            px = _clip(ex + vx * flight, low, high_x)
            py = _clip(ey + vy * flight, low, high_y)
    else:  # CIRCULAR: turning at its last turn rate, tick by tick until the bullet can reach it
        omega = st_t[S_OMEGA] * D2R
        c, s = math.cos(omega), math.sin(omega)
        for tick in range(1, 150):
            vx, vy = vx * c - vy * s, vx * s + vy * c
            px = _clip(px + vx, low, high_x)
            py = _clip(py + vy, low, high_y)
            if (tick + 1) * bullet_speed >= math.sqrt((px - x) * (px - x) + (py - y) * (py - y)):
                break
    lead = prm_t[LEAD]  # the drawn error of the lead: 1 is exact
    return math.atan2(ey + lead * (py - ey) - y, ex + lead * (px - ex) - x) * R2D


@_inline
def _power(p: Any, d: float, energy: float, prm_t: Any) -> float:
    """The bullet power by the row's rule, within the game's limits."""
    rule = int(prm_t[POWER_RULE])
    if rule == FIXED:
        power = prm_t[POWER]
    elif rule == BY_DISTANCE:
        power = _clip(prm_t[POWER_K] / max(d, 1.0), prm_t[POWER_MIN], prm_t[POWER_MAX])
    else:
        power = _clip(prm_t[POWER_PER_ENERGY] * energy, prm_t[POWER_MIN], prm_t[POWER_MAX])
    return _clip(power, p[MIN_POWER], p[MAX_POWER])


# ── the bot ─────────────────────────────────────────────────────────────────────────────────────


@_kernel
def drawn_act(p: Any, obs: Any, rows: Any, prm: Any, st: Any, draws: Any, out: Any) -> None:  # pragma: no cover - compiled
    """Actions ``out`` (k, 5) for observations ``obs`` (k, OBS_DIM, as float64) of the bot's tanks ``rows``.

    ``p``: ``scripted_kernels.rule_params``; ``prm`` (n, PARAMS) and ``st`` (n, STATE): every tank's drawn
    parameters and state (``st`` updated in place); ``draws`` (k, DRAWS): this tick's uniforms.
    """
    for i in range(obs.shape[0]):
        t = rows[i]
        prm_t, st_t = prm[t], st[t]
        x = (obs[i, 0] + 1.0) * 0.5 * p[WIDTH]
        y = (obs[i, 1] + 1.0) * 0.5 * p[HEIGHT]
        heading = math.atan2(obs[i, 2], obs[i, 3]) * R2D
        velocity = obs[i, 4] * p[MAX_SPEED]
        energy = obs[i, 5] * p[START_ENERGY]
        gun = heading + math.atan2(obs[i, 6], obs[i, 7]) * R2D
        heat = obs[i, 8] * p[START_HEAT]
        has_enemy = obs[i, 22] > 0
        enemy_dir = heading + math.atan2(obs[i, 9], obs[i, 10]) * R2D
        d = obs[i, 11] * p[MAX_DISTANCE]
        e_energy = obs[i, 12] * p[START_ENERGY]
        e_heading = heading + math.atan2(obs[i, 13], obs[i, 14]) * R2D
        e_velocity = obs[i, 15] * p[MAX_SPEED]
        # What last tick tells: the enemy's turn rate (circular targeting) and whether it fired (stop-and-go).
        fired = False
        if st_t[S_SEEN] > 0 and has_enemy:
            st_t[S_OMEGA] = _clip(_rel(e_heading - st_t[S_LAST_HEADING]), -p[TURN], p[TURN])
            drop = st_t[S_LAST_ENERGY] - e_energy
            fired = 0.09 <= drop <= 3.01  # a bullet's cost (0.1-3), or a hit taken of that size
        st_t[S_SEEN] = 1.0 if has_enemy else 0.0
        st_t[S_LAST_HEADING], st_t[S_LAST_ENERGY] = e_heading, e_energy

        move = int(prm_t[MOVE])
        a0, a1 = 0.0, 0.0
        if not has_enemy or move == STILL:
            pass
        elif move == CIRCLING:
            a0, a1 = prm_t[SPEED] / p[MAX_SPEED], st_t[S_DIR] * prm_t[TURN_SHARE]
        elif move == ORBITING:
            if draws[i, 0] < prm_t[FLIP]:
                st_t[S_DIR] = -st_t[S_DIR]
            a0, a1 = _sideways(p, x, y, heading, velocity, enemy_dir, d, prm_t, st_t)
        elif move == OSCILLATING:
            st_t[S_TIMER] -= 1.0
            if st_t[S_TIMER] <= 0:
                st_t[S_DIR], st_t[S_TIMER] = -st_t[S_DIR], prm_t[PERIOD]
            a0, a1 = _sideways(p, x, y, heading, velocity, enemy_dir, d, prm_t, st_t)
        elif move == STOP_AND_GO:
            if st_t[S_TIMER] <= 0 and (fired or st_t[S_IDLE] >= prm_t[STOP]):
                st_t[S_TIMER], st_t[S_IDLE] = prm_t[GO], 0.0
                if draws[i, 0] < 0.5:
                    st_t[S_DIR] = -st_t[S_DIR]
            if st_t[S_TIMER] > 0:
                st_t[S_TIMER] -= 1.0
                a0, a1 = _sideways(p, x, y, heading, velocity, enemy_dir, d, prm_t, st_t)
            else:
                st_t[S_IDLE] += 1.0
        elif move == RANDOM:
            if draws[i, 0] < prm_t[CHANGE]:
                st_t[S_WANT_HEADING] = draws[i, 1] * 360.0
                st_t[S_WANT_SPEED] = 2.0 + draws[i, 2] * (prm_t[SPEED] - 2.0)
            if _blocked(p, x, y, st_t[S_WANT_HEADING]):
                st_t[S_WANT_HEADING] = math.atan2(0.5 * p[HEIGHT] - y, 0.5 * p[WIDTH] - x) * R2D
            a0, a1 = _drive(p, heading, velocity, st_t[S_WANT_HEADING], st_t[S_WANT_SPEED])
        elif move == WALLS:
            a0, a1 = _walls(p, x, y, heading, velocity, enemy_dir, d, prm_t, st_t)
        elif move == CORNERS:
            a0, a1 = _corners(p, x, y, heading, velocity, prm_t, st_t)
        else:  # RAMMING
            a0, a1 = _drive(p, heading, velocity, enemy_dir, prm_t[SPEED])

        a2, a3 = 0.0, -1.0
        if has_enemy and int(prm_t[TARGET]) != NONE:
            power = _power(p, d, energy, prm_t)
            aim = _aim(p, x, y, enemy_dir, d, e_heading, e_velocity, p[SPEED_BASE] - p[SPEED_FACTOR] * power, prm_t, st_t)
            body = a1 * _turn_rate(p, velocity, a0)  # the body's turn carries the gun
            a2 = _clip((_rel(aim - gun) - body) / p[GUN_TURN], -1.0, 1.0)
            tolerance = math.atan2(prm_t[TOLERANCE] * p[RADIUS], max(d, 1.0)) * R2D
            if abs(_rel(aim - gun)) <= tolerance and heat <= 0.0 and energy > power + 0.1:
                a3 = max((power - p[MIN_POWER]) / (p[MAX_POWER] - p[MIN_POWER]), 1e-6)
                if int(prm_t[TARGET]) == RANDOM_OFFSET:  # a new offset for the next shot
                    st_t[S_OFFSET] = (2.0 * draws[i, 3] - 1.0) * prm_t[SPREAD]
        out[i, 0] = np.float32(_clip(a0, -1.0, 1.0))
        out[i, 1] = np.float32(_clip(a1, -1.0, 1.0))
        out[i, 2] = np.float32(a2)
        out[i, 3] = np.float32(_clip(a3, -1.0, 1.0))
        out[i, 4] = np.float32(1.0)
