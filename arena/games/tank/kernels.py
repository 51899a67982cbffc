"""numba kernels: the 1v1 tick and observation of :mod:`arena.games.tank.engine`, one match at a time.

Why: a numpy step of 128 matches spends most of its time in the per-call overhead of a few
hundred ufunc calls on (128, 2) arrays. Compiled, the same arithmetic runs as one loop over the
matches with every intermediate in registers. These kernels are the numpy code of ``engine.py``,
``bullets.py`` and ``observation.py`` rewritten per match for two tanks, with the **same float
operations in the same order** (the comments quote the numpy expression where the match is not
obvious), so that both engines play the same game bit for bit;
``tests/arena/games/test_compiled_engine.py`` checks it.

What keeps the bits equal:

* only IEEE-exact operations (+, -, *, /, sqrt, comparisons) and the C library's ``sin``,
  ``cos`` and ``hypot``, which numpy's float64 ufuncs also call (on x86-64 numpy >= 2); hypot's
  common path is the library's own algorithm inlined (:func:`_hypot_common`, glibc >= 2.35);
  ``arctan2`` is the exception (numpy uses its own SIMD routine on AVX-512 machines), so the
  one place that needs it, the step's ``gun_bearing_abs``, takes it from numpy between
  :func:`step_1v1` and :func:`gun_bearing_1v1`;
* numpy's reductions over slots and tanks add at most two non-zero terms in a 1v1 match, where
  every summation order gives the same result, so plain running sums reproduce them;
* the numpy engine's whole-batch conditions (``if want.any()``, ``if died.any()``...) only skip
  work that would add or multiply by zero; the one that is not an identity (the energy clamp
  after a death) is applied to the whole batch here too.

What keeps them fast: no reference counting (``_nrt=False``, see ``_JIT``); the per-tick phases
inlined; numpy's ``% 360`` without the fmod call where it is exact (:func:`_mod360`); the lead
direction of every tank as SIMD lanes (:func:`_leads`); and a memo of the heading trig and the lead
direction (``work``, ``key``) that the step computes for its StepInfo and the next
:func:`observe_1v1` reuses when the match has not changed since.

Kernels are ``@njit(cache=True)``: compiled once per machine, then loaded from numba's
cache next to this file (``__pycache__``). Why one file of ~1,000 lines,
past the house's size: numba's cache is keyed to the file that defines a kernel, not to the files
its inlined helpers come from, so a phase moved to a module of its own could change without the
cached kernels noticing and bots would run stale code. The sections below are the file's rooms. Only
:mod:`arena.games.tank.compiled` (and :mod:`arena.games.tank.precompile`, which warms the cache) imports this
module: the numpy engine never imports numba.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

from .geometry import DEG  # the only import the kernels compile in: numba's cache is keyed to this file alone

__all__ = [
    "INFO32",
    "KEYS",
    "PARAMS",
    "SCRATCH",
    "SCRATCH64",
    "WORK",
    "State",
    "Tanks",
    "gun_bearing_1v1",
    "libm_probe",
    "observe_1v1",
    "reset_1v1",
    "step_1v1",
]

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]
I64 = NDArray[np.int64]

PARAMS: tuple[str, ...] = (
    "min_power",  # rules.min_bullet_power
    "power_span",  # max_bullet_power - min_bullet_power
    "heat_eps",  # engine._HEAT_EPS
    "cooling",  # gun_cooling_rate
    "heat_base",
    "heat_factor",
    "speed_base",  # bullet_speed_base
    "speed_factor",
    "max_speed",
    "accel",
    "decel",
    "turn",  # max_turn_rate
    "turn_speed",  # turn_rate_speed_factor
    "gun_turn",
    "radar_turn",
    "radius",
    "width",
    "height",
    "x_max",  # width - radius
    "y_max",  # height - radius
    "wall_factor",
    "wall_offset",
    "ram_limit2",  # (2 radius - engine._RAM_TOL) ** 2
    "ram_damage",
    "score_ram",
    "bonus_ram",
    "push_lim",  # 2 radius
    "push_limit2",  # push_lim ** 2 - geometry._OVERLAP_EPS
    "push_passes",  # geometry._PUSH_PASSES
    "collisions",  # rules.bullet_collisions as 0 / 1
    "radius2",
    "damage_factor",
    "damage_bonus",
    "score_bullet",
    "bonus_bullet",
    "energy_return",
    "inactivity_ticks",
    "zap",
    "survival",
    "last_survivor",  # score_last_survivor * (T - 1)
    "max_ticks",
    "max_distance",
    "lead_speed",  # bullet speed of observation.LEAD_POWER
    "start_energy",
    "start_heat",  # start_gun_heat
    "x_scale",  # 2 / width
    "y_scale",  # 2 / height
    "inv_max_speed",
    "inv_start_energy",
    "inv_start_heat",
    "inv_max_distance",
)
"""The rules as one float64 vector, in this order (built by :func:`arena.games.tank.compiled.rule_params`)."""
(
    MIN_POWER,
    POWER_SPAN,
    HEAT_EPS,
    COOLING,
    HEAT_BASE,
    HEAT_FACTOR,
    SPEED_BASE,
    SPEED_FACTOR,
    MAX_SPEED,
    ACCEL,
    DECEL,
    TURN,
    TURN_SPEED,
    GUN_TURN,
    RADAR_TURN,
    RADIUS,
    WIDTH,
    HEIGHT,
    X_MAX,
    Y_MAX,
    WALL_FACTOR,
    WALL_OFFSET,
    RAM_LIMIT2,
    RAM_DAMAGE,
    SCORE_RAM,
    BONUS_RAM,
    PUSH_LIM,
    PUSH_LIMIT2,
    PUSH_PASSES,
    COLLISIONS,
    RADIUS2,
    DAMAGE_FACTOR,
    DAMAGE_BONUS,
    SCORE_BULLET,
    BONUS_BULLET,
    ENERGY_RETURN,
    INACTIVITY_TICKS,
    ZAP,
    SURVIVAL,
    LAST_SURVIVOR,
    MAX_TICKS,
    MAX_DISTANCE,
    LEAD_SPEED,
    START_ENERGY,
    START_HEAT,
    X_SCALE,
    Y_SCALE,
    INV_MAX_SPEED,
    INV_START_ENERGY,
    INV_START_HEAT,
    INV_MAX_DISTANCE,
) = range(len(PARAMS))

WORK: tuple[str, ...] = (
    "energy0", "score_delta", "dealt_delta", "cos_h", "sin_h", "lead_x", "lead_y",
    "own_x", "own_y", "aim_x", "aim_y", "enemy_vx", "enemy_vy", "enemy_alive", "point_x", "point_y", "reach",
)  # fmt: skip
"""Rows of the (len(WORK), M + padding, 2) float64 scratch a step keeps between its kernels (matches past M unused);
from ``own_x`` on, the lanes of :func:`_leads` (one per tank, read as flat rows)."""
(
    E0, SCORE_D, DEALT_D, COS_H, SIN_H, LEAD_X, LEAD_Y,
    OWN_X, OWN_Y, AIM_X, AIM_Y, ENEMY_VX, ENEMY_VY, ENEMY_ALIVE, POINT_X, POINT_Y, REACH,
) = range(len(WORK))  # fmt: skip

INFO32: tuple[str, ...] = ("energy_delta", "enemy_energy_delta", "damage_dealt", "enemy_distance", "gun_bearing_abs", "scores")
"""Rows of the (len(INFO32), M, 2) float32 block behind a compiled step's StepInfo fields."""
I_ENERGY, I_ENEMY, I_DEALT, I_DIST, I_BEARING, I_SCORES = range(len(INFO32))

