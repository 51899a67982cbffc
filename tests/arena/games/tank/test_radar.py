"""The radar observation (arena/games/tank/radar.py): the scans it keeps are the engine's, its columns the
full observation's maths on the remembered enemy."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle, TankRules
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.radar import RADAR_OBS_DIM, RADAR_OBS_FIELDS, SCAN_AGE_TICKS, RadarMemory, observation_dim

ENEMY = [9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 24]
OWN = [c for c in range(OBS_DIM) if c not in ENEMY]


def run(ticks: int, n: int = 16, seed: int = 0, radar_turn: float = 1.0):
    """Random actions, radar turns drawn in [-radar_turn, radar_turn]; yields (battle, memory, info) every tick."""
    battle = TankBattle(n, 2, TankRules(max_ticks=400), seed=seed)
    battle.record_events = True
    memory = RadarMemory(battle)
    rng = np.random.default_rng(seed)
    for _ in range(ticks):
        actions = rng.uniform(-1, 1, (n, 2, ACT_DIM))
        actions[..., 4] *= radar_turn
        memory.before_step()
        info = battle.step(actions)
        memory.after_step()
        yield battle, memory, info
        if info.round_over.any():
            battle.reset(info.round_over)
            memory.reset(info.round_over)


def test_the_scans_are_the_engines_recorded_scans() -> None:
    scans = 0
    for _, memory, info in run(600):
        assert info.events is not None
        engine = np.stack([info.events.scanned[:, 0, 1], info.events.scanned[:, 1, 0]], axis=1)
        np.testing.assert_array_equal(memory.scanned, engine)
        scans += int(engine.sum())
    assert scans > 100  # the radars do sweep over their enemies


def test_a_fresh_scan_shows_the_enemy_as_the_full_observation_does_and_an_old_one_ages() -> None:
    fresh = stale = 0
    for battle, memory, _ in run(600):
        full = battle.observe()
        radar = memory.observe(full)
        assert radar.shape == (16, 2, RADAR_OBS_DIM) and radar.dtype == np.float32
        np.testing.assert_array_equal(radar[..., OWN], full[..., OWN])  # its own state, exactly
        now = memory.scanned & battle.alive
        np.testing.assert_allclose(radar[now][:, ENEMY], full[now][:, ENEMY], atol=1e-6)
        np.testing.assert_allclose(radar[now][:, -1], 0.0)
        fresh += int(now.sum())
        seen_before = np.isfinite(memory.age) & ~memory.scanned & battle.alive
        stale += int(seen_before.sum())
        np.testing.assert_allclose(radar[seen_before][:, -1], np.minimum(memory.age[seen_before] / SCAN_AGE_TICKS, 1.0))
        angle = np.radians(battle.radar_heading - battle.heading)
        np.testing.assert_allclose(radar[..., 25], np.sin(angle), atol=1e-6)
        np.testing.assert_allclose(radar[..., 26], np.cos(angle), atol=1e-6)
    assert fresh > 100 and stale > 100


def test_nothing_is_known_of_the_enemy_before_the_first_scan_of_a_round() -> None:
    battle = TankBattle(4, 2, seed=3)
    memory = RadarMemory(battle)
    radar = memory.observe()
    assert (radar[..., ENEMY] == 0).all() and (radar[..., -1] == 1.0).all()
    assert (radar[..., 22] == battle.observe()[..., 22]).all()  # how many enemies live is known
    # A radar that never turns, on tanks that never move, sweeps nothing: the enemy stays unknown.
    for _ in range(5):
        memory.before_step()
        battle.step(np.zeros((4, 2, ACT_DIM)))
        memory.after_step()
    assert not memory.scanned.any() and (memory.observe()[..., ENEMY] == 0).all()


def test_a_round_reset_forgets_only_its_own_matches() -> None:
    *_, (battle, memory, _) = run(200, n=8, seed=1)
    seen = np.isfinite(memory.age)
    assert seen.any()
    mask = np.zeros(8, bool)
    mask[0] = True
    battle.reset(mask)
    memory.reset(mask)
    assert not np.isfinite(memory.age[0]).any() and (np.isfinite(memory.age[1:]) == seen[1:]).all()


def test_the_fields_and_the_modes() -> None:
    assert RADAR_OBS_FIELDS[:OBS_DIM] == RADAR_OBS_FIELDS[:25] and RADAR_OBS_DIM == OBS_DIM + 3
    assert (observation_dim("full"), observation_dim("radar")) == (OBS_DIM, RADAR_OBS_DIM)
    with pytest.raises(ValueError, match="unknown tank observation 'sonar'"):
        observation_dim("sonar")
    with pytest.raises(ValueError, match="1v1"):
        RadarMemory(TankBattle(2, 3))
    with pytest.raises(RuntimeError, match="before_step"):
        RadarMemory(TankBattle(2, 2)).after_step()
