"""openskill ratings of the league (arena/league/ratings.py); the round-robin that feeds them is in test_round_robin.py."""

from __future__ import annotations

import pytest

from arena.league import LEARNER, SELF, LeagueTable, Ratings


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
