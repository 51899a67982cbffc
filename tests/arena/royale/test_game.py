"""The engine's Tank Royale extensions: per-step events, radar scans, turn coupling, bullet-bullet collisions.

Each case places tanks by hand and checks the recorded events against the geometry; the last
ones check that switching the extensions off leaves the training path exactly as it was.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.events import StepEvents
from arena.games.tank.rules import TankRules
from tests.arena.games.tank.test_engine import act
from tests.arena.games.tank.test_engine import duel as place

ROYALE_RULES = TankRules(bullet_collisions=True)


def duel(rules: TankRules = ROYALE_RULES, **placement: float) -> TankBattle:
    """The engine tests' hand-placed 1v1 (guns cold), with Tank Royale's rules and events on."""
    b = place(**placement, rules=rules)
    b.record_events = True
    return b


def events(b: TankBattle, actions: np.ndarray) -> StepEvents:
    info = b.step(actions)
    assert info.events is not None and b.last_events is info.events
    return info.events


def test_events_off_by_default() -> None:
    """The training path records nothing: StepInfo.events stays None."""
    b = TankBattle(4, 2, seed=0)
    info = b.step(np.zeros((4, 2, ACT_DIM)))
    assert info.events is None and b.last_events is None


def test_scan_needs_the_enemy_in_the_radar_sweep() -> None:
    """A radar sweeping over the enemy scans it; one sweeping away does not; range is 1200."""
    b = duel()
    ev = events(b, act([0, 0, 0, 0, 0.2], [0, 0, 0, 0, 0]))  # tank 0's radar turns 9 degrees left from east
    assert ev.scanned[0, 0, 1]  # the enemy due east (0 degrees) is inside the arc [0, 9] (its circle)
    assert not ev.scanned[0, 1, 0]  # tank 1 neither moved nor turned: no scan (Tank Royale)
    assert ev.radar_sweep[0, 0] == pytest.approx(9.0)
    b = duel(h0=90.0)  # radar points north; the enemy is east
    ev = events(b, act([0, 0, 0, 0, 1.0]))  # 90 -> 135: away from the enemy
    assert not ev.scanned[0, 0, 1]
    ev = events(b, act([0, 0, 0, 0, -1.0]))  # 135 -> 90
    ev = events(b, act([0, 0, 0, 0, -1.0]))  # 90 -> 45
    assert not ev.scanned[0, 0, 1]
    ev = events(b, act([0, 0, 0, 0, -1.0]))  # 45 -> 0: sweeps over east
    assert ev.scanned[0, 0, 1]
    far = TankRules(width=2000.0, height=600.0, bullet_collisions=True)
    b = duel(x0=100.0, x1=1400.0, rules=far)  # 1300 apart: beyond 1200 + 18
    assert not events(b, act([0, 0, 0, 0, 0.1])).scanned.any()


def test_rescan_scans_without_moving() -> None:
    """A still tank scans along its radar line only when it asks to rescan."""
    b = duel()
    assert not events(b, act()).scanned.any()
    b.rescan = np.array([[True, False]])
    ev = events(b, act())
    assert ev.scanned[0, 0, 1] and not ev.scanned[0, 1, 0]
    assert ev.radar_sweep[0, 0] == 0.0


def test_turn_coupling_decouples_gun_and_radar() -> None:
    """adjustGunForBodyTurn keeps the gun still while the body turns; the radar follows the factors."""
    b = duel(h0=0.0)
    b.turn_coupling = np.array([[[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]])
    ev = events(b, act([0, 1.0, 0, 0, 0], [0, 1.0, 0, 0, 0]))
    assert b.heading[0, 0] == pytest.approx(10.0) and b.gun_heading[0, 0] == pytest.approx(0.0)
    assert b.radar_heading[0, 0] == pytest.approx(0.0)
    assert b.gun_heading[0, 1] == pytest.approx(190.0) and b.radar_heading[0, 1] == pytest.approx(190.0)
    assert ev.body_turn[0, 0] == pytest.approx(10.0) and ev.gun_turn[0, 0] == 0.0


def test_default_coupling_is_bit_identical() -> None:
    """turn_coupling of all ones gives the same headings as None (the trained path)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (50, 8, 2, ACT_DIM))
    b1, b2 = TankBattle(8, 2, seed=3), TankBattle(8, 2, seed=3)
    b2.turn_coupling = np.ones((8, 2, 3))
    for step in a:
        b1.step(step)
        b2.step(step)
    np.testing.assert_allclose(b1.gun_heading, b2.gun_heading, atol=1e-9)
    np.testing.assert_allclose(b1.radar_heading, b2.radar_heading, atol=1e-9)


