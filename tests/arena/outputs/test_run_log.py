"""What a training run writes and shows while it runs (arena/outputs/run_log.py): metrics.jsonl, summary figures, progress."""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

import pytest

from arena.outputs.run_log import MetricsLog, Progress, league_summary, strict_json, summarize, throughput_figures
from bot_protocol import PolicyId
from server.stats import LoopLag, ServerStats


def source(**fields) -> SimpleNamespace:
    """A stand-in for a TrainingServer: hands out one fixed ServerStats snapshot."""
    stats = ServerStats(**fields)
    return SimpleNamespace(stats=lambda bots=0: stats)


def strict(line: str) -> dict:
    return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}"))


def test_strict_json_turns_nan_and_infinities_into_null() -> None:
    row = {"a": 1.5, "b": math.nan, "c": math.inf, "d": -math.inf, "e": 3, "f": "x", "g": None}
    assert strict_json(row) == {"a": 1.5, "b": None, "c": None, "d": None, "e": 3, "f": "x", "g": None}
    assert strict_json({}) == {}


def test_metrics_log_appends_one_strict_json_line_per_row(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path, started=time.monotonic(), extra=lambda: {"league/rounds": 4.0})
    seen: list[dict] = []
    log.dashboard = SimpleNamespace(publish_stats=seen.append)
    log.tensorboard = seen.append
    log({"train/policy_loss": 0.25})
    log({"rollout/win_rate_last_100": math.nan})
    lines = path.read_text().splitlines()
    assert len(lines) == 2 == len(log.rows) and len(seen) == 4
    first, second = (strict(line) for line in lines)
    assert list(first) == ["wall_seconds", "train/policy_loss", "league/rounds"]
    assert first["train/policy_loss"] == 0.25 and first["league/rounds"] == 4.0 and 0 <= first["wall_seconds"] < 60
    assert second["rollout/win_rate_last_100"] is None
    assert math.isnan(log.rows[1]["rollout/win_rate_last_100"])  # the kept rows are as given; only the file is strict


def test_metrics_log_without_a_path_keeps_the_rows_only(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = MetricsLog(None, started=time.monotonic())
    log({"x": 1.0})
    assert [row["x"] for row in log.rows] == [1.0] and list(tmp_path.iterdir()) == []


def test_summarize_a_tank_and_a_reach_run() -> None:
    server = source(
        trainer_policy=PolicyId(2, 17), updates=5, gradient_steps=40, transitions_received=900, transitions_trained=800
    )
    won = [True] * 30 + [False] * 90
    rounds = SimpleNamespace(won_rounds=won, rounds=120, win_rate_last_100=0.1234, ticks=5000, perfect_at=(12.345, 678))
    summary = summarize("ppo", "tank", server, 61.26, rounds, {}, ["sitting"])
    assert summary["agent"] == "ppo" and (summary["generation"], summary["policy_version"]) == (2, 17)
    counts = ("updates", "gradient_steps", "transitions", "transitions_trained")
    assert [summary[k] for k in counts] == [5, 40, 900, 800]
    assert summary["wall_seconds"] == 61.3 and summary["opponents"] == ["sitting"] and summary["rounds"] == 120
    assert summary["win_rate_last_100"] == 0.123 and summary["win_rate_first_100"] == 0.3
    assert summary["win_rate_100_after"] == {"seconds": 12.35, "steps": 678}
    few = SimpleNamespace(won_rounds=[True] * 5, rounds=5, win_rate_last_100=1.0, ticks=50, perfect_at=None)
    summary = summarize("ppo", "tank", server, 1.0, few, {}, ["sitting"])
    assert summary["win_rate_first_100"] is None and summary["win_rate_100_after"] is None
    games = {0: SimpleNamespace(finished=[0.0] * 100), 1: SimpleNamespace(finished=[2.0] * 50)}
    reach = summarize("td3", "reach", server, 1.0, None, games, [])
    assert (reach["episodes"], reach["mean_return_first_100"], reach["mean_return_last_100"]) == (150, 0.0, 1.0)
    assert "rounds" not in reach


def test_throughput_figures_are_whole_run_rates() -> None:
    lag = LoopLag(p50=0.001, p99=0.004, max=0.02)
    server = source(
        steps_trained=1000,
        transitions_received=2000,
        update_seconds_total=2.0,
        gradient_steps=40,
        dropped={"stale": 3},
        loop_lag=lag,
    )
    rounds = SimpleNamespace(first_tick_at=10.0, ticks=1000)
    figures = throughput_figures(server, rounds, SimpleNamespace(cpu_seconds=[0.1, 0.1]), trainer_cpu=0.5, played_until=20.0)
    assert figures == {
        "seconds_from_first_step": 10.0,
        "trained_steps_per_s": 100,
        "received_steps_per_s": 200,
        "update_seconds_total": 2.0,
        "update_time_share": 0.2,
        "minibatch_ms": 50.0,
        "trainer_cpu_us_per_step": 500.0,
        "dropped_by_reason": {"stale": 3},
        "loop_lag_p99_ms": 4.0,
        "loop_lag_max_ms": 20.0,
        "bot_cpu_us_per_step": 200.0,
    }
    # Before the first step (or without a tank game) the rates are unknown, not zero.
    empty = throughput_figures(source(), None, None, trainer_cpu=0.0, played_until=5.0)
    assert empty["seconds_from_first_step"] is None and empty["trained_steps_per_s"] is None
    assert empty["minibatch_ms"] is None and "loop_lag_p99_ms" not in empty and "bot_cpu_us_per_step" not in empty
    # A run of a few rounds can stop before a worker's first report arrives: its first tick is logged after the
    # stop, and the rate is unknown, not negative.
    late = throughput_figures(server, SimpleNamespace(first_tick_at=21.0, ticks=1000), None, 0.5, played_until=20.0)
    assert late["seconds_from_first_step"] is None and late["trained_steps_per_s"] is None


def test_progress_off_a_terminal_prints_one_plain_line(capsys) -> None:
    """A run shorter than one 10 s interval still prints its figures once, at its end; unknown figures read "–"."""
    started = time.monotonic()
    rounds = SimpleNamespace(rounds=0, ticks=0, win_rate_last_100=math.nan)
    ticks = SimpleNamespace(measure=lambda read: (started + 3.0, (), (42.0,)))
    with Progress(source(agent="ppo", updates=2, connected_bots=1), started, rounds, ticks) as progress:
        progress.update()  # within the first interval: nothing yet
        assert capsys.readouterr().out == ""
    (line,) = capsys.readouterr().out.splitlines()
    assert "elapsed=3 s" in line and "rounds=0" in line and "ticks/s=42" in line and "bots connected=1" in line
    assert "win rate (last 100)=–" in line and "mean return (last 100)=–" in line and "loop lag p99=–" in line


def test_league_summary_gathers_every_saved_state(tmp_path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"members": [{"name": "sitting"}]}))
    (tmp_path / "state-1.json").write_text(json.dumps({"members": [{"name": "self@v4"}]}))
    (tmp_path / "state-2.json").write_text("{")  # half-written: skipped
    spec = SimpleNamespace(directory=tmp_path, config=SimpleNamespace(as_dict=lambda: {"self_share": 0.2}))
    table = SimpleNamespace(summary=lambda: {"ratings": [{"name": "learner"}]})
    assert league_summary(spec, table) == {
        "config": {"self_share": 0.2},
        "members": [{"name": "self@v4"}, {"name": "sitting"}],
        "ratings": [{"name": "learner"}],
    }
    assert league_summary(SimpleNamespace(directory=None, config=spec.config), table)["members"] == []
