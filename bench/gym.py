"""Learning benchmark on a gymnasium game with discrete actions: ``arena gym ENV`` over seeds, beside Stable-Baselines3.

Run ``python bench/gym.py`` (CartPole-v1, 100,000 steps, seeds 0-4: a few minutes on 2 cores;
``--env LunarLander-v3 --steps 1000000 --seeds 0 1 2`` needs ``pip install box2d``).
Ours is the README-style command a user types, ``arena gym ENV --steps N --seed S --json`` in a
subprocess (its own server and trainer, one bot in a child process playing 8 sub-environments over
the websocket), with its defaults; its figure is the JSON's ``eval_mean_return`` (the final policy, deterministic,
``--eval-episodes`` episodes). The baseline, when the ``bench`` extra is installed
(``pip install torch==2.13.0 -e ".[bench]"``), is SB3's PPO with RL-Zoo's hyperparameters for
CartPole-v1 (``hyperparams/ppo.yml``: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, GAE
lambda 0.8, learning rate and clip range falling linearly from 1e-3 and 0.2, no entropy bonus;
LunarLander-v3's: 16 envs, n_steps 1024, batch 64, 4 epochs, gamma 0.999, lambda 0.98, entropy 0.01),
trained for the same steps on one torch thread and evaluated the same way (deterministic, the same
number of episodes). Without the extra the baseline is skipped, saying so.

A learning result is a distribution: per side, every seed's figure, the median and the worst
seed; a seed that fails counts 0. Targets: CartPole-v1 at 100,000 steps, median >= 475 and worst
>= 400; LunarLander-v3 at 1,000,000 steps, median >= 200 and worst >= 150. Progress goes to
stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # bench/arena.py must not shadow arena
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

TARGETS = {
    "CartPole-v1": {"steps": 100_000, "median": 475.0, "worst": 400.0},
    "LunarLander-v3": {"steps": 1_000_000, "median": 200.0, "worst": 150.0},
}
"""What the issue asks of each game at its budget; other games and budgets are reported without targets."""

RL_ZOO = {
    "CartPole-v1": {
        "n_envs": 8,
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": 1e-3,
        "clip_range": 0.2,
        "anneal": True,
    },
    "LunarLander-v3": {
        "n_envs": 16,
        "n_steps": 1024,
        "batch_size": 64,
        "gae_lambda": 0.98,
        "gamma": 0.999,
        "n_epochs": 4,
        "ent_coef": 0.01,
        "learning_rate": 3e-4,
        "clip_range": 0.2,
        "anneal": False,
    },
}
"""RL-Zoo's PPO settings (``hyperparams/ppo.yml``) per game; ``anneal``: learning rate and clip range fall linearly to 0."""


def log(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:6.0f} s] {message}", file=sys.stderr, flush=True)


def ours(env: str, steps: int, seed: int, episodes: int, out: Path, options: list[str]) -> dict[str, Any]:
    """``arena gym ENV --steps N --seed S --json`` (plus ``--agent-option``s): its summary, or a failed seed's record."""
    command = [sys.executable, "-m", "arena.cli", "gym", env, "--steps", str(steps), "--seed", str(seed)]
    command += ["--eval-episodes", str(episodes), "--json", "--out", str(out)]
    command += [flag for option in options for flag in ("--agent-option", option)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"seed": seed, "failed": done.stderr.strip().splitlines()[-1:] or ["no output"], "eval_mean_return": 0.0}
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "seed": seed,
        "eval_mean_return": summary["eval_mean_return"],
        "eval_std_return": summary["eval_std_return"],
        "seconds": round(time.monotonic() - started, 1),
        "train_seconds": summary["seconds"],
        "steps": summary["steps"],
    }


