"""What a tank senses: the observation columns (``OBS_FIELDS``) and the code that fills them.

The observation is the learner's whole view of the game, so its layout is a contract with every
trained policy, the ONNX export and the Tank Royale bot that rebuilds it from Royale state
(``arena.royale.policy_bot``): changing a column breaks them all. The table lives here, next to
the one function that writes it (:func:`build_observation`), rather than inside the engine's step code.

The nearest-enemy and lead (linear-targeting) geometry is shared with the step's reward terms
(``StepInfo.enemy_distance``, ``gun_bearing_abs``), which must measure exactly what the policy
sees. The functions read a battle's state (:class:`~arena.games.tank.state.TankState`) and its
rules, and change nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .geometry import DEG, clip
from .rules import TankRules
from .state import TankState

__all__ = [
    "LEAD_POWER",
    "OBS_DIM",
    "OBS_FIELDS",
    "Enemy",
    "build_observation",
    "enemy_columns",
    "lead_direction",
    "nearest_enemy",
]

OBS_FIELDS: tuple[str, ...] = (
    "x",  # 0  own x / width * 2 - 1
    "y",  # 1  own y / height * 2 - 1
    "heading_sin",  # 2  own body heading
    "heading_cos",  # 3
    "velocity",  # 4  own velocity / max_speed (negative when reversing)
    "energy",  # 5  own energy / start_energy
    "gun_rel_sin",  # 6  gun heading minus body heading
    "gun_rel_cos",  # 7
    "gun_heat",  # 8  gun heat / start_gun_heat
    "enemy_bearing_sin",  # 9  direction to the nearest living enemy minus own heading
    "enemy_bearing_cos",  # 10
    "enemy_distance",  # 11 centre distance / field diagonal
    "enemy_energy",  # 12 enemy energy / start_energy
    "enemy_heading_sin",  # 13 enemy body heading minus own heading
    "enemy_heading_cos",  # 14
    "enemy_velocity",  # 15 enemy velocity / max_speed
    "gun_bearing_sin",  # 16 direction to the enemy minus gun heading (0 = aimed)
    "gun_bearing_cos",  # 17
    "wall_ahead",  # 18 free travel before the hull touches a wall, along the heading / field diagonal
    "wall_left",  # 19 ... heading + 90
    "wall_behind",  # 20 ... heading + 180
    "wall_right",  # 21 ... heading - 90
    "enemies_alive",  # 22 living enemies / 7
    "lead_bearing_sin",  # 23 direction to the linear-targeting intercept minus gun heading (0 = led)
    "lead_bearing_cos",  # 24
)
OBS_DIM: int = len(OBS_FIELDS)

LEAD_POWER = 2.0
"""Bullet power the lead features assume (speed 14): a mid-range shot; the learner may fire any power."""
_ENEMY_1V1 = np.array([1, 0], np.intp)  # in a 1v1 match, the enemy of tank 0 and of tank 1


def nearest_enemy(
    state: TankState,
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]:
    """Nearest living enemy of every tank: (has, dx, dy, dist, index)."""
    s = state
    T = s.x.shape[1]
    has: NDArray[np.bool_]
    j: NDArray[np.intp]
    if T == 2:
        j = np.broadcast_to(_ENEMY_1V1, s.x.shape)
        has = s.alive[:, ::-1]
        dx = s.x[:, ::-1] - s.x
        dy = s.y[:, ::-1] - s.y
    else:
        ddx = s.x[:, None, :] - s.x[:, :, None]  # [m, i, j] = x_j - x_i
        ddy = s.y[:, None, :] - s.y[:, :, None]
        valid = s.alive[:, None, :] & ~np.eye(T, dtype=bool)
        d2 = np.where(valid, ddx * ddx + ddy * ddy, np.inf)
        j = np.argmin(d2, axis=2)
        has = np.asarray(valid.any(axis=2))
        dx = np.take_along_axis(ddx, j[..., None], 2)[..., 0]
        dy = np.take_along_axis(ddy, j[..., None], 2)[..., 0]
    dist = np.sqrt(dx * dx + dy * dy)
    return has, dx, dy, dist, j


def lead_direction(
    state: TankState,
    rules: TankRules,
    has: NDArray[np.bool_],
    dx: NDArray[np.float64],
    dy: NDArray[np.float64],
    j: NDArray[np.intp],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Unit vector (0 without an enemy) to where a power-2 bullet meets the nearest enemy
    if it keeps its heading and speed (linear targeting, clipped to the field).

    Aiming head-on misses any moving tank beyond close range; this is the point a gun
    must lead to. It feeds the observation and the aim shaping term (``gun_bearing_abs``).
    """
    s = state
    if s.x.shape[1] == 2:
        e_heading, e_vel = s.heading[:, ::-1], s.velocity[:, ::-1]
    else:
        e_heading, e_vel = np.take_along_axis(s.heading, j, 1), np.take_along_axis(s.velocity, j, 1)
    eh = e_heading * DEG
    return _lead(s.x, s.y, dx, dy, (np.cos(eh), np.sin(eh)), e_vel, has, rules)


