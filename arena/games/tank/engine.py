"""Headless, deterministic, numpy-vectorized Robocode-style tank battles.

``M`` independent matches of ``T`` tanks each are stepped together: every piece of
state is a numpy array over ``[M, T]`` (tanks) or ``[M, B]`` (bullet slots), and one
:meth:`TankBattle.step` advances every match by one tick with a fixed number of
numpy calls (no Python loop over matches, tanks or bullets).

The rules follow Robocode / Robocode Tank Royale (see ``docs/arena.md`` for every
constant, where it comes from, the tick order and the observation/action tables).

Conventions (the Tank Royale ones, so a policy maps one-to-one onto a Tank Royale
bot intent): the origin is the bottom-left corner, x grows east, y grows north;
angles are in degrees in ``[0, 360)``, 0 = east (+x), 90 = north (+y), and a
positive turn is counter-clockwise (a *left* turn). Relative angles are in
``(-180, 180]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ACT_DIM",
    "OBS_DIM",
    "OBS_FIELDS",
    "BulletEvents",
    "StepEvents",
    "StepInfo",
    "TankBattle",
    "TankRules",
    "bullet_damage",
    "bullet_speed",
    "gun_heat_after_firing",
    "max_turn_rate",
    "next_velocity",
    "normalize_relative",
    "wall_damage",
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
ACT_DIM: int = 5
"""Action columns: target velocity, body turn, gun turn, fire power, radar turn (all in [-1, 1])."""

_TWO_PI = 2.0 * math.pi
_DEG = math.pi / 180.0
LEAD_POWER = 2.0
"""Bullet power the lead features assume (speed 14): a mid-range shot; the learner may fire any power."""
_HEAT_EPS = 1e-9  # gun heat below this is 0 (0.1-steps in floating point do not land on 0 exactly)
_OVERLAP_EPS = 1e-6  # the push-apart pass separates tanks closer than 2R - eps
_RAM_TOL = 0.05  # a collision needs an overlap of at least this (ignores push-apart residues in FFA jams)
_BOOL_RULES = frozenset({"bullet_collisions"})
_COMPACT_CLASHES = 48  # up to this many bullets in flight, bullet-bullet pairs are tested as one (K, K) block


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


# --- the formulas, shared by the engine, the scripted bots and the tests -------------------------


def bullet_speed(power: NDArray[np.float64] | float, rules: TankRules = TankRules()) -> NDArray[np.float64] | float:
    """Bullet speed for a fire power: 20 - 3 * power."""
    return rules.bullet_speed_base - rules.bullet_speed_factor * power


def bullet_damage(power: NDArray[np.float64] | float, rules: TankRules = TankRules()) -> NDArray[np.float64] | float:
    """Bullet damage for a fire power: 4 * power + 2 * max(power - 1, 0)."""
    return rules.bullet_damage_factor * power + rules.bullet_damage_bonus * np.maximum(np.subtract(power, 1.0), 0.0)


def gun_heat_after_firing(power: NDArray[np.float64] | float, rules: TankRules = TankRules()) -> NDArray[np.float64] | float:
    """Gun heat right after firing: 1 + power / 5."""
    return rules.gun_heat_base + rules.gun_heat_factor * power


def wall_damage(velocity: NDArray[np.float64] | float, rules: TankRules = TankRules()) -> NDArray[np.float64] | float:
    """Damage of hitting a wall at a velocity: max(|v| / 2 - 1, 0)."""
    return np.maximum(rules.wall_damage_factor * np.abs(velocity) - rules.wall_damage_offset, 0.0)


def max_turn_rate(velocity: NDArray[np.float64] | float, rules: TankRules = TankRules()) -> NDArray[np.float64] | float:
    """Body turn limit (deg/tick) at a velocity: 10 - 0.75 * |v|."""
    return rules.max_turn_rate - rules.turn_rate_speed_factor * np.minimum(np.abs(velocity), rules.max_speed)


def next_velocity(
    velocity: NDArray[np.float64], target: NDArray[np.float64], rules: TankRules = TankRules()
) -> NDArray[np.float64]:
    """Velocity after one tick of driving toward ``target`` (Tank Royale's ``calcNewBotSpeed``).

    Speeding up away from 0 (or starting from 0) changes the velocity by at most
    ``acceleration``; braking (moving toward 0 or reversing) by at most ``deceleration``.
    The result is clipped to ``[-max_speed, max_speed]``.
    """
    velocity = np.asarray(velocity, np.float64)
    target = np.clip(np.asarray(target, np.float64), -rules.max_speed, rules.max_speed)
    delta = target - velocity
    speeding_up = (velocity == 0) | ((velocity > 0) & (delta >= 0)) | ((velocity < 0) & (delta < 0))
    limit = np.where(speeding_up, rules.acceleration, rules.deceleration)
    return np.clip(velocity + np.clip(delta, -limit, limit), -rules.max_speed, rules.max_speed)


def normalize_relative(angle_deg: NDArray[np.float64]) -> NDArray[np.float64]:
    """Angle in degrees mapped to ``[-180, 180)``."""
    return (np.asarray(angle_deg) + 180.0) % 360.0 - 180.0


# --- step result ---------------------------------------------------------------------------------


@dataclass
class StepInfo:
    """What one :meth:`TankBattle.step` did, per match ``[M]`` and per tank ``[M, T]``."""

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


# --- the battle ----------------------------------------------------------------------------------


class TankBattle:
    """M independent matches of T tanks each, stepped together (numpy over [M, T]).

    Public state (read-only for callers; float64 unless noted):

    * tanks ``(M, T)``: ``x``, ``y``, ``heading``, ``velocity``, ``energy``,
      ``gun_heading``, ``radar_heading``, ``gun_heat``, ``alive`` (bool), ``scores``;
    * matches ``(M,)``: ``tick`` (ticks played this round), ``round`` (rounds started,
      1 after the first reset), ``inactive_ticks``, ``round_over``, ``truncated``,
      ``winner`` (int, -1 if none);
    * bullets ``(M, B)`` with ``B = rules.bullets_per_tank * T`` slots:
      ``bullet_active`` (bool), ``bullet_x``, ``bullet_y``, ``bullet_heading``,
      ``bullet_power``, ``bullet_speed``, ``bullet_owner`` (int tank index);
    * damage ledgers ``(M, T, T)`` [attacker, victim] for this round:
      ``bullet_damage_dealt``, ``ram_damage_dealt``.

    A finished match (``round_over``) is frozen: further steps change nothing in it
    until the caller resets it with ``reset(info.round_over)``.
    """

    def __init__(self, n_matches: int, n_tanks: int = 2, rules: TankRules = TankRules(), seed: int = 0) -> None:
        if not isinstance(n_matches, int | np.integer) or n_matches < 1:
            raise ValueError(f"n_matches must be a positive int, got {n_matches!r}")
        if not isinstance(n_tanks, int | np.integer) or not 2 <= n_tanks <= 8:
            raise ValueError(f"n_tanks must be an int in [2, 8], got {n_tanks!r}")
        if not isinstance(rules, TankRules):
            raise ValueError(f"rules must be a TankRules, got {type(rules).__name__}")
        if rules.spawn_cells < n_tanks:
            raise ValueError(f"the field has {rules.spawn_cells} start cells, too few for {n_tanks} tanks")
        M, T = int(n_matches), int(n_tanks)
        B = rules.bullets_per_tank * T
        self.n_matches, self.n_tanks, self.n_bullets = M, T, B
        self.rules = rules
        self.rng = np.random.default_rng(seed)
        self.max_distance = rules.max_distance

        f64 = np.float64
        self.x = np.zeros((M, T), f64)
        self.y = np.zeros((M, T), f64)
        self.heading = np.zeros((M, T), f64)
        self.velocity = np.zeros((M, T), f64)
        self.energy = np.zeros((M, T), f64)
        self.gun_heading = np.zeros((M, T), f64)
        self.radar_heading = np.zeros((M, T), f64)
        self.gun_heat = np.zeros((M, T), f64)
        self.alive = np.zeros((M, T), bool)
        self.scores = np.zeros((M, T), f64)
        self.bullet_damage_dealt = np.zeros((M, T, T), f64)
        self.ram_damage_dealt = np.zeros((M, T, T), f64)
        self.tick = np.zeros(M, np.int64)
        self.round = np.zeros(M, np.int64)
        self.inactive_ticks = np.zeros(M, np.int64)
        self.round_over = np.zeros(M, bool)
        self.truncated = np.zeros(M, bool)
        self.winner = np.full(M, -1, np.int64)

        self.bullet_active = np.zeros((M, B), bool)
        self.bullet_x = np.zeros((M, B), f64)
        self.bullet_y = np.zeros((M, B), f64)
        self.bullet_heading = np.zeros((M, B), f64)
        self.bullet_power = np.zeros((M, B), f64)
        self.bullet_speed = np.zeros((M, B), f64)
        self.bullet_owner = np.zeros((M, B), np.int64)
        self._bullet_dx = np.zeros((M, B), f64)  # unit direction (cos, sin) of bullet_heading
        self._bullet_dy = np.zeros((M, B), f64)

        # Fixed helpers.
        self._tidx = np.arange(T)
        self._eye = np.eye(T, dtype=bool)
        pi, pj = np.triu_indices(T, 1)
        self._pi, self._pj = pi, pj
        sym = np.zeros((len(pi), T))
        sym[np.arange(len(pi)), pi] = 1.0
        sym[np.arange(len(pi)), pj] = 1.0
        self._pair_sum = sym  # (P, T): pair -> both tanks
        signed = np.zeros((len(pi), T))
        signed[np.arange(len(pi)), pi] = -1.0
        signed[np.arange(len(pi)), pj] = 1.0
        self._pair_signed = signed  # (P, T): pair -> -i, +j
        self._other: NDArray[np.intp] = np.broadcast_to(
            np.arange(T, dtype=np.intp)[::-1], (M, T)
        ).copy()  # 1v1: the enemy's index

        # Tank Royale extensions (arena.royale sets them; the training loop leaves them alone and pays nothing).
        self.reward_terms = True
        """When False, ``step`` skips the reward geometry of StepInfo (``enemy_distance`` is then the diagonal and
        ``gun_bearing_abs`` 180 everywhere): for battles nobody learns from, like a Tank Royale match."""
        self.record_events = False
        """When True, every ``step`` also fills ``StepInfo.events`` (and ``last_events``): scans, collisions, bullets."""
        self.last_events: StepEvents | None = None
        """The events of the last step (``record_events``), for code that sees the battle but not the StepInfo."""
        self.turn_coupling: NDArray[np.float64] | None = None
        """(M, T, 3) or None: how much of the body turn the gun follows, and of the body and gun turns the radar
        follows (Tank Royale's ``adjustGunForBodyTurn``/``adjustRadar...`` flags); None = (1, 1, 1), fully carried."""
        self.rescan: NDArray[np.bool_] | None = None
        """(M, T) or None: tanks that scan this tick although they neither move nor turn (Tank Royale ``rescan``)."""
        self._ev_fired: BulletEvents | None = None
        self._ev_rams: tuple[NDArray[np.intp], NDArray[np.bool_], NDArray[np.bool_]] | None = None
        self._ev_bullets: tuple[BulletEvents, BulletEvents, tuple[BulletEvents, BulletEvents]] | None = None
        self._ev_pairs: tuple[BulletEvents, BulletEvents] | None = None
        self.reset()

    # --- reset ----------------------------------------------------------------------------------

    def reset(self, matches: NDArray[np.bool_] | None = None) -> None:
        """Start new rounds in the selected matches (all when ``matches`` is None).

        Tanks get random non-overlapping positions (one per random cell of a grid of
        ``spawn_cell`` cells, as Tank Royale), random headings (gun and radar start
        aligned with the body), full energy, zero velocity and gun heat
        ``start_gun_heat``; bullets, scores and ledgers are cleared.
        """
        r = self.rules
        M, T = self.n_matches, self.n_tanks
        if matches is None:
            idx = np.arange(M)
        else:
            mask = np.asarray(matches, bool)
            if mask.shape != (M,):
                raise ValueError(f"matches must have shape ({M},), got {mask.shape}")
            idx = np.flatnonzero(mask)
        k = len(idx)
        if k == 0:
            return
        ncx = int(r.width // r.spawn_cell)
        ncy = int(r.height // r.spawn_cell)
        cw, ch = r.width / ncx, r.height / ncy
        cells = np.argsort(self.rng.random((k, ncx * ncy)), axis=1)[:, :T]
        jitter = self.rng.random((k, T, 2))
        heading = self.rng.random((k, T)) * 360.0
        rad = r.tank_radius
        self.x[idx] = (cells % ncx) * cw + rad + jitter[..., 0] * (cw - 2 * rad)
        self.y[idx] = (cells // ncx) * ch + rad + jitter[..., 1] * (ch - 2 * rad)
        self.heading[idx] = heading
        self.gun_heading[idx] = heading
        self.radar_heading[idx] = heading
        self.velocity[idx] = 0.0
        self.energy[idx] = r.start_energy
        self.gun_heat[idx] = r.start_gun_heat
        self.alive[idx] = True
        self.scores[idx] = 0.0
        self.bullet_damage_dealt[idx] = 0.0
        self.ram_damage_dealt[idx] = 0.0
        self.tick[idx] = 0
        self.round[idx] += 1
        self.inactive_ticks[idx] = 0
        self.round_over[idx] = False
        self.truncated[idx] = False
        self.winner[idx] = -1
        self.bullet_active[idx] = False

    # --- geometry helpers -----------------------------------------------------------------------

    def _lead(
        self, has: NDArray[np.bool_], dx: NDArray[np.float64], dy: NDArray[np.float64], j: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Unit vector (0 without an enemy) to where a power-2 bullet meets the nearest enemy
        if it keeps its heading and speed (linear targeting, clipped to the field).

        Aiming head-on misses any moving tank beyond close range; this is the point a gun
        must lead to. It feeds the observation and the aim shaping term (``gun_bearing_abs``).
        """
        r = self.rules
        if self.n_tanks == 2:
            e_heading, e_vel = self.heading[:, ::-1], self.velocity[:, ::-1]
        else:
            e_heading, e_vel = np.take_along_axis(self.heading, j, 1), np.take_along_axis(self.velocity, j, 1)
        eh = e_heading * _DEG
        vx, vy = e_vel * np.cos(eh), e_vel * np.sin(eh)
        speed = r.bullet_speed_base - r.bullet_speed_factor * LEAD_POWER
        rad = r.tank_radius
        ex, ey = self.x + dx, self.y + dy
        px, py = ex, ey
        for _ in range(3):  # fixed-point iteration on the flight time, as Robocode's linear targeting does
            t = np.hypot(px - self.x, py - self.y) / speed + 1.0
            px = np.clip(ex + vx * t, rad, r.width - rad)
            py = np.clip(ey + vy * t, rad, r.height - rad)
        lx, ly = px - self.x, py - self.y
        inv = has / np.maximum(np.hypot(lx, ly), 1e-12)
        return lx * inv, ly * inv

    def _nearest(
        self,
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]:
        """Nearest living enemy of every tank: (has, dx, dy, dist, index)."""
        T = self.n_tanks
        has: NDArray[np.bool_]
        j: NDArray[np.intp]
        if T == 2:
            j = self._other
            has = self.alive[:, ::-1]
            dx = self.x[:, ::-1] - self.x
            dy = self.y[:, ::-1] - self.y
        else:
            ddx = self.x[:, None, :] - self.x[:, :, None]  # [m, i, j] = x_j - x_i
            ddy = self.y[:, None, :] - self.y[:, :, None]
            valid = self.alive[:, None, :] & ~self._eye
            d2 = np.where(valid, ddx * ddx + ddy * ddy, np.inf)
            j = np.argmin(d2, axis=2)
            has = np.asarray(valid.any(axis=2))
            dx = np.take_along_axis(ddx, j[..., None], 2)[..., 0]
            dy = np.take_along_axis(ddy, j[..., None], 2)[..., 0]
        dist = np.sqrt(dx * dx + dy * dy)
        return has, dx, dy, dist, j

    # --- observation ----------------------------------------------------------------------------

    def observe(self) -> NDArray[np.float32]:
        """(M, T, OBS_DIM) float32: every tank's own view (see OBS_FIELDS and docs/arena.md).

        Relative angles are computed with the angle-difference identities from the unit
        vectors of the absolute directions (4 trig calls instead of 11).
        """
        r = self.rules
        M, T = self.n_matches, self.n_tanks
        has, dx, dy, dist, j = self._nearest()
        buf = np.empty((OBS_DIM, M, T))
        h = self.heading * _DEG
        sh, ch = np.sin(h), np.cos(h)
        g = self.gun_heading * _DEG
        sg, cg = np.sin(g), np.cos(g)
        buf[0] = self.x * (2.0 / r.width) - 1.0
        buf[1] = self.y * (2.0 / r.height) - 1.0
        buf[2] = sh
        buf[3] = ch
        buf[4] = self.velocity * (1.0 / r.max_speed)
        buf[5] = self.energy * (1.0 / r.start_energy)
        buf[6] = sg * ch - cg * sh  # sin(gun - heading)
        buf[7] = cg * ch + sg * sh
        buf[8] = self.gun_heat * (1.0 / r.start_gun_heat)
        # Enemy part: the unit vector to the enemy is 0 where no enemy is alive, which zeroes the angles.
        inv_d = has / np.maximum(dist, 1e-12)
        ux, uy = dx * inv_d, dy * inv_d
        buf[9] = uy * ch - ux * sh  # sin(enemy direction - heading)
        buf[10] = ux * ch + uy * sh
        buf[11] = dist * (has / self.max_distance)
        if T == 2:
            e_energy, e_vel = self.energy[:, ::-1], self.velocity[:, ::-1]
            seh, ceh = sh[:, ::-1], ch[:, ::-1]
        else:
            e_energy = np.take_along_axis(self.energy, j, 1)
            e_vel = np.take_along_axis(self.velocity, j, 1)
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
        east = r.width - rad - self.x
        west = self.x - rad
        north = r.height - rad - self.y
        south = self.y - rad
        inv_c = 1.0 / np.maximum(np.abs(ch), 1e-9)
        inv_s = 1.0 / np.maximum(np.abs(sh), 1e-9)
        pc, ps = ch >= 0.0, sh >= 0.0
        ec, wc = np.where(pc, east, west) * inv_c, np.where(pc, west, east) * inv_c  # along +-heading, x part
        ns, ss = np.where(ps, north, south) * inv_s, np.where(ps, south, north) * inv_s  # along +-heading, y part
        es, ws = np.where(ps, west, east) * inv_s, np.where(ps, east, west) * inv_s  # along left/right, x part
        nc, sc = np.where(pc, north, south) * inv_c, np.where(pc, south, north) * inv_c  # along left/right, y part
        inv = 1.0 / self.max_distance
        np.minimum(np.minimum(ec, ns) * inv, 1.0, out=buf[18])
        np.minimum(np.minimum(es, nc) * inv, 1.0, out=buf[19])
        np.minimum(np.minimum(wc, ss) * inv, 1.0, out=buf[20])
        np.minimum(np.minimum(ws, sc) * inv, 1.0, out=buf[21])
        n_alive = self.alive.sum(axis=1, keepdims=True)
        buf[22] = (n_alive - self.alive) * (1.0 / 7.0)
        lux, luy = self._lead(has, dx, dy, j)
        buf[23] = luy * cg - lux * sg  # sin(lead direction - gun heading)
        buf[24] = lux * cg + luy * sg
        return buf.transpose(1, 2, 0).astype(np.float32)

    # --- step -----------------------------------------------------------------------------------

    def step(self, actions: NDArray[np.floating[Any]]) -> StepInfo:
        """Advance every running match by one tick. ``actions`` is (M, T, ACT_DIM), clipped to [-1, 1].

        Dead tanks' actions and finished matches are ignored. See docs/arena.md for the
        tick order. The caller resets finished matches itself (``reset(info.round_over)``).
        """
        r = self.rules
        M, T = self.n_matches, self.n_tanks
        a = np.array(actions, np.float64)  # a private copy
        if a.shape != (M, T, ACT_DIM):
            raise ValueError(f"actions must have shape ({M}, {T}, {ACT_DIM}), got {a.shape}")
        nan = np.isnan(a)
        if nan.any():
            a[nan] = 0.0
        np.minimum(np.maximum(a, -1.0, out=a), 1.0, out=a)
        running = ~self.round_over
        all_running = not self.round_over.any()
        live = self.alive if all_running else self.alive & running[:, None]  # tanks that act this tick
        energy = self.energy
        energy0 = energy.copy()
        self._score_delta = np.zeros((M, T))
        self._dealt_delta = np.zeros((M, T))  # damage each tank dealt this tick (bullets and rams)

        # 1. Guns: a cold gun fires (if asked, the energy allows it and a slot is free), a hot one cools.
        a_fire = a[..., 3]
        power = r.min_bullet_power + a_fire * (r.max_bullet_power - r.min_bullet_power)
        heat = self.gun_heat
        cold = heat <= 0.0
        heat = heat - r.gun_cooling_rate * (live & ~cold)
        heat = np.where(heat < _HEAT_EPS, 0.0, heat)
        want = live & cold & (a_fire > 0.0) & (energy > power)
        if want.any():
            fired = self._fire(want, power)
            heat = np.where(fired, r.gun_heat_base + r.gun_heat_factor * power, heat)
            energy -= power * fired
        self.gun_heat = heat

        # 2. Drive: velocity toward the target, turns (gun carried by the body, radar by the gun), move.
        v_old = self.velocity
        delta = a[..., 0] * r.max_speed - v_old
        speeding_up = (v_old == 0.0) | ((v_old > 0.0) == (delta >= 0.0))
        lim = np.where(speeding_up, r.acceleration, r.deceleration)
        v = v_old + np.minimum(np.maximum(delta, -lim), lim)
        v = np.where(live, np.minimum(np.maximum(v, -r.max_speed), r.max_speed), v_old)
        body = a[..., 1] * (r.max_turn_rate - r.turn_rate_speed_factor * np.abs(v))
        gun = a[..., 2] * r.max_gun_turn_rate
        radar = a[..., 4] * r.max_radar_turn_rate
        if not live.all():
            body *= live
            gun *= live
            radar *= live
        radar_old = self.radar_heading
        coupling = self.turn_coupling
        if coupling is None:  # the gun rides on the body, the radar on the gun
            gun_abs = gun + body
            self.radar_heading = np.remainder(radar_old + gun_abs + radar, 360.0)
        else:  # Tank Royale's adjust flags: the gun / radar do not (fully) follow what carries them
            c = np.asarray(coupling, np.float64)
            gun_abs = gun + body * c[..., 0]
            self.radar_heading = np.remainder(radar_old + (radar + body * c[..., 1] + gun * c[..., 2]), 360.0)
        self.heading = np.remainder(self.heading + body, 360.0)
        self.gun_heading = np.remainder(self.gun_heading + gun_abs, 360.0)
        h = self.heading * _DEG
        cos_h, sin_h = np.cos(h), np.sin(h)
        vm = v if all_running else v * running[:, None]
        x_old, y_old = self.x, self.y
        x = x_old + vm * cos_h
        y = y_old + vm * sin_h

        # 3. Walls: clamp inside the field, damage by the impact velocity, stop.
        rad = r.tank_radius
        xc = np.minimum(np.maximum(x, rad), r.width - rad)
        yc = np.minimum(np.maximum(y, rad), r.height - rad)
        hit_wall = (xc != x) | (yc != y)
        if hit_wall.any():
            energy -= np.maximum(r.wall_damage_factor * np.abs(v) - r.wall_damage_offset, 0.0) * hit_wall
            v = np.where(hit_wall, 0.0, v)
        x, y = xc, yc
        alive_now = live & (energy > 0.0)

        # 4. Rams: colliding pairs both take ram_damage and go back to where they were;
        #    a tank moving toward the other (ramming) stops and scores the ram.
        pi, pj = self._pi, self._pj
        dx = x[:, pj] - x[:, pi]
        dy = y[:, pj] - y[:, pi]
        coll = (dx * dx + dy * dy < (2.0 * rad - _RAM_TOL) ** 2) & alive_now[:, pi] & alive_now[:, pj]
        bumped = coll.any(axis=1)
        rows = np.flatnonzero(bumped)
        if rows.size:
            x, y, v, alive_now = self._rams(rows, coll[rows], dx[rows], dy[rows], x, y, x_old, y_old, v, h, alive_now)
        rec = self.record_events
        if rec:
            scanned = self._scan(x, y, x_old, y_old, body, gun_abs, radar_old, live)

        # 5. Bullets: move along their path; the first living non-owner tank the path crosses is hit;
        #    bullets whose end point leaves the field are removed.
        act_b = self.bullet_active if all_running else self.bullet_active & running[:, None]
        fi = np.flatnonzero(act_b)
        hit_match = None
        if fi.size:
            hit_match = self._bullets(fi, x, y, alive_now)
            if hit_match is not None:
                alive_now = alive_now & (energy > 0.0)

        # 6. Inactivity: any bullet hit or ram resets the match's counter; from inactivity_ticks on, zap.
        inactive = self.inactive_ticks + running
        damaged = bumped if hit_match is None else bumped | hit_match
        inactive[damaged] = 0
        self.inactive_ticks = inactive
        zap_m = inactive >= r.inactivity_ticks
        if zap_m.any():
            zap = zap_m[:, None] & alive_now
            energy -= r.inactivity_zap * zap
            alive_now = alive_now & (energy > 0.0)

        # 7. Deaths, scores, round end.
        died = live & ~alive_now
        self.x, self.y = x, y
        if died.any():
            v = np.where(died, 0.0, v)
            np.maximum(energy, 0.0, out=energy)
            scores_d = self._score_delta
            scores_d += r.score_survival * died.sum(axis=1, keepdims=True) * alive_now
        self.velocity = v
        self.alive = alive_now if all_running else np.where(running[:, None], alive_now, self.alive)
        self.scores += self._score_delta
        self.tick += running
        n_alive = self.alive.sum(axis=1)
        terminal = running & (n_alive <= 1)
        trunc = running & ~terminal & (self.tick >= r.max_ticks)
        solo = terminal & (n_alive == 1)
        if solo.any():
            self.scores += (r.score_last_survivor * (T - 1)) * (solo[:, None] & self.alive)
            self.winner = np.where(solo, np.argmax(self.alive, axis=1), self.winner)
        self.round_over |= terminal | trunc
        self.truncated |= trunc

        # Step info.
        d_energy = energy - energy0
        if self.reward_terms:
            has, ndx, ndy, dist, nj = self._nearest()
            lux, luy = self._lead(has, ndx, ndy, nj)
            gb = np.abs(normalize_relative(np.degrees(np.arctan2(luy, lux)) - self.gun_heading))
            enemy_distance = np.where(has, dist, self.max_distance).astype(np.float32)
            gun_bearing_abs = np.where(has, gb, 180.0).astype(np.float32)
        else:  # nobody learns from this battle (a Tank Royale match): skip the geometry
            enemy_distance = np.full((M, T), self.max_distance, np.float32)
            gun_bearing_abs = np.full((M, T), 180.0, np.float32)
        events = None
        if rec:
            events = self._events(body, gun, radar, radar_old, hit_wall, scanned)
        self.last_events = events
        return StepInfo(
            energy_delta=d_energy.astype(np.float32),
            enemy_energy_delta=(d_energy.sum(axis=1, keepdims=True) - d_energy).astype(np.float32),
            damage_dealt=self._dealt_delta.astype(np.float32),
            enemy_distance=enemy_distance,
            max_distance=float(self.max_distance),
            gun_bearing_abs=gun_bearing_abs,
            alive=self.alive.copy(),
            died=died,
            round_over=self.round_over.copy(),
            truncated=self.truncated.copy(),
            scores=self.scores.astype(np.float32),
            winner=self.winner.copy(),
            events=events,
        )

    def _events(
        self,
        body: NDArray[np.float64],
        gun: NDArray[np.float64],
        radar: NDArray[np.float64],
        radar_old: NDArray[np.float64],
        hit_wall: NDArray[np.bool_],
        scanned: NDArray[np.bool_],
    ) -> StepEvents:
        """Collect the records the phases left behind (``record_events`` only) into one StepEvents."""
        M, T = self.n_matches, self.n_tanks
        collided = np.zeros((M, T, T), bool)
        rammed = np.zeros((M, T, T), bool)
        if self._ev_rams is not None:
            rows, coll, rams = self._ev_rams
            collided[rows[:, None], self._pi, self._pj] = coll
            collided[rows[:, None], self._pj, self._pi] = coll
            rammed[rows] = rams
        fired = self._ev_fired or BulletEvents.empty()
        hits, walls, pairs = self._ev_bullets or (BulletEvents.empty(), BulletEvents.empty(), (BulletEvents.empty(),) * 2)
        self._ev_fired = self._ev_rams = self._ev_bullets = None
        return StepEvents(
            body_turn=body,
            gun_turn=gun,
            radar_turn=radar,
            radar_sweep=normalize_relative(self.radar_heading - radar_old),
            hit_wall=hit_wall.copy(),
            collided=collided,
            rammed=rammed,
            scanned=scanned,
            fired=fired,
            bullet_hits=hits,
            bullet_walls=walls,
            bullet_bullets=pairs,
        )

    def _scan(
        self,
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        x_old: NDArray[np.float64],
        y_old: NDArray[np.float64],
        body: NDArray[np.float64],
        gun_abs: NDArray[np.float64],
        radar_old: NDArray[np.float64],
        live: NDArray[np.bool_],
    ) -> NDArray[np.bool_]:
        """(M, T, T) [scanner, scanned]: which tanks each radar swept over this tick (Tank Royale's scan).

        The radar covers the arc from its old to its new heading, out to ``radar_range``; a tank
        is scanned when its circle touches that sector: its centre is within range + radius and
        its angular extent (asin(radius / distance)) overlaps the arc. A zero arc is a line.
        As in Tank Royale, a tank scans only when it moved or turned something this tick, or
        asked to ``rescan``.
        """
        r = self.rules
        sweep = normalize_relative(self.radar_heading - radar_old)
        moving = (x != x_old) | (y != y_old) | (body != 0.0) | (gun_abs != 0.0) | (sweep != 0.0)
        if self.rescan is not None:
            moving = moving | self.rescan
        dx = x[:, None, :] - x[:, :, None]  # [m, i, j] = x_j - x_i
        dy = y[:, None, :] - y[:, :, None]
        dist = np.sqrt(dx * dx + dy * dy)
        centre = self.radar_heading - 0.5 * sweep  # the middle of the swept arc
        bearing = np.degrees(np.arctan2(dy, dx))
        off = np.abs(normalize_relative(bearing - centre[:, :, None]))
        half = np.degrees(np.arcsin(np.minimum(r.tank_radius / np.maximum(dist, 1e-9), 1.0)))
        seen = (off <= 0.5 * np.abs(sweep)[:, :, None] + half) & (dist - r.tank_radius <= r.radar_range)
        return np.asarray(seen & (live & moving)[:, :, None] & live[:, None, :] & ~self._eye)

    def _fire(self, want: NDArray[np.bool_], power: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Put a bullet in a free slot for every tank in ``want`` (tank-index order); returns who fired."""
        B = self.n_bullets
        rows = np.flatnonzero(want.any(axis=1))
        w = want[rows]
        active = self.bullet_active[rows]
        rank = np.cumsum(w, axis=1) - 1
        ok = w & (rank < (B - active.sum(axis=1))[:, None])
        order = np.argsort(active, axis=1, kind="stable")  # free slots first, in slot order
        slot = np.take_along_axis(order, np.minimum(rank, B - 1), axis=1)
        ri, ti = np.nonzero(ok)
        mi = rows[ri]
        flat = mi * B + slot[ri, ti]
        p = power[mi, ti]
        g = self.gun_heading[mi, ti]
        gr = g * _DEG
        self.bullet_active.flat[flat] = True
        self.bullet_x.flat[flat] = self.x[mi, ti]
        self.bullet_y.flat[flat] = self.y[mi, ti]
        self.bullet_heading.flat[flat] = g
        self.bullet_power.flat[flat] = p
        self.bullet_speed.flat[flat] = self.rules.bullet_speed_base - self.rules.bullet_speed_factor * p
        self.bullet_owner.flat[flat] = ti
        self._bullet_dx.flat[flat] = np.cos(gr)
        self._bullet_dy.flat[flat] = np.sin(gr)
        if self.record_events:
            n = len(mi)
            self._ev_fired = BulletEvents(
                mi, slot[ri, ti], ti, p, self.x[mi, ti], self.y[mi, ti], g, np.full(n, -1, np.intp), np.zeros(n)
            )
        fired = np.zeros_like(want)
        fired[mi, ti] = True
        return fired

    def _rams(
        self,
        rows: NDArray[np.int64],
        coll: NDArray[np.bool_],
        dx: NDArray[np.float64],
        dy: NDArray[np.float64],
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        x_old: NDArray[np.float64],
        y_old: NDArray[np.float64],
        v: NDArray[np.float64],
        h: NDArray[np.float64],
        alive_now: NDArray[np.bool_],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Resolve the collisions of the matches ``rows`` (pair arrays already restricted to them)."""
        r = self.rules
        T = self.n_tanks
        pi, pj = self._pi, self._pj
        vr, hr = v[rows], h[rows]
        cos_h, sin_h = np.cos(hr), np.sin(hr)
        ram_i = coll & (vr[:, pi] * (dx * cos_h[:, pi] + dy * sin_h[:, pi]) > 0.0)
        ram_j = coll & (vr[:, pj] * (-dx * cos_h[:, pj] - dy * sin_h[:, pj]) > 0.0)
        rams = np.zeros((len(rows), T, T), bool)  # [attacker, victim]
        rams[:, pi, pj] = ram_i
        rams[:, pj, pi] = ram_j
        if self.record_events:
            self._ev_rams = (rows, coll, rams)
        n_coll = coll.astype(np.float64) @ self._pair_sum  # (R, T) collisions per tank
        e_before = self.energy[rows]
        e_after = e_before - r.ram_damage * n_coll
        self.energy[rows] = e_after
        dealt = rams * np.minimum(r.ram_damage, np.maximum(e_before, 0.0))[:, None, :]
        ledger = self.ram_damage_dealt[rows] + dealt
        self.ram_damage_dealt[rows] = ledger
        alive_r = alive_now[rows]
        killed = alive_r & (e_after <= 0.0)
        dealt_by = dealt.sum(axis=2)
        self._dealt_delta[rows] += dealt_by
        sd = r.score_ram_damage * dealt_by
        if killed.any():
            sd += r.bonus_ram_kill * (rams * killed[:, None, :] * ledger).sum(axis=2)
        self._score_delta[rows] += sd
        involved = n_coll > 0
        x = x.copy()
        y = y.copy()
        v = v.copy()
        alive_now = alive_now.copy()
        x[rows] = np.where(involved, x_old[rows], x[rows])
        y[rows] = np.where(involved, y_old[rows], y[rows])
        v[rows] = np.where(rams.any(axis=2), 0.0, vr)
        alive_now[rows] = alive_r & ~killed
        x[rows], y[rows] = self._separate(x[rows], y[rows], alive_now[rows])
        return x, y, v, alive_now

    def _bullets(
        self, fi: NDArray[np.int64], x: NDArray[np.float64], y: NDArray[np.float64], alive_now: NDArray[np.bool_]
    ) -> NDArray[np.bool_] | None:
        """Move the active bullets ``fi`` (flat indices into (M, B)), apply hits; returns matches with a hit (or None)."""
        r = self.rules
        B, T = self.n_bullets, self.n_tanks
        rad = r.tank_radius
        m = fi // B
        bx = self.bullet_x.ravel()[fi]
        by = self.bullet_y.ravel()[fi]
        bdx = self._bullet_dx.ravel()[fi]
        bdy = self._bullet_dy.ravel()[fi]
        sp = self.bullet_speed.ravel()[fi]
        cx = x[m] - bx[:, None]  # (K, T) from the bullet to every tank
        cy = y[m] - by[:, None]
        s = np.minimum(np.maximum(cx * bdx[:, None] + cy * bdy[:, None], 0.0), sp[:, None])  # closest point on path
        qx = cx - s * bdx[:, None]
        qy = cy - s * bdy[:, None]
        hitp = (qx * qx + qy * qy <= rad * rad) & alive_now[m] & (self.bullet_owner.ravel()[fi, None] != self._tidx)
        ex = bx + bdx * sp
        ey = by + bdy * sp
        clash = None
        if r.bullet_collisions and fi.size > 1:
            clash = self._bullet_clashes(fi, m, bx, by, ex, ey)
            if clash is not None:
                hitp &= ~clash[:, None]  # bullets that met a bullet hit nothing else
        hit_k = hitp.any(axis=1)
        hit_match = None
        out = (ex <= 0.0) | (ex >= r.width) | (ey <= 0.0) | (ey >= r.height)
        gone = out if clash is None else out | clash
        onehot = None
        if hit_k.any():
            hit_match = np.zeros(self.n_matches, bool)
            kh = np.flatnonzero(hit_k)
            rows, inv = np.unique(m[kh], return_inverse=True)
            hit_match[rows] = True
            # Dense (rows, B, T) view of the hits of those matches, resolved in slot order.
            dense_hit = np.zeros((len(rows), B, T), bool)
            dense_s = np.zeros((len(rows), B, T))
            slots = fi[kh] - m[kh] * B
            dense_hit[inv, slots] = hitp[kh]
            dense_s[inv, slots] = s[kh]
            onehot, dmg = self._bullet_hits(rows, dense_hit, dense_s)
            gone |= hit_k
        if self.record_events:
            self._record_bullets(
                fi, m, ex, ey, out & ~hit_k, onehot, dmg if onehot is not None else None, rows if onehot is not None else None
            )
        keep = fi[~gone]
        self.bullet_x.ravel()[keep] = ex[~gone]
        self.bullet_y.ravel()[keep] = ey[~gone]
        self.bullet_active.ravel()[fi[gone]] = False
        return hit_match

    def _bullet_clashes(
        self,
        fi: NDArray[np.int64],
        m: NDArray[np.int64],
        bx: NDArray[np.float64],
        by: NDArray[np.float64],
        ex: NDArray[np.float64],
        ey: NDArray[np.float64],
    ) -> NDArray[np.bool_] | None:
        """Bullets (of ``fi``) whose path segments cross another bullet's this tick; None if none do.

        Only matches with two or more bullets in flight are looked at, as dense (R, B, B) pairs;
        the pairs are recorded for ``record_events``.
        """
        M, B = self.n_matches, self.n_bullets
        if fi.size <= _COMPACT_CLASHES:
            return self._bullet_clashes_compact(fi, m, bx, by, ex, ey)
        count = np.bincount(m, minlength=M)
        rows = np.flatnonzero(count >= 2)
        if rows.size == 0:
            return None
        pos = np.full(M, -1, np.intp)
        pos[rows] = np.arange(len(rows))
        ks = np.flatnonzero(pos[m] >= 0)
        ri, slot = pos[m[ks]], fi[ks] - m[ks] * B
        shape = (len(rows), B)
        valid = np.zeros(shape, bool)
        valid[ri, slot] = True
        sx, sy, dx, dy = (np.zeros(shape) for _ in range(4))
        sx[ri, slot], sy[ri, slot] = bx[ks], by[ks]
        dx[ri, slot], dy[ri, slot] = ex[ks] - bx[ks], ey[ks] - by[ks]
        # Segments p + t d1 and q + u d2 cross when t and u are both in [0, 1].
        qx = sx[:, None, :] - sx[:, :, None]  # [r, a, b] = start_b - start_a
        qy = sy[:, None, :] - sy[:, :, None]
        denom = dx[:, :, None] * dy[:, None, :] - dy[:, :, None] * dx[:, None, :]
        safe = np.where(denom == 0.0, 1.0, denom)
        t = (qx * dy[:, None, :] - qy * dx[:, None, :]) / safe
        u = (qx * dy[:, :, None] - qy * dx[:, :, None]) / safe
        upper = np.triu(np.ones((B, B), bool), 1)
        cross = (denom != 0.0) & (t >= 0.0) & (t <= 1.0) & (u >= 0.0) & (u <= 1.0) & upper
        cross &= valid[:, :, None] & valid[:, None, :]
        if not cross.any():
            return None
        dense = cross.any(axis=2) | cross.any(axis=1)
        if self.record_events:
            pr, pa, pb = np.nonzero(cross)
            pm = rows[pr]
            self._ev_pairs = (
                self._bullet_records(pm, pa, sx[pr, pa] + dx[pr, pa], sy[pr, pa] + dy[pr, pa]),
                self._bullet_records(pm, pb, sx[pr, pb] + dx[pr, pb], sy[pr, pb] + dy[pr, pb]),
            )
        return np.asarray(dense[pos[m], fi - m * B] & (pos[m] >= 0))

    def _bullet_clashes_compact(
        self,
        fi: NDArray[np.int64],
        m: NDArray[np.int64],
        bx: NDArray[np.float64],
        by: NDArray[np.float64],
        ex: NDArray[np.float64],
        ey: NDArray[np.float64],
    ) -> NDArray[np.bool_] | None:
        """:meth:`_bullet_clashes` for few bullets in flight: all (K, K) pairs of the list at once (same match only)."""
        B = self.n_bullets
        dx, dy = ex - bx, ey - by
        qx = bx[None, :] - bx[:, None]  # [a, b] = start_b - start_a
        qy = by[None, :] - by[:, None]
        denom = dx[:, None] * dy[None, :] - dy[:, None] * dx[None, :]
        safe = np.where(denom == 0.0, 1.0, denom)
        t = (qx * dy[None, :] - qy * dx[None, :]) / safe
        u = (qx * dy[:, None] - qy * dx[:, None]) / safe
        k = len(fi)
        cross = (denom != 0.0) & (t >= 0.0) & (t <= 1.0) & (u >= 0.0) & (u <= 1.0) & (m[:, None] == m[None, :])
        cross &= np.triu(np.ones((k, k), bool), 1)
        if not cross.any():
            return None
        if self.record_events:
            pa, pb = np.nonzero(cross)
            pm = m[pa]
            self._ev_pairs = (
                self._bullet_records(pm, fi[pa] - pm * B, ex[pa], ey[pa]),
                self._bullet_records(pm, fi[pb] - pm * B, ex[pb], ey[pb]),
            )
        return np.asarray(cross.any(axis=1) | cross.any(axis=0))

    def _bullet_records(
        self, match: NDArray[np.intp], slot: NDArray[np.intp], x: NDArray[np.float64], y: NDArray[np.float64]
    ) -> BulletEvents:
        """BulletEvents for the bullets in ``(match, slot)`` at positions ``x, y`` (no victim)."""
        n = len(match)
        return BulletEvents(
            match,
            slot,
            self.bullet_owner[match, slot].astype(np.intp),
            self.bullet_power[match, slot],
            x,
            y,
            self.bullet_heading[match, slot],
            np.full(n, -1, np.intp),
            np.zeros(n),
        )

    def _record_bullets(
        self,
        fi: NDArray[np.int64],
        m: NDArray[np.int64],
        ex: NDArray[np.float64],
        ey: NDArray[np.float64],
        wall: NDArray[np.bool_],
        onehot: NDArray[np.bool_] | None,
        dmg: NDArray[np.float64] | None,
        rows: NDArray[np.int64] | None,
    ) -> None:
        """Keep this tick's bullet hits, wall hits and bullet-bullet pairs for ``StepEvents``."""
        B = self.n_bullets
        kw = np.flatnonzero(wall)
        walls = self._bullet_records(m[kw], fi[kw] - m[kw] * B, ex[kw], ey[kw])
        hits = BulletEvents.empty()
        if onehot is not None and rows is not None and dmg is not None:
            hr, hb, ht = np.nonzero(onehot)
            hm = rows[hr]
            k = np.searchsorted(fi, hm * B + hb)
            hits = self._bullet_records(hm, hb, ex[k], ey[k])
            hits.victim = ht.astype(np.intp)
            hits.damage = dmg[hr, hb]
        pairs = self._ev_pairs or (BulletEvents.empty(), BulletEvents.empty())
        self._ev_pairs = None
        self._ev_bullets = (hits, walls, pairs)

    def _bullet_hits(
        self, rows: NDArray[np.int64], hitp: NDArray[np.bool_], s: NDArray[np.float64]
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
        """Apply the bullet hits ``hitp`` (R, B, T) of the matches ``rows``, in slot order.

        Returns the hits as applied (R, B, T) (the first tank on each bullet's path) and each bullet's damage (R, B).
        """
        r = self.rules
        T = self.n_tanks
        if T == 2:
            onehot = hitp  # a bullet can only hit the one non-owner
        else:
            first = np.argmin(np.where(hitp, s, np.inf), axis=2)
            onehot = (first[..., None] == self._tidx) & hitp
        hit_b = np.asarray(onehot.any(axis=2))
        p = self.bullet_power[rows]
        dmg = r.bullet_damage_factor * p + r.bullet_damage_bonus * np.maximum(p - 1.0, 0.0)
        hit_dmg = onehot * dmg[..., None]  # (R, B, T)
        cum = np.cumsum(hit_dmg, axis=1)
        energy = self.energy[rows]
        before = energy[:, None, :] - (cum - hit_dmg)  # the victim's energy before this bullet
        scored = np.where(onehot, np.maximum(np.minimum(dmg[..., None], before), 0.0), 0.0)
        killing = onehot & (before > 0.0) & (before - dmg[..., None] <= 0.0)
        owner = (self.bullet_owner[rows][..., None] == self._tidx) & hit_b[..., None]  # (R, B, T) shooter
        owner_t = owner.transpose(0, 2, 1).astype(np.float64)
        dealt = owner_t @ scored  # [attacker, victim]
        ledger = self.bullet_damage_dealt[rows] + dealt
        self.bullet_damage_dealt[rows] = ledger
        dealt_by = dealt.sum(axis=2)
        self._dealt_delta[rows] += dealt_by
        sd = r.score_bullet_damage * dealt_by
        if killing.any():
            kills = (owner_t @ killing.astype(np.float64)) > 0.0
            sd += r.bonus_bullet_kill * (kills * ledger).sum(axis=2)
        self._score_delta[rows] += sd
        energy -= hit_dmg.sum(axis=1)
        # Energy return to the shooters still alive after the damage.
        ret = (owner * (r.bullet_energy_return * p)[..., None]).sum(axis=1)
        energy += np.where(self.alive[rows] & (energy > 0.0), ret, 0.0)
        self.energy[rows] = energy
        return onehot, dmg

    def _separate(
        self, x: NDArray[np.float64], y: NDArray[np.float64], alive: NDArray[np.bool_]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """After a ram: push still-overlapping living pairs apart (half each), clamp to the field; up to 10 passes.

        Needed in free-for-all only: a tank sent back to its old position can find there
        a third tank that just moved in.
        """
        r = self.rules
        pi, pj = self._pi, self._pj
        lim = 2.0 * r.tank_radius
        rad = r.tank_radius
        both = alive[:, pi] & alive[:, pj]
        for _ in range(10):
            dx = x[:, pj] - x[:, pi]
            dy = y[:, pj] - y[:, pi]
            d2 = dx * dx + dy * dy
            over = (d2 < lim * lim - _OVERLAP_EPS) & both
            if not over.any():
                break
            d = np.sqrt(d2)
            tiny = d < 1e-9
            ux = np.where(tiny, 1.0, dx / np.where(tiny, 1.0, d))
            uy = np.where(tiny, 0.0, dy / np.where(tiny, 1.0, d))
            push = np.where(over, (lim - d) * 0.5 + 1e-6, 0.0)
            x = np.clip(x + (push * ux) @ self._pair_signed, rad, r.width - rad)
            y = np.clip(y + (push * uy) @ self._pair_signed, rad, r.height - rad)
        return x, y
