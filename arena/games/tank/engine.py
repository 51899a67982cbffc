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

This module holds the battle's state and the tick order (guns, drive, walls, rams, bullets,
inactivity, deaths). The rest of the game lives beside it, one job per module:
``rules.py`` (:class:`TankRules` and the formulas), ``observation.py`` (``OBS_FIELDS`` and
:meth:`TankBattle.observe`), ``actions.py`` (``ACT_DIM``), ``bullets.py`` (the bullet phase),
``events.py`` (the :class:`StepInfo` / :class:`StepEvents` records), ``engines.py`` (the engines' names)
and ``geometry.py`` (pure numpy helpers). Callers import each name from the module that defines it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .actions import ACT_DIM
from .bullets import fire, move_bullets
from .engines import ENGINES, EngineName
from .events import BulletEvents, StepEvents, StepInfo
from .geometry import DEG, Pairs, normalize_relative, push_apart, sweep_touches
from .observation import build_observation, lead_direction, nearest_enemy
from .rules import DEFAULT_RULES, TankRules

__all__ = ["TankBattle"]

if TYPE_CHECKING:
    from .compiled import CompiledEngine

_HEAT_EPS = 1e-9  # gun heat below this is 0 (0.1-steps in floating point do not land on 0 exactly)
_RAM_TOL = 0.05  # a collision needs an overlap of at least this (ignores push-apart residues in FFA jams)


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

    ``engine="numba"`` runs :meth:`step`, :meth:`observe` and the
    writes of :meth:`reset` as compiled kernels (:mod:`arena.games.tank.compiled`), ~9x faster on the
    training loop's 64-256 matches, and plays the same game: the same state, StepInfo and observation,
    bit for bit (``tests/arena/games/test_compiled_engine.py``). They cover the training configuration:
    1v1 with ``record_events`` off and no ``turn_coupling`` / ``rescan``. Any other tick (recorded events,
    Tank Royale's flags) transparently runs the numpy code, and a free-for-all battle is numpy throughout.
    The random draws of :meth:`reset` are numpy's either way. The state arrays stay the same public numpy
    arrays, updated in place by the kernels (which read them afresh at every call).
    """

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

        f64 = np.float64
        (
            self.x, self.y, self.heading, self.velocity, self.energy, self.gun_heading, self.radar_heading,
            self.gun_heat, self.alive, self.scores, self.bullet_damage_dealt, self.ram_damage_dealt,
            self.tick, self.round, self.inactive_ticks, self.round_over, self.truncated, self.winner,
            self.bullet_active, self.bullet_x, self.bullet_y, self.bullet_heading, self.bullet_power,
            self.bullet_speed, self.bullet_owner, self._bullet_dx, self._bullet_dy,
        ) = _staggered_zeros(
            [((M, T), f64)] * 8 + [((M, T), bool), ((M, T), f64), ((M, T, T), f64), ((M, T, T), f64)]
            + [((M,), np.int64)] * 3 + [((M,), bool)] * 2 + [((M,), np.int64)]
            + [((M, B), bool)] + [((M, B), f64)] * 5 + [((M, B), np.int64)] + [((M, B), f64)] * 2
        )  # fmt: skip
        self.winner[:] = -1
        # (bullet_*: the slots; _bullet_dx, _bullet_dy: the unit direction (cos, sin) of each bullet_heading)

        # Fixed index helpers. These and the other underscored attributes are private to the package: the
        # phase modules (observation.py, bullets.py) read and update them as the step's own code does.
        self._tidx = np.arange(T)
        self._eye = np.eye(T, dtype=bool)
        self._pairs = Pairs.of(T)
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
        self.engine = engine
        """Which code steps and observes: "numpy" (the reference) or "numba" (compiled, 1v1; see the class doc)."""
        self._compiled: CompiledEngine | None = _compiled_engine(self) if engine == "numba" else None
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
        if self._compiled is not None:  # the same draws, used by a kernel (the ~20 fancy assignments cost ~50 us)
            self._compiled.reset(self, mask, draws)
            return
        keys = draws[: k * n_cells].reshape(k, n_cells)
        jitter = draws[k * n_cells : k * (n_cells + 2 * T)].reshape(k, T, 2)
        heading = draws[k * (n_cells + 2 * T) :].reshape(k, T) * 360.0
        idx = np.flatnonzero(mask)
        cells = np.argsort(keys, axis=1)[:, :T]  # the T cells with the smallest keys: a random choice without repeats
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

    # --- observation ----------------------------------------------------------------------------

    def observe(self) -> NDArray[np.float32]:
        """(M, T, OBS_DIM) float32: every tank's own view (see OBS_FIELDS and docs/arena.md)."""
        if self._compiled is not None:
            return self._compiled.observe(self)
        return build_observation(self)

    # --- step -----------------------------------------------------------------------------------

    def step(self, actions: NDArray[np.floating[Any]]) -> StepInfo:
        """Advance every running match by one tick. ``actions`` is (M, T, ACT_DIM), clipped to [-1, 1].

        Dead tanks' actions and finished matches are ignored. See docs/arena.md for the
        tick order. The caller resets finished matches itself (``reset(info.round_over)``).
        """
        compiled = self._compiled
        if compiled is not None and compiled.covers(self):
            return compiled.step(self, actions)
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
            fired = fire(self, want, power)
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
        h = self.heading * DEG
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
        pi, pj = self._pairs.first, self._pairs.second
        dx = x[:, pj] - x[:, pi]
        dy = y[:, pj] - y[:, pi]
        coll = (dx * dx + dy * dy < (2.0 * rad - _RAM_TOL) ** 2) & alive_now[:, pi] & alive_now[:, pj]
        bumped = coll.any(axis=1)
        rows = np.flatnonzero(bumped)
        if rows.size:
            x, y, v, alive_now = self._rams(rows, coll[rows], dx[rows], dy[rows], x, y, v, alive_now)
        rec = self.record_events
        if rec:
            sweep = normalize_relative(self.radar_heading - radar_old)  # the radar's turn this tick
            scanned = self._scan(x, y, x_old, y_old, body, gun_abs, sweep, live)

        # 5. Bullets: move along their path; the first living non-owner tank the path crosses is hit;
        #    bullets whose end point leaves the field are removed.
        act_b = self.bullet_active if all_running else self.bullet_active & running[:, None]
        fi = np.flatnonzero(act_b)
        hit_match = None
        if fi.size:
            hit_match = move_bullets(self, fi, x, y, alive_now)
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
            has, ndx, ndy, dist, nj = nearest_enemy(self)
            lux, luy = lead_direction(self, has, ndx, ndy, nj)
            gb = np.abs(normalize_relative(np.degrees(np.arctan2(luy, lux)) - self.gun_heading))
            enemy_distance = np.where(has, dist, self.max_distance).astype(np.float32)
            gun_bearing_abs = np.where(has, gb, 180.0).astype(np.float32)
        else:  # nobody learns from this battle (a Tank Royale match): skip the geometry
            enemy_distance = np.full((M, T), self.max_distance, np.float32)
            gun_bearing_abs = np.full((M, T), 180.0, np.float32)
        events = None
        if rec:
            events = self._events(body, gun, radar, sweep, hit_wall, scanned)
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
        sweep: NDArray[np.float64],
        hit_wall: NDArray[np.bool_],
        scanned: NDArray[np.bool_],
    ) -> StepEvents:
        """Collect the records the phases left behind (``record_events`` only) into one StepEvents."""
        M, T = self.n_matches, self.n_tanks
        collided = np.zeros((M, T, T), bool)
        rammed = np.zeros((M, T, T), bool)
        if self._ev_rams is not None:
            rows, coll, rams = self._ev_rams
            pi, pj = self._pairs.first, self._pairs.second
            collided[rows[:, None], pi, pj] = coll
            collided[rows[:, None], pj, pi] = coll
            rammed[rows] = rams
        fired = self._ev_fired or BulletEvents.empty()
        hits, walls, pairs = self._ev_bullets or (BulletEvents.empty(), BulletEvents.empty(), (BulletEvents.empty(),) * 2)
        self._ev_fired = self._ev_rams = self._ev_bullets = None
        return StepEvents(
            body_turn=body,
            gun_turn=gun,
            radar_turn=radar,
            radar_sweep=sweep,
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
        sweep: NDArray[np.float64],
        live: NDArray[np.bool_],
    ) -> NDArray[np.bool_]:
        """(M, T, T) [scanner, scanned]: which tanks each radar swept over this tick (Tank Royale's scan).

        The radar covers the arc ``sweep`` that ends at its new heading, out to ``radar_range``; a tank
        is scanned when its circle touches that sector (:func:`~arena.games.tank.geometry.sweep_touches`).
        As in Tank Royale, a tank scans only when it moved or turned something this tick, or
        asked to ``rescan``; dead tanks neither scan nor are scanned.
        """
        r = self.rules
        moving = (x != x_old) | (y != y_old) | (body != 0.0) | (gun_abs != 0.0) | (sweep != 0.0)
        if self.rescan is not None:
            moving = moving | self.rescan
        seen = sweep_touches(x, y, self.radar_heading, sweep, r.tank_radius, r.radar_range)
        return np.asarray(seen & (live & moving)[:, :, None] & live[:, None, :] & ~self._eye)

    def _rams(
        self,
        rows: NDArray[np.int64],
        coll: NDArray[np.bool_],
        dx: NDArray[np.float64],
        dy: NDArray[np.float64],
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        v: NDArray[np.float64],
        alive_now: NDArray[np.bool_],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Resolve the collisions of the matches ``rows`` (pair arrays already restricted to them).

        ``x, y`` are the positions after the drive; ``self.x, self.y`` are still those before it, where a
        tank involved goes back to.
        """
        r = self.rules
        T = self.n_tanks
        pi, pj = self._pairs.first, self._pairs.second
        x_old, y_old = self.x, self.y
        vr, hr = v[rows], self.heading[rows] * DEG
        cos_h, sin_h = np.cos(hr), np.sin(hr)
        ram_i = coll & (vr[:, pi] * (dx * cos_h[:, pi] + dy * sin_h[:, pi]) > 0.0)
        ram_j = coll & (vr[:, pj] * (-dx * cos_h[:, pj] - dy * sin_h[:, pj]) > 0.0)
        rams = np.zeros((len(rows), T, T), bool)  # [attacker, victim]
        rams[:, pi, pj] = ram_i
        rams[:, pj, pi] = ram_j
        if self.record_events:
            self._ev_rams = (rows, coll, rams)
        n_coll = coll.astype(np.float64) @ self._pairs.both  # (R, T) collisions per tank
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
        x[rows], y[rows] = push_apart(x[rows], y[rows], alive_now[rows], self._pairs, r.tank_radius, r.width, r.height)
        return x, y, v, alive_now


def _staggered_zeros(specs: list[tuple[tuple[int, ...], Any]]) -> list[NDArray[Any]]:
    """Zeroed C-contiguous arrays of these (shape, dtype)s, each starting a few cache lines further into its
    4 KiB page than the one before.

    Why: the compiled step reads and writes a match's row of ~25 arrays together. Allocated one by one, the
    (M, 2) arrays of 128-256 matches all began at the same offset in their pages, so a match's rows shared one
    set of the L1 cache (8 ways here) and evicted each other; staggered, they spread over the sets.
    """
    line, page = 64, 4096
    starts, end = [], 0
    for k, (shape, dtype) in enumerate(specs):
        start = -(-end // page) * page + (3 * k % (page // line)) * line
        starts.append(start)
        end = start + int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = np.zeros(end + page, np.uint8)
    base = -buffer.ctypes.data % page
    return [
        buffer[base + start : base + start + int(np.prod(shape)) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
        for start, (shape, dtype) in zip(starts, specs, strict=True)
    ]


def _compiled_engine(battle: TankBattle) -> CompiledEngine | None:
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
    if battle.n_tanks != 2:
        return None
    return CompiledEngine(battle, _HEAT_EPS, _RAM_TOL)
