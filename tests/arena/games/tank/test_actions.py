"""What a tank does (arena/games/tank/actions.py): the actions as a step reads them."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank.actions import ACT_DIM, read_actions


def test_read_actions_copies_clips_and_zeroes_nan() -> None:
    given = np.array([[[2.0, -3.0, np.nan, 0.5, -np.inf]]], np.float32)
    got = read_actions(given, 1, 1)
    assert got.dtype == np.float64 and got.shape == (1, 1, ACT_DIM) and got is not given
    np.testing.assert_array_equal(got[0, 0], [1.0, -1.0, 0.0, 0.5, -1.0])
    assert np.isnan(given[0, 0, 2])  # the caller's array is left alone
    with pytest.raises(ValueError, match=r"actions must have shape \(1, 2, 5\), got \(1, 1, 5\)"):
        read_actions(given, 1, 2)
