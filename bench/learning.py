"""Learning benchmark: `arena train` against an opponent for N minutes, then `arena match` of the result.

Runs the real command line in subprocesses, exactly as a user would:

1. ``arena train --opponent tracker --minutes 10 --out DIR`` (flags configurable);
2. ``arena match --bot <final checkpoint> --bot NAME --rounds 200 --json`` against ``sitting``,
   ``spinner`` and ``tracker``;
3. the same matches for the *untrained* policy (version 0 of the same run) — the baseline
   measured in the same run.

Prints progress to stderr and, as its last stdout line, one JSON object with the win rates,
the targets (>= 95% vs sitting, >= 80% vs spinner, >= 60% vs tracker), the training summary and
where the learning curve is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"sitting": 0.95, "spinner": 0.80, "tracker": 0.60}


def arena(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"arena {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    return result.stdout


def win_rates(bot: str, rounds: int, seed: int) -> dict[str, float]:
    rates = {}
    for opponent in TARGETS:
        out = json.loads(
            arena("match", "--bot", bot, "--bot", opponent, "--rounds", str(rounds), "--seed", str(seed), "--json")
        )
        rates[opponent] = out["bots"][0]["wins"] / out["rounds"]
        print(f"  {Path(bot).name} vs {opponent}: {rates[opponent]:.0%}", file=sys.stderr, flush=True)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget (default 10)")
    parser.add_argument("--opponent", action="append", help="training opponent(s) (default: tracker)")
    parser.add_argument("--rounds", type=int, default=200, help="evaluation rounds per opponent (default 200)")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--extra", default="", help="extra flags for arena train, e.g. '--matches 32'")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="arena-learning-"))
    opponents = args.opponent or ["tracker"]
    train_flags = ["train", "--minutes", str(args.minutes), "--out", str(out), "--seed", str(args.seed)]
    train_flags += [f for o in opponents for f in ("--opponent", o)] + args.extra.split()
    print(f"training: arena {' '.join(train_flags)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    arena(*train_flags)
    train_seconds = time.monotonic() - started
    summary = json.loads((out / "summary.json").read_text())
    checkpoints = sorted((out / "checkpoints").glob("ckpt-*.pt"))
    final = str(checkpoints[-1])
    print(
        f"trained {summary['updates']} updates, {summary['rounds']} rounds in {train_seconds:.0f} s; evaluating",
        file=sys.stderr,
    )
    trained = win_rates(final, args.rounds, args.seed + 1)

    # Baseline in the same run: the untrained policy of the same seed (a fresh run with no update).
    baseline_dir = out / "untrained"
    arena(
        "train",
        "--rounds",
        "1",
        "--ticks-per-round",
        "1",
        "--matches",
        "1",
        "--out",
        str(baseline_dir),
        "--seed",
        str(args.seed),
    )
    untrained_ckpt = str(sorted((baseline_dir / "checkpoints").glob("ckpt-*.pt"))[0])
    print("untrained baseline:", file=sys.stderr)
    untrained = win_rates(untrained_ckpt, args.rounds, args.seed + 1)

    result = {
        "bench": "learning",
        "train": {"opponents": opponents, "minutes": args.minutes, "extra_flags": args.extra, **summary},
        "eval_rounds": args.rounds,
        "win_rate": trained,
        "untrained_win_rate": untrained,
        "targets": TARGETS,
        "met": {k: trained[k] >= v for k, v in TARGETS.items()},
        "shortfall": {k: round(max(0.0, v - trained[k]), 3) for k, v in TARGETS.items()},
        "learning_curve": str(out / "learning_curve.png"),
        "run_dir": str(out),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
