"""The "reach" game (arena/games/reach.py): steer a point to a target; rewards, termination, truncation."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.reach import ACT_DIM, OBS_DIM, ReachGame


def toward(game: ReachGame) -> np.ndarray:
    """Full speed straight at the target."""
    offset = game.target - game.pos
    return (offset / np.maximum(np.linalg.norm(offset, axis=1, keepdims=True), 1e-9)).astype(np.float32)


def test_observation_is_position_and_offset_to_the_target() -> None:
    game = ReachGame(6, seed=1)
    obs = game.observe()
    assert obs.shape == (6, OBS_DIM) and obs.dtype == np.float32 and ACT_DIM == 2
    np.testing.assert_array_equal(obs[:, :2], game.pos)
    np.testing.assert_allclose(obs[:, 2:], game.target - game.pos)
    assert (np.abs(obs) <= 2).all()


def test_a_greedy_agent_scores_one_plus_ten_times_the_start_distance() -> None:
    """Closing in is rewarded every step; an episode ends with +1 on the target, after about distance / 0.1 steps."""
    game = ReachGame(16, seed=0, max_steps=1000)
    start = np.linalg.norm(game.target - game.pos, axis=1)
    returns, ended = np.zeros(16), np.zeros(16, bool)
    for _ in range(40):
        result = game.step(toward(game))
        assert (result.reward[~ended] > 0).all()
        returns += np.where(ended, 0.0, result.reward)
        ended |= result.terminal
    assert ended.all()
    assert (returns <= 1 + 10 * start + 1e-4).all()
    np.testing.assert_allclose(returns, 1 + 10 * start, atol=1.0)


def test_moving_away_is_not_rewarded_and_random_play_scores_about_zero() -> None:
    game = ReachGame(64, seed=1)
    result = game.step(-toward(game))
    assert (result.reward <= 1e-6).all()
    rng = np.random.default_rng(1)
    for _ in range(200):
        game.step(rng.uniform(-1, 1, (64, ACT_DIM)).astype(np.float32))
    assert len(game.finished) > 100 and abs(np.mean(game.finished)) < 1.0


def test_reaching_the_target_is_terminal_with_the_bonus_and_starts_a_new_episode() -> None:
    game = ReachGame(1, seed=3)
    game.pos[:] = [[0.0, 0.0]]
    game.target[:] = [[0.15, 0.0]]
    result = game.step(np.array([[50.0, 0.0]], np.float32))  # clipped to 1: moves 0.1
    assert result.terminal[0] and not result.truncated[0]
    assert result.reward[0] == pytest.approx(10 * 0.1 + 1.0, abs=1e-5)
    np.testing.assert_allclose(result.final_obs[0], [0.1, 0.0, 0.05, 0.0], atol=1e-6)
    assert game.finished == [pytest.approx(2.0, abs=1e-5)] and game.t[0] == 0
    np.testing.assert_array_equal(result.obs, game.observe())


def test_an_episode_is_truncated_after_max_steps() -> None:
    game = ReachGame(4, seed=5, max_steps=3)
    game.pos[:] = -0.9
    game.target[:] = 0.9
    for step in range(1, 4):
        result = game.step(np.zeros((4, ACT_DIM), np.float32))
        assert not result.terminal.any() and (result.reward == 0).all()
        assert result.truncated.all() == (step == 3)
    assert game.finished == [0.0] * 4 and (game.t == 0).all()
