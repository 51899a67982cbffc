"""The ``drawn`` scripted bot (arena/games/tank/drawn.py, drawn_kernel.py): its draws, its families' behaviour
and its two engines (its name: tests/arena/games/tank/test_roster.py)."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, TankBattle, TankRules, make_scripted
from arena.games.tank.drawn import DEFAULT_RANGES, MOVEMENTS, POWER_RULES, TARGETINGS, Drawn, DrawnRanges
from arena.games.tank.drawn_kernel import PARAMS, STATE


def only(**kwargs: object) -> DrawnRanges:
    """Ranges with some families or ranges pinned (a range given as one number is pinned to it)."""
    pinned = {k: (v, v) if isinstance(v, float) else v for k, v in kwargs.items()}
    return DrawnRanges(**pinned)  # type: ignore[arg-type]


def play(
    bots: tuple[Drawn, object], ticks: int, n: int, seed: int = 3, reset: bool = True
) -> tuple[np.ndarray, np.ndarray, TankBattle]:
    """Tank 0 by ``bots[0]``, tank 1 by ``bots[1]`` for ``ticks`` ticks: (actions, tank 0's damage dealt, battle)."""
    battle = TankBattle(n, 2, TankRules(max_ticks=5000), seed=seed)
    actions = np.zeros((ticks, n, 2, ACT_DIM), np.float32)
    dealt = np.zeros((ticks, n))
    for tick in range(ticks):
        obs = battle.observe()
        for i, bot in enumerate(bots):
            actions[tick, :, i] = bot.act(obs[:, i])  # type: ignore[attr-defined]
        info = battle.step(actions[tick])
        dealt[tick] = info.damage_dealt[:, 0]
        if reset and info.round_over.any():
            battle.reset(info.round_over)
            for bot in bots:
                bot.reset(info.round_over)  # type: ignore[attr-defined]
    return actions, dealt, battle


def test_the_draws_cover_every_family_within_the_documented_ranges() -> None:
    n = 4000
    bot = Drawn(n, seed=0)
    prm = {name: bot.params[:, k] for k, name in enumerate(PARAMS)}
    for key, names in (("move", MOVEMENTS), ("target", TARGETINGS), ("power_rule", POWER_RULES)):
        counts = np.bincount(prm[key].astype(int), minlength=len(names))
        assert len(counts) == len(names) and (counts > 0.5 * n / len(names)).all(), (key, counts)
    r = DEFAULT_RANGES
    for f in fields(r):
        if isinstance(getattr(r, f.name), tuple) and f.name in prm and f.name not in ("switch",):
            low, high = getattr(r, f.name)
            assert (prm[f.name] >= low).all() and (prm[f.name] <= high).all(), f.name
            assert prm[f.name].max() - prm[f.name].min() > 0.5 * (high - low), f.name  # spread over the range
    for name in ("period", "stop", "go", "switch"):
        assert (prm[name] == np.floor(prm[name])).all(), name
    stays = prm["switch"] == 0
    assert abs(stays.mean() - r.stay) < 0.05
    assert (prm["switch"][~stays] >= r.switch[0]).all() and (prm["switch"][~stays] <= r.switch[1]).all()
    assert set(np.unique(prm["direction"])) == {-1.0, 1.0} and set(np.unique(prm["corner"])) == {0.0, 1.0, 2.0, 3.0}
    st = {name: bot.state[:, k] for k, name in enumerate(STATE)}
    assert (np.abs(st["offset"]) <= prm["spread"]).all()
    assert (prm["power_min"] <= prm["power_max"]).all()


def test_the_ranges_are_validated() -> None:
    assert DrawnRanges(speed=(5.0, 5.0)).speed == (5.0, 5.0)  # a pinned parameter is a range too
    for bad in (
        {"speed": (6.0, 2.0)},
        {"speed": (0.0, 2.0)},
        {"flip": (0.0, 1.5)},
        {"lead": (0.6, float("nan"))},
        {"period": (0.5, 10.0)},
        {"movements": ("still", "flying")},
        {"targetings": ()},
        {"power_rules": ("fixed", "fixed")},
        {"power_min": (0.1, 2.0), "power_max": (1.5, 3.0)},
        {"stay": 1.5},
    ):
        with pytest.raises(ValueError, match="DrawnRanges"):
            DrawnRanges(**bad)  # type: ignore[arg-type]


def test_a_seed_makes_the_same_bot_and_reset_redraws_only_the_masked_rows() -> None:
    first, _, _ = play((Drawn(12, seed=4), make_scripted("spinner", 12, seed=9)), ticks=120, n=12)
    again, _, _ = play((Drawn(12, seed=4), make_scripted("spinner", 12, seed=9)), ticks=120, n=12)
    other, _, _ = play((Drawn(12, seed=5), make_scripted("spinner", 12, seed=9)), ticks=120, n=12)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[:, :, 0], other[:, :, 0])
    bot = Drawn(10, seed=1)
    bot.state[:] = 7.0
    params = bot.params.copy()
    mask = np.zeros(10, bool)
    mask[[2, 5]] = True
    bot.reset(mask)
    np.testing.assert_array_equal(bot.params[~mask], params[~mask])
    assert (bot.state[~mask] == 7.0).all() and not (bot.state[mask] == 7.0).all()
    assert (bot.params[mask] != params[mask]).any(axis=1).all()


