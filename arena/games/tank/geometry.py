"""Pure numpy geometry of the tank field: angles, segment crossings, radar sectors, pushing circles apart.

These functions know nothing of a battle: they take arrays (``[M, T]`` tanks, ``[K]`` bullets)
and plain numbers, and return arrays. That keeps each one testable on its own, and lets two
phases that need the same formula (the dense and the compact bullet-bullet test in
``bullets.py``) call one copy of it. Conventions are the engine's: degrees, 0 = east,
counter-clockwise positive (see ``engine.py``'s docstring).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["DEG", "Pairs", "clip", "normalize_relative", "push_apart", "segments_cross", "sweep_touches"]

DEG: float = math.pi / 180.0
"""Radians per degree (a module constant, not ``np.radians``: one multiply, no call)."""
_OVERLAP_EPS = 1e-6  # push_apart separates circles closer than 2R - eps
_PUSH_PASSES = 10  # push_apart stops after this many passes even if some circles still overlap


def clip(values: Any, low: Any, high: Any) -> Any:
    """``np.clip``, bit for bit (it is defined as this), at half its cost on the engine's small arrays.

    Why: a tick calls it dozens of times on small arrays, where ``np.clip``'s Python wrappers cost
    about as much as the two ufuncs themselves; NaN propagates either way.
    """
    return np.minimum(np.maximum(values, low), high)


def normalize_relative(angle_deg: NDArray[np.float64]) -> NDArray[np.float64]:
    """Angle in degrees mapped to ``[-180, 180)``."""
    return (np.asarray(angle_deg) + 180.0) % 360.0 - 180.0


def segments_cross(
    sx: NDArray[np.float64], sy: NDArray[np.float64], dx: NDArray[np.float64], dy: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """``[..., a, b]``: segment ``a`` (start ``s``, displacement ``d``, along the last axis) crosses segment ``b``.

    Segments ``p + t d1`` and ``q + u d2`` cross when t and u are both in [0, 1]. Parallel
    pairs (zero cross product, which includes a segment with itself and zero-length ones) never
    cross: two bullets flying side by side do not meet. Both bullet-bullet tests use this, the
    dense ``(R, B, B)`` one and the compact ``(K, K)`` one, so that they agree to the bit; the
    caller keeps the pairs it means (``a < b``, same match, slot in use).
    """
    qx = sx[..., None, :] - sx[..., :, None]  # [a, b] = start_b - start_a
    qy = sy[..., None, :] - sy[..., :, None]
    dxa, dya = dx[..., :, None], dy[..., :, None]
    dxb, dyb = dx[..., None, :], dy[..., None, :]
    denom = dxa * dyb - dya * dxb
    safe = np.where(denom == 0.0, 1.0, denom)
    t = (qx * dyb - qy * dxb) / safe
    u = (qx * dya - qy * dxa) / safe
    return np.asarray((denom != 0.0) & (t >= 0.0) & (t <= 1.0) & (u >= 0.0) & (u <= 1.0))


def sweep_touches(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    heading: NDArray[np.float64],
    sweep: NDArray[np.float64],
    radius: float,
    reach: float,
) -> NDArray[np.bool_]:
    """``(M, T, T)`` [i, j]: circle ``j`` (centre ``x, y``, ``radius``) touches the sector swept by ray ``i``.

    Ray ``i`` starts at circle ``i``'s centre and turned by ``sweep`` degrees to end at
    ``heading``, out to ``reach``. A circle touches the sector when its centre is within
    ``reach + radius`` and its angular extent (``asin(radius / distance)``) overlaps the arc;
    a zero sweep is a line. This is Tank Royale's radar scan (the diagonal, i == i, is left
    for the caller to mask).
    """
    dx = x[:, None, :] - x[:, :, None]  # [m, i, j] = x_j - x_i
    dy = y[:, None, :] - y[:, :, None]
    dist = np.sqrt(dx * dx + dy * dy)
    centre = heading - 0.5 * sweep  # the middle of the swept arc
    bearing = np.degrees(np.arctan2(dy, dx))
    off = np.abs(normalize_relative(bearing - centre[:, :, None]))
    half = np.degrees(np.arcsin(np.minimum(radius / np.maximum(dist, 1e-9), 1.0)))
    return np.asarray((off <= 0.5 * np.abs(sweep)[:, :, None] + half) & (dist - radius <= reach))


class Pairs(NamedTuple):
    """The unordered pairs ``(first[p], second[p])`` of ``T`` circles, for arithmetic on all pairs at once."""

    first: NDArray[np.intp]
    """(P,) the lower index of each pair (``np.triu_indices(T, 1)``'s order)."""
    second: NDArray[np.intp]
    """(P,) the higher index."""
    both: NDArray[np.float64]
    """(P, T) a pair onto its two circles (+1 each): ``counts @ both`` adds a pair's count to both."""
    signed: NDArray[np.float64]
    """(P, T) a pair onto its two circles, -1 for ``first`` and +1 for ``second``: a push apart along the pair."""

    @classmethod
    def of(cls, n: int) -> Pairs:
        """The ``n * (n - 1) / 2`` pairs of ``n`` circles."""
        first, second = np.triu_indices(n, 1)
        both = np.zeros((len(first), n))
        both[np.arange(len(first)), first] = 1.0
        both[np.arange(len(first)), second] = 1.0
        signed = np.zeros((len(first), n))
        signed[np.arange(len(first)), first] = -1.0
        signed[np.arange(len(first)), second] = 1.0
        return cls(first, second, both, signed)


def push_apart(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    alive: NDArray[np.bool_],
    pairs: Pairs,
    radius: float,
    width: float,
    height: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Push still-overlapping living circles apart (half each), clamped to the field; up to 10 passes.

    ``x, y, alive`` are ``(R, T)``; ``pairs`` are those of the ``T`` circles. Needed after a ram in
    free-for-all only: a tank sent back to its old position can find there a third tank that
    just moved in.
    """
    pi, pj = pairs.first, pairs.second
    lim = 2.0 * radius
    both = alive[:, pi] & alive[:, pj]
    for _ in range(_PUSH_PASSES):
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
        x = clip(x + (push * ux) @ pairs.signed, radius, width - radius)
        y = clip(y + (push * uy) @ pairs.signed, radius, height - radius)
    return x, y
