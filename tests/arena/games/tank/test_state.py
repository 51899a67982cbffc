"""The battle's state as one record (arena/games/tank/state.py): TankState and the battle's attributes onto it."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle
from arena.games.tank.state import TankState


def test_zeros_gives_every_array_its_shape_and_dtype_and_no_winner() -> None:
    s = TankState.zeros(3, 2, 4)
    assert s.x.shape == s.scores.shape == (3, 2) and s.alive.dtype == bool
    assert s.bullet_damage_dealt.shape == (3, 2, 2) and s.tick.shape == (3,) and s.tick.dtype == np.int64
    assert s.bullet_owner.shape == (3, 4) and s.bullet_owner.dtype == np.int64 and s.bullet_active.dtype == bool
    assert all(a.flags.c_contiguous and a.flags.writeable for a in s)
    assert (s.winner == -1).all() and not any(a.any() for a in s if a is not s.winner)
    starts = sorted(a.ctypes.data % 4096 for a in s)
    assert len(set(starts)) == len(s)  # staggered: no two arrays begin at the same offset of a page


def test_the_battles_attributes_are_its_state_arrays_and_cannot_be_rebound() -> None:
    b = TankBattle(2, seed=1)
    assert b.x is b.state.x and b._bullet_dx is b.state.bullet_dx and b.round is b.state.round
    b.energy[0, 0] = 5.0
    b.energy -= 1.0  # in place: the same array, handed back
    assert b.state.energy[0, 0] == 4.0 and b.energy is b.state.energy
    with pytest.raises(AttributeError, match=r"write into it \(x\[\.\.\.\] = \.\.\.\)"):
        b.x = np.zeros((2, 2))
    arrays = list(b.state)
    b.step(np.ones((2, 2, ACT_DIM)))
    b.reset()
    assert all(a is b for a, b in zip(arrays, b.state, strict=True))  # steps and resets write into the same arrays
