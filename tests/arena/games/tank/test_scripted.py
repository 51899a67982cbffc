"""Scripted tank opponents (arena/games/tank/scripted.py): what each bot does, bounds, determinism, the View."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, SCRIPTED, TankBattle, TankRules, make_scripted
from arena.games.tank.scripted import View


def test_sitting_never_moves() -> None:
    b = TankBattle(8, 2, seed=5)
    sit, spin = make_scripted("sitting", 8), make_scripted("spinner", 8, seed=1)
    x0, y0, h0, g0 = b.x[:, 0].copy(), b.y[:, 0].copy(), b.heading[:, 0].copy(), b.gun_heading[:, 0].copy()
    for _ in range(200):
        obs = b.observe()
        a = np.stack([sit.act(obs[:, 0]), spin.act(obs[:, 1])], axis=1)
        assert (a[:, 0] == 0).all()
        b.step(a)
    # Rams push the rammer back, not the victim: a sitting tank stays exactly where it was.
    np.testing.assert_array_equal(b.x[:, 0], x0)
    np.testing.assert_array_equal(b.y[:, 0], y0)
    np.testing.assert_array_equal(b.heading[:, 0], h0)
    np.testing.assert_array_equal(b.gun_heading[:, 0], g0)
    assert (b.velocity[:, 0] == 0).all()


def play(name: str, seed: int, ticks: int = 150) -> np.ndarray:
    """The actions of bot ``name`` (tank 0 of 4 matches) against a spinner, tick by tick."""
    b = TankBattle(4, 2, TankRules(max_ticks=60), seed=2)
    bot, other = make_scripted(name, 4, seed=seed), make_scripted("spinner", 4, seed=9)
    out = []
    for _ in range(ticks):
        obs = b.observe()
        a = np.stack([bot.act(obs[:, 0]), other.act(obs[:, 1])], axis=1)
        out.append(a[:, 0])
        info = b.step(a)
        b.reset(info.round_over)
        bot.reset(info.round_over)
        other.reset(info.round_over)
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_bots_are_deterministic_given_a_seed_and_in_bounds(name: str) -> None:
    first, again = play(name, seed=4), play(name, seed=4)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (150, 4, ACT_DIM) and np.isfinite(first).all() and (np.abs(first) <= 1).all()


def test_view_reads_the_observation_back_in_game_units() -> None:
    b = TankBattle(5, 3, seed=6)
    rng = np.random.default_rng(0)
    for _ in range(20):
        b.step(rng.uniform(-1, 1, (5, 3, ACT_DIM)))
    v = View(b.observe()[:, 0], b.rules)
    np.testing.assert_allclose(v.x, b.x[:, 0], atol=1e-3)
    np.testing.assert_allclose(v.y, b.y[:, 0], atol=1e-3)
    np.testing.assert_allclose(v.energy, b.energy[:, 0], atol=1e-4)
    np.testing.assert_allclose(np.remainder(v.heading, 360.0), b.heading[:, 0], atol=1e-3)
    with pytest.raises(ValueError, match=r"obs must have shape \(N, "):
        View(np.zeros((2, 3), np.float32), b.rules)