def _lead(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    dx: NDArray[np.float64],
    dy: NDArray[np.float64],
    heading: tuple[NDArray[np.float64], NDArray[np.float64]],
    e_vel: NDArray[np.float64],
    has: NDArray[np.bool_],
    rules: TankRules,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`lead_direction` from an enemy given as arrays: offset (dx, dy), heading (its cos, sin), velocity."""
    r = rules
    ceh, seh = heading
    vx, vy = e_vel * ceh, e_vel * seh
    speed = r.bullet_speed_base - r.bullet_speed_factor * LEAD_POWER
    rad = r.tank_radius
    ex, ey = x + dx, y + dy
    px, py = ex, ey
    for _ in range(3):  # fixed-point iteration on the flight time, as Robocode's linear targeting does
        t = np.hypot(px - x, py - y) / speed + 1.0
        px = clip(ex + vx * t, rad, r.width - rad)
        py = clip(ey + vy * t, rad, r.height - rad)
    lx, ly = px - x, py - y
    inv = has / np.maximum(np.hypot(lx, ly), 1e-12)
    return lx * inv, ly * inv


def build_observation(state: TankState, rules: TankRules) -> NDArray[np.float32]:
    """(M, T, OBS_DIM) float32: every tank's own view (see OBS_FIELDS and docs/arena.md).

    Relative angles are computed with the angle-difference identities from the unit
    vectors of the absolute directions (4 trig calls instead of 11).
    """
    s, r = state, rules
    M, T = s.x.shape
    has, dx, dy, dist, j = nearest_enemy(s)
    buf = np.empty((OBS_DIM, M, T))
    h = s.heading * DEG
    sh, ch = np.sin(h), np.cos(h)
    g = s.gun_heading * DEG
    sg, cg = np.sin(g), np.cos(g)
    buf[0] = s.x * (2.0 / r.width) - 1.0
    buf[1] = s.y * (2.0 / r.height) - 1.0
    buf[2] = sh
    buf[3] = ch
    buf[4] = s.velocity * (1.0 / r.max_speed)
    buf[5] = s.energy * (1.0 / r.start_energy)
    buf[6] = sg * ch - cg * sh  # sin(gun - heading)
    buf[7] = cg * ch + sg * sh
    buf[8] = s.gun_heat * (1.0 / r.start_gun_heat)
    if T == 2:
        e_energy, e_vel = s.energy[:, ::-1], s.velocity[:, ::-1]
        seh, ceh = sh[:, ::-1], ch[:, ::-1]
    else:
        e_energy = np.take_along_axis(s.energy, j, 1)
        e_vel = np.take_along_axis(s.velocity, j, 1)
        seh = np.take_along_axis(sh, j, 1)
        ceh = np.take_along_axis(ch, j, 1)
    enemy_columns(buf, s.x, s.y, (sh, ch, sg, cg), Enemy(has, dx, dy, dist, e_energy, seh, ceh, e_vel), r)
    # Wall rays: free travel of the centre inside [R, W-R] x [R, H-R] ahead, left, behind, right.
    rad = r.tank_radius
    east = r.width - rad - s.x
    west = s.x - rad
    north = r.height - rad - s.y
    south = s.y - rad
    inv_c = 1.0 / np.maximum(np.abs(ch), 1e-9)
    inv_s = 1.0 / np.maximum(np.abs(sh), 1e-9)
    pc, ps = ch >= 0.0, sh >= 0.0
    ec, wc = np.where(pc, east, west) * inv_c, np.where(pc, west, east) * inv_c  # along +-heading, x part
    ns, ss = np.where(ps, north, south) * inv_s, np.where(ps, south, north) * inv_s  # along +-heading, y part
    es, ws = np.where(ps, west, east) * inv_s, np.where(ps, east, west) * inv_s  # along left/right, x part
    nc, sc = np.where(pc, north, south) * inv_c, np.where(pc, south, north) * inv_c  # along left/right, y part
    inv = 1.0 / r.max_distance
    np.minimum(np.minimum(ec, ns) * inv, 1.0, out=buf[18])
    np.minimum(np.minimum(es, nc) * inv, 1.0, out=buf[19])
    np.minimum(np.minimum(wc, ss) * inv, 1.0, out=buf[20])
    np.minimum(np.minimum(ws, sc) * inv, 1.0, out=buf[21])
    n_alive = s.alive.sum(axis=1, keepdims=True)
    buf[22] = (n_alive - s.alive) * (1.0 / 7.0)
    return buf.transpose(1, 2, 0).astype(np.float32)


class Enemy(NamedTuple):
    """The enemy a tank's observation describes, per tank (M, T): the nearest living one, or (the radar
    observation) the one its radar last scanned. ``has``: there is one (else its columns are 0)."""

    has: NDArray[np.bool_]
    dx: NDArray[np.float64]
    """Its centre minus the tank's."""
    dy: NDArray[np.float64]
    dist: NDArray[np.float64]
    energy: NDArray[np.float64]
    sin_heading: NDArray[np.float64]
    """sin of its body heading (absolute)."""
    cos_heading: NDArray[np.float64]
    velocity: NDArray[np.float64]


