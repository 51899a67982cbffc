"""What a tank senses: the observation columns (``OBS_FIELDS``) and the code that fills them.

The observation is the learner's whole view of the game, so its layout is a contract with every
trained policy, the ONNX export and the Tank Royale bot that rebuilds it from Royale state
(``arena.royale.policy_bot``): changing a column breaks them all. The table lives here, next to
the one function that writes it (:func:`build_observation`), rather than inside the engine's step code.

The nearest-enemy and lead (linear-targeting) geometry is shared with the step's reward terms
(``StepInfo.enemy_distance``, ``gun_bearing_abs``), which must measure exactly what the policy
sees. The functions read a :class:`~arena.games.tank.engine.TankBattle`'s state, including the
fixed index helpers it keeps for them (``_other``, ``_eye``), and change nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .geometry import DEG, clip

if TYPE_CHECKING:
    from .engine import TankBattle

__all__ = ["LEAD_POWER", "OBS_DIM", "OBS_FIELDS", "build_observation", "lead_direction", "nearest_enemy"]

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


def nearest_enemy(
    battle: TankBattle,
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]:
    """Nearest living enemy of every tank: (has, dx, dy, dist, index)."""
    T = battle.n_tanks
    has: NDArray[np.bool_]
    j: NDArray[np.intp]
    if T == 2:
        j = battle._other
        has = battle.alive[:, ::-1]
        dx = battle.x[:, ::-1] - battle.x
        dy = battle.y[:, ::-1] - battle.y
    else:
        ddx = battle.x[:, None, :] - battle.x[:, :, None]  # [m, i, j] = x_j - x_i
        ddy = battle.y[:, None, :] - battle.y[:, :, None]
        valid = battle.alive[:, None, :] & ~battle._eye
        d2 = np.where(valid, ddx * ddx + ddy * ddy, np.inf)
        j = np.argmin(d2, axis=2)
        has = np.asarray(valid.any(axis=2))
        dx = np.take_along_axis(ddx, j[..., None], 2)[..., 0]
        dy = np.take_along_axis(ddy, j[..., None], 2)[..., 0]
    dist = np.sqrt(dx * dx + dy * dy)
    return has, dx, dy, dist, j


def lead_direction(
    battle: TankBattle, has: NDArray[np.bool_], dx: NDArray[np.float64], dy: NDArray[np.float64], j: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Unit vector (0 without an enemy) to where a power-2 bullet meets the nearest enemy
    if it keeps its heading and speed (linear targeting, clipped to the field).

    Aiming head-on misses any moving tank beyond close range; this is the point a gun
    must lead to. It feeds the observation and the aim shaping term (``gun_bearing_abs``).
    """
    r = battle.rules
    if battle.n_tanks == 2:
        e_heading, e_vel = battle.heading[:, ::-1], battle.velocity[:, ::-1]
    else:
        e_heading, e_vel = np.take_along_axis(battle.heading, j, 1), np.take_along_axis(battle.velocity, j, 1)
    eh = e_heading * DEG
    vx, vy = e_vel * np.cos(eh), e_vel * np.sin(eh)
    speed = r.bullet_speed_base - r.bullet_speed_factor * LEAD_POWER
    rad = r.tank_radius
    ex, ey = battle.x + dx, battle.y + dy
    px, py = ex, ey
    for _ in range(3):  # fixed-point iteration on the flight time, as Robocode's linear targeting does
        t = np.hypot(px - battle.x, py - battle.y) / speed + 1.0
        px = clip(ex + vx * t, rad, r.width - rad)
        py = clip(ey + vy * t, rad, r.height - rad)
    lx, ly = px - battle.x, py - battle.y
    inv = has / np.maximum(np.hypot(lx, ly), 1e-12)
    return lx * inv, ly * inv


