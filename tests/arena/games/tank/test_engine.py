"""The Robocode-style tank engine: determinism, physics against hand-computed values, rounds, scores, bots."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, OBS_DIM, OBS_FIELDS, SCRIPTED, TankBattle, TankRules, make_scripted, play_scripted
from arena.games.tank.rules import next_velocity

RULES = TankRules()

# --- helpers --------------------------------------------------------------------------------------


def duel(x0=200.0, y0=300.0, x1=600.0, y1=300.0, h0=0.0, h1=180.0, rules: TankRules = RULES) -> TankBattle:
    """One 1v1 match with tanks placed by hand, both still, guns along the body, gun heat 0."""
    b = TankBattle(1, 2, rules, seed=0)
    b.x[0] = [x0, x1]
    b.y[0] = [y0, y1]
    b.heading[0] = [h0, h1]
    b.gun_heading[0] = [h0, h1]
    b.radar_heading[0] = [h0, h1]
    b.gun_heat[0] = 0.0
    return b


def act(*tanks: list[float]) -> np.ndarray:
    """Actions for one 1v1 match: one list of up to 5 floats per tank (missing tanks/columns 0)."""
    a = np.zeros((1, max(2, len(tanks)), ACT_DIM))
    for i, t in enumerate(tanks):
        a[0, i, : len(t)] = t
    return a


def fire_level(power: float, r: TankRules = RULES) -> float:
    return (power - r.min_bullet_power) / (r.max_bullet_power - r.min_bullet_power)


def state(b: TankBattle) -> list[np.ndarray]:
    names = [
        "x",
        "y",
        "heading",
        "velocity",
        "energy",
        "gun_heading",
        "radar_heading",
        "gun_heat",
        "alive",
        "scores",
        "tick",
        "round",
        "bullet_active",
        "bullet_x",
        "bullet_y",
        "bullet_power",
    ]
    return [getattr(b, n).copy() for n in names]


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
    with pytest.raises(ValueError, match="shape"):
        b.step(np.zeros((1, 2, 4)))


# --- guns and bullets -----------------------------------------------------------------------------


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


# --- observation and step info --------------------------------------------------------------------


def test_observation_shape_finite_bounded() -> None:
    assert len(OBS_FIELDS) == OBS_DIM == 25 and len(set(OBS_FIELDS)) == OBS_DIM
    for n_tanks in (2, 5):
        b = TankBattle(16, n_tanks, seed=4)
        rng = np.random.default_rng(0)
        lo, hi = np.inf, -np.inf
        for _ in range(300):
            obs = b.observe()
            assert obs.shape == (16, n_tanks, OBS_DIM) and obs.dtype == np.float32
            assert np.isfinite(obs).all()
            lo, hi = min(lo, obs.min()), max(hi, obs.max())
            info = b.step(rng.uniform(-1, 1, (16, n_tanks, ACT_DIM)))
            b.reset(info.round_over)
        assert lo >= -1.0 - 1e-6 and hi <= 1.5


def test_observation_values() -> None:
    b = duel(200, 300, 600, 300, h0=90.0, h1=180.0)
    b.gun_heading[0, 0] = 0.0  # gun points east, straight at the enemy
    b.velocity[0] = [4.0, -8.0]
    o = b.observe()[0, 0]
    f = dict(zip(OBS_FIELDS, o.tolist(), strict=True))
    assert f["x"] == pytest.approx(-0.5) and f["y"] == pytest.approx(0.0)
    assert f["heading_sin"] == pytest.approx(1.0) and f["heading_cos"] == pytest.approx(0.0, abs=1e-6)
    assert f["velocity"] == pytest.approx(0.5)
    assert f["energy"] == pytest.approx(1.0)
    assert f["gun_rel_sin"] == pytest.approx(-1.0)  # gun 90 degrees right of the body
    assert f["gun_heat"] == 0.0
    assert f["enemy_bearing_sin"] == pytest.approx(-1.0)  # enemy on the right
    assert f["enemy_distance"] == pytest.approx(0.4)
    assert f["enemy_heading_sin"] == pytest.approx(1.0)  # enemy heading 180 = own + 90
    assert f["enemy_velocity"] == pytest.approx(-1.0)
    assert f["gun_bearing_sin"] == pytest.approx(0.0, abs=1e-6) and f["gun_bearing_cos"] == pytest.approx(1.0)
    assert f["wall_ahead"] == pytest.approx((600 - 18 - 300) / 1000)
    assert f["wall_left"] == pytest.approx((200 - 18) / 1000)
    assert f["wall_behind"] == pytest.approx((300 - 18) / 1000)
    assert f["wall_right"] == pytest.approx((800 - 18 - 200) / 1000)
    assert f["enemies_alive"] == pytest.approx(1 / 7)
    # Moving straight away along the line of fire: the intercept is dead ahead of the gun too.
    assert f["lead_bearing_sin"] == pytest.approx(0.0, abs=1e-6) and f["lead_bearing_cos"] == pytest.approx(1.0)
    # Crossing instead (enemy heading 90, moving up at 8): lead up, to the left of a gun aimed east.
    b.heading[0, 1], b.velocity[0, 1] = 90.0, 8.0
    f = dict(zip(OBS_FIELDS, b.observe()[0, 0].tolist(), strict=True))
    assert f["lead_bearing_sin"] > 0.2 and f["gun_bearing_sin"] == pytest.approx(0.0, abs=1e-6)
    # No living enemy: the enemy part is zeros.
    b.alive[0, 1] = False
    o = b.observe()[0, 0]
    assert (o[9:18] == 0).all() and o[22] == 0 and (o[23:25] == 0).all()


def reference_obs(b: TankBattle, m: int, i: int) -> list[float]:
    """One tank's observation computed the slow, obvious way (per tank, math module)."""
    import math

    r = b.rules
    rel = lambda deg: math.radians(deg)  # noqa: E731
    h = b.heading[m, i]
    row = [b.x[m, i] / r.width * 2 - 1, b.y[m, i] / r.height * 2 - 1, math.sin(rel(h)), math.cos(rel(h))]
    row += [b.velocity[m, i] / 8, b.energy[m, i] / 100]
    row += [math.sin(rel(b.gun_heading[m, i] - h)), math.cos(rel(b.gun_heading[m, i] - h)), b.gun_heat[m, i] / 3]
    enemies = [j for j in range(b.n_tanks) if j != i and b.alive[m, j]]
    nearest = None
    if enemies:
        j = nearest = min(enemies, key=lambda k: math.hypot(b.x[m, k] - b.x[m, i], b.y[m, k] - b.y[m, i]))
        dx, dy = b.x[m, j] - b.x[m, i], b.y[m, j] - b.y[m, i]
        ang = math.degrees(math.atan2(dy, dx))
        row += [math.sin(rel(ang - h)), math.cos(rel(ang - h)), math.hypot(dx, dy) / 1000, b.energy[m, j] / 100]
        row += [math.sin(rel(b.heading[m, j] - h)), math.cos(rel(b.heading[m, j] - h)), b.velocity[m, j] / 8]
        row += [math.sin(rel(ang - b.gun_heading[m, i])), math.cos(rel(ang - b.gun_heading[m, i]))]
    else:
        row += [0.0] * 9
    for d in (h, h + 90, h + 180, h - 90):  # ahead, left, behind, right: march until the hull touches a wall
        c, s_ = math.cos(rel(d)), math.sin(rel(d))
        ts = []
        if abs(c) > 1e-12:
            ts.append(((r.width - 18 - b.x[m, i]) if c > 0 else (18 - b.x[m, i])) / c)
        if abs(s_) > 1e-12:
            ts.append(((r.height - 18 - b.y[m, i]) if s_ > 0 else (18 - b.y[m, i])) / s_)
        row.append(min(min(ts) / 1000, 1.0))
    row.append(len(enemies) / 7)
    row.extend(reference_lead(b, m, i, nearest))
    return row