def enemy_columns(
    buf: NDArray[np.float64],
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    own: tuple[NDArray[np.float64], ...],
    enemy: Enemy,
    rules: TankRules,
) -> None:
    """Write the enemy's columns (9-17, 23-24) of ``buf`` (columns first: ``buf[c]`` is (M, T)) for tanks at
    ``x, y`` whose body and gun headings have the sines and cosines ``own = (sh, ch, sg, cg)``."""
    r, e = rules, enemy
    sh, ch, sg, cg = own
    # The unit vector to the enemy is 0 where there is none, which zeroes the angles.
    inv_d = e.has / np.maximum(e.dist, 1e-12)
    ux, uy = e.dx * inv_d, e.dy * inv_d
    buf[9] = uy * ch - ux * sh  # sin(enemy direction - heading)
    buf[10] = ux * ch + uy * sh
    buf[11] = e.dist * (e.has / r.max_distance)
    buf[12] = e.energy * (e.has / r.start_energy)
    seh, ceh = e.sin_heading, e.cos_heading
    buf[13] = (seh * ch - ceh * sh) * e.has  # sin(enemy heading - heading)
    buf[14] = (ceh * ch + seh * sh) * e.has
    buf[15] = e.velocity * (e.has / r.max_speed)
    buf[16] = uy * cg - ux * sg  # sin(enemy direction - gun heading)
    buf[17] = ux * cg + uy * sg
    lux, luy = _lead(x, y, e.dx, e.dy, (ceh, seh), e.velocity, e.has, r)
    buf[23] = luy * cg - lux * sg  # sin(lead direction - gun heading)
    buf[24] = lux * cg + luy * sg
