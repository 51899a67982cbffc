"""The verdicts of ``bench/learning.py``: median and worst over every seed, and the targets judged on them.

Pure functions over the per-seed entries ``bench/learning.py`` records, kept apart from the code that
plays the matches so that the rules a learning result is judged by can be read and tested on their own.
The rule they all follow: a learning result is a distribution over seeds, and a seed that crashed is the
worst outcome a user can get, so it counts 0% against every opponent, never a seed left out.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["BASE_RATE_KEYS", "aggregate", "judge", "rate_keys", "spread"]

BASE_RATE_KEYS = ("win_rate", "win_rate_deterministic", "win_rate_last", "win_rate_population")
"""The per-opponent results every run may have; each panel of official-API bots adds ``win_rate_PANEL``."""


def rate_keys(panels: Sequence[str]) -> tuple[str, ...]:
    """The result keys aggregated per opponent: :data:`BASE_RATE_KEYS` and one per panel."""
    return (*BASE_RATE_KEYS, *(f"win_rate_{panel}" for panel in panels))


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median and worst (minimum) over every seed; a seed or match that failed (None) counts as 0%.

    ``n`` is how many values were counted, ``failed`` how many of them are zeros standing for a failure:
    a crash is the worst outcome a user can get, never a seed left out.
    """
    if not values:
        return {"median": None, "worst": None, "n": 0, "failed": 0}
    counted = [0.0 if v is None else v for v in values]
    return {
        "median": round(statistics.median(counted), 4),
        "worst": round(min(counted), 4),
        "n": len(counted),
        "failed": sum(v is None for v in values),
    }


def aggregate(
    entries: list[dict[str, Any]],
    expected: dict[str, Sequence[str]] | None = None,
    panels: Sequence[str] = ("royale",),
) -> dict[str, Any]:
    """Per opponent, median and worst over **every** seed: a seed that failed counts 0% against every opponent.

    ``expected``: result key (``win_rate``, ``win_rate_royale``, ...) → the opponents every seed should have
    played; a seed missing one (it crashed before, or the match failed) counts 0% there. Without it, the
    opponents any seed played. ``panels``: the panels of official-API bots whose ``PANEL_mean`` and
    ``PANEL_median`` per seed are aggregated too (``royale``: the tuning bots).
    """
    failed = [e for e in entries if "error" in e]
    result: dict[str, Any] = {
        "seeds": len(entries),
        "seeds_finished": len(entries) - len(failed),
        "seeds_failed": [e["seed"] for e in failed],
        "failures": [{"seed": e["seed"], "error": e["error"]} for e in failed],
        "failed_matches": sum(len(e.get("errors", [])) for e in entries),
    }
    for key in rate_keys(panels):
        names = list(expected.get(key, ())) if expected is not None else []
        names += [n for e in entries for n in e.get(key, {}) if n not in names]
        if names:
            result[key] = {name: spread([e.get(key, {}).get(name) for e in entries]) for name in names}
    for panel in panels:
        if (expected and expected.get(f"win_rate_{panel}")) or any(f"{panel}_mean" in e for e in entries):
            result[f"{panel}_mean"] = spread([e.get(f"{panel}_mean") for e in entries])
            result[f"{panel}_median"] = spread([e.get(f"{panel}_median") for e in entries])
    league = [e for e in entries if "round_robin" in e or e.get("league_expected")]
    if league:
        robins = [e["round_robin"] for e in league if "round_robin" in e]
        ranks = [r["rank"] for r in robins]
        result["round_robin"] = {
            "rank": {
                "median": statistics.median(ranks) if ranks else None,
                "worst": max(ranks) if ranks and len(ranks) == len(league) else None,  # the largest; None: a seed failed
                "n": len(ranks),
            },
            "above_every_scripted": sum(bool(r["above_every_scripted"]) for r in robins),
            "of": len(league),
        }
    for key in ("transitions_trained", "updates", "gradient_steps", "trained_steps_per_s"):
        got = [e[key] for e in entries if isinstance(e.get(key), int | float)]
        result[f"median_{key}"] = statistics.median(got) if got else None
    result["returned_last"] = sum(1 for e in entries if (e.get("returned_policy") or {}).get("returned") == "last")
    return result


def judge(agg: dict[str, Any], targets: dict[str, Any], applies: bool, why: str) -> dict[str, Any]:
    """Each target: the figure, its bound, met (None: not measured). A failed seed fails the targets."""
    rows: dict[str, Any] = {}
    seeds, finished = agg["seeds"], agg["seeds_finished"]
    rows["every_seed_finished"] = {"value": f"{finished} of {seeds}", "target": "all", "met": seeds > 0 and finished == seeds}
    rates = agg.get("win_rate", {})
    for kind in ("median", "worst"):
        for name, bound in targets[kind].items():
            value = rates.get(name, {}).get(kind)
            rows[f"{kind}/{name}"] = {"value": value, "target": bound, "met": None if value is None else value >= bound}
    value = agg.get("royale_mean", {}).get("median")
    bound = targets["royale_mean_median"]
    rows["median/royale_mean"] = {"value": value, "target": bound, "met": None if value is None else value >= bound}
    robin = agg.get("round_robin")
    if robin:
        rows["above_every_scripted/every_seed"] = {
            "value": f"{robin['above_every_scripted']} of {seeds}",
            "target": "all",
            "met": robin["above_every_scripted"] == seeds,
        }
    else:
        rows["above_every_scripted/every_seed"] = {"value": None, "target": "all", "met": None}
    met = [row["met"] for row in rows.values()]
    all_met = False if False in met else (None if None in met else True)
    return {
        "applies": applies,
        "why": why,
        "over_seeds": seeds,
        "seeds_failed": agg["seeds_failed"],
        "targets": rows,
        "all_met": all_met,
    }