SCRATCH: tuple[str, ...] = ("live", "alive_now", "want", "died", "hit", "clash")
"""Rows of the (len(SCRATCH), B) bool scratch of a step: per-tank flags (columns 0-1) and per-slot bullet flags."""
LIVE, ALIVE_NOW, WANT, DIED, HIT, CLASH = range(len(SCRATCH))
SCRATCH64: tuple[str, ...] = ("power", "x_old", "y_old", "end_x", "end_y")
"""Rows of the (len(SCRATCH64), B) float64 scratch: per-tank (columns 0-1) and per-slot values."""
POWER, X_OLD, Y_OLD, END_X, END_Y = range(len(SCRATCH64))
KEYS: tuple[str, ...] = ("x0", "y0", "x1", "y1", "v0", "v1", "h0", "h1", "alive0", "alive1")
"""Columns of the (M, len(KEYS)) memo key: the state the cached trig and lead rows of ``work`` were computed from."""
RAD2DEG = 180.0 / math.pi  # np.degrees multiplies by this constant
LEAD_ITERATIONS = 3  # observation.lead_direction's fixed-point iterations


class State(NamedTuple):
    """The battle's state (:class:`arena.games.tank.state.TankState`, the same fields in the same order), as the
    kernels name it: a kernel is handed the record as a plain tuple and rebuilds this from it.

    Why a copy of the field list here: numba's cache is keyed to this file alone, so a kernel that took its names
    from ``state.py`` could run stale code after a change there; ``compiled.py`` checks that both lists agree.
    Why a plain tuple: numba's dispatcher types a plain tuple in C at every call, a NamedTuple in Python code.
    """

    x: F64
    y: F64
    heading: F64
    velocity: F64
    energy: F64
    gun_heading: F64
    radar_heading: F64
    gun_heat: F64
    alive: B8
    scores: F64
    bullet_damage_dealt: F64
    ram_damage_dealt: F64
    tick: I64
    round: I64
    inactive_ticks: I64
    round_over: B8
    truncated: B8
    winner: I64
    bullet_active: B8
    bullet_x: F64
    bullet_y: F64
    bullet_heading: F64
    bullet_power: F64
    bullet_speed: F64
    bullet_owner: I64
    bullet_dx: F64
    bullet_dy: F64


class Tanks(NamedTuple):
    """The first ten fields of :class:`State`, the (M, 2) tank arrays: all an observation reads (a shorter tuple is
    a cheaper call)."""

    x: F64
    y: F64
    heading: F64
    velocity: F64
    energy: F64
    gun_heading: F64
    radar_heading: F64
    gun_heat: F64
    alive: B8
    scores: F64


_JIT: dict[str, Any] = {"cache": True, "error_model": "numpy", "_nrt": False}
"""How every kernel is compiled. ``cache``: on disk, next to this file. ``error_model="numpy"``: a division by
zero gives inf/nan as in numpy (no exception path). ``_nrt=False``: no reference counting; the kernels allocate
nothing and only borrow the caller's arrays, and numba's atomic increments and decrements of the ~30 arrays took
60% of a tick (numba's option for code without allocations; not in its type stubs, hence the dict)."""
_kernel = njit(nogil=True, **_JIT)
"""An entry point, called from Python; it lets the server's other threads run meanwhile (it touches no Python object)."""
_inline = njit(inline="always", **_JIT)
"""A phase of every tick, or a small helper: inlined into the kernels (a call would pass the arrays one by one)."""
_rare = njit(**_JIT)
"""What only some ticks need (a collision, hits, bullet clashes): called, which keeps the compile ~40% shorter."""


_HYPOT_LARGE = 2.0**511  # glibc's thresholds (e_hypot.c): above, below or apart by these it scales or adds
_HYPOT_TINY = 2.0**-459
_HYPOT_EPS = 2.0**-54


@_inline
def _hypot_common(x: float, y: float) -> tuple[float, bool]:
    """``(hypot(x, y), True)`` as glibc (>= 2.35, built without FMA, as x86-64 distributions ship it) computes it on
    its common path, or ``(..., False)`` off it (an infinity, a NaN, an operand so small or so far below the other
    that the library scales or adds instead): then the caller asks the library.

    Why: the lead direction's chains of hypot calls were a sixth of a tick, mostly the calls themselves. Here the
    same IEEE operations in the same order (Borges' corrected square root, the library's own algorithm) give the
    same double, both of the library's branches computed and one selected, so a loop of them runs as SIMD lanes.
    :func:`libm_probe` checks it against numpy's hypot: on a library that computes otherwise the engines'
    equality test becomes a tolerance test instead of failing silently.
    """
    ax = abs(x)
    ay = abs(y)
    hi = ay if ax < ay else ax
    lo = ax if ax < ay else ay
    common = (hi <= _HYPOT_LARGE) & (lo >= _HYPOT_TINY) & (lo > hi * _HYPOT_EPS)
    h = math.sqrt(hi * hi + lo * lo)
    d_lo = h - lo
    d_hi = h - hi
    near = hi * (2.0 * d_lo - hi) + (d_lo - 2.0 * (hi - lo)) * d_lo  # h <= 2 lo: t1 + t2 of the library's kernel
    apart = 2.0 * d_hi * (hi - 2.0 * lo) + ((4.0 * d_hi - lo) * lo + d_hi * d_hi)
    return h - (near if h <= 2.0 * lo else apart) / (2.0 * h), common


@_inline
def _hypot(x: float, y: float) -> float:
    """``math.hypot(x, y)``, the same double, inlined on the common path (see :func:`_hypot_common`)."""
    h, common = _hypot_common(x, y)
    return h if common else math.hypot(x, y)


@_inline
def _mod360(angle: float) -> float:
    """``angle % 360.0`` (numpy's remainder: fmod, then + 360 below 0, +0.0 for a zero), without the fmod call.

    Exact: fmod of an angle in [360, 720) is ``angle - 360`` (Sterbenz), and below 0 numpy adds 360 itself.
    """
    if 0.0 < angle < 360.0:
        return angle
    if 360.0 <= angle < 720.0:
        return angle - 360.0
    if -360.0 < angle < 0.0:
        return angle + 360.0
    return angle % 360.0


