"""Pure numpy geometry of the tank field (arena/games/tank/geometry.py): angles, crossings, radar sectors, push-apart."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank.geometry import Pairs, normalize_relative, push_apart, segments_cross, sweep_touches


def test_normalize_relative_maps_into_minus_180_to_180() -> None:
    angles = np.array([0.0, 180.0, -180.0, 190.0, -190.0, 360.0, 540.0, 359.5, -720.25])
    out = normalize_relative(angles)
    np.testing.assert_allclose(out, [0.0, -180.0, -180.0, -170.0, 170.0, 0.0, -180.0, -0.5, -0.25])
    assert ((out >= -180.0) & (out < 180.0)).all()


def test_segments_cross_pairs_but_never_parallel_ones() -> None:
    """Segments a, b cross; c is far from all; d is parallel to a (never crosses it) but crosses b."""
    sx, sy = np.array([0.0, 0.0, 20.0, 0.0]), np.array([0.0, 10.0, 0.0, 1.0])
    dx, dy = np.array([10.0, 10.0, 10.0, 10.0]), np.array([10.0, -10.0, 0.0, 10.0])
    expected = np.array([[0, 1, 0, 0], [1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 0, 0]], bool)
    np.testing.assert_array_equal(segments_cross(sx, sy, dx, dy), expected)
    # Leading axes are batches (the dense per-match form); a zero-length segment crosses nothing.
    batch = segments_cross(np.stack([sx, sx]), np.stack([sy, sy]), np.stack([dx, dx * 0.0]), np.stack([dy, dy]))
    assert batch.shape == (2, 4, 4)
    np.testing.assert_array_equal(batch[0], expected)
    zero = segments_cross(np.array([0.0, 5.0]), np.array([0.0, 0.0]), np.array([10.0, 0.0]), np.array([0.0, 0.0]))
    assert not zero.any()


def test_sweep_touches_a_circle_inside_the_arc_and_the_reach() -> None:
    """Tank 1 is 300 east of tank 0: its circle spans asin(18 / 300) = 3.44 degrees either side of east."""
    x, y = np.array([[100.0, 400.0]]), np.array([[300.0, 300.0]])

    def touches(heading: float, sweep: float, reach: float = 1200.0) -> bool:
        seen = sweep_touches(x, y, np.array([[heading, 0.0]]), np.array([[sweep, 0.0]]), 18.0, reach)
        assert seen.shape == (1, 2, 2)
        return bool(seen[0, 0, 1])

    assert touches(10.0, 20.0)  # the arc [-10, 10] covers east
    assert not touches(90.0, 45.0)  # [45, 90]: away from it
    assert touches(3.0, 0.0) and not touches(4.0, 0.0)  # a zero sweep is a line
    assert not touches(0.0, 0.0, reach=250.0) and touches(0.0, 0.0, reach=290.0)  # the hull is 282 away


def test_push_apart_separates_living_overlaps_half_each() -> None:
    pairs = Pairs.of(2)
    assert pairs.first.tolist() == [0] and pairs.second.tolist() == [1] and pairs.signed.tolist() == [[-1.0, 1.0]]
    x, y = np.array([[100.0, 110.0]]), np.array([[300.0, 300.0]])
    nx, ny = push_apart(x, y, np.ones((1, 2), bool), pairs, 18.0, 800.0, 600.0)
    assert nx[0, 1] - nx[0, 0] >= 36.0 - 1e-6
    assert nx[0].mean() == pytest.approx(105.0) and (ny == 300.0).all()
    # A dead tank is not pushed, nor pushes; a wall holds a tank in the field.
    dead = push_apart(x, y, np.array([[True, False]]), pairs, 18.0, 800.0, 600.0)
    np.testing.assert_array_equal(dead[0], x)
    wall, _ = push_apart(np.array([[18.0, 20.0]]), y, np.ones((1, 2), bool), pairs, 18.0, 800.0, 600.0)
    assert wall[0, 0] == 18.0 and wall[0, 1] > 20.0


def test_pairs_of_three_circles() -> None:
    pairs = Pairs.of(3)
    assert list(zip(pairs.first.tolist(), pairs.second.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2)]
    np.testing.assert_array_equal(np.array([1.0, 0.0, 1.0]) @ pairs.both, [1.0, 2.0, 1.0])  # (0, 1) and (1, 2)
    np.testing.assert_array_equal(pairs.signed.sum(axis=1), 0.0)
