"""bench/learning_verdicts.py: median and worst over every seed, a failed seed counted as 0%, targets judged."""

from __future__ import annotations

from typing import Any

import pytest

from bench.learning import PANELS, SCRIPTED, TARGETS
from bench.learning_verdicts import aggregate, judge, spread


def seed(number: int, rates: tuple[float, float, float, float], royale: float, above: bool, rank: int) -> dict[str, Any]:
    return {
        "seed": number,
        "win_rate": dict(zip(SCRIPTED, rates, strict=True)),
        "royale_mean": royale,
        "round_robin": {"rank": rank, "above_every_scripted": above},
        "returned_policy": {"returned": "last"},
        "league_expected": True,
    }


def strong(number: int) -> dict[str, Any]:
    return seed(number, (1.0, 0.99, 0.97, 0.95), 0.9, True, 1)


def test_median_and_worst_seed_decide() -> None:
    entries = [
        seed(0, (0.95, 0.98, 0.54, 0.28), 0.82, False, 3),
        seed(1, (1.00, 0.82, 0.83, 0.82), 0.99, True, 1),
        seed(2, (0.97, 0.79, 0.71, 0.48), 0.91, False, 5),
    ]
    agg = aggregate(entries, {"win_rate": SCRIPTED})
    assert agg["win_rate"]["walker"] == {"median": 0.71, "worst": 0.54, "n": 3, "failed": 0}
    assert agg["round_robin"]["rank"] == {"median": 3, "worst": 5, "n": 3}  # the worst rank is the largest
    rows = judge(agg, TARGETS, True, "the 5-minute default case")["targets"]
    assert rows["median/sitting"]["met"] and rows["median/spinner"]["met"]
    assert not rows["median/walker"]["met"] and not rows["worst/tracker"]["met"]
    assert rows["median/royale_mean"] == {"value": 0.91, "target": 0.8, "met": True}
    assert rows["above_every_scripted/every_seed"]["met"] is False


def test_a_crashed_seed_is_zero_against_every_opponent_and_fails_the_targets() -> None:
    """Two strong seeds and one that crashed: the crash is the worst seed, listed, and the targets are unmet."""
    entries = [strong(0), {"seed": 1, "error": "arena train exited -9: Killed", "league_expected": True}, strong(2)]
    agg = aggregate(entries, {"win_rate": SCRIPTED, "win_rate_royale": ["Walls"]})
    assert (agg["seeds"], agg["seeds_finished"], agg["seeds_failed"]) == (3, 2, [1])
    assert agg["failures"] == [{"seed": 1, "error": "arena train exited -9: Killed"}]
    for name in SCRIPTED:
        assert agg["win_rate"][name]["worst"] == 0.0 and agg["win_rate"][name]["failed"] == 1
        assert agg["win_rate"][name]["n"] == 3
    assert agg["win_rate"]["sitting"]["median"] == 1.0
    assert agg["win_rate_royale"]["Walls"] == {"median": 0.0, "worst": 0.0, "n": 3, "failed": 3}
    assert agg["royale_mean"]["worst"] == 0.0
    assert agg["round_robin"]["above_every_scripted"] == 2 and agg["round_robin"]["of"] == 3
    assert agg["round_robin"]["rank"]["worst"] is None  # a seed has no rank: no worst rank can be claimed
    verdict = judge(agg, TARGETS, True, "the 5-minute default case")
    rows = verdict["targets"]
    assert rows["every_seed_finished"] == {"value": "2 of 3", "target": "all", "met": False}
    assert rows["worst/sitting"]["met"] is False and rows["median/sitting"]["met"] is True
    assert rows["above_every_scripted/every_seed"]["met"] is False
    assert verdict["all_met"] is False and verdict["over_seeds"] == 3 and verdict["seeds_failed"] == [1]


def test_every_seed_crashed_is_unmet_not_unknown() -> None:
    entries = [{"seed": s, "error": "boom"} for s in range(3)]
    verdict = judge(aggregate(entries, {"win_rate": SCRIPTED}), TARGETS, True, "x")
    assert verdict["all_met"] is False
    assert verdict["targets"]["median/tracker"] == {"value": 0.0, "target": 0.6, "met": False}


def test_a_failed_match_counts_as_a_match_lost() -> None:
    assert spread([1.0, None, 0.5]) == {"median": 0.5, "worst": 0.0, "n": 3, "failed": 1}
    assert spread([]) == {"median": None, "worst": None, "n": 0, "failed": 0}


@pytest.mark.parametrize("panel", sorted(PANELS))
def test_each_panel_is_aggregated_on_its_own_and_a_crash_counts_zero_there_too(panel: str) -> None:
    """The held-out and the validation panels: each its own figures, a failed seed 0% against each of its bots."""
    played = {k: v for k, v in strong(0).items() if k != "royale_mean"}
    played |= {f"win_rate_{panel}": {"A": 0.9, "B": 0.5}, f"{panel}_mean": 0.7, f"{panel}_median": 0.7}
    expected = {"win_rate": SCRIPTED, f"win_rate_{panel}": ["A", "B"]}
    agg = aggregate([played, {"seed": 1, "error": "boom"}], expected, panels=("royale", *PANELS))
    assert agg[f"win_rate_{panel}"]["B"] == {"median": 0.25, "worst": 0.0, "n": 2, "failed": 1}
    assert agg[f"{panel}_mean"] == {"median": 0.35, "worst": 0.0, "n": 2, "failed": 1}
    assert "royale_mean" not in agg  # the tuning bots were not played: no figure for them
    others = [key for key in PANELS if key != panel]
    assert not any(f"{key}_mean" in agg or f"win_rate_{key}" in agg for key in others)