@_inline
def _same(a: float, b: float) -> bool:
    """``a`` and ``b`` are the same double, zeros' signs included (a memo key check)."""
    return a == b and (a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b))


@_inline
def _action(value: float) -> float:
    """An action column as the numpy step reads it: NaN is 0, then clipped to [-1, 1]."""
    if value != value:
        return 0.0
    return min(max(value, -1.0), 1.0)


@_inline
def _clip(value: float, low: float, high: float) -> float:
    """``geometry.clip`` (``np.minimum(np.maximum(v, low), high)``) on one float."""
    return min(max(value, low), high)


# --- the tick, phase by phase (engine.TankBattle.step) -----------------------------------------


@_inline
def _guns(par: F64, s: State, act: F64, m: int, running: bool, flag: B8, tmp: F64) -> None:
    """Phase 1: a hot gun cools, a cold one fires into the next free slot (tank-index order)."""
    for t in range(2):
        live = s.alive[m, t] and running
        flag[LIVE, t] = live
        fire = _action(act[m, t, 3])
        p = par[MIN_POWER] + fire * par[POWER_SPAN]
        tmp[POWER, t] = p
        heat = s.gun_heat[m, t]
        cold = heat <= 0.0
        if live and not cold:  # heat - gun_cooling_rate * (live & ~cold)
            heat = heat - par[COOLING]
        if heat < par[HEAT_EPS]:
            heat = 0.0
        s.gun_heat[m, t] = heat
        flag[WANT, t] = live and cold and fire > 0.0 and s.energy[m, t] > p
    slot = 0
    n_slots = s.bullet_active.shape[1]
    for t in range(2):
        if not flag[WANT, t]:
            continue
        while slot < n_slots and s.bullet_active[m, slot]:  # bullets.fire: free slots first, in slot order
            slot += 1
        if slot == n_slots:
            break  # no free slot: the shot is skipped
        p = tmp[POWER, t]
        g = s.gun_heading[m, t]  # the gun heading the observation showed (before this tick's turns)
        gr = g * DEG
        s.bullet_active[m, slot] = True
        s.bullet_x[m, slot] = s.x[m, t]
        s.bullet_y[m, slot] = s.y[m, t]
        s.bullet_heading[m, slot] = g
        s.bullet_power[m, slot] = p
        s.bullet_speed[m, slot] = par[SPEED_BASE] - par[SPEED_FACTOR] * p
        s.bullet_owner[m, slot] = t
        s.bullet_dx[m, slot] = math.cos(gr)
        s.bullet_dy[m, slot] = math.sin(gr)
        s.gun_heat[m, t] = par[HEAT_BASE] + par[HEAT_FACTOR] * p
        s.energy[m, t] -= p


@_inline
def _drive(par: F64, s: State, act: F64, w: F64, m: int, running: bool, flag: B8, tmp: F64) -> None:
    """Phases 2-3: velocity, turns (gun on the body, radar on the gun), move along the new heading, walls."""
    for t in range(2):
        live = flag[LIVE, t]
        v_old = s.velocity[m, t]
        delta = _action(act[m, t, 0]) * par[MAX_SPEED] - v_old
        speeding_up = v_old == 0.0 or ((v_old > 0.0) == (delta >= 0.0))
        lim = par[ACCEL] if speeding_up else par[DECEL]
        v = v_old + min(max(delta, -lim), lim)
        v = _clip(v, -par[MAX_SPEED], par[MAX_SPEED]) if live else v_old
        body = _action(act[m, t, 1]) * (par[TURN] - par[TURN_SPEED] * abs(v))
        gun = _action(act[m, t, 2]) * par[GUN_TURN]
        radar = _action(act[m, t, 4]) * par[RADAR_TURN]
        if not live:  # body *= live ...
            body *= 0.0
            gun *= 0.0
            radar *= 0.0
        gun_abs = gun + body
        s.radar_heading[m, t] = _mod360(s.radar_heading[m, t] + gun_abs + radar)
        heading = _mod360(s.heading[m, t] + body)
        s.heading[m, t] = heading
        s.gun_heading[m, t] = _mod360(s.gun_heading[m, t] + gun_abs)
        h = heading * DEG
        c, sn = math.cos(h), math.sin(h)
        w[COS_H, m, t] = c
        w[SIN_H, m, t] = sn
        vm = v if running else v * 0.0
        tmp[X_OLD, t] = s.x[m, t]
        tmp[Y_OLD, t] = s.y[m, t]
        x = s.x[m, t] + vm * c
        y = s.y[m, t] + vm * sn
        xc = _clip(x, par[RADIUS], par[X_MAX])  # 3. walls
        yc = _clip(y, par[RADIUS], par[Y_MAX])
        if xc != x or yc != y:
            s.energy[m, t] -= max(par[WALL_FACTOR] * abs(v) - par[WALL_OFFSET], 0.0)
            v = 0.0
        s.x[m, t] = xc
        s.y[m, t] = yc
        s.velocity[m, t] = v
        flag[ALIVE_NOW, t] = live and s.energy[m, t] > 0.0


@_inline
def _rams(par: F64, s: State, w: F64, m: int, flag: B8, tmp: F64) -> bool:
    """Phase 4: whether the two living tanks overlap (by at least the ram tolerance); if so, :func:`_collide`."""
    dx = s.x[m, 1] - s.x[m, 0]
    dy = s.y[m, 1] - s.y[m, 0]
    if not (dx * dx + dy * dy < par[RAM_LIMIT2] and flag[ALIVE_NOW, 0] and flag[ALIVE_NOW, 1]):
        return False
    _collide(par, s, w, m, flag, tmp, dx, dy)
    return True


@_rare
def _collide(par: F64, s: State, w: F64, m: int, flag: B8, tmp: F64, dx: float, dy: float) -> None:
    """TankBattle._rams for one pair: both take ram damage and go back; a rammer stops and scores the ram."""
    ram0 = s.velocity[m, 0] * (dx * w[COS_H, m, 0] + dy * w[SIN_H, m, 0]) > 0.0
    ram1 = s.velocity[m, 1] * (-dx * w[COS_H, m, 1] - dy * w[SIN_H, m, 1]) > 0.0
    e0, e1 = s.energy[m, 0], s.energy[m, 1]
    s.energy[m, 0] = e0 - par[RAM_DAMAGE]  # e_before - ram_damage * n_coll, n_coll = 1
    s.energy[m, 1] = e1 - par[RAM_DAMAGE]
    d01 = min(par[RAM_DAMAGE], max(e1, 0.0)) if ram0 else 0.0  # [attacker 0, victim 1]
    d10 = min(par[RAM_DAMAGE], max(e0, 0.0)) if ram1 else 0.0
    ledger = s.ram_damage_dealt
    ledger[m, 0, 1] += d01
    ledger[m, 1, 0] += d10
    killed0 = flag[ALIVE_NOW, 0] and s.energy[m, 0] <= 0.0
    killed1 = flag[ALIVE_NOW, 1] and s.energy[m, 1] <= 0.0
    w[DEALT_D, m, 0] += d01
    w[DEALT_D, m, 1] += d10
    sd0 = par[SCORE_RAM] * d01
    sd1 = par[SCORE_RAM] * d10
    if ram0 and killed1:
        sd0 += par[BONUS_RAM] * ledger[m, 0, 1]
    if ram1 and killed0:
        sd1 += par[BONUS_RAM] * ledger[m, 1, 0]
    w[SCORE_D, m, 0] += sd0
    w[SCORE_D, m, 1] += sd1
    for t in range(2):  # both involved: back to where they were
        s.x[m, t] = tmp[X_OLD, t]
        s.y[m, t] = tmp[Y_OLD, t]
    if ram0:
        s.velocity[m, 0] = 0.0
    if ram1:
        s.velocity[m, 1] = 0.0
    flag[ALIVE_NOW, 0] = flag[ALIVE_NOW, 0] and not killed0
    flag[ALIVE_NOW, 1] = flag[ALIVE_NOW, 1] and not killed1
    if flag[ALIVE_NOW, 0] and flag[ALIVE_NOW, 1]:
        _push_apart(par, s, m)


