"""What a tank senses (arena/games/tank/observation.py): OBS_FIELDS, build_observation and the lead geometry.

``test_observation_matches_reference`` checks every column against a slow per-tank computation
(docs/arena.md cites it).
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, OBS_DIM, OBS_FIELDS, TankBattle
from arena.games.tank.observation import lead_direction, nearest_enemy
from tests.arena.games.tank.helpers import duel


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


def test_nearest_enemy_and_lead_of_a_still_target() -> None:
    """Free-for-all: the nearest living enemy is picked; a still one is led head-on; none gives zeros."""
    b = TankBattle(1, 3, seed=0)
    b.x[0], b.y[0] = [100.0, 500.0, 100.0], [300.0, 300.0, 400.0]
    b.velocity[0] = 0.0
    has, dx, dy, dist, j = nearest_enemy(b.state)
    assert has[0].all() and j[0].tolist() == [2, 0, 0]
    assert (dx[0, 0], dy[0, 0], dist[0, 0]) == pytest.approx((0.0, 100.0, 100.0))
    lx, ly = lead_direction(b.state, b.rules, has, dx, dy, j)
    assert (lx[0, 0], ly[0, 0]) == pytest.approx((0.0, 1.0))
    np.testing.assert_allclose(np.hypot(lx, ly), 1.0)
    b.alive[0, 1:] = False
    has, dx, dy, dist, j = nearest_enemy(b.state)
    assert not has[0, 0]
    lx, ly = lead_direction(b.state, b.rules, has, dx, dy, j)
    assert lx[0, 0] == 0.0 and ly[0, 0] == 0.0
