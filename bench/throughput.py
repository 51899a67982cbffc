"""End-to-end training speed and time to a skill: ``arena train`` beside Stable-Baselines3, in one run.

Every run trains for the same wall time (``--seconds``, default 30) against a scripted opponent;
time is counted from the first environment step on both sides. Ours run the real command in a
subprocess and are read from its ``summary.json``; SB3's PPO trains in this process through
``bench/sb3_tank.py``'s ``VecEnv`` over our vectorized engine.

1. ``today``: the settings ``arena train`` had before the defaults were measured (a bot thread,
   16 matches, 2,048-step rollouts in minibatches of 256, 4 epochs, the plain PPO clip);
2. ``flags``: the fast settings found first with options that existed then (a worker process,
   128 matches, minibatch 4,096, rollout 32,768, 4 epochs, the plain clip);
3. ``defaults``: ``arena train`` with no flags but ``--opponent sitting`` (every run here is against
   ``sitting`` unless it says otherwise);
4. ``defaults_mix``: the same against all four scripted bots, spread over the matches;
   ``defaults_league``: against the league (``arena train``'s default opponent), whose
   opponents cost the bot side most;
5. ``sb3_same_shape``: SB3's PPO with our defaults' batch shape (128 envs x 64 steps, minibatch
   1,024, 2 epochs; its other hyperparameters its own), so the figure isolates the system;
6. ``sb3_defaults``: SB3 with its own defaults (16 envs as ``today``, n_steps 2,048, minibatch 64,
   10 epochs).

``defaults``, ``defaults_league`` and ``sb3_same_shape`` run ``--repeats`` seeds (3), since one run's time to 100% can be
twice another's; the verdict compares medians. Each run's final policy then plays ``--eval-rounds``
(200) rounds against ``sitting``. Progress goes to stderr; the last stdout line is one JSON object
with every run, the verdict and the targets: >= 120,000
trained steps/s with the defaults against ``sitting`` and >= 100,000 against the league, >= 2x SB3's
steps/s at the same shape, 100% against ``sitting`` within 10 s and 0.84 M steps and in at most half
SB3's time, loop lag p99 < 20 ms. The one-core figures: the learner's update alone
(``bench/learner.py``'s) and the learning bot's loop alone against ``sitting`` and the league
(``bench/bot_loop.py``).

    pip install torch==2.13.0 -e ".[bench]"   # stable-baselines3, after torch
    python bench/throughput.py                 # ~8 minutes on 2 cores
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
OURS = {"today": TODAY, "flags": FLAGS, "defaults": "", "defaults_mix": MIX, "defaults_league": "--opponent league"}
SB3 = {
    "sb3_same_shape": {"n_envs": 128, "n_steps": 64, "batch_size": 1024, "n_epochs": 2},
    "sb3_defaults": {"n_envs": 16, "n_steps": 2048, "batch_size": 64, "n_epochs": 10},
}
TARGETS = {"trained_steps_per_s": 120_000, "league_trained_steps_per_s": 100_000, "x_sb3_same_shape": 2.0,
           "seconds_to_100": 10.0, "steps_to_100": 840_000, "x_sb3_time_to_100": 0.5, "loop_lag_p99_ms": 20.0}  # fmt: skip
HIGHER_IS_BETTER = ("trained_steps_per_s", "league_trained_steps_per_s", "x_sb3_same_shape")


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
    extra = shlex.split(flags)
    if "--opponent" not in extra:  # the speed and time-to-skill figures are against sitting (the league is a case)
        extra = ["--opponent", "sitting", *extra]
    arena("train", "--minutes", str(seconds / 60), "--out", str(out), "--seed", str(seed), "--eval-rounds", "0",
          "--no-report", "--dashboard-port", "-1", *extra)  # fmt: skip
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


REPEATED = ("defaults", "defaults_league", "sb3_same_shape")


def reached(run: dict[str, Any], key: str) -> float | None:
    """Seconds or steps until 100% against the opponent (``None``: never within the run)."""
    return (run.get("win_rate_100_after") or {}).get(key)


def median(values: list[float | None]) -> float | None:
    """The median, a run that never got there counting as infinitely slow (``None`` if the median did not)."""
    ranked = sorted(float("inf") if v is None else float(v) for v in values)
    if not ranked:
        return None
    mid = len(ranked) // 2
    value = ranked[mid] if len(ranked) % 2 else (ranked[mid - 1] + ranked[mid]) / 2
    return None if value == float("inf") else round(value, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="training wall time per run (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the single runs, first seed of the repeated ones")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="seeds for 'defaults', 'defaults_league' and 'sb3_same_shape', whose time to 100%% is compared: "
        "one run's can be 2x another's (default 3; the verdict takes medians)",
    )
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
        seeds = [args.seed + i for i in range(args.repeats if name in REPEATED else 1)]
        runs[name] = []
        for seed in seeds:
            log(f"{name}, seed {seed}: {args.seconds:.0f} s ...")
            if name in OURS:
                figures = run_ours(name, OURS[name], args.seconds, seed, args.eval_rounds, root / f"seed{seed}")
            else:
                from bench.sb3_tank import train_sb3

                figures = train_sb3(args.seconds, seed=seed, eval_rounds=args.eval_rounds, **SB3[name])
            runs[name].append({"seed": seed, **figures})
            log(f"{name}, seed {seed}: {json.dumps(figures)}")
    log("one-core figures: the learner's update alone, the bot's loop alone ...")
    from bench.bot_loop import bot_side
    from bench.learner import time_updates

    # the default (fused) step; the autograd reference beside it is bench/learner.py's business
    fused = next(point for point in time_updates(8192, 1024, 1, 3, 2) if point["step"] == "fused")
    one_core = {"learner": fused, "bot": bot_side(10.0), "bot_league": bot_side(10.0, opponent="league")}
    log(f"one-core figures: {json.dumps(one_core)}")
    verdict: dict[str, Any] = {}
    ours, sb3 = runs.get("defaults"), runs.get("sb3_same_shape")
    if ours:
        verdict["trained_steps_per_s"] = median([r["trained_steps_per_s"] for r in ours])
        verdict["seconds_to_100"] = median([reached(r, "seconds") for r in ours])
        verdict["steps_to_100"] = median([reached(r, "steps") for r in ours])
        verdict["loop_lag_p99_ms"] = max(r.get("loop_lag_p99_ms") or 0.0 for r in ours)
        verdict["learner_us_per_step"] = median([r.get("trainer_cpu_us_per_step") for r in ours])
        verdict["learner_us_per_step_one_core"] = one_core["learner"]["us_per_env_step"]
        verdict["bot_us_per_step"] = median([r.get("bot_cpu_us_per_step") for r in ours])
        verdict["bot_us_per_step_one_core"] = one_core["bot"]["us_per_step"]
        verdict["bot_league_us_per_step_one_core"] = one_core["bot_league"]["us_per_step"]
    league = runs.get("defaults_league")
    if league:
        verdict["league_trained_steps_per_s"] = median([r["trained_steps_per_s"] for r in league])
    if ours and sb3:
        sb3_rate = median([r["steps_per_s"] for r in sb3])
        verdict["sb3_steps_per_s"] = sb3_rate
        verdict["sb3_seconds_to_100"] = median([reached(r, "seconds") for r in sb3])
        verdict["sb3_steps_to_100"] = median([reached(r, "steps") for r in sb3])
        verdict["x_sb3_same_shape"] = round(verdict["trained_steps_per_s"] / sb3_rate, 2) if sb3_rate else None
        ours_t, sb3_t = verdict["seconds_to_100"], verdict["sb3_seconds_to_100"]
        verdict["x_sb3_time_to_100"] = round(ours_t / sb3_t, 2) if ours_t and sb3_t else None
    met = {}
    for key, target in TARGETS.items():
        value = verdict.get(key)
        met[key] = None if value is None else (value >= target if key in HIGHER_IS_BETTER else value <= target)
    print(json.dumps({"bench": "throughput", "seconds_per_run": args.seconds, "seed": args.seed, "cores": os.cpu_count(),
                      "wall_seconds": round(time.monotonic() - started), "runs": runs, "one_core": one_core,
                      "verdict": verdict, "targets": TARGETS, "met": met}))  # fmt: skip


if __name__ == "__main__":
    main()