@_rare
def _push_apart(par: F64, s: State, m: int) -> None:
    """geometry.push_apart for one living pair: half each along the centre line, clamped, up to 10 passes."""
    lim = par[PUSH_LIM]
    for _ in range(int(par[PUSH_PASSES])):
        dx = s.x[m, 1] - s.x[m, 0]
        dy = s.y[m, 1] - s.y[m, 0]
        d2 = dx * dx + dy * dy
        if not d2 < par[PUSH_LIMIT2]:
            break
        d = math.sqrt(d2)
        tiny = d < 1e-9
        ux = 1.0 if tiny else dx / d
        uy = 0.0 if tiny else dy / d
        push = (lim - d) * 0.5 + 1e-6
        px, py = push * ux, push * uy  # (push * ux) @ pair_signed: -1 for tank 0, +1 for tank 1
        s.x[m, 0] = _clip(s.x[m, 0] + px * -1.0, par[RADIUS], par[X_MAX])
        s.x[m, 1] = _clip(s.x[m, 1] + px * 1.0, par[RADIUS], par[X_MAX])
        s.y[m, 0] = _clip(s.y[m, 0] + py * -1.0, par[RADIUS], par[Y_MAX])
        s.y[m, 1] = _clip(s.y[m, 1] + py * 1.0, par[RADIUS], par[Y_MAX])


@_rare
def _clashes(s: State, m: int, flag: B8, tmp: F64) -> None:
    """bullets._clashes for one match: bullets whose path segments cross (geometry.segments_cross, a < b)."""
    n_slots = s.bullet_active.shape[1]
    for i in range(n_slots):
        if not s.bullet_active[m, i]:
            continue
        sxa, sya = s.bullet_x[m, i], s.bullet_y[m, i]
        dxa, dya = tmp[END_X, i] - sxa, tmp[END_Y, i] - sya
        for j in range(i + 1, n_slots):
            if not s.bullet_active[m, j]:
                continue
            dxb, dyb = tmp[END_X, j] - s.bullet_x[m, j], tmp[END_Y, j] - s.bullet_y[m, j]
            qx = s.bullet_x[m, j] - sxa
            qy = s.bullet_y[m, j] - sya
            denom = dxa * dyb - dya * dxb
            safe = 1.0 if denom == 0.0 else denom
            t = (qx * dyb - qy * dxb) / safe
            u = (qx * dya - qy * dxa) / safe
            if denom != 0.0 and t >= 0.0 and t <= 1.0 and u >= 0.0 and u <= 1.0:
                flag[CLASH, i] = True
                flag[CLASH, j] = True


@_inline
def _bullets(par: F64, s: State, w: F64, m: int, flag: B8, tmp: F64) -> bool:
    """Phase 5 (bullets.move_bullets for one match): move, clash, hit the non-owner; returns whether one hit."""
    collisions = par[COLLISIONS] != 0.0
    any_hit = _paths_then_clashes(par, s, m, flag, tmp) if collisions else _move_bullets(par, s, m, flag)
    if any_hit:
        _apply_hits(par, s, w, m, flag)
        for t in range(2):
            flag[ALIVE_NOW, t] = flag[ALIVE_NOW, t] and s.energy[m, t] > 0.0
    return any_hit


@_rare
def _paths_then_clashes(par: F64, s: State, m: int, flag: B8, tmp: F64) -> bool:
    """Phase 5 with bullet collisions: each live slot's hit and path end, then the clashes, then the moves."""
    n_active = 0
    for k in range(s.bullet_active.shape[1]):
        if not s.bullet_active[m, k]:
            flag[HIT, k] = False
            continue
        n_active += 1
        bx, by, bdx, bdy, sp = s.bullet_x[m, k], s.bullet_y[m, k], s.bullet_dx[m, k], s.bullet_dy[m, k], s.bullet_speed[m, k]
        t = 1 - s.bullet_owner[m, k]  # the one tank this bullet can hit
        cx = s.x[m, t] - bx
        cy = s.y[m, t] - by
        along = min(max(cx * bdx + cy * bdy, 0.0), sp)  # closest point of the path
        qx = cx - along * bdx
        qy = cy - along * bdy
        flag[HIT, k] = qx * qx + qy * qy <= par[RADIUS2] and flag[ALIVE_NOW, t]
        tmp[END_X, k] = bx + bdx * sp  # moved after the clashes are known
        tmp[END_Y, k] = by + bdy * sp
    return n_active > 0 and _clash_and_move(par, s, m, flag, tmp, n_active)


@_inline
def _move_bullets(par: F64, s: State, m: int, flag: B8) -> bool:
    """Phase 5 without bullet collisions (the default): every slot of match ``m`` moved, hit or gone, branch-free.

    Why: the slots' active, hit and wall outcomes vary from slot to slot and tick to tick, and as branches each
    guess the core got wrong cost more than the slot's arithmetic. Here every slot is computed (an empty one's
    stale values are read and thrown away) and each outcome selected, so the loop runs as SIMD lanes; a live
    slot gets the doubles :func:`_paths_then_clashes` gives it. Returns whether a bullet hit.
    """
    x0, x1, y0, y1 = s.x[m, 0], s.x[m, 1], s.y[m, 0], s.y[m, 1]
    alive0, alive1 = flag[ALIVE_NOW, 0], flag[ALIVE_NOW, 1]
    radius2, width, height = par[RADIUS2], par[WIDTH], par[HEIGHT]
    hits = 0
    for k in range(s.bullet_active.shape[1]):
        active = s.bullet_active[m, k]
        bx, by, bdx, bdy, sp = s.bullet_x[m, k], s.bullet_y[m, k], s.bullet_dx[m, k], s.bullet_dy[m, k], s.bullet_speed[m, k]
        at_one = s.bullet_owner[m, k] == 0  # the one tank this bullet can hit: the other one
        cx = (x1 if at_one else x0) - bx
        cy = (y1 if at_one else y0) - by
        along = min(max(cx * bdx + cy * bdy, 0.0), sp)  # closest point of the path
        qx = cx - along * bdx
        qy = cy - along * bdy
        hit = active & (qx * qx + qy * qy <= radius2) & (alive1 if at_one else alive0)
        ex = bx + bdx * sp
        ey = by + bdy * sp
        gone = hit | (ex <= 0.0) | (ex >= width) | (ey <= 0.0) | (ey >= height)
        moves = active & (not gone)
        flag[HIT, k] = hit
        s.bullet_active[m, k] = moves
        s.bullet_x[m, k] = ex if moves else bx
        s.bullet_y[m, k] = ey if moves else by
        hits += 1 if hit else 0
    return hits > 0


