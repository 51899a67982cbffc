"""arena.outputs.report: the end-of-run report (curve, match table against every scripted bot, throughput) as PNG and HTML.

The evaluation plays real rounds with a freshly initialized PPO policy, few and short,
so the whole file runs in a few seconds.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from agents import make_agent
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.outputs.report import SCRIPTED_OPPONENTS, evaluate_against_scripted, plot_curve, write_report
from bot_protocol import Policy, Weights, encode


@pytest.fixture(scope="module")
def weights() -> Weights:
    arch, tensors = make_agent("ppo", OBS_DIM, ACT_DIM, seed=0).export_actor()
    return Weights.pack(1, 7, arch, tensors)


def _rows(n: int = 12) -> list[dict[str, Any]]:
    return [
        {
            "wall_seconds": 5.0 * i,
            "updates": float(i),
            "rollout/win_rate_last_100": math.nan if i == 1 else 0.05 * i,
            "time/update_seconds": 0.3,
            "server/policy_lag_avg": 1.5,
            "server/policy_lag_max": 4.0,
            "server/loop_lag_p99_ms": 8.0 + i,
            "server/dropped_transitions": 0.0,
        }
        for i in range(1, n + 1)
    ]


SUMMARY = {
    "agent": "ppo",
    "game": "tank",
    "generation": 1,
    "policy_version": 7,
    "updates": 12,
    "transitions": 30_000,
    "transitions_trained": 24_576,
    "wall_seconds": 60.0,
    "opponents": ["sitting", "tracker"],
    "rounds": 150,
    "win_rate_last_100": 0.4,
    "win_rate_first_100": 0.1,
    "ticks": 240_000,
}


def test_evaluation_plays_every_scripted_opponent(weights: Weights) -> None:
    """Each of the four scripted bots gets exactly the asked rounds, and wins + draws + losses add up."""
    table = evaluate_against_scripted(Policy.from_weights(weights), rounds_per_opponent=3, seed=5, ticks_per_round=60)
    assert [row["opponent"] for row in table["opponents"]] == list(SCRIPTED_OPPONENTS)
    assert set(SCRIPTED_OPPONENTS) == {"sitting", "spinner", "walker", "tracker"}
    for row in table["opponents"]:
        assert row["rounds"] == 3
        assert row["wins"] + row["draws"] + row["losses"] == 3
        assert row["win_rate"] == pytest.approx(row["wins"] / 3, abs=1e-3)
    assert table["policy"] == {"generation": 1, "version": 7}
    assert (table["rounds_per_opponent"], table["ticks_per_round"], table["seed"]) == (3, 60, 5)
    assert table["seconds"] >= 0
    json.dumps(table)  # goes into summary.json as is


def test_evaluation_loads_a_weights_file_and_is_seeded(weights: Weights, tmp_path: Path) -> None:
    """A policy file gives the same table as the loaded policy with the same seed."""
    path = tmp_path / "policy.weights"
    path.write_bytes(encode(weights))
    by_file = evaluate_against_scripted(path, rounds_per_opponent=2, seed=1, ticks_per_round=40)
    in_memory = evaluate_against_scripted(Policy.from_weights(weights), rounds_per_opponent=2, seed=1, ticks_per_round=40)
    assert by_file["opponents"] == in_memory["opponents"]
    with pytest.raises(ValueError, match="rounds_per_opponent"):
        evaluate_against_scripted(path, rounds_per_opponent=0)
    with pytest.raises(FileNotFoundError):
        evaluate_against_scripted(tmp_path / "missing.pt", rounds_per_opponent=1)


def test_report_files_are_written_and_the_page_is_self_contained(weights: Weights, tmp_path: Path) -> None:
    """The curve, report.html and report.png exist; the page embeds the curve and links to nothing outside."""
    table = evaluate_against_scripted(Policy.from_weights(weights), rounds_per_opponent=2, seed=0, ticks_per_round=50)
    out = tmp_path / "run"
    written = write_report(out, _rows(), SUMMARY, table, settings={"matches": 16, "bots": 1, "ticks_per_round": 50})
    assert written == [out / "learning_curve.png", out / "report.html", out / "report.png"]
    for path in (out / "learning_curve.png", out / "report.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert not re.search(r"https?://", page), "the page must not load anything from the network"
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!data:)""", page), "only data: URIs"
    assert page.count('src="data:image/png;base64,') == 1
    for opponent in SCRIPTED_OPPONENTS:
        assert f"<td>{opponent}</td>" in page
    for figure in (
        "transitions received",
        "arena ticks",
        "policy lag",
        "event-loop lag p99",
        "evaluation time",
        "ticks per round",
    ):
        assert figure in page
    assert "ppo vs sitting, tracker" in page
    assert "20.0 ms" in page  # the worst loop-lag p99 over the rows


def test_report_without_curve_or_evaluation(tmp_path: Path) -> None:
    """A run too short for a curve, without an evaluation, still gets a page that says so."""
    rows = [{"wall_seconds": 1.0, "updates": 1.0, "rollout/win_rate_last_100": math.nan}]
    written = write_report(tmp_path, rows, {"agent": "td3", "game": "tank", "wall_seconds": 2.0}, None)
    assert tmp_path / "learning_curve.png" not in written
    assert written == [tmp_path / "report.html", tmp_path / "report.png"]
    page = (tmp_path / "report.html").read_text()
    assert "No learning curve" in page and "Not evaluated" in page
    assert "data:image" not in page


def test_reach_curve_is_the_mean_return(tmp_path: Path) -> None:
    """Outside the tank game the curve is the mean episode return; no rows with it, no file."""
    rows = [{"wall_seconds": 10.0 * i, "rollout/ep_rew_mean": -5.0 + i} for i in range(3)]
    assert plot_curve(rows, tmp_path / "curve.png", tank=False) == tmp_path / "curve.png"
    assert plot_curve(rows, tmp_path / "none.png", tank=True) is None
    assert not (tmp_path / "none.png").exists()


def test_a_league_run_gets_a_ratings_table_and_a_win_rate_chart(tmp_path: Path) -> None:
    """The league section: ratings ranked as in summary.json, each member's kind, and the win rate per opponent over time."""
    from arena.league import LeagueTable

    table = LeagueTable()
    table.add([(True, 1.0, "sitting", False)] * 30 + [(False, 0.0, "tracker", False)] * 30 + [(True, 1.0, "self@v200", False)])
    rows = [{**row, **table.metrics()} for row in _rows()]
    members = [{"name": "sitting", "kind": "scripted"}, {"name": "tracker", "kind": "scripted"}]
    summary = {**SUMMARY, "opponents": ["league"], "league": {"members": members, **table.summary()}}
    written = write_report(tmp_path, rows, summary, None)
    assert tmp_path / "league_win_rates.png" in written
    page = (tmp_path / "report.html").read_text()
    assert "<h2>League</h2>" in page and html.escape("learner's win rate") in page
    order = [name for name in re.findall(r"<tr><td>([^<]+)</td><td>(?:scripted|learner|left the league)", page)]
    assert order == [r["name"] for r in table.summary()["ratings"]] and order.index("tracker") < order.index("sitting")
    assert "left the league" in page  # self@v200 was rated but is no member any more
    # A run without a league has no league section and no chart.
    plain = tmp_path / "plain"
    assert plain / "league_win_rates.png" not in write_report(plain, _rows(), SUMMARY, None)
    assert "<h2>League</h2>" not in (plain / "report.html").read_text()
