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

This module holds the battle and the tick order: guns, drive and walls, rams, bullets, then
inactivity, deaths and the round's end, one method per phase as in the compiled step
(``kernels.step_1v1``). The rest of the game lives beside it, one job per module:
``state.py`` (:class:`TankState`, the arrays), ``tick.py`` (a step's working values),
``rules.py`` (:class:`TankRules` and the formulas), ``observation.py`` (``OBS_FIELDS`` and
:meth:`TankBattle.observe`), ``actions.py`` (``ACT_DIM``), ``bullets.py`` (the bullet phase),
``events.py`` (the :class:`StepInfo` / :class:`StepEvents` records), ``engines.py`` (the engines' names)
and ``geometry.py`` (pure numpy helpers). Callers import each name from the module that defines it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .actions import read_actions
from .bullets import fire, move_bullets
from .engines import ENGINES, EngineName
from .events import BulletEvents, StepEvents, StepInfo
from .geometry import DEG, Pairs, normalize_relative, push_apart, sweep_touches
from .observation import build_observation, lead_direction, nearest_enemy
from .rules import DEFAULT_RULES, TankRules
from .state import StateArray, TankState
from .tick import Tick

__all__ = ["TankBattle"]

if TYPE_CHECKING:
    from .compiled import CompiledEngine

_HEAT_EPS = 1e-9  # gun heat below this is 0 (0.1-steps in floating point do not land on 0 exactly)
_RAM_TOL = 0.05  # a collision needs an overlap of at least this (ignores push-apart residues in FFA jams)


class TankBattle:
    """M independent matches of T tanks each, stepped together (numpy over [M, T]).

    The state is one record, :attr:`state` (:class:`~arena.games.tank.state.TankState`), and each of its
    arrays is also an attribute (read-only for callers; float64 unless noted):

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

    The arrays are allocated once and every step writes into them (an attribute cannot be rebound).
    A finished match (``round_over``) is frozen: further steps change nothing in it
    until the caller resets it with ``reset(info.round_over)``.

    ``engine="numba"`` runs :meth:`step`, :meth:`observe` and the
    writes of :meth:`reset` as compiled kernels (:mod:`arena.games.tank.compiled`), ~9x faster on the
    training loop's 64-256 matches, and plays the same game: the same state, StepInfo and observation,
    bit for bit (``tests/arena/games/test_compiled_engine.py``). They cover the training configuration:
    1v1 with ``record_events`` off and no ``turn_coupling`` / ``rescan``. Any other tick (recorded events,
    Tank Royale's flags) transparently runs the numpy code, and a free-for-all battle is numpy throughout.
    The random draws of :meth:`reset` are numpy's either way.
    """

    x = StateArray[np.float64]()
    y = StateArray[np.float64]()
    heading = StateArray[np.float64]()
    velocity = StateArray[np.float64]()
    energy = StateArray[np.float64]()
    gun_heading = StateArray[np.float64]()
    radar_heading = StateArray[np.float64]()
    gun_heat = StateArray[np.float64]()
    alive = StateArray[np.bool_]()
    scores = StateArray[np.float64]()
    bullet_damage_dealt = StateArray[np.float64]()
    ram_damage_dealt = StateArray[np.float64]()
    tick = StateArray[np.int64]()
    round = StateArray[np.int64]()
    inactive_ticks = StateArray[np.int64]()
    round_over = StateArray[np.bool_]()
    truncated = StateArray[np.bool_]()
    winner = StateArray[np.int64]()
    bullet_active = StateArray[np.bool_]()
    bullet_x = StateArray[np.float64]()
    bullet_y = StateArray[np.float64]()
    bullet_heading = StateArray[np.float64]()
    bullet_power = StateArray[np.float64]()
    bullet_speed = StateArray[np.float64]()
    bullet_owner = StateArray[np.int64]()
    _bullet_dx = StateArray[np.float64]()  # the unit direction of each bullet_heading: private, the engines' own
    _bullet_dy = StateArray[np.float64]()

    def __init__(
        self,
        n_matches: int,
        n_tanks: int = 2,
        rules: TankRules = DEFAULT_RULES,
        seed: int = 0,
        engine: EngineName = "numpy",
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
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
        self.state = TankState.zeros(M, T, B)
        """Every array of the battle, as one record: what the phases and the compiled kernels are handed."""
        self._pairs = Pairs.of(T)  # the tank pairs, for the rams and the collision records

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
        self.engine = engine
        """Which code steps and observes: "numpy" (the reference) or "numba" (compiled, 1v1; see the class doc)."""
        self._compiled: CompiledEngine | None = _compiled_engine(self.state, rules) if engine == "numba" else None
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
            mask = np.ones(M, bool)
        else:
            mask = np.asarray(matches, bool)
            if mask.shape != (M,):
                raise ValueError(f"matches must have shape ({M},), got {mask.shape}")
        k = int(np.count_nonzero(mask))
        if k == 0:  # the common case in a training loop
            return
        ncx = int(r.width // r.spawn_cell)
        ncy = int(r.height // r.spawn_cell)
        cw, ch = r.width / ncx, r.height / ncy
        n_cells = ncx * ncy
        # One draw, the same doubles as three in a row: a random key per cell, a jitter per tank, a heading per tank.
        draws = self.rng.random(k * (n_cells + 3 * T))
        if self._compiled is not None:  # the same draws, used by a kernel instead of ~20 fancy assignments
            self._compiled.reset(mask, draws)
            return
        keys = draws[: k * n_cells].reshape(k, n_cells)
        jitter = draws[k * n_cells : k * (n_cells + 2 * T)].reshape(k, T, 2)
        heading = draws[k * (n_cells + 2 * T) :].reshape(k, T) * 360.0
        idx = np.flatnonzero(mask)
        cells = np.argsort(keys, axis=1)[:, :T]  # the T cells with the smallest keys: a random choice without repeats
        rad = r.tank_radius
        s = self.state
        s.x[idx] = (cells % ncx) * cw + rad + jitter[..., 0] * (cw - 2 * rad)
        s.y[idx] = (cells // ncx) * ch + rad + jitter[..., 1] * (ch - 2 * rad)
        s.heading[idx] = heading
        s.gun_heading[idx] = heading
        s.radar_heading[idx] = heading
        s.velocity[idx] = 0.0
        s.energy[idx] = r.start_energy
        s.gun_heat[idx] = r.start_gun_heat
        s.alive[idx] = True
        s.scores[idx] = 0.0
        s.bullet_damage_dealt[idx] = 0.0
        s.ram_damage_dealt[idx] = 0.0
        s.tick[idx] = 0
        s.round[idx] += 1
        s.inactive_ticks[idx] = 0
        s.round_over[idx] = False
        s.truncated[idx] = False
        s.winner[idx] = -1
        s.bullet_active[idx] = False

    # --- observation ----------------------------------------------------------------------------

    def observe(self) -> NDArray[np.float32]:
        """(M, T, OBS_DIM) float32: every tank's own view (see OBS_FIELDS and docs/arena.md)."""
        if self._compiled is not None:
            return self._compiled.observe()
        return build_observation(self.state, self.rules)

    # --- step -----------------------------------------------------------------------------------

    def step(self, actions: NDArray[np.floating[Any]]) -> StepInfo:
        """Advance every running match by one tick. ``actions`` is (M, T, ACT_DIM), clipped to [-1, 1].

        Dead tanks' actions and finished matches are ignored. See docs/arena.md for the
        tick order. The caller resets finished matches itself (``reset(info.round_over)``).
        """
        compiled = self._compiled
        # The kernels play the training configuration: no recorded events, no Tank Royale flags.
        if compiled is not None and not self.record_events and self.turn_coupling is None and self.rescan is None:
            info = compiled.step(actions, bool(self.reward_terms))
            self.last_events = None
            return info
        s = self.state
        running = ~s.round_over
        all_running = not s.round_over.any()
        tick = Tick(
            actions=read_actions(actions, self.n_matches, self.n_tanks),
            running=running,
            all_running=all_running,
            live=s.alive.copy() if all_running else s.alive & running[:, None],
            energy0=s.energy.copy(),
            record=self.record_events,
            score_delta=np.zeros(s.x.shape),
            dealt_delta=np.zeros(s.x.shape),
        )
        self._guns(tick)
        self._drive(tick)
        self._rams(tick)
        if tick.record:
            tick.scanned = self._scan(tick)
        self._bullets(tick)
        self._end_of_tick(tick)
        return self._step_info(tick)

    def _guns(self, tick: Tick) -> None:
        """1. Guns: a cold gun fires (if asked, the energy allows it and a slot is free), a hot one cools."""
        s, r, live = self.state, self.rules, tick.live
        a_fire = tick.actions[..., 3]
        power = r.min_bullet_power + a_fire * (r.max_bullet_power - r.min_bullet_power)
        heat = s.gun_heat
        cold = heat <= 0.0
        heat = heat - r.gun_cooling_rate * (live & ~cold)
        heat = np.where(heat < _HEAT_EPS, 0.0, heat)
        want = live & cold & (a_fire > 0.0) & (s.energy > power)
        if want.any():
            fired = fire(s, r, tick, want, power)
            heat = np.where(fired, r.gun_heat_base + r.gun_heat_factor * power, heat)
            s.energy[...] -= power * fired
        s.gun_heat[...] = heat

    def _drive(self, tick: Tick) -> None:
        """2-3. Drive: velocity toward the target, turns (gun carried by the body, radar by the gun), move;
        walls: clamp inside the field, damage by the impact velocity, stop."""
        s, r, a, live = self.state, self.rules, tick.actions, tick.live
        v_old = s.velocity
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
        coupling = self.turn_coupling
        if coupling is None:  # the gun rides on the body, the radar on the gun
            gun_abs = gun + body
            radar_heading = np.remainder(s.radar_heading + gun_abs + radar, 360.0)
        else:  # Tank Royale's adjust flags: the gun / radar do not (fully) follow what carries them
            c = np.asarray(coupling, np.float64)
            gun_abs = gun + body * c[..., 0]
            radar_heading = np.remainder(s.radar_heading + (radar + body * c[..., 1] + gun * c[..., 2]), 360.0)
        if tick.record:
            tick.sweep = normalize_relative(radar_heading - s.radar_heading)  # the radar's turn this tick
        s.radar_heading[...] = radar_heading
        np.remainder(s.heading + body, 360.0, out=s.heading)
        np.remainder(s.gun_heading + gun_abs, 360.0, out=s.gun_heading)
        h = s.heading * DEG
        vm = v if tick.all_running else v * tick.running[:, None]
        x = s.x + vm * np.cos(h)
        y = s.y + vm * np.sin(h)
        rad = r.tank_radius
        tick.x = np.minimum(np.maximum(x, rad), r.width - rad)
        tick.y = np.minimum(np.maximum(y, rad), r.height - rad)
        tick.hit_wall = (tick.x != x) | (tick.y != y)
        if tick.hit_wall.any():
            s.energy[...] -= np.maximum(r.wall_damage_factor * np.abs(v) - r.wall_damage_offset, 0.0) * tick.hit_wall
            v = np.where(tick.hit_wall, 0.0, v)
        tick.v = v
        tick.body, tick.gun, tick.radar, tick.gun_abs = body, gun, radar, gun_abs
        tick.alive_now = live & (s.energy > 0.0)

    def _rams(self, tick: Tick) -> None:
        """4. Rams: colliding pairs both take ram_damage and go back to where they were;
        a tank moving toward the other (ramming) stops and scores the ram."""
        pi, pj = self._pairs.first, self._pairs.second
        x, y, alive_now = tick.x, tick.y, tick.alive_now
        dx = x[:, pj] - x[:, pi]
        dy = y[:, pj] - y[:, pi]
        lim = 2.0 * self.rules.tank_radius - _RAM_TOL
        coll = (dx * dx + dy * dy < lim**2) & alive_now[:, pi] & alive_now[:, pj]
        tick.bumped = np.asarray(coll.any(axis=1))
        rows = np.flatnonzero(tick.bumped)
        if rows.size:
            self._collide(tick, rows, coll[rows], dx[rows], dy[rows])

    def _collide(
        self, tick: Tick, rows: NDArray[np.int64], coll: NDArray[np.bool_], dx: NDArray[np.float64], dy: NDArray[np.float64]
    ) -> None:
        """Resolve the collisions of the matches ``rows`` (pair arrays already restricted to them).

        A tank involved goes back to where it was before the drive (``state.x, state.y``, not yet overwritten).
        """
        s, r = self.state, self.rules
        T = self.n_tanks
        pi, pj = self._pairs.first, self._pairs.second
        vr, hr = tick.v[rows], s.heading[rows] * DEG
        cos_h, sin_h = np.cos(hr), np.sin(hr)
        ram_i = coll & (vr[:, pi] * (dx * cos_h[:, pi] + dy * sin_h[:, pi]) > 0.0)
        ram_j = coll & (vr[:, pj] * (-dx * cos_h[:, pj] - dy * sin_h[:, pj]) > 0.0)
        rams = np.zeros((len(rows), T, T), bool)  # [attacker, victim]
        rams[:, pi, pj] = ram_i
        rams[:, pj, pi] = ram_j
        if tick.record:
            tick.rams = (rows, coll, rams)
        n_coll = coll.astype(np.float64) @ self._pairs.both  # (R, T) collisions per tank
        e_before = s.energy[rows]
        e_after = e_before - r.ram_damage * n_coll
        s.energy[rows] = e_after
        dealt = rams * np.minimum(r.ram_damage, np.maximum(e_before, 0.0))[:, None, :]
        ledger = s.ram_damage_dealt[rows] + dealt
        s.ram_damage_dealt[rows] = ledger
        alive_r = tick.alive_now[rows]
        killed = alive_r & (e_after <= 0.0)
        dealt_by = dealt.sum(axis=2)
        tick.dealt_delta[rows] += dealt_by
        sd = r.score_ram_damage * dealt_by
        if killed.any():
            sd += r.bonus_ram_kill * (rams * killed[:, None, :] * ledger).sum(axis=2)
        tick.score_delta[rows] += sd
        involved = n_coll > 0
        x, y, alive_now = tick.x, tick.y, tick.alive_now  # the tick's own arrays: changed in place
        x[rows] = np.where(involved, s.x[rows], x[rows])
        y[rows] = np.where(involved, s.y[rows], y[rows])
        tick.v[rows] = np.where(rams.any(axis=2), 0.0, vr)
        alive_now[rows] = alive_r & ~killed
        x[rows], y[rows] = push_apart(x[rows], y[rows], alive_now[rows], self._pairs, r.tank_radius, r.width, r.height)

    def _scan(self, tick: Tick) -> NDArray[np.bool_]:
        """(M, T, T) [scanner, scanned]: which tanks each radar swept over this tick (Tank Royale's scan).

        The radar covers the arc ``sweep`` that ends at its new heading, out to ``radar_range``; a tank
        is scanned when its circle touches that sector (:func:`~arena.games.tank.geometry.sweep_touches`).
        As in Tank Royale, a tank scans only when it moved or turned something this tick, or
        asked to ``rescan``; dead tanks neither scan nor are scanned.
        """
        s, r, x, y, live = self.state, self.rules, tick.x, tick.y, tick.live
        sweep = tick.sweep
        assert sweep is not None, "the drive records the sweep when events are recorded"
        moving = (x != s.x) | (y != s.y) | (tick.body != 0.0) | (tick.gun_abs != 0.0) | (sweep != 0.0)
        if self.rescan is not None:
            moving = moving | self.rescan
        seen = sweep_touches(x, y, s.radar_heading, sweep, r.tank_radius, r.radar_range)
        return np.asarray(seen & (live & moving)[:, :, None] & live[:, None, :] & ~np.eye(self.n_tanks, dtype=bool))

    def _bullets(self, tick: Tick) -> None:
        """5. Bullets: move along their path; the first living non-owner tank the path crosses is hit;
        bullets whose end point leaves the field are removed (:mod:`arena.games.tank.bullets`)."""
        s = self.state
        active = s.bullet_active if tick.all_running else s.bullet_active & tick.running[:, None]
        fi = np.flatnonzero(active)
        if fi.size:
            tick.hit_match = move_bullets(s, self.rules, tick, fi)
            if tick.hit_match is not None:
                tick.alive_now = tick.alive_now & (s.energy > 0.0)

    def _end_of_tick(self, tick: Tick) -> None:
        """6. Inactivity: any bullet hit or ram resets the match's counter; from inactivity_ticks on, zap.
        7. Deaths, scores, round end; the tick's positions, velocities and survivors written to the state."""
        s, r, running = self.state, self.rules, tick.running
        inactive = s.inactive_ticks + running
        damaged = tick.bumped if tick.hit_match is None else tick.bumped | tick.hit_match
        inactive[damaged] = 0
        s.inactive_ticks[...] = inactive
        zap_m = inactive >= r.inactivity_ticks
        alive_now = tick.alive_now
        if zap_m.any():
            s.energy[...] -= r.inactivity_zap * (zap_m[:, None] & alive_now)
            alive_now = alive_now & (s.energy > 0.0)
        tick.died = died = tick.live & ~alive_now
        s.x[...] = tick.x
        s.y[...] = tick.y
        v = tick.v
        if died.any():
            v = np.where(died, 0.0, v)
            np.maximum(s.energy, 0.0, out=s.energy)
            tick.score_delta += r.score_survival * died.sum(axis=1, keepdims=True) * alive_now
        s.velocity[...] = v
        s.alive[...] = alive_now if tick.all_running else np.where(running[:, None], alive_now, s.alive)
        s.scores[...] += tick.score_delta
        s.tick[...] += running
        n_alive = s.alive.sum(axis=1)
        terminal = running & (n_alive <= 1)
        trunc = running & ~terminal & (s.tick >= r.max_ticks)
        solo = terminal & (n_alive == 1)
        if solo.any():
            s.scores[...] += (r.score_last_survivor * (self.n_tanks - 1)) * (solo[:, None] & s.alive)
            s.winner[...] = np.where(solo, np.argmax(s.alive, axis=1), s.winner)
        s.round_over[...] |= terminal | trunc
        s.truncated[...] |= trunc

    def _step_info(self, tick: Tick) -> StepInfo:
        """What the step did (StepInfo), with the reward geometry unless ``reward_terms`` is off, and the events."""
        s = self.state
        d_energy = s.energy - tick.energy0
        if self.reward_terms:
            has, ndx, ndy, dist, nj = nearest_enemy(s)
            lux, luy = lead_direction(s, self.rules, has, ndx, ndy, nj)
            gb = np.abs(normalize_relative(np.degrees(np.arctan2(luy, lux)) - s.gun_heading))
            enemy_distance = np.where(has, dist, self.max_distance).astype(np.float32)
            gun_bearing_abs = np.where(has, gb, 180.0).astype(np.float32)
        else:  # nobody learns from this battle (a Tank Royale match): skip the geometry
            enemy_distance = np.full(s.x.shape, self.max_distance, np.float32)
            gun_bearing_abs = np.full(s.x.shape, 180.0, np.float32)
        events = self._events(tick) if tick.record else None
        self.last_events = events
        return StepInfo(
            energy_delta=d_energy.astype(np.float32),
            enemy_energy_delta=(d_energy.sum(axis=1, keepdims=True) - d_energy).astype(np.float32),
            damage_dealt=tick.dealt_delta.astype(np.float32),
            enemy_distance=enemy_distance,
            max_distance=float(self.max_distance),
            gun_bearing_abs=gun_bearing_abs,
            alive=s.alive.copy(),
            died=tick.died,
            round_over=s.round_over.copy(),
            truncated=s.truncated.copy(),
            scores=s.scores.astype(np.float32),
            winner=s.winner.copy(),
            events=events,
        )

    def _events(self, tick: Tick) -> StepEvents:
        """Collect the records the phases left behind (``record_events`` only) into one StepEvents."""
        M, T = self.n_matches, self.n_tanks
        collided = np.zeros((M, T, T), bool)
        rammed = np.zeros((M, T, T), bool)
        if tick.rams is not None:
            rows, coll, rams = tick.rams
            pi, pj = self._pairs.first, self._pairs.second
            collided[rows[:, None], pi, pj] = coll
            collided[rows[:, None], pj, pi] = coll
            rammed[rows] = rams
        hits, walls, pairs = tick.bullets or (BulletEvents.empty(), BulletEvents.empty(), (BulletEvents.empty(),) * 2)
        assert tick.sweep is not None and tick.scanned is not None, "recorded by the drive and the scan"
        return StepEvents(
            body_turn=tick.body,
            gun_turn=tick.gun,
            radar_turn=tick.radar,
            radar_sweep=tick.sweep,
            hit_wall=tick.hit_wall.copy(),
            collided=collided,
            rammed=rammed,
            scanned=tick.scanned,
            fired=tick.fired or BulletEvents.empty(),
            bullet_hits=hits,
            bullet_walls=walls,
            bullet_bullets=pairs,
        )


def _compiled_engine(state: TankState, rules: TankRules) -> CompiledEngine | None:
    """The numba engine of a battle that asked for one (None for free-for-all, which stays numpy).

    numba is imported here, only then: the numpy engine never needs it, so importing the package never pays for it.
    """
    try:
        from .compiled import CompiledEngine
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in ("numba", "llvmlite"):
            raise
        raise ImportError(
            "TankBattle(engine='numba') needs numba (a dependency of arena-trainer: pip install numba), or engine='numpy'"
        ) from e
    if state.x.shape[1] != 2:
        return None
    return CompiledEngine(state, rules, _HEAT_EPS, _RAM_TOL)