@_rare
def _clash_and_move(par: F64, s: State, m: int, flag: B8, tmp: F64, n_active: int) -> bool:
    """With bullet collisions: bullets whose paths cross are destroyed (and hit nothing), then the rest move."""
    n_slots = s.bullet_active.shape[1]
    for k in range(n_slots):
        flag[CLASH, k] = False
    if n_active > 1:
        _clashes(s, m, flag, tmp)
    any_hit = False
    for k in range(n_slots):
        if not s.bullet_active[m, k]:
            continue
        hit = flag[HIT, k] and not flag[CLASH, k]  # bullets that met a bullet hit nothing else
        flag[HIT, k] = hit
        any_hit = any_hit or hit
        ex, ey = tmp[END_X, k], tmp[END_Y, k]
        if hit or flag[CLASH, k] or ex <= 0.0 or ex >= par[WIDTH] or ey <= 0.0 or ey >= par[HEIGHT]:
            s.bullet_active[m, k] = False
        else:
            s.bullet_x[m, k] = ex
            s.bullet_y[m, k] = ey
    return any_hit


@_rare
def _apply_hits(par: F64, s: State, w: F64, m: int, flag: B8) -> None:
    """bullets._apply_hits for one match: damage in slot order (who killed whom), then energy returns."""
    cum0 = cum1 = 0.0  # running damage per victim (np.cumsum over slots)
    dealt0 = dealt1 = 0.0  # per attacker, on the other tank (owner_t @ scored)
    kill0 = kill1 = False
    ret0 = ret1 = 0.0
    for k in range(s.bullet_active.shape[1]):
        if not flag[HIT, k]:
            continue
        a = s.bullet_owner[m, k]
        p = s.bullet_power[m, k]
        dmg = par[DAMAGE_FACTOR] * p + par[DAMAGE_BONUS] * max(p - 1.0, 0.0)
        if a == 0:  # victim 1
            cum1 += dmg
            before = s.energy[m, 1] - (cum1 - dmg)
        else:
            cum0 += dmg
            before = s.energy[m, 0] - (cum0 - dmg)
        scored = max(min(dmg, before), 0.0)
        killing = before > 0.0 and before - dmg <= 0.0
        if a == 0:
            dealt0 += scored
            kill0 = kill0 or killing
            ret0 += par[ENERGY_RETURN] * p
        else:
            dealt1 += scored
            kill1 = kill1 or killing
            ret1 += par[ENERGY_RETURN] * p
    ledger = s.bullet_damage_dealt
    ledger[m, 0, 1] += dealt0
    ledger[m, 1, 0] += dealt1
    w[DEALT_D, m, 0] += dealt0
    w[DEALT_D, m, 1] += dealt1
    sd0 = par[SCORE_BULLET] * dealt0
    sd1 = par[SCORE_BULLET] * dealt1
    if kill0:
        sd0 += par[BONUS_BULLET] * ledger[m, 0, 1]
    if kill1:
        sd1 += par[BONUS_BULLET] * ledger[m, 1, 0]
    w[SCORE_D, m, 0] += sd0
    w[SCORE_D, m, 1] += sd1
    e0 = s.energy[m, 0] - cum0
    e1 = s.energy[m, 1] - cum1
    if s.alive[m, 0] and e0 > 0.0:  # returns after all damage, to shooters alive at the start of the tick
        e0 = e0 + ret0
    if s.alive[m, 1] and e1 > 0.0:
        e1 = e1 + ret1
    s.energy[m, 0] = e0
    s.energy[m, 1] = e1


@_inline
def _end_of_tick(par: F64, s: State, w: F64, m: int, running: bool, damaged: bool, flag: B8) -> int:
    """Phases 6-7 for one match: inactivity zap, deaths, survival points, round end. Returns the deaths."""
    inactive = s.inactive_ticks[m] + (1 if running else 0)
    if damaged:
        inactive = 0
    s.inactive_ticks[m] = inactive
    if inactive >= par[INACTIVITY_TICKS]:
        for t in range(2):
            if flag[ALIVE_NOW, t]:
                s.energy[m, t] -= par[ZAP]
                flag[ALIVE_NOW, t] = s.energy[m, t] > 0.0
    n_died = 0
    for t in range(2):
        flag[DIED, t] = flag[LIVE, t] and not flag[ALIVE_NOW, t]
        if flag[DIED, t]:
            n_died += 1
            s.velocity[m, t] = 0.0
    for t in range(2):
        if n_died and flag[ALIVE_NOW, t]:
            w[SCORE_D, m, t] += par[SURVIVAL] * n_died
        if running:
            s.alive[m, t] = flag[ALIVE_NOW, t]
        s.scores[m, t] += w[SCORE_D, m, t]
    if running:
        s.tick[m] += 1
        n_alive = int(s.alive[m, 0]) + int(s.alive[m, 1])
        terminal = n_alive <= 1
        trunc = not terminal and s.tick[m] >= par[MAX_TICKS]
        if terminal and n_alive == 1:
            winner = 0 if s.alive[m, 0] else 1
            s.scores[m, winner] += par[LAST_SURVIVOR]
            s.winner[m] = winner
        s.round_over[m] = s.round_over[m] or terminal or trunc
        s.truncated[m] = s.truncated[m] or trunc
    return n_died


# --- what a tank sees (observation.py) ----------------------------------------------------------


@_inline
def _lead_start(s: Tanks, w: F64, m: int, t: int) -> tuple[float, float, float, float, float]:
    """lead_direction's set-up for tank ``t`` of match ``m``: (ex, ey, vx, vy, reach).

    The aim point starts at the enemy's centre (``x + dx`` as the numpy code computes it), ``vx, vy`` is the
    enemy's velocity (its heading trig from ``w``) and ``reach`` the distance to the aim point.
    """
    j = 1 - t
    x, y = s.x[m, t], s.y[m, t]
    ex = x + (s.x[m, j] - x)
    ey = y + (s.y[m, j] - y)
    vx = s.velocity[m, j] * w[COS_H, m, j]
    vy = s.velocity[m, j] * w[SIN_H, m, j]
    return ex, ey, vx, vy, _hypot(ex - x, ey - y)


