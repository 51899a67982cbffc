"""End-to-end training speed and time to a skill: ``arena train`` beside Stable-Baselines3, in one run.

Every run trains for the same wall time (``--seconds``, default 40) against a scripted opponent;
time is counted from the first environment step on both sides. Ours run the real command in a
subprocess and are read from its ``summary.json``; SB3's PPO trains in this process through
``bench/sb3_tank.py``'s ``VecEnv`` over our vectorized engine.

1. ``today``: the settings ``arena train`` had before the defaults were measured (a bot thread,
   16 matches, 2,048-step rollouts in minibatches of 256, 4 epochs, the plain PPO clip);
2. ``flags``: the fast settings found first with options that existed then (a worker process,
   128 matches, minibatch 4,096, rollout 32,768, 4 epochs, the plain clip);
3. ``defaults``: ``arena train`` with no flags;
4. ``defaults_mix``: the same against all four scripted bots, spread over the matches;
5. ``sb3_same_shape``: SB3's PPO with our defaults' batch shape (128 envs x 64 steps, minibatch
   1,024, 2 epochs; its other hyperparameters its own), so the figure isolates the system;
6. ``sb3_defaults``: SB3 with its own defaults (16 envs as ``today``, n_steps 2,048, minibatch 64,
   10 epochs).

Each run's final policy then plays ``--eval-rounds`` (200) rounds against ``sitting``. Progress goes
to stderr; the last stdout line is one JSON object with every figure and the targets: >= 80,000
trained steps/s with the defaults, >= 2x SB3's steps/s at the same shape, 100% against ``sitting``
within 10 s and 0.84 M steps and in at most half SB3's time, loop lag p99 < 20 ms.

    pip install torch==2.13.0 -e ".[bench]"   # stable-baselines3, after torch
    python bench/throughput.py                 # ~6 minutes on 2 cores
    python bench/throughput.py --only defaults,sb3_same_shape --seconds 30
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SEED_PPO = "--agent-option epochs=4 --agent-option proximal_anchor=false"  # PPOConfig's own, as before the sweep
TODAY = f"--workers 0 --bots 1 --matches 16 --agent-option rollout_steps=2048 --agent-option minibatch_size=256 {SEED_PPO}"
FLAGS = f"--workers 1 --matches 128 --agent-option minibatch_size=4096 --agent-option rollout_steps=32768 {SEED_PPO}"
MIX = "--opponent sitting --opponent spinner --opponent walker --opponent tracker"
OURS = {"today": TODAY, "flags": FLAGS, "defaults": "", "defaults_mix": MIX}
SB3 = {
    "sb3_same_shape": {"n_envs": 128, "n_steps": 64, "batch_size": 1024, "n_epochs": 2},
    "sb3_defaults": {"n_envs": 16, "n_steps": 2048, "batch_size": 64, "n_epochs": 10},
}
TARGETS = {"trained_steps_per_s": 80_000, "x_sb3_same_shape": 2.0, "seconds_to_100": 10.0, "steps_to_100": 840_000,
           "x_sb3_time_to_100": 0.5, "loop_lag_p99_ms": 20.0}  # fmt: skip


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def arena(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"arena {shlex.join(args)} failed ({result.returncode}): {result.stderr.strip()[-800:]}")
    return result.stdout


def eval_win_rate(policy: str, opponent: str, rounds: int, seed: int) -> float:
    out = json.loads(
        arena("match", "--bot", policy, "--bot", opponent, "--rounds", str(rounds), "--seed", str(seed), "--json")
    )
    return round(out["bots"][0]["wins"] / out["rounds"], 3)


def run_ours(name: str, flags: str, seconds: float, seed: int, eval_rounds: int, root: Path) -> dict[str, Any]:
    out = root / name
    arena("train", "--minutes", str(seconds / 60), "--out", str(out), "--seed", str(seed), "--eval-rounds", "0",
          "--no-report", "--dashboard-port", "-1", *shlex.split(flags))  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    lags = [row["server/policy_lag_avg"] for row in rows if "server/policy_lag_avg" in row]
    figures = {
        "system": "arena-trainer",
        "flags": flags,
        "layout": summary["layout"],
        **summary["throughput"],
        "steps": summary["transitions_trained"],
        "updates": summary["updates"],
        "policy_lag_avg": round(sum(lags) / len(lags), 2) if lags else None,
        "win_rate_100_after": summary.get("win_rate_100_after"),
        "win_rate_last_100": summary.get("win_rate_last_100"),
        "eval_rounds": eval_rounds,
        "eval_win_rate": eval_win_rate(str(out), "sitting", eval_rounds, seed + 1) if eval_rounds else None,
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="training wall time per run (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-rounds", type=int, default=200, help="rounds of each final policy against sitting (default 200)"
    )
    parser.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join([*OURS, *SB3])}")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else [*OURS, *SB3]
    unknown = set(chosen) - set(OURS) - set(SB3)
    if unknown:
        raise SystemExit(f"--only: unknown run(s) {', '.join(sorted(unknown))}")
    root = Path(tempfile.mkdtemp(prefix="arena-throughput-"))
    runs: dict[str, Any] = {}
    started = time.monotonic()
    for name in chosen:
        log(f"{name}: {args.seconds:.0f} s ...")
        if name in OURS:
            runs[name] = run_ours(name, OURS[name], args.seconds, args.seed, args.eval_rounds, root)
        else:
            from bench.sb3_tank import train_sb3

            runs[name] = train_sb3(args.seconds, seed=args.seed, eval_rounds=args.eval_rounds, **SB3[name])
        log(f"{name}: {json.dumps(runs[name])}")
    verdict: dict[str, Any] = {}
    ours, sb3 = runs.get("defaults"), runs.get("sb3_same_shape")
    if ours:
        reached = ours["win_rate_100_after"] or {}
        verdict["trained_steps_per_s"] = ours["trained_steps_per_s"]
        verdict["seconds_to_100"] = reached.get("seconds")
        verdict["steps_to_100"] = reached.get("steps")
        verdict["loop_lag_p99_ms"] = ours.get("loop_lag_p99_ms")
    if ours and sb3:
        verdict["x_sb3_same_shape"] = round(ours["trained_steps_per_s"] / sb3["steps_per_s"], 2)
        ours_t, sb3_t = (ours["win_rate_100_after"] or {}).get("seconds"), (sb3["win_rate_100_after"] or {}).get("seconds")
        verdict["x_sb3_time_to_100"] = round(ours_t / sb3_t, 2) if ours_t and sb3_t else None
    met = {}
    for key, target in TARGETS.items():
        value = verdict.get(key)
        higher_is_better = key in ("trained_steps_per_s", "x_sb3_same_shape")
        met[key] = None if value is None else (value >= target if higher_is_better else value <= target)
    print(json.dumps({"bench": "throughput", "seconds_per_run": args.seconds, "seed": args.seed, "cores": os.cpu_count(),
                      "wall_seconds": round(time.monotonic() - started), "runs": runs, "verdict": verdict,
                      "targets": TARGETS, "met": met}))  # fmt: skip


if __name__ == "__main__":
    main()