def test_fire_and_bullet_hit_events() -> None:
    """Firing records the bullet at the tank's centre; its hit names owner, victim and damage."""
    b = duel(x0=200.0, x1=300.0)
    fired = events(b, act([0, 0, 0, 1.0])).fired  # power 3 (speed 11), straight at the enemy 100 units east
    assert len(fired) == 1 and fired.owner[0] == 0
    assert (fired.x[0], fired.y[0], fired.heading[0]) == (200.0, 300.0, 0.0)
    assert fired.power[0] == pytest.approx(3.0)
    for _ in range(2, 10):
        hit = events(b, act()).bullet_hits
        if len(hit):
            break
    assert b.tick[0] == 8  # the path 277 -> 288 comes within 18 of the enemy's centre at 300
    assert hit.owner[0] == 0 and hit.victim[0] == 1 and hit.damage[0] == pytest.approx(16.0)
    assert hit.slot[0] == fired.slot[0] and b.energy[0, 1] == pytest.approx(84.0)


def test_bullet_wall_event() -> None:
    """A bullet whose end point leaves the field is a wall hit, with its last position."""
    b = duel(x0=780.0 - 18.0, x1=100.0, h0=0.0)
    ev = events(b, act([0, 0, 0, 0.0001]))
    assert len(ev.fired) == 1
    ev = events(b, act())
    assert len(ev.bullet_walls) == 1 and ev.bullet_walls.x[0] >= 800.0 and ev.bullet_walls.owner[0] == 0
    assert not b.bullet_active.any()


def test_wall_and_collision_events() -> None:
    """Driving into a wall and into the other tank are recorded, with who rammed whom."""
    b = duel(x0=800.0 - 18.5, h0=0.0, x1=100.0)
    ev = events(b, act([1.0]))
    assert ev.hit_wall[0, 0] and not ev.hit_wall[0, 1]
    b = duel(x0=300.0, x1=336.5, h0=0.0, h1=0.0)
    ev = events(b, act([1.0]))
    assert ev.collided[0, 0, 1] and ev.collided[0, 1, 0]
    assert ev.rammed[0, 0, 1] and not ev.rammed[0, 1, 0]


def test_bullet_bullet_collision() -> None:
    """Two bullets whose paths cross in the same tick destroy each other (rule on) and hit nothing."""

    def crossing(rules: TankRules) -> TankBattle:
        b = duel(x0=200.0, y0=300.0, x1=300.0, y1=200.0, h0=0.0, h1=90.0, rules=rules)
        events(b, act([0, 0, 0, 1.0], [0, 0, 0, 1.0]))  # power 3 (speed 11): east from tank 0, north from tank 1
        return b

    b = crossing(ROYALE_RULES)
    for _ in range(12):
        ev = events(b, act())
        if len(ev.bullet_bullets[0]):
            break
    else:
        pytest.fail("the bullets never met")
    a, c = ev.bullet_bullets
    assert {int(a.owner[0]), int(c.owner[0])} == {0, 1}
    assert b.tick[0] == 10  # both are 100 units from (300, 300): they cross it in the same tick
    assert not b.bullet_active.any() and not len(ev.bullet_hits)
    b = crossing(dataclasses.replace(ROYALE_RULES, bullet_collisions=False))
    for _ in range(12):
        assert not len(events(b, act()).bullet_bullets[0])
    assert b.bullet_active.sum() == 2  # without the rule they fly on


def test_many_bullets_take_the_per_match_path() -> None:
    """With more bullets in flight than the compact block takes, pairs are still found per match only."""
    M = 40  # 80 bullets: beyond the compact (K, K) path
    b = TankBattle(M, 2, ROYALE_RULES, seed=0)
    b.record_events = True
    b.x[:] = [200.0, 300.0]
    b.y[:] = [300.0, 200.0]
    b.heading[:] = b.gun_heading[:] = b.radar_heading[:] = [0.0, 90.0]
    b.gun_heat[:] = 0.0
    b.step(np.tile(np.array([[0, 0, 0, 1.0, 0], [0, 0, 0, 1.0, 0]]), (M, 1, 1)))
    for _ in range(9):
        ev = b.step(np.zeros((M, 2, ACT_DIM))).events
    assert ev is not None and b.tick[0] == 10
    first, second = ev.bullet_bullets
    assert sorted(first.match.tolist()) == list(range(M)) and (first.match == second.match).all()
    assert not b.bullet_active.any()


def test_recording_events_does_not_change_the_game() -> None:
    """The same seed and actions give the same states with and without record_events."""
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (300, 16, 2, ACT_DIM))
    b1, b2 = TankBattle(16, 2, seed=5), TankBattle(16, 2, seed=5)
    b2.record_events = True
    for step in a:
        i1, i2 = b1.step(step), b2.step(step)
        b1.reset(i1.round_over)
        b2.reset(i2.round_over)
    for name in ("x", "y", "energy", "heading", "radar_heading", "bullet_x", "scores"):
        np.testing.assert_array_equal(getattr(b1, name), getattr(b2, name))
