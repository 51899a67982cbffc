"""The bullet phase (arena/games/tank/bullets.py): firing into free slots, flight, hits, damage and energy return.

The Tank Royale extensions of this phase (bullet-bullet collisions, the bullet event records) are
tested with the other extensions in tests/arena/royale/test_game.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle, TankRules
from tests.arena.games.tank.helpers import act, duel, fire_level


@pytest.mark.parametrize(("power", "speed", "damage", "gain"), [(1.0, 17.0, 4.0, 3.0), (3.0, 11.0, 16.0, 9.0)])
def test_bullet_speed_damage_and_energy_return(power: float, speed: float, damage: float, gain: float) -> None:
    b = duel(100, 300, 400, 300)  # shooter faces east, the target 300 to the east
    info = b.step(act([0, 0, 0, fire_level(power)], []))
    # The target's reward term sees nothing of the shot's cost: only damage dealt to it counts.
    assert info.enemy_energy_delta[0, 1] == pytest.approx(-power) and info.reward_terms()[0, 1, 1] == 0.0
    assert b.bullet_active[0].sum() == 1
    k = int(np.flatnonzero(b.bullet_active[0])[0])
    assert b.bullet_power[0, k] == pytest.approx(power)
    assert b.bullet_speed[0, k] == pytest.approx(speed)
    assert b.bullet_x[0, k] == pytest.approx(100.0 + speed)  # fired from the centre, moved once this tick
    assert info.energy_delta[0, 0] == pytest.approx(-power)
    assert b.gun_heat[0, 0] == pytest.approx(1.0 + power / 5.0)
    # The hull edge is at 400 - 18 = 382: the tick whose path reaches it is the hit.
    hit_tick = int(np.ceil((400.0 - 18.0 - 100.0) / speed))
    ticks = 1
    while b.energy[0, 1] == 100.0:
        info = b.step(act([], []))
        ticks += 1
        assert ticks < 100
    assert ticks == hit_tick
    assert b.energy[0, 1] == pytest.approx(100.0 - damage)
    assert b.energy[0, 0] == pytest.approx(100.0 - power + gain)
    assert info.energy_delta[0, 1] == pytest.approx(-damage)
    assert info.enemy_energy_delta[0, 0] == pytest.approx(-damage)
    assert info.damage_dealt[0, 0] == pytest.approx(damage) and info.damage_dealt[0, 1] == 0.0
    assert info.energy_delta[0, 0] == pytest.approx(gain)
    assert info.scores[0, 0] == pytest.approx(damage)  # 1 point per damage point
    assert not b.bullet_active[0].any()
    assert b.bullet_damage_dealt[0, 0, 1] == pytest.approx(damage)


def test_the_first_tank_on_the_path_takes_the_hit() -> None:
    """Free-for-all: a bullet hits the nearest tank along its path, never one behind it."""
    b = TankBattle(1, 3, seed=0)
    b.x[0], b.y[0] = [100.0, 300.0, 500.0], [300.0, 300.0, 300.0]
    b.heading[0] = b.gun_heading[0] = [0.0, 90.0, 90.0]
    b.gun_heat[0] = 0.0
    a = np.zeros((1, 3, ACT_DIM))
    a[0, 0, 3] = fire_level(1.0)
    b.step(a)
    a[:] = 0
    for _ in range(30):
        b.step(a)
    assert b.energy[0, 1] == pytest.approx(96.0) and b.energy[0, 2] == 100.0
    assert b.bullet_damage_dealt[0, 0].tolist() == pytest.approx([0.0, 4.0, 0.0])
    assert not b.bullet_active.any()


@pytest.mark.parametrize(("per_tank", "shots"), [(1, [1, 18]), (8, [1, 18, 35, 52])])
def test_a_shot_without_a_free_slot_is_skipped(per_tank: int, shots: list[int]) -> None:
    """A match has bullets_per_tank x tanks slots; with all of them in flight a cold gun does not fire."""
    b = duel(30, 300, 700, 550, rules=TankRules(bullets_per_tank=per_tank))
    fired = []
    for t in range(1, 61):
        energy = b.energy[0, 0]
        b.step(act([0, 0, 0, 1.0], []))  # power 3: speed 11, gun heat 1.6 (fires every 17 ticks)
        if b.energy[0, 0] < energy:
            fired.append(t)
    assert fired == shots
    assert b.bullet_active[0].sum() == min(len(shots), 2 * per_tank)
