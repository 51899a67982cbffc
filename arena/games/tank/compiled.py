"""The compiled (numba) engine of 1v1 tank battles: ``TankBattle(..., engine="numba")``.

Why: the training loop steps 128-256 1v1 matches at a time, where the numpy engine spends most of
its time per tick in numpy's per-call overhead (docs/arena.md, "Speed"). :class:`CompiledEngine` runs the same tick and
observation as a few numba kernels (:mod:`arena.games.tank.kernels`) over the battle's own state
(:class:`~arena.games.tank.state.TankState`), in place, so every reader of the state (scripted bots,
rewards, recorders, the dashboard) sees what it always saw. It is chosen per battle and only covers
the training configuration; :meth:`TankBattle.step <arena.games.tank.engine.TankBattle.step>` runs
the numpy code for any other tick (recorded events, Tank Royale's turn coupling or rescan).
Free-for-all battles (``n_tanks > 2``) never get one: they stay numpy.

Importing this module imports numba (a dependency of the package, kept out of the numpy engine's imports);
``engine.py`` imports it only when a battle asks for ``engine="numba"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import kernels
from .actions import ACT_DIM
from .events import StepInfo
from .geometry import _OVERLAP_EPS, _PUSH_PASSES, DEG
from .observation import LEAD_POWER, OBS_DIM
from .rules import TankRules
from .state import TankState

__all__ = ["KERNELS", "SCRIPTED_KERNELS", "CompiledEngine", "libm_matches_numpy", "rule_params"]

KERNELS: tuple[str, ...] = ("step_1v1", "gun_bearing_1v1", "observe_1v1", "reset_1v1")
"""The entry points in :mod:`arena.games.tank.kernels` (each compiled, or loaded from the cache, on first use)."""
SCRIPTED_KERNELS: tuple[str, ...] = ("angle_inputs", "spinner_act", "walker_act", "tracker_lead", "tracker_fire")
"""The entry points in :mod:`arena.games.tank.scripted_kernels` (the scripted bots' ``engine="numba"``)."""
assert kernels.State._fields == TankState._fields, "kernels.State and state.TankState list the same fields in order"
assert kernels.Tanks._fields == TankState._fields[: len(kernels.Tanks._fields)], "kernels.Tanks is the state's first fields"


def rule_params(rules: TankRules, heat_eps: float, ram_tol: float) -> NDArray[np.float64]:
    """The rules as the kernels' float64 vector (``kernels.PARAMS`` order).

    Every derived constant is computed with the very expression the numpy code uses (``(2.0 * rad - ram_tol) ** 2``,
    ``2.0 / width``...), so both engines compare against the same doubles.
    """
    r = rules
    n_tanks = 2
    rad = r.tank_radius
    lim = 2.0 * rad
    values = {
        "min_power": r.min_bullet_power,
        "power_span": r.max_bullet_power - r.min_bullet_power,
        "heat_eps": heat_eps,
        "cooling": r.gun_cooling_rate,
        "heat_base": r.gun_heat_base,
        "heat_factor": r.gun_heat_factor,
        "speed_base": r.bullet_speed_base,
        "speed_factor": r.bullet_speed_factor,
        "max_speed": r.max_speed,
        "accel": r.acceleration,
        "decel": r.deceleration,
        "turn": r.max_turn_rate,
        "turn_speed": r.turn_rate_speed_factor,
        "gun_turn": r.max_gun_turn_rate,
        "radar_turn": r.max_radar_turn_rate,
        "radius": rad,
        "width": r.width,
        "height": r.height,
        "x_max": r.width - rad,
        "y_max": r.height - rad,
        "wall_factor": r.wall_damage_factor,
        "wall_offset": r.wall_damage_offset,
        "ram_limit2": (2.0 * rad - ram_tol) ** 2,
        "ram_damage": r.ram_damage,
        "score_ram": r.score_ram_damage,
        "bonus_ram": r.bonus_ram_kill,
        "push_lim": lim,
        "push_limit2": lim * lim - _OVERLAP_EPS,
        "push_passes": _PUSH_PASSES,
        "collisions": float(r.bullet_collisions),
        "radius2": rad * rad,
        "damage_factor": r.bullet_damage_factor,
        "damage_bonus": r.bullet_damage_bonus,
        "score_bullet": r.score_bullet_damage,
        "bonus_bullet": r.bonus_bullet_kill,
        "energy_return": r.bullet_energy_return,
        "inactivity_ticks": r.inactivity_ticks,
        "zap": r.inactivity_zap,
        "survival": r.score_survival,
        "last_survivor": r.score_last_survivor * (n_tanks - 1),
        "max_ticks": r.max_ticks,
        "max_distance": r.max_distance,
        "lead_speed": r.bullet_speed_base - r.bullet_speed_factor * LEAD_POWER,
        "start_energy": r.start_energy,
        "start_heat": r.start_gun_heat,
        "x_scale": 2.0 / r.width,
        "y_scale": 2.0 / r.height,
        "inv_max_speed": 1.0 / r.max_speed,
        "inv_start_energy": 1.0 / r.start_energy,
        "inv_start_heat": 1.0 / r.start_gun_heat,
        "inv_max_distance": 1.0 / r.max_distance,
    }
    assert tuple(values) == kernels.PARAMS, "rule_params and kernels.PARAMS list the same names in the same order"
    return np.array([float(v) for v in values.values()], np.float64)


class CompiledEngine:
    """The numba step, observation and reset of one 1v1 battle's :class:`~arena.games.tank.state.TankState`.

    It holds the rules as constants, a little scratch and the state's arrays as the kernels take them (plain
    tuples); the arrays are the battle's own, written in place by every step (numpy's or this one), so a numpy
    step in between, or a caller's edit, is always seen.
    """

    def __init__(self, state: TankState, rules: TankRules, heat_eps: float, ram_tol: float) -> None:
        M, T = state.x.shape
        B = state.bullet_active.shape[1]
        if T != 2:
            raise ValueError(f"the compiled engine plays 1v1 only, got {T} tanks")
        self.state = state
        self.params = rule_params(rules, heat_eps, ram_tol)
        self.max_distance = float(rules.max_distance)
        # Plain tuples, built once: numba's dispatcher types a plain tuple in C at every call, a NamedTuple in Python.
        self._arrays = tuple(state)
        self._tanks = self._arrays[: len(kernels.Tanks._fields)]
        # Rows padded by 4 matches (64 bytes): at 128 or 256 matches a row is 2 or 4 KiB, and unpadded rows
        # shared their L1 cache sets and 4K-aliased each other's loads and stores (the lead's lanes 1.5x slower).
        self._work = np.zeros((len(kernels.WORK), M + 4, 2))
        self._lead_x, self._lead_y = self._work[kernels.LEAD_X, :M], self._work[kernels.LEAD_Y, :M]
        self._key = np.full((M, len(kernels.KEYS)), np.nan)  # nothing cached yet
        flag = np.zeros((len(kernels.SCRATCH), max(B, 2)), bool)
        tmp = np.zeros((len(kernels.SCRATCH64), max(B, 2)))
        self._scratch = (self._work, self._key, flag, tmp)
        self._act_shape, self._obs_shape = (M, 2, ACT_DIM), (M, 2, OBS_DIM)
        self._info_shape = (len(kernels.INFO32), M, 2)
        r = rules
        ncx = int(r.width // r.spawn_cell)
        ncy = int(r.height // r.spawn_cell)
        cw, ch = r.width / ncx, r.height / ncy
        # As TankBattle.reset: cells per row, cell width and height, the jitter's spans, cells in all.
        self._spawn = np.array([ncx, cw, ch, cw - 2 * r.tank_radius, ch - 2 * r.tank_radius, ncx * ncy])

    def step(self, actions: Any, reward_terms: bool) -> StepInfo:
        """TankBattle.step, compiled: the same state changes and the same StepInfo."""
        s = self.state
        a = np.ascontiguousarray(actions, np.float64)  # one compiled variant (float32 would be a second: +10 s)
        if a.shape != self._act_shape:
            raise ValueError(f"actions must have shape {self._act_shape}, got {a.shape}")
        info32 = np.empty(self._info_shape, np.float32)
        died = np.empty(self._act_shape[:2], bool)
        kernels.step_1v1(self.params, reward_terms, a, self._arrays, self._scratch, info32, died)
        energy_delta, enemy_energy_delta, damage_dealt, enemy_distance, gun_bearing_abs, scores = info32
        if reward_terms:  # numpy's own arctan2 (a SIMD routine on AVX-512, not the C library's), then the bearing
            angle = np.arctan2(self._lead_y, self._lead_x)
            kernels.gun_bearing_1v1(angle, s.gun_heading, s.alive, gun_bearing_abs)
        return StepInfo(
            energy_delta=energy_delta,
            enemy_energy_delta=enemy_energy_delta,
            damage_dealt=damage_dealt,
            enemy_distance=enemy_distance,
            max_distance=self.max_distance,
            gun_bearing_abs=gun_bearing_abs,
            alive=s.alive.copy(),
            died=died,
            round_over=s.round_over.copy(),
            truncated=s.truncated.copy(),
            scores=scores,
            winner=s.winner.copy(),
        )

    def reset(self, mask: NDArray[np.bool_], draws: NDArray[np.float64]) -> None:
        """The state writes of TankBattle.reset in the matches of ``mask``, from its random draws (the caller's, from
        the battle's RNG, in TankBattle.reset's order: a key per spawn cell for each reset match, then a jitter pair
        per tank, then a heading per tank), read in place by the kernel, unsliced."""
        kernels.reset_1v1(self.params, self._spawn, mask, draws, self._arrays)

    def observe(self) -> NDArray[np.float32]:
        """TankBattle.observe, compiled: (M, 2, OBS_DIM) float32."""
        out = np.empty(self._obs_shape, np.float32)
        kernels.observe_1v1(self.params, self._tanks, self._work, self._key, out)
        return out


def libm_matches_numpy(n: int = 20_000, seed: int = 0) -> bool:
    """Whether the kernels' sin, cos, hypot and sqrt give numpy's float64 results, bit for bit, on this machine.

    The premise of the engines' bit-equality: the kernels call the C library, and so does numpy for these four
    (x86-64 Linux, numpy 1.26 and 2.4 as tested); a numpy that vectorizes them with its own routines (as it does
    arctan2 on AVX-512) would differ in the last bit now and then. Probed on ``n`` random angles in [0, 2 pi) and
    coordinates in the field's range.
    """
    rng = np.random.default_rng(seed)
    angle = rng.random(n) * 360.0 * DEG
    x, y = rng.uniform(-1000.0, 1000.0, (2, n))
    out = np.empty((4, n))
    kernels.libm_probe(angle, x, y, out)
    expected = (np.sin(angle), np.cos(angle), np.hypot(x, y), np.sqrt(x * x + y * y))
    return all(got.tobytes() == want.tobytes() for got, want in zip(out, expected, strict=True))