def test_replay_off_leaves_the_draws_as_they_were_and_records_nothing() -> None:
    plain, asked = Drawn(16, seed=6), Drawn(16, seed=6)
    asked.replay_unbeaten(0.5)  # on, but nothing unbeaten yet: the same generator stream
    every = np.ones(16, bool)
    for _ in range(3):
        plain.reset(every)
        asked.reset(every)
    np.testing.assert_array_equal(plain.params, asked.params)
    plain.record(np.arange(16), np.zeros(16, bool))
    assert plain.unbeaten == 0


def test_an_unbeaten_draw_comes_back_at_the_share_asked_until_the_learner_beats_it() -> None:
    bot = Drawn(400, seed=2)
    bot.replay_unbeaten(0.25, capacity=8)
    hard = bot.params[0].copy()
    won = np.ones(400, bool)
    won[0] = False  # the learner lost only to tank 0's draw (a draw counts as not won, too)
    bot.record(np.arange(400), won)
    assert bot.unbeaten == 1
    bot.reset(np.ones(400, bool))
    replayed = (bot.params == hard).all(axis=1)
    assert 0.18 < replayed.mean() < 0.32, replayed.mean()
    assert (bot.state[replayed, STATE.index("direction")] == hard[PARAMS.index("direction")]).all()
    bot.record(np.flatnonzero(~replayed), np.ones(int((~replayed).sum()), bool))
    assert bot.unbeaten == 1, "beating fresh draws drops nothing"
    bot.record(np.flatnonzero(replayed)[:1], np.ones(1, bool))
    assert bot.unbeaten == 0, "beaten once, a replayed draw has been learned"
    bot.reset(np.ones(400, bool))
    assert not (bot.params == hard).all(axis=1).any()


def test_replay_keeps_the_newest_unbeaten_draws_within_its_capacity() -> None:
    bot = Drawn(6, seed=3)
    bot.replay_unbeaten(0.5, capacity=4)
    bot.record(np.arange(6), np.zeros(6, bool))
    assert bot.unbeaten == 4
    kept = np.stack(list(bot._unbeaten.values()))
    np.testing.assert_array_equal(kept, bot.params[2:])
    for share, capacity, message in ((1.0, 4, "share"), (-0.1, 4, "share"), (0.5, 0, "capacity")):
        with pytest.raises(ValueError, match=f"replay {message}"):
            bot.replay_unbeaten(share, capacity)


def test_a_still_tank_never_moves() -> None:
    still = Drawn(8, seed=2, ranges=only(movements=("still",)))
    battle = TankBattle(8, 2, TankRules(max_ticks=5000), seed=5)
    x0, y0, h0 = battle.x[:, 0].copy(), battle.y[:, 0].copy(), battle.heading[:, 0].copy()
    spinner = make_scripted("spinner", 8, seed=1)
    for _ in range(200):
        obs = battle.observe()
        a = np.stack([still.act(obs[:, 0]), spinner.act(obs[:, 1])], axis=1)
        assert (a[:, 0, :2] == 0).all()
        battle.step(a)
    np.testing.assert_array_equal(battle.x[:, 0], x0)
    np.testing.assert_array_equal(battle.y[:, 0], y0)
    np.testing.assert_array_equal(battle.heading[:, 0], h0)


def test_a_ramming_tank_closes_the_distance() -> None:
    n = 8
    rammer = Drawn(n, seed=3, ranges=only(movements=("ramming",), targetings=("none",)))
    _, _, battle = play((rammer, make_scripted("sitting", n)), ticks=250, n=n, reset=False)
    distance = np.hypot(battle.x[:, 0] - battle.x[:, 1], battle.y[:, 0] - battle.y[:, 1])
    assert (distance < 2 * battle.rules.tank_radius + 10.0).all(), distance


def test_no_targeting_never_fires() -> None:
    n = 8
    quiet = Drawn(n, seed=6, ranges=only(targetings=("none",)))
    actions, _, _ = play((quiet, make_scripted("spinner", n, seed=2)), ticks=200, n=n)
    assert (actions[:, :, 0, 3] < 0).all()
    loud = Drawn(n, seed=6, ranges=only(targetings=("head_on",)))
    actions, _, _ = play((loud, make_scripted("spinner", n, seed=2)), ticks=200, n=n)
    assert (actions[:, :, 0, 3] > 0).any()


