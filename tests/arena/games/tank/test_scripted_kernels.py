"""The compiled scripted bots (``make_scripted(..., engine="numba")``) against the numpy reference: the same bots.

Seeded battles are played twice, once with numpy bots and once with compiled ones, free-running on the
numpy engine (nothing copied from one to the other): every action of every tick must be bit-equal, so the
battles stay bit-equal too. The kernels take their angles from numpy's ``arctan2`` (the C library's
``atan2`` differs from numpy's AVX-512 routine in the last bit) and use only IEEE-exact operations and the
C library's sin, cos and hypot besides, which is what ``compiled.libm_matches_numpy`` checks on this machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle, compiled, make_scripted
from arena.games.tank.observation import OBS_DIM

EXACT = compiled.libm_matches_numpy()


def _assert_same(what: str, ref: np.ndarray, got: np.ndarray) -> None:
    if EXACT:
        assert got.tobytes() == ref.tobytes(), f"{what}: first difference at {np.argwhere(got != ref)[:1].tolist()}"
    else:  # a numpy whose sin/cos are not the C library's: close, not equal
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=what)


def _battle_actions(engine: str, names: tuple[str, str], ticks: int, matches: int = 12, seed: int = 5) -> np.ndarray:
    """Every tick's actions (ticks, matches, 2, ACT_DIM) of ``names[0]`` vs ``names[1]`` with bots on ``engine``."""
    battle = TankBattle(matches, 2, seed=seed)
    bots = [make_scripted(name, matches, seed=100 + i, engine=engine) for i, name in enumerate(names)]  # type: ignore[arg-type]
    actions = np.zeros((ticks, matches, 2, ACT_DIM), np.float32)
    obs = battle.observe()
    for tick in range(ticks):
        for i, bot in enumerate(bots):
            actions[tick, :, i] = bot.act(obs[:, i])
        info = battle.step(actions[tick])
        if info.round_over.any():
            battle.reset(info.round_over)
            for bot in bots:
                bot.reset(info.round_over)
        obs = battle.observe()
    return actions


@pytest.mark.parametrize(
    "names", [("spinner", "walker"), ("walker", "tracker"), ("tracker", "spinner"), ("tracker", "tracker")]
)
def test_compiled_bots_play_the_numpy_bots_battles_bit_for_bit(names: tuple[str, str]) -> None:
    """Free-running battles with rounds ending and restarting (Walker's and Tracker's draws included)."""
    reference = _battle_actions("numpy", names, ticks=400)
    compiled_run = _battle_actions("numba", names, ticks=400)
    assert np.abs(reference[..., 3]).max() > 0, "the bots fired: the fire decision was compared too"
    _assert_same(f"{names}", reference, compiled_run)


@pytest.mark.parametrize("name", ["sitting", "spinner", "walker", "tracker"])
def test_a_bot_on_changing_rows_keeps_the_numpy_bots_state(name: str) -> None:
    """As a league seats it: each call on a random subset of its tanks (``rows``), rounds restarting in between."""
    n = 40
    battle = TankBattle(n, 2, seed=9)
    rng = np.random.default_rng(3)
    reference = make_scripted(name, n, seed=7)
    fast = make_scripted(name, n, seed=7, engine="numba")
    for _ in range(150):
        obs = battle.observe()[:, 1]
        rows = np.flatnonzero(rng.random(n) < 0.4)
        _assert_same(name, reference.act(obs[rows], rows=rows), fast.act(obs[rows], rows=rows))
        for attr in ("direction", "cooldown"):
            if hasattr(reference, attr):
                _assert_same(attr, getattr(reference, attr), getattr(fast, attr))
        info = battle.step(rng.uniform(-1, 1, (n, 2, ACT_DIM)).astype(np.float32))
        if info.round_over.any():
            battle.reset(info.round_over)
            reference.reset(info.round_over)
            fast.reset(info.round_over)


def test_a_compiled_bot_refuses_a_wrong_shape_and_an_unknown_engine() -> None:
    bot = make_scripted("tracker", 4, engine="numba")
    with pytest.raises(ValueError, match="shape"):
        bot.act(np.zeros((4, OBS_DIM - 1), np.float32))
    with pytest.raises(ValueError, match="shape"):
        bot.act(np.zeros((5, OBS_DIM), np.float32))  # more rows than the tanks it drives
    with pytest.raises(ValueError, match="rows must name"):
        bot.act(np.zeros((2, OBS_DIM), np.float32), rows=np.array([0, 4]))  # tank 4 of 4: out of range
    with pytest.raises(ValueError, match="rows must name"):
        bot.act(np.zeros((2, OBS_DIM), np.float32), rows=np.array([1]))
    with pytest.raises(ValueError, match="engine must be"):
        make_scripted("walker", 4, engine="cuda")  # type: ignore[arg-type]