def reference_lead(b: TankBattle, m: int, i: int, k: int | None) -> list[float]:
    """sin, cos of (linear-targeting intercept of enemy k for a power-2 bullet - gun heading)."""
    import math

    if k is None:
        return [0.0, 0.0]
    r = b.rules
    speed = r.bullet_speed_base - r.bullet_speed_factor * 2.0
    vx = b.velocity[m, k] * math.cos(math.radians(b.heading[m, k]))
    vy = b.velocity[m, k] * math.sin(math.radians(b.heading[m, k]))
    px, py = b.x[m, k], b.y[m, k]
    for _ in range(3):
        t = math.hypot(px - b.x[m, i], py - b.y[m, i]) / speed + 1.0
        px = min(max(b.x[m, k] + vx * t, 18.0), r.width - 18.0)
        py = min(max(b.y[m, k] + vy * t, 18.0), r.height - 18.0)
    angle = math.atan2(py - b.y[m, i], px - b.x[m, i]) - math.radians(b.gun_heading[m, i])
    return [math.sin(angle), math.cos(angle)]


@pytest.mark.parametrize("n_tanks", [2, 3, 8])
def test_observation_matches_reference(n_tanks: int) -> None:
    b = TankBattle(6, n_tanks, seed=11)
    rng = np.random.default_rng(1)
    for _ in range(120):
        b.step(rng.uniform(-1, 1, (6, n_tanks, ACT_DIM)))
    b.alive[0, 1:] = False  # one match without living enemies for tank 0
    obs = b.observe()
    for m in range(6):
        for i in range(n_tanks):
            np.testing.assert_allclose(obs[m, i], reference_obs(b, m, i), atol=2e-6, err_msg=f"match {m} tank {i}")


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


# --- rules validation -----------------------------------------------------------------------------


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


def test_battle_arguments_validated() -> None:
    with pytest.raises(ValueError):
        TankBattle(0)
    with pytest.raises(ValueError):
        TankBattle(1, 9)


# --- scripted bots --------------------------------------------------------------------------------


def test_make_scripted_names() -> None:
    assert set(SCRIPTED) == {"sitting", "spinner", "walker", "tracker"}
    for name in SCRIPTED:
        bot = make_scripted(name, 3, seed=1)
        assert bot.name == name
        out = bot.act(TankBattle(3, 2, seed=0).observe()[:, 0])
        assert out.shape == (3, ACT_DIM) and out.dtype == np.float32 and (np.abs(out) <= 1).all()
    with pytest.raises(ValueError, match="sitting"):
        make_scripted("nope", 1)


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


def test_tracker_beats_sitting() -> None:
    res = play_scripted(["tracker", "sitting"], rounds=50, seed=0, n_matches=50)
    assert res["rounds"] == 50
    wins = res["wins"]
    assert isinstance(wins, list) and wins[0] >= 45
    assert res["mean_score"][0] > res["mean_score"][1]  # type: ignore[index]
