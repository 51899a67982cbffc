"""The rules of the tank game (arena/games/tank/rules.py): TankRules' validation and the formulas built on it."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import TankRules
from arena.games.tank.rules import (
    DEFAULT_RULES,
    bullet_damage,
    bullet_speed,
    gun_heat_after_firing,
    max_turn_rate,
    next_velocity,
    wall_damage,
)
from tests.arena.games.tank.helpers import act, duel

# --- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"width": -1.0}, "width"),
        ({"max_speed": 0.0}, "max_speed"),
        ({"max_ticks": 2.5}, "max_ticks"),
        ({"min_bullet_power": 4.0}, "max_bullet_power"),
        ({"inactivity_zap": float("nan")}, "inactivity_zap"),
        ({"spawn_cell": 10.0}, "spawn_cell"),
    ],
)
def test_rules_validation_names_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TankRules(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bullet_collisions": 1}, "bullet_collisions must be a bool"),
        ({"width": True}, "width must be a number"),
        ({"max_ticks": 2000.0}, "max_ticks must be an int"),
        ({"bullet_speed_factor": 7.0}, "bullet_speed_factor makes bullets"),
        ({"turn_rate_speed_factor": 2.0}, "turn_rate_speed_factor makes the body turn limit negative"),
        ({"width": 40.0}, "width and height must be >= spawn_cell"),
    ],
)
def test_rules_refuse_wrong_types_and_contradictions(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TankRules(**kwargs)  # type: ignore[arg-type]


def test_defaults_and_derived_figures() -> None:
    """The shared default is Robocode's rules; the field diagonal and the start cells follow from the size."""
    assert TankRules() == DEFAULT_RULES and not DEFAULT_RULES.bullet_collisions
    assert DEFAULT_RULES.max_distance == pytest.approx(1000.0)
    assert DEFAULT_RULES.spawn_cells == 16 * 12
    assert TankRules(width=1000.0, height=1000.0, spawn_cell=100.0).spawn_cells == 100


# --- the formulas ---------------------------------------------------------------------------------


def test_acceleration_and_deceleration_limits() -> None:
    b = duel()
    speeds = []
    for _ in range(10):
        b.step(act([1.0], []))
        speeds.append(b.velocity[0, 0])
    assert speeds == [1, 2, 3, 4, 5, 6, 7, 8, 8, 8]
    speeds = []
    for _ in range(6):
        b.step(act([-1.0], []))  # brake at 2 per tick, then accelerate backwards at 1
        speeds.append(b.velocity[0, 0])
    assert speeds == [6, 4, 2, 0, -1, -2]
    # Targets between the limits are reached exactly.
    np.testing.assert_allclose(next_velocity(np.array([5.0, -3.0, 0.0]), np.array([4.5, -3.5, 0.25])), [4.5, -3.5, 0.25])


def test_formulas_give_robocodes_numbers() -> None:
    """Bullet speed 20 - 3p, damage 4p + 2(p - 1)+, gun heat 1 + p/5, wall damage |v|/2 - 1, turn 10 - 0.75|v|."""
    assert bullet_speed(1.0) == pytest.approx(17.0) and bullet_speed(3.0) == pytest.approx(11.0)
    np.testing.assert_allclose(bullet_damage(np.array([0.5, 1.0, 3.0])), [2.0, 4.0, 16.0])
    assert gun_heat_after_firing(1.0) == pytest.approx(1.2) and gun_heat_after_firing(3.0) == pytest.approx(1.6)
    np.testing.assert_allclose(wall_damage(np.array([8.0, -8.0, 2.0, 0.0])), [3.0, 3.0, 0.0, 0.0])
    np.testing.assert_allclose(max_turn_rate(np.array([0.0, 4.0, -8.0, 20.0])), [10.0, 7.0, 4.0, 4.0])
    # Other rules, other numbers: the formulas read the rules they are given.
    fast = TankRules(bullet_speed_base=30.0, max_turn_rate=20.0)
    assert bullet_speed(1.0, fast) == pytest.approx(27.0) and max_turn_rate(0.0, fast) == pytest.approx(20.0)


def test_next_velocity_brakes_at_two_and_clips_to_max_speed() -> None:
    np.testing.assert_allclose(next_velocity(np.array([8.0, -8.0, 1.0]), np.array([20.0, 0.0, -1.0])), [8.0, -6.0, -1.0])
    slow = TankRules(max_speed=4.0, acceleration=0.5)
    np.testing.assert_allclose(next_velocity(np.array([0.0, 3.8]), np.array([1.0, 9.0]), slow), [0.5, 4.0])
