"""PPO ablation on the tank arena: learning per sample, one change at a time.

Each variant is ``arena train`` against ``sitting`` (the real command, in a subprocess) for a fixed
wall time and several seeds, with the base flags plus the variant's own. For every run it reads
``summary.json``: the time and the environment steps until the win rate of the last 100 rounds
first reaches 100% (counted from the first environment step), trained steps/s and the final win
rate. Progress goes to stderr; the last stdout line is one JSON object with every run and each
variant's median, the base (first variant) measured in the same run.

    python bench/ablation.py --seconds 40 --seeds 0,1
    python bench/ablation.py --variant base= --variant ent0='--agent-option entropy_coef=0'
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


def run(flags: list[str], out: Path, seconds: float, seed: int) -> dict[str, Any]:
    """One ``arena train`` run; its summary figures."""
    cmd = [sys.executable, "-m", "arena.cli", "train", "--minutes", str(seconds / 60), "--out", str(out), "--seed", str(seed)]
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
    }


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
    args = parser.parse_args()
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
            figures = run(flags, root / f"{len(results)}-{seed}", args.seconds, seed)
            runs.append(figures)
            print(f"{name} seed {seed}: {figures}", file=sys.stderr, flush=True)
        results[name] = {
            "flags": extra,
            "runs": runs,
            "median_seconds_to_100": median([r["seconds_to_100"] for r in runs]),
            "median_steps_to_100": median([r["steps_to_100"] for r in runs]),
            "median_trained_steps_per_s": statistics.median(r["trained_steps_per_s"] for r in runs),
        }
    print(json.dumps({"bench": "ablation", "seconds_per_run": args.seconds, "base_flags": args.base, "seeds": seeds,
                      "wall_seconds": round(time.monotonic() - started), "variants": results}))  # fmt: skip


if __name__ == "__main__":
    main()
