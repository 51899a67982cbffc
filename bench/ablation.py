"""PPO ablation on the tank arena: learning per sample, one change at a time.

Each variant is ``arena train`` against ``sitting`` (the real command, in a subprocess) for a fixed
wall time and several seeds, with the base flags plus the variant's own. For every run it reads
``summary.json``: the time and the environment steps until the win rate of the last 100 rounds
first reaches 100% (counted from the first environment step), trained steps/s and the final win
rate. Progress goes to stderr; the last stdout line is one JSON object with every run and each
variant's median, the base (first variant) measured in the same run.

``--steps N --judge NAME`` measures learning per sample on a harder skill instead: each run stops
after N environment steps (``arena train --steps N/matches``), then its last policy plays
``arena match`` against NAME (200 rounds): the per-sample comparison with another trainer given
the same samples (``bench/learning.py --equal-samples`` gives Stable-Baselines3's count).

    python bench/ablation.py --seconds 40 --seeds 0,1
    python bench/ablation.py --variant base= --variant ent0='--agent-option entropy_coef=0'
    python bench/ablation.py --steps 2950000 --judge tracker --base "--opponent tracker --matches 16 \
        --agent-option rollout_steps=2048 --agent-option minibatch_size=256 --agent-option epochs=4"
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_VARIANTS = {
    "base": "",
    "entropy_coef=0": "--agent-option entropy_coef=0",
    "log_std_init=0": "--agent-option log_std_init=0",
    "advantage_norm=minibatch": "--agent-option advantage_norm=minibatch",
    "learning_rate=1e-3": "--agent-option learning_rate=1e-3",
}


def run(flags: list[str], out: Path, seconds: float, seed: int, steps: int | None = None) -> dict[str, Any]:
    """One ``arena train`` run (for ``seconds``, or ``steps`` environment steps); its summary figures."""
    if steps is None:
        budget = ["--minutes", str(seconds / 60)]
    else:
        given = [int(flags[i + 1]) for i, flag in enumerate(flags[:-1]) if flag == "--matches"]
        matches = given[-1] if given else 128  # arena train's default
        budget = ["--steps", str(max(1, steps // matches))]
    cmd = [sys.executable, "-m", "arena.cli", "train", *budget, "--out", str(out), "--seed", str(seed)]
    cmd += ["--eval-rounds", "0", "--no-report", "--dashboard-port", "-1", *flags]
    if "--opponent" not in flags:  # time to 100% is measured against sitting
        cmd += ["--opponent", "sitting"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({result.returncode}): {result.stderr.strip()[-800:]}")
    summary = json.loads((out / "summary.json").read_text())
    reached = summary.get("win_rate_100_after")
    return {
        "seed": seed,
        "seconds_to_100": reached and reached["seconds"],
        "steps_to_100": reached and reached["steps"],
        "trained_steps_per_s": summary["throughput"]["trained_steps_per_s"],
        "minibatch_ms": summary["throughput"]["minibatch_ms"],
        "update_time_share": summary["throughput"]["update_time_share"],
        "final_win_rate_last_100": summary.get("win_rate_last_100"),
        "transitions_trained": summary.get("transitions_trained"),
    }


def judge(run_dir: Path, opponent: str, rounds: int, seed: int) -> float:
    """The run's policy's win rate over ``rounds`` rounds of ``arena match`` against ``opponent``."""
    cmd = [sys.executable, "-m", "arena.cli", "match", "--bot", str(run_dir), "--bot", opponent, "--rounds", str(rounds)]
    cmd += ["--seed", str(seed + 1), "--json"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({result.returncode}): {result.stderr.strip()[-800:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return float(report["bots"][0]["wins"] / report["rounds"])


def median(values: list[float | None]) -> float | None:
    """Median where a run that never reached 100% counts as infinitely slow (``None``: not reached)."""
    middle = statistics.median(float("inf") if v is None else float(v) for v in values)
    return None if middle == float("inf") else middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="training wall time per run (default 40)")
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    parser.add_argument("--base", default="", help="flags every variant shares (default: arena train's defaults)")
    parser.add_argument(
        "--variant", action="append", metavar="NAME=FLAGS", help="a variant (repeatable; default: the ablation list)"
    )
    parser.add_argument("--steps", type=int, default=None, help="environment steps per run instead of --seconds")
    parser.add_argument("--judge", default=None, metavar="NAME", help="after each run, 200 rounds against this opponent")
    args = parser.parse_args()
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be >= 1")
    variants = DEFAULT_VARIANTS
    if args.variant:
        variants = dict(v.partition("=")[::2] for v in args.variant)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(tempfile.mkdtemp(prefix="arena-ablation-"))
    results: dict[str, Any] = {}
    started = time.monotonic()
    for name, extra in variants.items():
        runs = []
        for seed in seeds:
            flags = shlex.split(args.base) + shlex.split(extra)
            out = root / f"{len(results)}-{seed}"
            figures = run(flags, out, args.seconds, seed, args.steps)
            if args.judge:
                figures["judged_win_rate"] = judge(out, args.judge, 200, seed)
            runs.append(figures)
            print(f"{name} seed {seed}: {figures}", file=sys.stderr, flush=True)
        results[name] = {
            "flags": extra,
            "runs": runs,
            "median_seconds_to_100": median([r["seconds_to_100"] for r in runs]),
            "median_steps_to_100": median([r["steps_to_100"] for r in runs]),
            "median_trained_steps_per_s": statistics.median(r["trained_steps_per_s"] for r in runs),
        }
        if args.judge:
            judged = [r["judged_win_rate"] for r in runs]
            results[name] |= {"median_judged_win_rate": statistics.median(judged), "worst_judged_win_rate": min(judged)}
    print(json.dumps({"bench": "ablation", "seconds_per_run": args.seconds, "steps_per_run": args.steps,
                      "judge": args.judge, "base_flags": args.base, "seeds": seeds,
                      "wall_seconds": round(time.monotonic() - started), "variants": results}))  # fmt: skip


if __name__ == "__main__":
    main()