@_inline
def _lead_iteration(
    par: F64, x: float, y: float, ex: float, ey: float, vx: float, vy: float, px: float, py: float, reach: float
) -> tuple[bool, float, float, float]:
    """One fixed-point iteration of the flight time (lead_direction's loop): (converged, px, py, reach).

    ``reach`` is the distance to ``(px, py)``. A point that maps onto itself (a still or cornered enemy) is the
    fixed point: every further iteration would repeat it exactly, so the caller stops there.
    """
    flight = reach / par[LEAD_SPEED] + 1.0
    qx = _clip(ex + vx * flight, par[RADIUS], par[X_MAX])
    qy = _clip(ey + vy * flight, par[RADIUS], par[Y_MAX])
    if qx == px and qy == py:
        return True, px, py, reach
    return False, qx, qy, _hypot(qx - x, qy - y)


@_inline
def _remember(par: F64, s: Tanks, w: F64, key: F64, m: int) -> None:
    """Both tanks' lead (observation.lead_direction) into ``w``, from the heading trig already there; keyed to the state.

    Why a memo: the training loop's ``step``, ``reset(finished)``, ``observe`` needs the lead of the same state twice
    (StepInfo's gun bearing, then the observation); the second time finds it here unless a reset or an edit changed
    the match, which :func:`_key_holds` sees. The two tanks' iterations alternate: each is a chain of dependent
    hypot calls and divisions, and two chains side by side keep the core busy.
    """
    x0, y0, x1, y1 = s.x[m, 0], s.y[m, 0], s.x[m, 1], s.y[m, 1]
    ex0, ey0, vx0, vy0, reach0 = _lead_start(s, w, m, 0)
    ex1, ey1, vx1, vy1, reach1 = _lead_start(s, w, m, 1)
    px0, py0, px1, py1 = ex0, ey0, ex1, ey1
    done0 = done1 = False
    for _ in range(LEAD_ITERATIONS):
        if not done0:
            done0, px0, py0, reach0 = _lead_iteration(par, x0, y0, ex0, ey0, vx0, vy0, px0, py0, reach0)
        if not done1:
            done1, px1, py1, reach1 = _lead_iteration(par, x1, y1, ex1, ey1, vx1, vy1, px1, py1, reach1)
    inv0 = (1.0 if s.alive[m, 1] else 0.0) / max(reach0, 1e-12)  # reach = hypot(lx, ly)
    inv1 = (1.0 if s.alive[m, 0] else 0.0) / max(reach1, 1e-12)
    w[LEAD_X, m, 0] = (px0 - x0) * inv0
    w[LEAD_Y, m, 0] = (py0 - y0) * inv0
    w[LEAD_X, m, 1] = (px1 - x1) * inv1
    w[LEAD_Y, m, 1] = (py1 - y1) * inv1
    _set_key(s, key, m)


@_inline
def _set_key(s: Tanks | State, key: F64, m: int) -> None:
    """Record the state the cached trig and lead of match ``m`` belong to."""
    for t in range(2):
        key[m, 2 * t] = s.x[m, t]
        key[m, 2 * t + 1] = s.y[m, t]
        key[m, 4 + t] = s.velocity[m, t]
        key[m, 6 + t] = s.heading[m, t]
        key[m, 8 + t] = 1.0 if s.alive[m, t] else 0.0


@_inline
def _leads(par: F64, s: State, w: F64, key: F64) -> None:
    """:func:`_remember` for every match at once, as SIMD lanes: the same doubles, a third of the time.

    Why: each tank's lead is a chain of dependent square roots and divisions (four hypot calls, three flight
    times), which one match at a time leaves the core waiting on their latency; the step needs every match's.
    Laid out as flat rows of 2M lanes (one per tank), each pass of the fixed point is one loop the compiler turns
    into vector instructions. The early stop of :func:`_remember` is left out: a converged point maps onto itself,
    so the passes after it recompute the same doubles. A lane off the library's common path (see
    :func:`_hypot_common`) is redone by the library after its pass.
    """
    M = s.x.shape[0]
    n = 2 * M
    for m in range(M):  # every read before the first write: the compiler cannot tell the arrays apart
        x0, x1, y0, y1 = s.x[m, 0], s.x[m, 1], s.y[m, 0], s.y[m, 1]
        v0, v1 = s.velocity[m, 0], s.velocity[m, 1]
        c0, c1, s0, s1 = w[COS_H, m, 0], w[COS_H, m, 1], w[SIN_H, m, 0], w[SIN_H, m, 1]
        ax0, ay0 = x0 + (x1 - x0), y0 + (y1 - y0)  # as _lead_start
        ax1, ay1 = x1 + (x0 - x1), y1 + (y0 - y1)
        w[OWN_X, m, 0], w[OWN_X, m, 1], w[OWN_Y, m, 0], w[OWN_Y, m, 1] = x0, x1, y0, y1
        w[AIM_X, m, 0], w[AIM_X, m, 1], w[AIM_Y, m, 0], w[AIM_Y, m, 1] = ax0, ax1, ay0, ay1
        w[POINT_X, m, 0], w[POINT_X, m, 1], w[POINT_Y, m, 0], w[POINT_Y, m, 1] = ax0, ax1, ay0, ay1
        w[ENEMY_VX, m, 0], w[ENEMY_VX, m, 1] = v1 * c1, v0 * c0
        w[ENEMY_VY, m, 0], w[ENEMY_VY, m, 1] = v1 * s1, v0 * s0
        w[ENEMY_ALIVE, m, 0], w[ENEMY_ALIVE, m, 1] = (1.0 if s.alive[m, 1] else 0.0), (1.0 if s.alive[m, 0] else 0.0)
    lanes = w.reshape((w.shape[0], 2 * w.shape[1]))  # the first n of each row: a row may be padded past M
    own_x, own_y, aim_x, aim_y = lanes[OWN_X], lanes[OWN_Y], lanes[AIM_X], lanes[AIM_Y]
    vx, vy, px, py, reach = lanes[ENEMY_VX], lanes[ENEMY_VY], lanes[POINT_X], lanes[POINT_Y], lanes[REACH]
    speed, low, x_max, y_max = par[LEAD_SPEED], par[RADIUS], par[X_MAX], par[Y_MAX]
    off = 0
    for i in range(n):
        r, common = _hypot_common(px[i] - own_x[i], py[i] - own_y[i])
        reach[i] = r
        off += 0 if common else 1
    _off_common_path(own_x, own_y, px, py, reach, n, off)
    for _ in range(LEAD_ITERATIONS):
        off = 0
        for i in range(n):
            flight = reach[i] / speed + 1.0
            qx = _clip(aim_x[i] + vx[i] * flight, low, x_max)
            qy = _clip(aim_y[i] + vy[i] * flight, low, y_max)
            r, common = _hypot_common(qx - own_x[i], qy - own_y[i])
            px[i] = qx
            py[i] = qy
            reach[i] = r
            off += 0 if common else 1
        _off_common_path(own_x, own_y, px, py, reach, n, off)
    lead_x, lead_y, enemy_alive = lanes[LEAD_X], lanes[LEAD_Y], lanes[ENEMY_ALIVE]
    for i in range(n):
        inv = enemy_alive[i] / max(reach[i], 1e-12)  # as _remember
        lead_x[i] = (px[i] - own_x[i]) * inv
        lead_y[i] = (py[i] - own_y[i]) * inv
    for m in range(M):
        _set_key(s, key, m)