def build_observation(battle: TankBattle) -> NDArray[np.float32]:
    """(M, T, OBS_DIM) float32: every tank's own view (see OBS_FIELDS and docs/arena.md).

    Relative angles are computed with the angle-difference identities from the unit
    vectors of the absolute directions (4 trig calls instead of 11).
    """
    r = battle.rules
    M, T = battle.n_matches, battle.n_tanks
    has, dx, dy, dist, j = nearest_enemy(battle)
    buf = np.empty((OBS_DIM, M, T))
    h = battle.heading * DEG
    sh, ch = np.sin(h), np.cos(h)
    g = battle.gun_heading * DEG
    sg, cg = np.sin(g), np.cos(g)
    buf[0] = battle.x * (2.0 / r.width) - 1.0
    buf[1] = battle.y * (2.0 / r.height) - 1.0
    buf[2] = sh
    buf[3] = ch
    buf[4] = battle.velocity * (1.0 / r.max_speed)
    buf[5] = battle.energy * (1.0 / r.start_energy)
    buf[6] = sg * ch - cg * sh  # sin(gun - heading)
    buf[7] = cg * ch + sg * sh
    buf[8] = battle.gun_heat * (1.0 / r.start_gun_heat)
    # Enemy part: the unit vector to the enemy is 0 where no enemy is alive, which zeroes the angles.
    inv_d = has / np.maximum(dist, 1e-12)
    ux, uy = dx * inv_d, dy * inv_d
    buf[9] = uy * ch - ux * sh  # sin(enemy direction - heading)
    buf[10] = ux * ch + uy * sh
    buf[11] = dist * (has / battle.max_distance)
    if T == 2:
        e_energy, e_vel = battle.energy[:, ::-1], battle.velocity[:, ::-1]
        seh, ceh = sh[:, ::-1], ch[:, ::-1]
    else:
        e_energy = np.take_along_axis(battle.energy, j, 1)
        e_vel = np.take_along_axis(battle.velocity, j, 1)
        seh = np.take_along_axis(sh, j, 1)
        ceh = np.take_along_axis(ch, j, 1)
    buf[12] = e_energy * (has / r.start_energy)
    buf[13] = (seh * ch - ceh * sh) * has  # sin(enemy heading - heading)
    buf[14] = (ceh * ch + seh * sh) * has
    buf[15] = e_vel * (has / r.max_speed)
    buf[16] = uy * cg - ux * sg  # sin(enemy direction - gun heading)
    buf[17] = ux * cg + uy * sg
    # Wall rays: free travel of the centre inside [R, W-R] x [R, H-R] ahead, left, behind, right.
    rad = r.tank_radius
    east = r.width - rad - battle.x
    west = battle.x - rad
    north = r.height - rad - battle.y
    south = battle.y - rad
    inv_c = 1.0 / np.maximum(np.abs(ch), 1e-9)
    inv_s = 1.0 / np.maximum(np.abs(sh), 1e-9)
    pc, ps = ch >= 0.0, sh >= 0.0
    ec, wc = np.where(pc, east, west) * inv_c, np.where(pc, west, east) * inv_c  # along +-heading, x part
    ns, ss = np.where(ps, north, south) * inv_s, np.where(ps, south, north) * inv_s  # along +-heading, y part
    es, ws = np.where(ps, west, east) * inv_s, np.where(ps, east, west) * inv_s  # along left/right, x part
    nc, sc = np.where(pc, north, south) * inv_c, np.where(pc, south, north) * inv_c  # along left/right, y part
    inv = 1.0 / battle.max_distance
    np.minimum(np.minimum(ec, ns) * inv, 1.0, out=buf[18])
    np.minimum(np.minimum(es, nc) * inv, 1.0, out=buf[19])
    np.minimum(np.minimum(wc, ss) * inv, 1.0, out=buf[20])
    np.minimum(np.minimum(ws, sc) * inv, 1.0, out=buf[21])
    n_alive = battle.alive.sum(axis=1, keepdims=True)
    buf[22] = (n_alive - battle.alive) * (1.0 / 7.0)
    lux, luy = lead_direction(battle, has, dx, dy, j)
    buf[23] = luy * cg - lux * sg  # sin(lead direction - gun heading)
    buf[24] = lux * cg + luy * sg
    return buf.transpose(1, 2, 0).astype(np.float32)
