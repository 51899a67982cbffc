"""Learning benchmark: what `arena train` teaches, against every scripted bot, for the league and a fixed opponent.

Runs the real command line in subprocesses, exactly as a user would, for each case and seed:

1. ``arena train --minutes M --out DIR --seed S [--opponent ...]``: the cases are
   ``default`` (the README's main job: 5 minutes against the league, the default opponent),
   ``league10`` (10 minutes against the league) and ``tracker10`` (10 minutes against a fixed
   ``tracker``, beside them: what the league buys);
2. ``arena match --bot <final checkpoint> --bot NAME --rounds 200 --json`` against each scripted
   bot, with sampled actions (as in training) and with the mean action (``--deterministic``);
3. for league runs, ``arena league DIR --json``: a round-robin of the final policy against every
   league member (is the final policy rated the league's highest?);
4. ``arena match --bot <final checkpoint> --bot royale:DIR --rounds N --json`` against bots written
   with the official Tank Royale API that no run trained against (``tests/data/royale_bots``:
   Walls, and SpinBot, which only the ``league_royale`` case trains against), over Tank
   Royale's protocol with its rules (bullets that meet destroy each other): how the policy does
   against bots it never saw. Needs ``pip install -e '.[royale]'``; ``--royale-rounds 0`` skips it;
5. the same matches for the *untrained* policy of the same seed: the baseline measured in the same run.

Prints progress to stderr and, as its last stdout line, one JSON object: per case and seed the
win rates, the targets (5 minutes: >= 95% sitting, >= 80% spinner and walker, >= 60% tracker;
10 minutes of league: >= 90% against each) and whether they are met, the training figures,
and the round-robin ranks.

    python bench/learning.py                              # all four cases, seeds 0 and 1 (~65 minutes)
    python bench/learning.py --case default --seeds 0     # one 5-minute run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPTED = ("sitting", "spinner", "walker", "tracker")
FIVE_MINUTE_TARGETS = {"sitting": 0.95, "spinner": 0.80, "walker": 0.80, "tracker": 0.60}
CASES: dict[str, dict[str, Any]] = {
    "default": {"minutes": 5.0, "opponents": [], "targets": FIVE_MINUTE_TARGETS},
    "league10": {"minutes": 10.0, "opponents": [], "targets": dict.fromkeys(SCRIPTED, 0.90)},
    "tracker10": {"minutes": 10.0, "opponents": ["tracker"], "targets": {}},
    "league_royale": {
        "minutes": 5.0,
        "opponents": [
            "league",
            f"royale:{Path(__file__).resolve().parent.parent / 'tests' / 'data' / 'royale_bots' / 'SpinBot'}",
        ],
        "targets": FIVE_MINUTE_TARGETS,
    },
}
"""case → training minutes, --opponent flags (none: the default league) and win-rate targets.
``league_royale`` is the default run with the league's Tank Royale share: SpinBot, 2 matches."""
UNSEEN_ROYALE = ("Walls", "SpinBot")
"""Official-API bots of tests/data/royale_bots every policy is evaluated against (docs/royale.md)."""


