"""openskill ratings of the league (arena/league/ratings.py) and a scripted round-robin (arena/league/round_robin.py)."""

from __future__ import annotations

import pytest

from arena.bots.play import ScriptedController
from arena.games.tank.engine import TankRules
from arena.league import LEARNER, SELF, LeagueTable, Ratings, cross_table, rate, round_robin


def scripted(name: str):
    return lambda n, seed: ScriptedController(name, n, seed)


def test_ratings_move_the_right_way_on_a_scripted_round_robin():
    """tracker beats sitting (docs/arena.md's cross table): it ends rated above it, with shrinking uncertainty."""
    players = {name: scripted(name) for name in ("sitting", "spinner", "tracker")}
    results = round_robin(players, rounds_per_pair=8, seed=3, rules=TankRules(max_ticks=600))
    assert len(results) == 3 * 8
    assert {(a, b) for a, b, _ in results} >= {("sitting", "tracker"), ("tracker", "sitting")}  # both seats
    table = rate(results).table()
    order = [row["name"] for row in table]
    assert order.index("tracker") < order.index("sitting")
    assert all(row["sigma"] < 25 / 3 for row in table) and all(row["rounds"] == 16 for row in table)
    scores = cross_table(results)
    assert scores["tracker"]["sitting"] > 0.5
    assert scores["sitting"]["tracker"] == pytest.approx(1 - scores["tracker"]["sitting"])


def test_a_draw_moves_ratings_toward_each_other():
    ratings = Ratings()
    for _ in range(5):
        ratings.record("a", "b", 1.0)
    gap = {r["name"]: r["mu"] for r in ratings.table()}
    ratings.record("a", "b", 0.5)
    after = {r["name"]: r["mu"] for r in ratings.table()}
    assert after["a"] - after["b"] < gap["a"] - gap["b"]
    with pytest.raises(ValueError):
        ratings.record("a", "a", 1.0)


def test_league_table_rates_the_learner_but_not_its_self_play():
    table = LeagueTable()
    table.add([(True, 10.0, "sitting", False)] * 20 + [(False, 0.0, "tracker", False)] * 20 + [(False, 0.0, SELF, True)] * 5)
    names = [row["name"] for row in table.summary()["ratings"]]
    assert SELF not in names and names.index("tracker") < names.index(LEARNER) < names.index("sitting")
    summary = table.summary()["opponents"]
    assert summary["sitting"]["win_rate"] == 1.0 and summary[SELF]["draws"] == 5
    row = table.metrics()
    assert row["league/win_rate/sitting"] > 0.9 and f"league/rating/{LEARNER}" in row
    assert LEARNER in table.leader_line()


def test_league_table_round_trips(tmp_path):
    table = LeagueTable()
    table.add([(True, 1.0, "walker", False), (False, 0.0, "tracker", True)])
    table.save(tmp_path / "table.json")
    from arena.league.commands import load_table

    again = load_table(tmp_path)
    assert again is not None and again.summary() == table.summary()
    (tmp_path / "table.json").write_text("{")
    with pytest.raises(ValueError, match="unreadable"):
        load_table(tmp_path)