def test_circular_targeting_hits_a_circling_tank_more_than_head_on() -> None:
    """A still shooter with one targeting family against a tank circling at speed 8 (radius ~115)."""
    n = 32
    hits = {}
    for targeting in ("head_on", "circular"):
        shooter = Drawn(
            n,
            seed=1,
            engine="numba",
            ranges=only(movements=("still",), targetings=(targeting,), power_rules=("fixed",), power=1.0, lead=1.0),
        )
        target = Drawn(
            n, seed=2, engine="numba", ranges=only(movements=("circling",), targetings=("none",), speed=8.0, turn=1.0)
        )
        _, dealt, _ = play((shooter, target), ticks=300, n=n, seed=4, reset=False)
        hits[targeting] = int((dealt > 0).sum())
    assert hits["circular"] > 2 * hits["head_on"] > 0, hits


def test_the_compiled_kernel_and_its_python_function_act_alike_on_changing_rows() -> None:
    """Both engines run one function (``drawn_act`` and its ``py_func``): bit-equal, seated on changing rows as a league
    seats a bot, rounds restarting in between. The angles are ``math.atan2`` in both, the C library's."""
    n = 40
    battle = TankBattle(n, 2, seed=9)
    rng = np.random.default_rng(3)
    python, compiled = Drawn(n, seed=7, engine="numpy"), Drawn(n, seed=7, engine="numba")
    fired = False
    for _ in range(200):
        obs = battle.observe()[:, 1]
        rows = np.flatnonzero(rng.random(n) < 0.4)
        expected = python.act(obs[rows], rows=rows)
        got = compiled.act(obs[rows], rows=rows)
        assert got.tobytes() == expected.tobytes()
        assert compiled.state.tobytes() == python.state.tobytes()
        fired = fired or bool((got[:, 3] > 0).any())
        info = battle.step(rng.uniform(-1, 1, (n, 2, ACT_DIM)).astype(np.float32))
        if info.round_over.any():
            battle.reset(info.round_over)
            python.reset(info.round_over)
            compiled.reset(info.round_over)
    assert fired
    with pytest.raises(ValueError, match="rows must name"):
        compiled.act(np.zeros((2, obs.shape[1]), np.float32), rows=np.array([0, n]))
    with pytest.raises(ValueError, match="shape"):
        compiled.act(np.zeros((n + 1, obs.shape[1]), np.float32))


def test_arena_match_plays_it_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from arena.cli import main

    assert main(["match", "--bot", "drawn", "--bot", "sitting", "--rounds", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rounds"] == 4
    assert [b["name"] for b in report["bots"]] == ["drawn", "sitting"]


def test_it_is_a_fixed_opponent_by_name() -> None:
    """``arena train --opponent drawn`` and ``arena match --rate`` build their opponents through make_opponent."""
    from arena.bots.play import ScriptedController, make_opponent

    opponent = make_opponent("drawn", 3, seed=1, engine="numba")
    assert isinstance(opponent, ScriptedController)


def test_a_population_narrowed_by_name_draws_only_its_families(capsys: pytest.CaptureFixture[str]) -> None:
    """``drawn:movements=A+B,...``: the name :func:`population_name` writes, read back by make_scripted and
    ``arena match --bot``; the same families in any order make the same name."""
    from arena.cli import main
    from arena.games.tank.drawn import population_name, population_ranges

    assert population_name() == population_name(movements="", targetings=TARGETINGS) == "drawn"
    name = population_name(movements="random+orbiting", power_rules=("fixed",))
    assert name == "drawn:movements=orbiting+random,power_rules=fixed"
    assert population_ranges(name) == DrawnRanges(movements=("orbiting", "random"), power_rules=("fixed",))
    bot = make_scripted(name, 600, seed=2)
    assert isinstance(bot, Drawn)
    drawn_moves = {MOVEMENTS[int(m)] for m in bot.params[:, PARAMS.index("move")]}
    assert drawn_moves == {"orbiting", "random"} and set(bot.params[:, PARAMS.index("power_rule")]) == {0.0}
    assert len({TARGETINGS[int(t)] for t in bot.params[:, PARAMS.index("target")]}) == len(TARGETINGS)

    assert main(["match", "--bot", "drawn:targetings=none", "--bot", "sitting", "--rounds", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [b["name"] for b in report["bots"]] == ["drawn:targetings=none", "sitting"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("drawn:", "not a drawn population"),
        ("drawn:moves=still", "unknown part 'moves'"),
        ("drawn:movements=flying", "must be distinct names from"),
        ("drawn:movements=still,movements=walls", "give each part once"),
        ("drawn:targetings=", "give each part once"),
    ],
)
def test_a_bad_population_name_is_one_line(name: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.cli import main

    with pytest.raises(ValueError, match=message):
        make_scripted(name, 1)
    assert main(["match", "--bot", name, "--bot", "sitting", "--rounds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