def arena(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"arena {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    return result.stdout


def win_rates(bot: str, rounds: int, seed: int, deterministic: bool = False) -> dict[str, float]:
    rates = {}
    for opponent in SCRIPTED:
        flags = ["--deterministic"] if deterministic else []
        out = json.loads(
            arena("match", "--bot", bot, "--bot", opponent, "--rounds", str(rounds), "--seed", str(seed), "--json", *flags)
        )
        rates[opponent] = out["bots"][0]["wins"] / out["rounds"]
    how = "mean action" if deterministic else "sampled"
    print(f"  {Path(bot).name} ({how}): " + ", ".join(f"{k} {v:.0%}" for k, v in rates.items()), file=sys.stderr, flush=True)
    return rates


def royale_win_rates(bot: str, rounds: int, seed: int) -> dict[str, float]:
    """Win rates against the official-API bots, over Tank Royale's protocol (sampled actions)."""
    bots = Path(__file__).resolve().parent.parent / "tests" / "data" / "royale_bots"
    rates = {}
    for name in UNSEEN_ROYALE:
        flags = ["match", "--bot", bot, "--bot", f"royale:{bots / name}", "--rounds", str(rounds), "--seed", str(seed)]
        out = json.loads(arena(*flags, "--json"))
        rates[f"royale:{name}"] = out["bots"][0]["wins"] / out["rounds"]
    print(f"  {Path(bot).name} vs Tank Royale bots: " + ", ".join(f"{k} {v:.0%}" for k, v in rates.items()), file=sys.stderr)
    return rates


def run_case(case: str, seed: int, rounds: int, root: Path, extra: list[str], royale_rounds: int) -> dict[str, Any]:
    spec = CASES[case]
    out = root / f"{case}-seed{seed}"
    flags = ["train", "--minutes", str(spec["minutes"]), "--out", str(out), "--seed", str(seed), "--eval-rounds", "0"]
    flags += [f for o in spec["opponents"] for f in ("--opponent", o)] + extra
    print(f"{case}, seed {seed}: arena {' '.join(flags)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    arena(*flags)
    summary = json.loads((out / "summary.json").read_text())
    final = str(sorted((out / "checkpoints").glob("ckpt-*.pt"))[-1])
    print(
        f"  trained {summary['transitions_trained']:,} steps, {summary['updates']} updates, {summary['rounds']} rounds in "
        f"{time.monotonic() - started:.0f} s; evaluating",
        file=sys.stderr,
        flush=True,
    )
    sampled = win_rates(final, rounds, seed + 1)
    mean_action = win_rates(final, rounds, seed + 1, deterministic=True)
    targets: dict[str, float] = spec["targets"]
    result: dict[str, Any] = {
        "case": case,
        "seed": seed,
        "minutes": spec["minutes"],
        "opponents": summary.get("opponents"),
        "transitions_trained": summary["transitions_trained"],
        "updates": summary["updates"],
        "trained_steps_per_s": summary.get("throughput", {}).get("trained_steps_per_s"),
        "win_rate": sampled,
        "win_rate_deterministic": mean_action,
        "targets": targets,
        "met": {k: sampled[k] >= v for k, v in targets.items()},
        "run_dir": str(out),
    }
    if royale_rounds:
        result["win_rate_royale"] = royale_win_rates(final, royale_rounds, seed + 1)
        league = summary.get("league", {}).get("opponents", {})
        result["royale_share_rounds"] = {k: v["rounds"] for k, v in league.items() if k.startswith("royale:")}
    if "league" in summary:
        report = json.loads(arena("league", str(out), "--rounds", "20", "--seed", str(seed), "--json"))
        ranking = [row["name"] for row in report["round_robin"]["ratings"]]
        result["round_robin"] = {"ranking": ranking, "final_rank": ranking.index("final") + 1, "members": len(ranking)}
        print(f"  round-robin: final policy #{ranking.index('final') + 1} of {len(ranking)}: {ranking}", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="cases to run (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds per case (default: 0 1)")
    parser.add_argument("--tracker-seeds", type=int, nargs="+", default=None, help="seeds of tracker10 (default: --seeds)")
    parser.add_argument("--rounds", type=int, default=200, help="evaluation rounds per opponent (default 200)")
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary directory)")
    parser.add_argument("--extra", default="", help="extra flags for arena train, e.g. '--matches 64'")
    parser.add_argument(
        "--royale-rounds", type=int, default=10, help="rounds against each official-API Tank Royale bot (default 10; 0: skip)"
    )
    args = parser.parse_args()
    if args.royale_rounds and importlib.util.find_spec("robocode_tank_royale") is None:
        print(
            "no official Tank Royale bot API (pip install -e '.[royale]'): no league_royale, no royale evaluation",
            file=sys.stderr,
        )
        args.royale_rounds = 0
        args.case = [c for c in (args.case or list(CASES)) if c != "league_royale"]
    root = args.out or Path(tempfile.mkdtemp(prefix="arena-learning-"))
    runs = []
    for case in args.case or list(CASES):
        seeds = args.tracker_seeds if case == "tracker10" and args.tracker_seeds is not None else args.seeds
        runs += [run_case(case, seed, args.rounds, root, args.extra.split(), args.royale_rounds) for seed in seeds]

    # Baseline in the same run: the untrained policy of each seed (a fresh run with no update).
    baseline = {}
    for seed in args.seeds:
        untrained = root / f"untrained-seed{seed}"
        arena("train", "--opponent", "sitting", "--rounds", "1", "--ticks-per-round", "1", "--matches", "1",
              "--out", str(untrained), "--seed", str(seed), "--no-report")  # fmt: skip
        print(f"untrained baseline, seed {seed}:", file=sys.stderr)
        first = str(sorted((untrained / "checkpoints").glob("ckpt-*.pt"))[0])
        baseline[seed] = win_rates(first, args.rounds, seed + 1)
        if args.royale_rounds:
            baseline[seed] |= royale_win_rates(first, args.royale_rounds, seed + 1)
    met = {f"{r['case']}/seed{r['seed']}": all(r["met"].values()) for r in runs if r["targets"]}
    print(json.dumps({"bench": "learning", "eval_rounds": args.rounds, "runs": runs, "untrained_win_rate": baseline,
                      "all_targets_met": met, "root": str(root)}))  # fmt: skip


if __name__ == "__main__":
    main()