@_inline
def _off_common_path(own_x: F64, own_y: F64, px: F64, py: F64, reach: F64, n: int, off: int) -> None:
    """The library's hypot for the lanes of the first ``n`` that :func:`_hypot_common` left (none, in a real battle)."""
    if off:
        for i in range(n):
            dx, dy = px[i] - own_x[i], py[i] - own_y[i]
            if not _hypot_common(dx, dy)[1]:
                reach[i] = math.hypot(dx, dy)


@_inline
def _key_holds(s: Tanks, key: F64, m: int) -> bool:
    """Whether match ``m`` is still in the state its cached trig and lead were computed from (no reset, no edit)."""
    for t in range(2):
        if not (
            _same(key[m, 2 * t], s.x[m, t])
            and _same(key[m, 2 * t + 1], s.y[m, t])
            and _same(key[m, 4 + t], s.velocity[m, t])
            and _same(key[m, 6 + t], s.heading[m, t])
            and key[m, 8 + t] == (1.0 if s.alive[m, t] else 0.0)
        ):
            return False
    return True


@_inline
def _wall_rays(par: F64, x: float, y: float, ch: float, sh: float, row: NDArray[np.float32]) -> None:
    """Columns 18-21: free travel ahead, left, behind and right before the hull touches a wall."""
    rad = par[RADIUS]
    east = par[X_MAX] - x
    west = x - rad
    north = par[Y_MAX] - y
    south = y - rad
    inv_c = 1.0 / max(abs(ch), 1e-9)
    inv_s = 1.0 / max(abs(sh), 1e-9)
    pc, ps = ch >= 0.0, sh >= 0.0
    ec, wc = (east if pc else west) * inv_c, (west if pc else east) * inv_c
    ns, ss = (north if ps else south) * inv_s, (south if ps else north) * inv_s
    es, ws = (west if ps else east) * inv_s, (east if ps else west) * inv_s
    nc, sc = (north if pc else south) * inv_c, (south if pc else north) * inv_c
    inv = par[INV_MAX_DISTANCE]
    row[18] = min(min(ec, ns) * inv, 1.0)
    row[19] = min(min(es, nc) * inv, 1.0)
    row[20] = min(min(wc, ss) * inv, 1.0)
    row[21] = min(min(ws, sc) * inv, 1.0)


@_inline
def _observe_tank(par: F64, s: Tanks, w: F64, m: int, t: int, row: NDArray[np.float32]) -> None:
    """One tank's 25 columns (observation.build_observation), from the heading trig and lead cached in ``w``."""
    j = 1 - t
    sh, ch = w[SIN_H, m, t], w[COS_H, m, t]
    seh, ceh = w[SIN_H, m, j], w[COS_H, m, j]
    lux, luy = w[LEAD_X, m, t], w[LEAD_Y, m, t]
    g = s.gun_heading[m, t] * DEG
    sg, cg = math.sin(g), math.cos(g)
    x, y = s.x[m, t], s.y[m, t]
    has = s.alive[m, j]  # nearest_enemy; below, ``has / c`` is ``1 / c`` or 0: the same doubles as numpy's
    hasf = 1.0 if has else 0.0
    dx = s.x[m, j] - x
    dy = s.y[m, j] - y
    dist = math.sqrt(dx * dx + dy * dy)
    row[0] = x * par[X_SCALE] - 1.0
    row[1] = y * par[Y_SCALE] - 1.0
    row[2] = sh
    row[3] = ch
    row[4] = s.velocity[m, t] * par[INV_MAX_SPEED]
    row[5] = s.energy[m, t] * par[INV_START_ENERGY]
    row[6] = sg * ch - cg * sh
    row[7] = cg * ch + sg * sh
    row[8] = s.gun_heat[m, t] * par[INV_START_HEAT]
    inv_d = 1.0 / max(dist, 1e-12) if has else 0.0
    ux, uy = dx * inv_d, dy * inv_d
    row[9] = uy * ch - ux * sh
    row[10] = ux * ch + uy * sh
    row[11] = dist * (par[INV_MAX_DISTANCE] if has else 0.0)
    row[12] = s.energy[m, j] * (par[INV_START_ENERGY] if has else 0.0)
    row[13] = (seh * ch - ceh * sh) * hasf
    row[14] = (ceh * ch + seh * sh) * hasf
    row[15] = s.velocity[m, j] * (par[INV_MAX_SPEED] if has else 0.0)
    row[16] = uy * cg - ux * sg
    row[17] = ux * cg + uy * sg
    _wall_rays(par, x, y, ch, sh, row)
    row[22] = float(int(s.alive[m, 0]) + int(s.alive[m, 1]) - int(s.alive[m, t])) * (1.0 / 7.0)
    row[23] = luy * cg - lux * sg
    row[24] = lux * cg + luy * sg


@_kernel
def observe_1v1(par: F64, tanks: Any, work: F64, key: F64, out: NDArray[np.float32]) -> None:
    """Fill ``out`` (M, 2, OBS_DIM) float32 with every tank's observation (observation.build_observation).

    ``tanks`` is the state's first ten arrays (:class:`Tanks`) as a plain tuple. Matches still in the state the
    last step left them in reuse its heading trig and lead (``work``, ``key``).
    """
    s = Tanks(*tanks)
    for m in range(s.x.shape[0]):
        if not _key_holds(s, key, m):
            for t in range(2):
                h = s.heading[m, t] * DEG
                work[COS_H, m, t] = math.cos(h)
                work[SIN_H, m, t] = math.sin(h)
            _remember(par, s, work, key, m)
        for t in range(2):
            _observe_tank(par, s, work, m, t, out[m, t])


# --- the step ---------------------------------------------------------------------------------


