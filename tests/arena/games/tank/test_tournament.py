"""Scripted bots against each other (arena/games/tank/tournament.py): the round runner, the cross table, its markdown."""

from __future__ import annotations

import pytest

from arena.games.tank.tournament import cross_table, main, markdown, play_scripted


def test_tracker_beats_sitting() -> None:
    res = play_scripted(["tracker", "sitting"], rounds=50, seed=0, n_matches=50)
    assert res["rounds"] == 50
    wins = res["wins"]
    assert isinstance(wins, list) and wins[0] >= 45
    assert res["mean_score"][0] > res["mean_score"][1]  # type: ignore[index]
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        play_scripted(["tracker", "sitting"], rounds=0)


def test_the_cross_table_holds_both_sides_of_every_pair_and_mirrors_averaged() -> None:
    table = cross_table(["tracker", "spinner"], rounds=6, seed=1, n_matches=6)
    assert list(table) == ["tracker", "spinner"] and all(list(row) == ["tracker", "spinner"] for row in table.values())
    a, b = table["tracker"]["spinner"], table["spinner"]["tracker"]
    assert a["draw_rate"] == b["draw_rate"]
    assert a["win_rate"] + b["win_rate"] + a["draw_rate"] == pytest.approx(1.0)
    mirror = table["spinner"]["spinner"]
    assert 2 * mirror["win_rate"] + mirror["draw_rate"] == pytest.approx(1.0)


def test_the_markdown_is_the_three_tables_of_the_docs() -> None:
    cell = {"win_rate": 0.5, "draw_rate": 0.25, "mean_score": 12.34, "mean_energy": 5.0}
    text = markdown({"a": {"a": cell, "b": {**cell, "draw_rate": 0.0}}, "b": {"a": cell, "b": cell}}, rounds=8, seed=3)
    lines = text.splitlines()
    assert lines[0] == "Win rate of the row bot against the column bot (8 rounds 1v1 per pair, seed 3):"
    assert lines[2:6] == [
        "| row \\ column | a | b |",
        "|---|---:|---:|",
        "| **a** | 50% (25% draws) | 50% |",
        "| **b** | 50% (25% draws) | 50% (25% draws) |",
    ]
    assert "Mean round score of the row bot against the column bot:" in lines and "| **a** | 12.3 | 12.3 |" in lines
    assert lines[-4:] == [
        "| row \\ column | a | b |",
        "|---|---:|---:|",
        "| **a** | 5.0 | 5.0 |",
        "| **b** | 5.0 | 5.0 |",
    ]


def test_main_prints_the_tables(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import arena.games.tank.tournament as tournament

    monkeypatch.setattr(
        tournament,
        "cross_table",
        lambda rounds, seed: {"x": {"x": dict.fromkeys(("win_rate", "draw_rate", "mean_score", "mean_energy"), 0.0)}},
    )
    main(["--rounds", "3", "--seed", "2"])
    out = capsys.readouterr().out
    assert out.startswith("Win rate of the row bot against the column bot (3 rounds 1v1 per pair, seed 2):")
    assert out.rstrip().endswith("s)")
