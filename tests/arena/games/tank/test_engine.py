"""The Robocode-style tank engine as a whole: determinism, resets, the tick's phases in play, rounds, scores.

The parts of the engine that live in modules of their own are tested beside it: rules.py in
test_rules.py, observation.py in test_observation.py, bullets.py in test_bullets.py, events.py in
test_events.py, geometry.py in test_geometry.py and the scripted bots in test_scripted.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle, TankRules
from tests.arena.games.tank.helpers import act, duel, fire_level, state

__all__ = ["act", "duel"]  # tests/arena/royale/test_game.py imports these two from here

# --- determinism ----------------------------------------------------------------------------------


def run_random(seed: int, n_tanks: int = 2, steps: int = 400) -> tuple[list[np.ndarray], np.ndarray]:
    b = TankBattle(8, n_tanks, seed=seed)
    rng = np.random.default_rng(123)
    obs = b.observe()
    for _ in range(steps):
        info = b.step(rng.uniform(-1, 1, (8, n_tanks, ACT_DIM)).astype(np.float32))
        b.reset(info.round_over)
        obs = b.observe()
    return state(b), obs


@pytest.mark.parametrize("n_tanks", [2, 4])
def test_determinism_same_seed_same_actions(n_tanks: int) -> None:
    s1, o1 = run_random(7, n_tanks)
    s2, o2 = run_random(7, n_tanks)
    for a, b in zip(s1, s2, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(o1, o2)
    s3, _ = run_random(8, n_tanks)
    assert not np.array_equal(s1[0], s3[0])


def test_reset_positions_valid() -> None:
    r = TankRules()
    b = TankBattle(200, 8, r, seed=1)
    assert (b.x >= r.tank_radius).all() and (b.x <= r.width - r.tank_radius).all()
    assert (b.y >= r.tank_radius).all() and (b.y <= r.height - r.tank_radius).all()
    d = np.hypot(b.x[:, :, None] - b.x[:, None, :], b.y[:, :, None] - b.y[:, None, :])
    d[:, np.arange(8), np.arange(8)] = np.inf
    assert d.min() >= 2 * r.tank_radius - 1e-9
    assert (b.gun_heat == 3.0).all() and (b.energy == 100.0).all() and b.alive.all()
    np.testing.assert_array_equal(b.gun_heading, b.heading)


# --- movement -------------------------------------------------------------------------------------


def test_position_follows_heading_convention() -> None:
    b = duel(400, 300, 100, 100, h0=90.0)  # 90 degrees = north = +y
    b.step(act([1.0]))
    assert b.x[0, 0] == pytest.approx(400.0)
    assert b.y[0, 0] == pytest.approx(301.0)
    b = duel(400, 300, 100, 100, h0=0.0)  # 0 = east = +x
    b.step(act([1.0]))
    assert b.x[0, 0] == pytest.approx(401.0) and b.y[0, 0] == pytest.approx(300.0)


@pytest.mark.parametrize("v", [0.0, 4.0, 8.0])
def test_max_body_turn_rate_at_speed(v: float) -> None:
    b = duel()
    b.velocity[0, 0] = v
    b.step(act([v / 8.0, 1.0]))  # hold the speed, full left turn
    assert b.velocity[0, 0] == v
    assert b.heading[0, 0] == pytest.approx(10.0 - 0.75 * v)
    b.step(act([v / 8.0, -1.0]))
    assert b.heading[0, 0] == pytest.approx(0.0)
    b.step(act([v / 8.0, -0.5]))
    assert b.heading[0, 0] == pytest.approx(360.0 - 0.5 * (10.0 - 0.75 * v))


def test_gun_and_radar_turns_add_up() -> None:
    b = duel()
    b.step(act([0.0, 1.0, 1.0, 0.0, 1.0]))  # body 10, gun +20 on top, radar +45 on top of the gun
    assert b.heading[0, 0] == pytest.approx(10.0)
    assert b.gun_heading[0, 0] == pytest.approx(30.0)
    assert b.radar_heading[0, 0] == pytest.approx(75.0)
    b.step(act([0.0, 0.0, -0.5, 0.0, -1.0]))
    assert b.gun_heading[0, 0] == pytest.approx(20.0)
    assert b.radar_heading[0, 0] == pytest.approx(20.0)


def test_actions_are_clipped_and_nan_safe() -> None:
    b = duel()
    b.step(act([50.0, -7.0, 3.0]))
    assert b.velocity[0, 0] == 1.0
    assert b.heading[0, 0] == pytest.approx(360.0 - 9.25)
    b.step(act([float("nan"), float("nan")]))
    assert np.isfinite(b.x).all() and np.isfinite(b.heading).all()
    with pytest.raises(ValueError, match="actions must have shape"):
        b.step(np.zeros((1, 2, 4)))


# --- guns -----------------------------------------------------------------------------------------


def test_gun_heat_cooling_and_no_fire_while_hot() -> None:
    b = duel(100, 300, 700, 500)
    b.gun_heading[0, 0] = 270.0  # fire into the south wall, away from the target
    fired_at = []
    for t in range(1, 31):
        e = b.energy[0, 0]
        b.step(act([0, 0, 0, fire_level(1.0)], []))
        if b.energy[0, 0] < e:
            fired_at.append(t)
        if t == 1:
            assert b.gun_heat[0, 0] == pytest.approx(1.2)
        if t == 2:
            assert b.gun_heat[0, 0] == pytest.approx(1.1)
    assert fired_at == [1, 14, 27]  # heat 1.2 needs 12 ticks of 0.1 cooling, fires on the 13th


def test_round_start_gun_heat() -> None:
    b = TankBattle(1, 2, seed=3)
    b.x[0], b.y[0] = [100.0, 700.0], [100.0, 500.0]
    assert b.gun_heat[0, 0] == 3.0
    first = None
    for t in range(1, 40):
        e = b.energy[0, 0]
        b.step(act([0, 0, 0, 1.0], []))
        if b.energy[0, 0] < e and first is None:
            first = t
    assert first == 31  # 30 ticks of cooling from 3.0


def test_cannot_fire_without_enough_energy() -> None:
    b = duel(100, 300, 700, 500)
    b.energy[0, 0] = 2.0
    b.step(act([0, 0, 0, 1.0], []))  # power 3 > energy 2: no shot
    assert not b.bullet_active.any() and b.energy[0, 0] == 2.0


# --- walls, rams, deaths --------------------------------------------------------------------------


def test_wall_damage_at_full_speed() -> None:
    b = duel(800 - 18 - 4, 300, 100, 300, h0=0.0)
    b.velocity[0, 0] = 8.0
    info = b.step(act([1.0], []))
    assert b.x[0, 0] == pytest.approx(800 - 18)
    assert b.velocity[0, 0] == 0.0
    assert b.energy[0, 0] == pytest.approx(97.0)  # max(8 / 2 - 1, 0) = 3
    assert info.energy_delta[0, 0] == pytest.approx(-3.0)
    # At speed 2 a wall is harmless.
    b = duel(18 + 1, 300, 500, 300, h0=180.0)
    b.velocity[0, 0] = 2.0
    b.step(act([0.25], []))
    assert b.x[0, 0] == pytest.approx(18.0) and b.energy[0, 0] == 100.0 and b.velocity[0, 0] == 0.0


def test_ram_damage_each_and_stop() -> None:
    b = duel(300, 300, 337, 300, h0=0.0, h1=90.0)
    b.velocity[0, 0] = 2.0
    info = b.step(act([0.25], []))  # moves 2 forward: centres 35 apart < 36
    np.testing.assert_allclose(b.energy[0], [99.4, 99.4])
    assert b.velocity[0, 0] == 0.0  # the rammer stops
    assert b.x[0, 0] == pytest.approx(300.0) and b.x[0, 1] == pytest.approx(337.0)  # pushed back
    assert info.scores[0, 0] == pytest.approx(1.2) and info.scores[0, 1] == 0.0  # 2 x ram damage to the rammer
    assert b.inactive_ticks[0] == 0


def test_bullet_kill_ends_round_terminal_with_scores() -> None:
    b = duel(100, 300, 300, 300)
    b.energy[0, 1] = 3.0
    info = b.step(act([0, 0, 0, fire_level(1.0)], []))
    while not info.round_over[0]:
        info = b.step(act([], []))
    assert info.died[0].tolist() == [False, True]
    assert info.alive[0].tolist() == [True, False]
    assert not info.truncated[0]
    assert info.winner[0] == 0
    # bullet damage 3 (capped at the energy left) + 20% kill bonus + 50 survival + 10 last survivor
    assert info.scores[0, 0] == pytest.approx(3.0 + 0.6 + 50.0 + 10.0)
    assert info.scores[0, 1] == 0.0
    assert b.energy[0, 1] == 0.0
    # A finished match is frozen until reset.
    before = state(b)
    info2 = b.step(act([1, 1, 1, 1, 1], [1, 1, 1, 1, 1]))
    for x, y in zip(before, state(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert info2.round_over[0] and info2.winner[0] == 0 and (info2.energy_delta == 0).all()
    b.reset(info2.round_over)
    assert b.alive.all() and not b.round_over[0] and b.round[0] == 2 and b.scores.sum() == 0


def test_ram_kill_scores() -> None:
    b = duel(300, 300, 337, 300, h0=0.0, h1=90.0)
    b.velocity[0, 0] = 2.0
    b.energy[0, 1] = 0.5
    info = b.step(act([0.25], []))
    assert info.round_over[0] and not info.truncated[0] and info.winner[0] == 0
    # ram damage 0.5 dealt (capped) x 2 + 30% ram kill bonus + 50 survival + 10 last survivor
    assert info.scores[0, 0] == pytest.approx(1.0 + 0.15 + 50.0 + 10.0)


def test_wall_death_and_simultaneous_deaths() -> None:
    b = duel(800 - 18 - 4, 300, 18 + 4, 300, h0=0.0, h1=180.0)
    b.velocity[0] = [8.0, 8.0]
    b.energy[0] = [2.0, 2.0]
    info = b.step(act([1.0], [1.0]))
    assert info.died[0].all() and info.round_over[0] and not info.truncated[0]
    assert info.winner[0] == -1 and (info.scores[0] == 0).all()


def test_tick_cap_is_truncation() -> None:
    b = TankBattle(3, 2, TankRules(max_ticks=50), seed=0)
    for t in range(1, 51):
        info = b.step(np.zeros((3, 2, ACT_DIM)))
        if t < 50:
            assert not info.round_over.any()
    assert info.round_over.all() and info.truncated.all()
    assert (info.winner == -1).all() and info.alive.all()


def test_inactivity_zap_after_450_ticks() -> None:
    b = TankBattle(2, 2, seed=0)
    zero = np.zeros((2, 2, ACT_DIM))
    for _ in range(449):
        info = b.step(zero)
    assert (b.energy == 100.0).all()
    info = b.step(zero)  # the 450th tick without damage
    np.testing.assert_allclose(b.energy, 99.9)
    np.testing.assert_allclose(info.energy_delta, -0.1, rtol=1e-5)
    b.step(zero)
    np.testing.assert_allclose(b.energy, 99.8)


def test_ffa_kill_gives_survival_to_everyone_alive() -> None:
    b = TankBattle(1, 4, seed=0)
    b.x[0] = [100.0, 300.0, 700.0, 700.0]
    b.y[0] = [300.0, 300.0, 100.0, 500.0]
    b.heading[0] = b.gun_heading[0] = [0.0, 90.0, 90.0, 90.0]
    b.gun_heat[0] = 0.0
    b.energy[0, 1] = 1.0
    a = np.zeros((1, 4, ACT_DIM))
    a[0, 0, 3] = fire_level(1.0)
    info = b.step(a)
    a[:] = 0
    while not info.died[0, 1]:
        info = b.step(a)
    assert not info.round_over[0]
    # shooter: 1 damage + 0.2 kill bonus + 50; the bystanders get 50 each
    np.testing.assert_allclose(info.scores[0], [51.2, 0.0, 50.0, 50.0], rtol=1e-6)
    obs = b.observe()
    np.testing.assert_allclose(obs[0, [0, 2, 3], 22], 2 / 7, rtol=1e-6)


@pytest.mark.parametrize("n_tanks", [2, 8])
def test_random_play_invariants(n_tanks: int) -> None:
    r = TankRules(max_ticks=300)
    b = TankBattle(16, n_tanks, r, seed=3)
    rng = np.random.default_rng(5)
    finished = 0
    for _ in range(700):
        a = rng.uniform(-1, 1, (16, n_tanks, ACT_DIM))
        a[..., 3] = rng.uniform(-0.2, 1, (16, n_tanks))  # fire a lot
        energy = b.energy.copy()
        info = b.step(a)
        np.testing.assert_allclose(info.energy_delta, b.energy - energy, atol=1e-4)
        assert (b.energy >= 0).all() and (b.energy[b.alive] > 0).all() and (b.energy[~b.alive] == 0).all()
        assert (
            (b.x >= 18 - 1e-9).all() and (b.x <= 782 + 1e-9).all() and (b.y >= 18 - 1e-9).all() and (b.y <= 582 + 1e-9).all()
        )
        assert (np.abs(b.velocity) <= 8).all() and (b.velocity[~b.alive] == 0).all()
        assert ((b.gun_heat >= 0) & (b.gun_heat <= 3)).all()
        assert (info.scores >= 0).all() and not (info.died & info.alive).any()
        live = b.alive & ~b.round_over[:, None]
        d = np.hypot(b.x[:, :, None] - b.x[:, None, :], b.y[:, :, None] - b.y[:, None, :])
        both = live[:, :, None] & live[:, None, :] & ~np.eye(n_tanks, dtype=bool)
        assert (d[both] >= 36 - 0.05).all()  # push-apart residues in jams stay below the collision tolerance
        assert (info.winner[~info.round_over] == -1).all()
        assert (info.winner[info.truncated] == -1).all()
        w = info.winner >= 0
        assert b.alive[w, info.winner[w]].all() and (b.alive.sum(axis=1)[w] == 1).all()
        finished += int(info.round_over.sum())
        b.reset(info.round_over)
    assert finished > 16


# --- arguments ------------------------------------------------------------------------------------


def test_battle_arguments_validated() -> None:
    with pytest.raises(ValueError):
        TankBattle(0)
    with pytest.raises(ValueError):
        TankBattle(1, 9)