@_inline
def _step_info(par: F64, reward_terms: bool, s: State, w: F64, key: F64, m: int, info: NDArray[np.float32]) -> None:
    """The StepInfo float32 columns of one match (:func:`_leads` wrote the lead :func:`gun_bearing_1v1` needs next)."""
    d0 = s.energy[m, 0] - w[E0, m, 0]
    d1 = s.energy[m, 1] - w[E0, m, 1]
    total = d0 + d1
    if not reward_terms:
        key[m, 0] = math.nan  # no lead computed: observe() must not reuse an old one
    for t in range(2):
        d = d0 if t == 0 else d1
        info[I_ENERGY, m, t] = d
        info[I_ENEMY, m, t] = total - d
        info[I_DEALT, m, t] = w[DEALT_D, m, t]
        info[I_SCORES, m, t] = s.scores[m, t]
        if reward_terms:
            j = 1 - t
            dx = s.x[m, j] - s.x[m, t]
            dy = s.y[m, j] - s.y[m, t]
            info[I_DIST, m, t] = math.sqrt(dx * dx + dy * dy) if s.alive[m, j] else par[MAX_DISTANCE]
        else:
            info[I_DIST, m, t] = par[MAX_DISTANCE]
            info[I_BEARING, m, t] = 180.0


@_kernel
def step_1v1(
    par: F64, reward_terms: bool, act: NDArray[np.floating], state: Any, scratch: Any, info: NDArray[np.float32], died: B8
) -> None:
    """One tick of every 1v1 match (TankBattle.step), in place on the battle's state (:class:`State` as a plain tuple).

    ``scratch`` is ``(work, key, flag, tmp)``: ``work`` (len(WORK), M + padding, 2) and ``key`` (M, len(KEYS)) are
    kept between kernels, ``flag`` (len(SCRATCH), B) and ``tmp`` (len(SCRATCH64), B) are a match's temporaries.
    ``info`` (len(INFO32), M, 2) and ``died`` (M, 2) receive the StepInfo columns, except ``gun_bearing_abs`` when
    ``reward_terms``: the caller takes numpy's arctan2 of ``work[LEAD_Y], work[LEAD_X]`` and hands it to
    :func:`gun_bearing_1v1`.
    """
    s = State(*state)
    work, key, flag, tmp = scratch
    any_died = False
    for m in range(s.x.shape[0]):
        running = not s.round_over[m]
        for t in range(2):
            work[E0, m, t] = s.energy[m, t]
            work[SCORE_D, m, t] = 0.0
            work[DEALT_D, m, t] = 0.0
        _guns(par, s, act, m, running, flag, tmp)
        _drive(par, s, act, work, m, running, flag, tmp)
        bumped = _rams(par, s, work, m, flag, tmp)
        hit_any = running and _bullets(par, s, work, m, flag, tmp)
        n_died = _end_of_tick(par, s, work, m, running, bumped or hit_any, flag)
        died[m, 0] = flag[DIED, 0]
        died[m, 1] = flag[DIED, 1]
        any_died = any_died or n_died > 0
    if any_died:  # np.maximum(energy, 0.0, out=energy): the whole batch, as the numpy step does
        for m in range(s.x.shape[0]):
            for t in range(2):
                s.energy[m, t] = max(s.energy[m, t], 0.0)
    if reward_terms:
        _leads(par, s, work, key)
    for m in range(s.x.shape[0]):
        _step_info(par, reward_terms, s, work, key, m, info)


@_kernel
def gun_bearing_1v1(angle: F64, gun_heading: F64, alive: B8, out: NDArray[np.float32]) -> None:
    """StepInfo.gun_bearing_abs from numpy's ``arctan2`` of the lead direction: |angle - gun heading| in degrees."""
    for m in range(angle.shape[0]):
        for t in range(2):
            if alive[m, 1 - t]:
                out[m, t] = abs(_mod360(angle[m, t] * RAD2DEG - gun_heading[m, t] + 180.0) - 180.0)
            else:
                out[m, t] = 180.0


# --- a new round (TankBattle.reset) --------------------------------------------------------------


@_kernel
def reset_1v1(par: F64, spawn: F64, mask: B8, draws: F64, state: Any) -> None:
    """Start new rounds in the matches of ``mask`` of ``state`` (:class:`State` as a plain tuple) from TankBattle.reset's
    random draws: for the k reset matches, k rows of a key per spawn cell, then k x 2 jitter pairs, then k x 2
    headings (times 360, as numpy's reset multiplies them); ``spawn`` is (cells per row, cell width, cell height,
    x jitter span, y jitter span, cells).

    Each tank's cell is numpy's ``argsort(keys, axis=1)[:, :2]``: the two smallest keys, found in one pass instead of
    a sort of every key. Two equal keys (two equal random doubles among a row's, odds ~1e-13
    a round) are taken in index order, which numpy's unstable sort does not promise.
    """
    s = State(*state)
    ncx = int(spawn[0])
    n_cells = int(spawn[5])
    k = 0
    for m in range(mask.shape[0]):
        k += 1 if mask[m] else 0
    jitters = k * n_cells  # where the jitter pairs start, then the headings
    headings = jitters + 4 * k
    i = -1
    for m in range(mask.shape[0]):
        if not mask[m]:
            continue
        i += 1
        row = draws[i * n_cells : (i + 1) * n_cells]
        first, second = 0, -1
        for cell in range(1, n_cells):
            if row[cell] < row[first]:
                first, second = cell, first
            elif second < 0 or row[cell] < row[second]:
                second = cell
        for t in range(2):
            c = first if t == 0 else second
            jx, jy = draws[jitters + 4 * i + 2 * t], draws[jitters + 4 * i + 2 * t + 1]
            new_heading = draws[headings + 2 * i + t] * 360.0
            s.x[m, t] = (c % ncx) * spawn[1] + par[RADIUS] + jx * spawn[3]
            s.y[m, t] = (c // ncx) * spawn[2] + par[RADIUS] + jy * spawn[4]
            s.heading[m, t] = new_heading
            s.gun_heading[m, t] = new_heading
            s.radar_heading[m, t] = new_heading
            s.velocity[m, t] = 0.0
            s.energy[m, t] = par[START_ENERGY]
            s.gun_heat[m, t] = par[START_HEAT]
            s.alive[m, t] = True
            s.scores[m, t] = 0.0
            for j in range(2):
                s.bullet_damage_dealt[m, t, j] = 0.0
                s.ram_damage_dealt[m, t, j] = 0.0
        s.tick[m] = 0
        s.round[m] += 1
        s.inactive_ticks[m] = 0
        s.round_over[m] = False
        s.truncated[m] = False
        s.winner[m] = -1
        for k in range(s.bullet_active.shape[1]):
            s.bullet_active[m, k] = False


# --- the premise of bit-equality -----------------------------------------------------------------


@_kernel
def libm_probe(angle: F64, x: F64, y: F64, out: F64) -> None:
    """``out`` (4, N) = sin, cos of ``angle`` (radians), hypot and sqrt(x² + y²), as the kernels compute them.

    :func:`arena.games.tank.compiled.libm_matches_numpy` compares these with numpy's ufuncs.
    """
    for i in range(angle.shape[0]):
        out[0, i] = math.sin(angle[i])
        out[1, i] = math.cos(angle[i])
        out[2, i] = _hypot(x[i], y[i])
        out[3, i] = math.sqrt(x[i] * x[i] + y[i] * y[i])
