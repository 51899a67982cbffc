"""What one step did (arena/games/tank/events.py): StepInfo and its reward terms, BulletEvents.

The StepEvents records a battle fills with ``record_events`` on are checked against hand-placed
battles in tests/arena/royale/test_game.py.
"""

from __future__ import annotations

import numpy as np

from arena.games.tank import ACT_DIM, StepInfo, TankBattle
from arena.games.tank.events import BulletEvents


def test_reward_terms_columns() -> None:
    b = TankBattle(4, 2, seed=2)
    info = b.step(np.random.default_rng(0).uniform(-1, 1, (4, 2, ACT_DIM)))
    rt = info.reward_terms()
    assert rt.shape == (4, 2, 5) and rt.dtype == np.float32
    np.testing.assert_array_equal(rt[..., 0], info.energy_delta)
    np.testing.assert_array_equal(rt[..., 1], -info.damage_dealt)
    np.testing.assert_array_equal(rt[..., 2], info.enemy_distance)
    assert (rt[..., 3] == 1000.0).all() and info.max_distance == 1000.0
    np.testing.assert_array_equal(rt[..., 4], info.gun_bearing_abs)
    d = np.hypot(b.x[:, 1] - b.x[:, 0], b.y[:, 1] - b.y[:, 0])
    np.testing.assert_allclose(info.enemy_distance[:, 0], d, rtol=1e-5)
    assert ((info.gun_bearing_abs >= 0) & (info.gun_bearing_abs <= 180)).all()


def test_reward_terms_stack_the_fields_of_a_hand_built_info() -> None:
    """reward_terms only stacks columns: energy delta, minus damage dealt, distance, diagonal, gun bearing."""
    f32 = np.float32
    info = StepInfo(
        energy_delta=np.array([[-3.0, 1.5]], f32),
        enemy_energy_delta=np.array([[1.5, -3.0]], f32),
        damage_dealt=np.array([[4.0, 0.0]], f32),
        enemy_distance=np.array([[250.0, 250.0]], f32),
        max_distance=1000.0,
        gun_bearing_abs=np.array([[10.0, 180.0]], f32),
        alive=np.ones((1, 2), bool),
        died=np.zeros((1, 2), bool),
        round_over=np.zeros(1, bool),
        truncated=np.zeros(1, bool),
        scores=np.zeros((1, 2), f32),
        winner=np.full(1, -1, np.int64),
    )
    assert info.events is None
    rt = info.reward_terms()
    assert rt.shape == (1, 2, 5) and rt.dtype == np.float32
    assert rt[0].tolist() == [[-3.0, -4.0, 250.0, 1000.0, 10.0], [1.5, 0.0, 250.0, 1000.0, 180.0]]


def test_bullet_events_empty() -> None:
    ev = BulletEvents.empty()
    assert len(ev) == 0
    for name in ("match", "slot", "owner", "power", "x", "y", "heading", "victim", "damage"):
        assert getattr(ev, name).shape == (0,)
    assert ev.match.dtype == np.intp and ev.damage.dtype == np.float64
