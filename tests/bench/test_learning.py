"""bench/learning.py's verdicts: median and worst over seeds, failed seeds left out and said, targets judged."""

from __future__ import annotations

from typing import Any

from bench.learning import TARGETS, aggregate, judge


def seed(number: int, rates: tuple[float, float, float, float], royale: float, above: bool, rank: int) -> dict[str, Any]:
    names = ("sitting", "spinner", "walker", "tracker")
    return {
        "seed": number,
        "win_rate": dict(zip(names, rates, strict=True)),
        "royale_mean": royale,
        "round_robin": {"rank": rank, "above_every_scripted": above},
        "returned_policy": {"returned": "last"},
    }


def test_median_and_worst_seed_decide_and_a_failed_seed_is_counted_not_averaged() -> None:
    entries = [
        seed(0, (0.95, 0.98, 0.54, 0.28), 0.82, False, 3),
        seed(1, (1.00, 0.82, 0.83, 0.82), 0.99, True, 1),
        seed(2, (0.97, 0.79, 0.71, 0.48), 0.91, False, 5),
        {"seed": 3, "error": "arena train exited 1"},
    ]
    agg = aggregate(entries)
    assert (agg["seeds"], agg["seeds_finished"], agg["seeds_failed"]) == (4, 3, [3])
    assert agg["win_rate"]["walker"] == {"median": 0.71, "worst": 0.54, "n": 3}
    assert agg["round_robin"]["rank"] == {"median": 3, "worst": 5, "n": 3}  # the worst rank is the largest
    verdict = judge(agg, TARGETS, True, "the 5-minute default case")
    rows = verdict["targets"]
    assert rows["median/sitting"]["met"] and rows["median/spinner"]["met"]
    assert not rows["median/walker"]["met"] and not rows["worst/tracker"]["met"]
    assert rows["median/royale_mean"] == {"value": 0.91, "target": 0.8, "met": True}
    assert rows["above_every_scripted/every_seed"]["met"] is False
    assert verdict["all_met"] is False and verdict["over_seeds"] == 3