def sb3(env: str, steps: int, seed: int, episodes: int) -> dict[str, Any]:
    """SB3's PPO with RL-Zoo's settings for ``env`` for ``steps``; evaluated as ours is."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    zoo = RL_ZOO[env]
    vec = make_vec_env(env, n_envs=zoo["n_envs"], seed=seed)

    def linear(start: float) -> Any:
        return (lambda remaining: remaining * start) if zoo["anneal"] else start

    model = PPO(
        "MlpPolicy",
        vec,
        n_steps=zoo["n_steps"],
        batch_size=zoo["batch_size"],
        gae_lambda=zoo["gae_lambda"],
        gamma=zoo["gamma"],
        n_epochs=zoo["n_epochs"],
        ent_coef=zoo["ent_coef"],
        learning_rate=linear(zoo["learning_rate"]),
        clip_range=linear(zoo["clip_range"]),
        seed=seed,
        device="cpu",
    )
    started = time.monotonic()
    model.learn(total_timesteps=steps)
    seconds = time.monotonic() - started
    one = gym.make(env)
    returns = []
    obs, _ = one.reset(seed=seed + 10_000)
    for _ in range(episodes):
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(np.asarray(obs), deterministic=True)
            obs, reward, terminated, truncated, _ = one.step(int(action))
            total += float(reward)
            done = bool(terminated or truncated)
        returns.append(total)
        obs, _ = one.reset()
    return {
        "seed": seed,
        "eval_mean_return": float(np.mean(returns)),
        "eval_std_return": float(np.std(returns)),
        "train_seconds": round(seconds, 1),
    }


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    figures = [float(r["eval_mean_return"]) for r in runs]
    seconds = [float(r["train_seconds"]) for r in runs if "train_seconds" in r]
    return {
        "median": statistics.median(figures),
        "worst": min(figures),
        "failed_seeds": sum("failed" in r for r in runs),
        "train_seconds_median": statistics.median(seconds) if seconds else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", help="gymnasium id with discrete actions (default: CartPole-v1)")
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps per run (default: 100000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds (default: 0 1 2 3 4)")
    parser.add_argument("--eval-episodes", type=int, default=20, help="evaluation episodes per run (default: 20)")
    parser.add_argument("--no-sb3", action="store_true", help="skip the SB3 baseline")
    parser.add_argument(
        "--agent-option", action="append", default=[], metavar="NAME=VALUE", help="passed to arena gym (a probe)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    log(started, f"{args.env}, {args.steps:,} steps, seeds {args.seeds}: ours (arena gym), then SB3's PPO")
    mine: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="arena-bench-gym-") as root:
        for seed in args.seeds:
            mine.append(ours(args.env, args.steps, seed, args.eval_episodes, Path(root) / f"seed{seed}", args.agent_option))
            log(started, f"ours, seed {seed}: {mine[-1]}")
    baseline: dict[str, Any]
    if args.no_sb3:
        baseline = {"skipped": "--no-sb3"}
    else:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:
            installed = False
        else:
            installed = True
        if not installed:
            baseline = {"skipped": "stable-baselines3 is not installed (pip install -e '.[bench]' after torch)"}
            log(started, baseline["skipped"])
        elif args.env not in RL_ZOO:
            baseline = {"skipped": f"no RL-Zoo settings here for {args.env} (known: {', '.join(RL_ZOO)})"}
        else:
            theirs = []
            for seed in args.seeds:
                theirs.append(sb3(args.env, args.steps, seed, args.eval_episodes))
                log(started, f"SB3, seed {seed}: {theirs[-1]}")
            baseline = {"settings": RL_ZOO[args.env], "seeds": theirs, **aggregate(theirs)}
    at_budget = args.steps == TARGETS.get(args.env, {}).get("steps") and not args.agent_option
    target = TARGETS.get(args.env) if at_budget else None
    result = aggregate(mine)
    met = None if target is None else result["median"] >= target["median"] and result["worst"] >= target["worst"]
    print(
        json.dumps(
            {
                "bench": "gym",
                "env": args.env,
                "steps": args.steps,
                "eval_episodes": args.eval_episodes,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "kind": "evaluation" if at_budget else "probe",
                "agent_options": args.agent_option,
                "ours": {"command": "arena gym ENV --steps N --seed S --json", "seeds": mine, **result},
                "sb3_ppo": baseline,
                "targets": target,
                "targets_met": met,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
