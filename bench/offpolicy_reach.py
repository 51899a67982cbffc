"""DDPG and TD3 learn the reach game through the real server: how much, over seeds.

How much an off-policy learner learns in a fixed number of bot steps depends on how soon trained
weights reach the bot, which depends on thread timing on a busy machine; the test suite checks the
plumbing (weights hot-swapped while playing, nothing dropped), and this benchmark holds the learning
bound, measured over seeds beside the random policy on the same games.

Each run: a :class:`server.TrainingServer` on 127.0.0.1 (port 0) with the agent, one reach bot of 8
agents playing ``--steps`` ticks through a real websocket (the test suite's settings: hidden (64, 64),
warm-up 1,000 steps, batch 128, learning rate 1e-3, 32 updates per publish). The figure is the mean
return of the last 50 finished episodes; the baseline is uniform random actions on the same game and
seed. Target: every seed's last-50 return above the random policy's + 3 (random gets about 0; the old
test's runs here ended at 5.4-6.7 for DDPG and 7.7-10.7 for TD3).

    python bench/offpolicy_reach.py                      # td3 and ddpg, seeds 0-2 (about 2 minutes)
    python bench/offpolicy_reach.py --algo ddpg --seeds 5

Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from agents import make_agent  # noqa: E402
from arena.games.reach import ACT_DIM, OBS_DIM, ReachGame, play_reach  # noqa: E402
from server import ServerConfig, ServerThread, TrainingServer  # noqa: E402

MARGIN = 3.0
"""A seed passes when its last-50 return beats the random policy's by this much."""


def random_return(steps: int, n_agents: int, seed: int) -> float:
    """Mean episode return of uniform random actions on the same game (the baseline, about 0)."""
    game, rng = ReachGame(n_agents, seed=seed), np.random.default_rng(seed)
    for _ in range(steps):
        game.step(rng.uniform(-1, 1, (n_agents, ACT_DIM)).astype(np.float32))
    return float(np.mean(game.finished))


def one_run(algo: str, seed: int, steps: int, n_agents: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    agent = make_agent(
        algo, OBS_DIM, ACT_DIM, hidden=(64, 64), warmup_steps=1000, batch_size=128, learning_rate=1e-3,
        updates_per_publish=32,
    )  # fmt: skip
    server = TrainingServer(agent, ServerConfig(port=0))
    thread = ServerThread(server).start()
    started = time.monotonic()
    try:
        game, bot = play_reach(server.url, n_agents=n_agents, steps=steps, seed=seed)
    finally:
        thread.stop()
    first, last = float(np.mean(game.finished[:50])), float(np.mean(game.finished[-50:]))
    baseline = random_return(steps, n_agents, seed)
    return {
        "algo": algo,
        "seed": seed,
        "first_50": round(first, 2),
        "last_50": round(last, 2),
        "random": round(baseline, 2),
        "weights_swapped": bot.stats.weights_swapped,
        "updates": agent.updates,
        "seconds": round(time.monotonic() - started, 1),
        "passed": last > baseline + MARGIN,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", action="append", choices=("td3", "ddpg"), help="default: both")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per algorithm (default 3)")
    parser.add_argument("--steps", type=int, default=1500, help="bot ticks per run (default 1500, 8 agents a tick)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny networks: a second intra-op thread only adds contention on 2 cores
    results: dict[str, Any] = {}
    for algo in args.algo or ["td3", "ddpg"]:
        runs = []
        for seed in range(args.seeds):
            run = one_run(algo, seed, args.steps, n_agents=8)
            print(run, file=sys.stderr, flush=True)
            runs.append(run)
        lasts = [r["last_50"] for r in runs]
        results[algo] = {
            "runs": runs,
            "last_50_median": round(statistics.median(lasts), 2),
            "last_50_worst": round(min(lasts), 2),
            "random_median": round(statistics.median(r["random"] for r in runs), 2),
            "seeds_passed": sum(r["passed"] for r in runs),
        }
    verdict = all(r["seeds_passed"] == len(r["runs"]) for r in results.values())
    print(json.dumps({"bench": "offpolicy_reach", "steps": args.steps, "margin": MARGIN, "results": results,
                      "target": f"every seed's last-50 return > random + {MARGIN}", "passed": verdict}))  # fmt: skip


if __name__ == "__main__":
    main()
