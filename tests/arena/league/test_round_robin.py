"""Every pair of bots plays (arena/league/round_robin.py): round_robin, rate and cross_table."""

from __future__ import annotations

import math

import pytest

from arena.bots.play import ScriptedController
from arena.games.tank.rules import TankRules
from arena.league import cross_table, rate, round_robin


def scripted(name: str):
    return lambda n, seed: ScriptedController(name, n, seed)


def test_ratings_move_the_right_way_on_a_scripted_round_robin():
    """tracker beats sitting (docs/arena.md's cross table): it ends rated above it."""
    players = {name: scripted(name) for name in ("sitting", "spinner", "tracker")}
    results = round_robin(players, rounds_per_pair=8, seed=3, rules=TankRules(max_ticks=600))
    assert len(results) == 3 * 8
    assert {(a, b) for a, b, _ in results} >= {("sitting", "tracker"), ("tracker", "sitting")}  # both seats
    table = rate(results)
    order = [row["name"] for row in table]
    assert order.index("tracker") < order.index("sitting")
    assert all(row["rounds"] == 16 for row in table)
    scores = cross_table(results)
    assert scores["tracker"]["sitting"] > 0.5
    assert scores["sitting"]["tracker"] == pytest.approx(1 - scores["tracker"]["sitting"])


def test_every_pair_plays_from_both_seats_and_progress_counts_the_rounds():
    seen: list[tuple[int, int]] = []
    players = {"a": scripted("sitting"), "b": scripted("sitting")}
    results = round_robin(
        players, rounds_per_pair=2, seed=0, rules=TankRules(max_ticks=20), progress=lambda *p: seen.append(p)
    )
    assert results == [("a", "b", 0.5), ("b", "a", 0.5)]  # two sitting bots: the tick cap, a draw; schedule order
    assert seen[-1] == (2, 2)
    with pytest.raises(ValueError, match="at least two"):
        round_robin({"a": scripted("sitting")}, 1)
    with pytest.raises(ValueError, match="rounds per pair"):
        round_robin(players, 0)


def test_cross_table_scores_both_sides_of_every_pair():
    table = cross_table([("a", "b", 1.0), ("b", "a", 0.0), ("a", "b", 0.5), ("c", "a", 1.0)])
    assert table["a"]["b"] == 0.8333 and table["b"]["a"] == 0.1667  # rounded to 4 places
    assert table["c"]["a"] == 1.0 and table["a"]["c"] == 0.0 and "c" not in table["b"]
    assert [row["name"] for row in rate([("a", "b", 1.0)] * 3)] == ["a", "b"]


def test_rate_fits_all_rounds_at_once_so_their_order_does_not_matter():
    """a beats b 6-4 head to head and both beat c every round: a first, and any order of the rounds agrees.

    openskill's one-round-at-a-time update, which the round-robin used before, ranked one run's policy 1st,
    4th or 6th of 7 depending on the order of the same rounds.
    """
    results = [("a", "b", 1.0)] * 6 + [("b", "a", 1.0)] * 4 + [("a", "c", 1.0)] * 10 + [("c", "b", 0.0)] * 10
    table = rate(results)
    assert [row["name"] for row in table] == ["a", "b", "c"]
    assert [row["score"] for row in table] == [0.8, 0.7, 0.0] and all(row["rounds"] == 20 for row in table)
    assert sum(row["elo"] for row in table) == pytest.approx(0.0, abs=0.2)  # the mean is 0
    # Bradley-Terry: a's edge over b is log(odds) of its 6-4 record (7-5 with the prior's drawn round), in Elo.
    elo = {row["name"]: row["elo"] for row in table}
    assert elo["a"] - elo["b"] == pytest.approx(400 * math.log10(7 / 5), abs=25)
    for order in (results[::-1], results[1::2] + results[::2], sorted(results)):
        assert rate(order) == table
    assert rate([]) == []
    with pytest.raises(ValueError, match="itself"):
        rate([("a", "a", 1.0)])
    with pytest.raises(ValueError, match="prior_rounds"):
        rate(results, prior_rounds=0)


def test_a_recurrent_radar_policy_plays_the_round_robin_from_its_radar_observation():
    """A policy of the radar observation (28 columns) in either seat is handed its radar's view, with its state."""
    from arena.bots.play import PolicyController
    from tests.arena.bots.test_play import policy

    radar = policy(28, "gru", seed=2)
    players = {"radar": lambda n, seed: PolicyController("radar", radar, seed), "spinner": scripted("spinner")}
    results = round_robin(players, rounds_per_pair=4, seed=1, rules=TankRules(max_ticks=60))
    assert len(results) == 4 and {a for a, _, _ in results} == {"radar", "spinner"}
