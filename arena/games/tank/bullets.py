"""The bullet phase of a tick: firing, flight, bullet-bullet clashes, hits and their event records.

Bullets are the engine's largest and most intricate phase (a sparse list of the bullets in flight,
scattered into dense per-match blocks where hits must be resolved in slot order), and nothing
else in a step needs its details, so it has a module of its own. :meth:`TankBattle.step
<arena.games.tank.engine.TankBattle.step>` calls :func:`fire` in its gun phase and
:func:`move_bullets` after the rams; both work in place on the battle's state
(:class:`~arena.games.tank.state.TankState`) and on the step's :class:`~arena.games.tank.tick.Tick`:
the score and damage each tank earned, and the event records when ``record`` is on
(``fired``, ``clashes``, ``bullets``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .events import BulletEvents
from .geometry import DEG, segments_cross
from .rules import TankRules
from .state import TankState
from .tick import Tick

__all__ = ["fire", "move_bullets"]

_COMPACT_CLASHES = 48  # up to this many bullets in flight, bullet-bullet pairs are tested as one (K, K) block

_Applied = tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.float64]]
"""What :func:`_apply_hits` did to the matches ``rows``: ``(rows, onehot (R, B, T), damage (R, B))``."""


def fire(
    state: TankState, rules: TankRules, tick: Tick, want: NDArray[np.bool_], power: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """Put a bullet in a free slot for every tank in ``want`` (tank-index order); returns who fired."""
    s = state
    B = s.bullet_active.shape[1]
    rows = np.flatnonzero(want.any(axis=1))
    w = want[rows]
    active = s.bullet_active[rows]
    rank = np.cumsum(w, axis=1) - 1
    ok = w & (rank < (B - active.sum(axis=1))[:, None])
    order = np.argsort(active, axis=1, kind="stable")  # free slots first, in slot order
    slot = np.take_along_axis(order, np.minimum(rank, B - 1), axis=1)
    ri, ti = np.nonzero(ok)
    mi = rows[ri]
    flat = mi * B + slot[ri, ti]
    p = power[mi, ti]
    g = s.gun_heading[mi, ti]
    gr = g * DEG
    s.bullet_active.flat[flat] = True
    s.bullet_x.flat[flat] = s.x[mi, ti]
    s.bullet_y.flat[flat] = s.y[mi, ti]
    s.bullet_heading.flat[flat] = g
    s.bullet_power.flat[flat] = p
    s.bullet_speed.flat[flat] = rules.bullet_speed_base - rules.bullet_speed_factor * p
    s.bullet_owner.flat[flat] = ti
    s.bullet_dx.flat[flat] = np.cos(gr)
    s.bullet_dy.flat[flat] = np.sin(gr)
    if tick.record:
        n = len(mi)
        tick.fired = BulletEvents(mi, slot[ri, ti], ti, p, s.x[mi, ti], s.y[mi, ti], g, np.full(n, -1, np.intp), np.zeros(n))
    fired = np.zeros_like(want)
    fired[mi, ti] = True
    return fired


def move_bullets(state: TankState, rules: TankRules, tick: Tick, fi: NDArray[np.int64]) -> NDArray[np.bool_] | None:
    """Move the active bullets ``fi`` (flat indices into (M, B)), apply hits; returns matches with a hit (or None).

    The tanks are where the tick has them so far (``tick.x``, ``tick.y``, ``tick.alive_now``).
    """
    s, r = state, rules
    M, T = s.x.shape
    B = s.bullet_active.shape[1]
    x, y, alive_now = tick.x, tick.y, tick.alive_now
    rad = r.tank_radius
    m = fi // B
    bx = s.bullet_x.ravel()[fi]
    by = s.bullet_y.ravel()[fi]
    bdx = s.bullet_dx.ravel()[fi]
    bdy = s.bullet_dy.ravel()[fi]
    sp = s.bullet_speed.ravel()[fi]
    cx = x[m] - bx[:, None]  # (K, T) from the bullet to every tank
    cy = y[m] - by[:, None]
    along = np.minimum(np.maximum(cx * bdx[:, None] + cy * bdy[:, None], 0.0), sp[:, None])  # closest point on path
    qx = cx - along * bdx[:, None]
    qy = cy - along * bdy[:, None]
    hitp = (qx * qx + qy * qy <= rad * rad) & alive_now[m] & (s.bullet_owner.ravel()[fi, None] != np.arange(T))
    ex = bx + bdx * sp
    ey = by + bdy * sp
    clash = None
    if r.bullet_collisions and fi.size > 1:
        clash = _clashes(s, tick, fi, m, bx, by, ex, ey)
        if clash is not None:
            hitp &= ~clash[:, None]  # bullets that met a bullet hit nothing else
    hit_k = hitp.any(axis=1)
    hit_match = None
    out = (ex <= 0.0) | (ex >= r.width) | (ey <= 0.0) | (ey >= r.height)
    gone = out if clash is None else out | clash
    applied: _Applied | None = None  # the hits as applied, for the event records
    if hit_k.any():
        hit_match = np.zeros(M, bool)
        kh = np.flatnonzero(hit_k)
        rows, inv = np.unique(m[kh], return_inverse=True)
        hit_match[rows] = True
        # Dense (rows, B, T) view of the hits of those matches, resolved in slot order.
        dense_hit = np.zeros((len(rows), B, T), bool)
        dense_along = np.zeros((len(rows), B, T))
        slots = fi[kh] - m[kh] * B
        dense_hit[inv, slots] = hitp[kh]
        dense_along[inv, slots] = along[kh]
        onehot, dmg = _apply_hits(s, r, tick, rows, dense_hit, dense_along)
        applied = (rows, onehot, dmg)
        gone |= hit_k
    if tick.record:
        _record_bullets(s, tick, fi, m, ex, ey, out & ~hit_k, applied)
    keep = fi[~gone]
    s.bullet_x.ravel()[keep] = ex[~gone]
    s.bullet_y.ravel()[keep] = ey[~gone]
    s.bullet_active.ravel()[fi[gone]] = False
    return hit_match


def _clashes(
    s: TankState,
    tick: Tick,
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
    M, B = s.bullet_active.shape
    if fi.size <= _COMPACT_CLASHES:
        return _clashes_compact(s, tick, fi, m, bx, by, ex, ey)
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
    cross = segments_cross(sx, sy, dx, dy) & np.triu(np.ones((B, B), bool), 1)  # [r, a, b], each pair once
    cross &= valid[:, :, None] & valid[:, None, :]
    if not cross.any():
        return None
    dense = np.asarray(cross.any(axis=2) | cross.any(axis=1))  # (R, B): the bullet met another
    if tick.record:
        pr, pa, pb = np.nonzero(cross)
        pm = rows[pr]
        tick.clashes = (
            _records(s, pm, pa, sx[pr, pa] + dx[pr, pa], sy[pr, pa] + dy[pr, pa]),
            _records(s, pm, pb, sx[pr, pb] + dx[pr, pb], sy[pr, pb] + dy[pr, pb]),
        )
    return np.asarray(dense[pos[m], fi - m * B] & (pos[m] >= 0))


def _clashes_compact(
    s: TankState,
    tick: Tick,
    fi: NDArray[np.int64],
    m: NDArray[np.int64],
    bx: NDArray[np.float64],
    by: NDArray[np.float64],
    ex: NDArray[np.float64],
    ey: NDArray[np.float64],
) -> NDArray[np.bool_] | None:
    """:func:`_clashes` for few bullets in flight: all (K, K) pairs of the list at once (same match only)."""
    B = s.bullet_active.shape[1]
    k = len(fi)
    cross = segments_cross(bx, by, ex - bx, ey - by) & (m[:, None] == m[None, :])  # [a, b], same match only
    cross &= np.triu(np.ones((k, k), bool), 1)
    if not cross.any():
        return None
    if tick.record:
        pa, pb = np.nonzero(cross)
        pm = m[pa]
        tick.clashes = (
            _records(s, pm, fi[pa] - pm * B, ex[pa], ey[pa]),
            _records(s, pm, fi[pb] - pm * B, ex[pb], ey[pb]),
        )
    return np.asarray(cross.any(axis=1) | cross.any(axis=0))


def _records(
    s: TankState, match: NDArray[np.intp], slot: NDArray[np.intp], x: NDArray[np.float64], y: NDArray[np.float64]
) -> BulletEvents:
    """BulletEvents for the bullets in ``(match, slot)`` at positions ``x, y`` (no victim)."""
    n = len(match)
    return BulletEvents(
        match,
        slot,
        s.bullet_owner[match, slot].astype(np.intp),
        s.bullet_power[match, slot],
        x,
        y,
        s.bullet_heading[match, slot],
        np.full(n, -1, np.intp),
        np.zeros(n),
    )


def _record_bullets(
    s: TankState,
    tick: Tick,
    fi: NDArray[np.int64],
    m: NDArray[np.int64],
    ex: NDArray[np.float64],
    ey: NDArray[np.float64],
    wall: NDArray[np.bool_],
    applied: _Applied | None,
) -> None:
    """Keep this tick's bullet hits, wall hits and bullet-bullet pairs for ``StepEvents``.

    ``wall`` marks the bullets (of ``fi``) that left the field without hitting a tank; ``applied``
    is ``(rows, onehot, damage)`` from :func:`_apply_hits`, or None when no bullet hit.
    """
    B = s.bullet_active.shape[1]
    kw = np.flatnonzero(wall)
    walls = _records(s, m[kw], fi[kw] - m[kw] * B, ex[kw], ey[kw])
    hits = BulletEvents.empty()
    if applied is not None:
        rows, onehot, dmg = applied
        hr, hb, ht = np.nonzero(onehot)
        hm = rows[hr]
        k = np.searchsorted(fi, hm * B + hb)
        hits = _records(s, hm, hb, ex[k], ey[k])
        hits.victim = ht.astype(np.intp)
        hits.damage = dmg[hr, hb]
    pairs = tick.clashes or (BulletEvents.empty(), BulletEvents.empty())
    tick.bullets = (hits, walls, pairs)


def _apply_hits(
    s: TankState, r: TankRules, tick: Tick, rows: NDArray[np.int64], hitp: NDArray[np.bool_], along: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Apply the bullet hits ``hitp`` (R, B, T) of the matches ``rows``, in slot order (``along``: where on its path).

    Returns the hits as applied (R, B, T) (the first tank on each bullet's path) and each bullet's damage (R, B).
    """
    T = s.x.shape[1]
    tanks = np.arange(T)
    if T == 2:
        onehot = hitp  # a bullet can only hit the one non-owner
    else:
        first = np.argmin(np.where(hitp, along, np.inf), axis=2)
        onehot = (first[..., None] == tanks) & hitp
    hit_b = np.asarray(onehot.any(axis=2))
    p = s.bullet_power[rows]
    dmg = r.bullet_damage_factor * p + r.bullet_damage_bonus * np.maximum(p - 1.0, 0.0)
    hit_dmg = onehot * dmg[..., None]  # (R, B, T)
    cum = np.cumsum(hit_dmg, axis=1)
    energy = s.energy[rows]
    before = energy[:, None, :] - (cum - hit_dmg)  # the victim's energy before this bullet
    scored = np.where(onehot, np.maximum(np.minimum(dmg[..., None], before), 0.0), 0.0)
    killing = onehot & (before > 0.0) & (before - dmg[..., None] <= 0.0)
    owner = (s.bullet_owner[rows][..., None] == tanks) & hit_b[..., None]  # (R, B, T) shooter
    owner_t = owner.transpose(0, 2, 1).astype(np.float64)
    dealt = owner_t @ scored  # [attacker, victim]
    ledger = s.bullet_damage_dealt[rows] + dealt
    s.bullet_damage_dealt[rows] = ledger
    dealt_by = dealt.sum(axis=2)
    tick.dealt_delta[rows] += dealt_by
    sd = r.score_bullet_damage * dealt_by
    if killing.any():
        kills = (owner_t @ killing.astype(np.float64)) > 0.0
        sd += r.bonus_bullet_kill * (kills * ledger).sum(axis=2)
    tick.score_delta[rows] += sd
    energy -= hit_dmg.sum(axis=1)
    # Energy return to the shooters still alive after the damage.
    ret = (owner * (r.bullet_energy_return * p)[..., None]).sum(axis=1)
    energy += np.where(s.alive[rows] & (energy > 0.0), ret, 0.0)
    s.energy[rows] = energy
    return onehot, dmg
