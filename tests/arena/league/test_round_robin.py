"""Every pair of bots plays (arena/league/round_robin.py): round_robin, rate and cross_table."""

from __future__ import annotations

import pytest

from arena.bots.play import ScriptedController
from arena.games.tank.engine import TankRules
from arena.league import cross_table, rate, round_robin


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


def test_every_pair_plays_from_both_seats_and_progress_counts_the_rounds():
    seen: list[tuple[int, int]] = []
    players = {"a": scripted("sitting"), "b": scripted("sitting")}
    results = round_robin(
        players, rounds_per_pair=2, seed=0, rules=TankRules(max_ticks=20), progress=lambda *p: seen.append(p)
    )
    assert sorted(results) == [("a", "b", 0.5), ("b", "a", 0.5)]  # two sitting bots: the tick cap, a draw
    assert seen[-1] == (2, 2)
    with pytest.raises(ValueError, match="at least two"):
        round_robin({"a": scripted("sitting")}, 1)
    with pytest.raises(ValueError, match="rounds per pair"):
        round_robin(players, 0)


def test_cross_table_scores_both_sides_of_every_pair():
    table = cross_table([("a", "b", 1.0), ("b", "a", 0.0), ("a", "b", 0.5), ("c", "a", 1.0)])
    assert table["a"]["b"] == 0.8333 and table["b"]["a"] == 0.1667  # rounded to 4 places
    assert table["c"]["a"] == 1.0 and table["a"]["c"] == 0.0 and "c" not in table["b"]
    assert [row["name"] for row in rate([("a", "b", 1.0)] * 3).table()] == ["a", "b"]
