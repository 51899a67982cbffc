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


def test_a_collapse_against_a_beaten_opponent_is_warned_once_and_counted():
    """The learner beats sitting, then loses to it round after round: one warning line, a metric, and it re-arms."""
    table = LeagueTable()
    table.add([(True, 10.0, "sitting", False)] * 60)
    assert table.warnings() == [] and table.lost() == []
    table.add([(False, 0.0, "sitting", False)] * 80)  # a moving average over ~100 rounds: it takes a while
    [line] = table.warnings()
    assert line.startswith("warning: the learner no longer beats sitting") and "it had reached" in line
    assert table.metrics()["league/collapses"] == 1 and table.lost() == ["sitting"]
    table.add([(False, 0.0, "sitting", False)] * 40)
    assert table.warnings() == []  # said once per fall, not every round
    table.add([(True, 10.0, "sitting", False)] * 150)
    assert table.lost() == []
    table.add([(False, 0.0, "sitting", False)] * 100)
    assert len(table.warnings()) == 1 and table.summary()["collapses"] == 2


def test_no_collapse_from_an_opponent_never_beaten_nor_from_snapshots():
    table = LeagueTable()
    table.add([(False, 0.0, "tracker", False)] * 100 + [(True, 1.0, "self@v200", False)] * 60)
    table.add([(False, 0.0, "self@v200", False)] * 60 + [(True, 1.0, "tracker", False)] * 10)
    assert table.warnings() == [] and table.metrics()["league/collapses"] == 0
