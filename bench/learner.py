"""The learner alone: one PPO update of the tank arena's shape, timed on an idle core.

This is the one-core figure the end-to-end benchmarks (``bench/throughput.py``) hold the trainer
thread against: the same ``PPOAgent.update`` on synthetic segments of the tank's sizes (25 -> 5,
reward terms, 256-step segments), with no server, no bot and no other thread. Progress goes to
stderr; the last stdout line is one JSON object: for each (rollout, minibatch, torch threads) the
seconds per update, the microseconds per environment step (all epochs) and per minibatch row.

    python bench/learner.py                      # the default shapes, 1 and 2 torch threads
    python bench/learner.py --shape 32768:4096 --threads 1 --repeats 5
"""

from __future__ import annotations

import os
import sys

# Run as ``python bench/learner.py``, this file's folder would shadow the ``agents`` package's siblings.
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

from agents import PPOAgent, PPOConfig, Segment, SegmentEnd  # noqa: E402
from arena.games.tank.rewards import N_TERMS, TANK_REWARD  # noqa: E402

OBS_DIM, ACT_DIM, SEGMENT_STEPS = 25, 5, 256
DEFAULT_SHAPES = ("2048:256", "32768:4096", "32768:8192", "65536:8192")


def segments(steps: int, rng: np.random.Generator) -> list[Segment]:
    """``steps`` steps of plausible tank data, cut into 256-step segments (the server's default)."""
    out = []
    for start in range(0, steps, SEGMENT_STEPS):
        n = min(SEGMENT_STEPS, steps - start)
        terminal = rng.random() < 0.2
        out.append(
            Segment(
                bot="bench",
                agent=start // SEGMENT_STEPS,
                obs=rng.standard_normal((n, OBS_DIM), dtype=np.float32),
                act=rng.uniform(-1, 1, (n, ACT_DIM)).astype(np.float32),
                logp=rng.normal(-6.0, 1.0, n).astype(np.float32),
                end=SegmentEnd.TERMINAL if terminal else SegmentEnd.CUT,
                next_obs=None if terminal else rng.standard_normal(OBS_DIM, dtype=np.float32),
                generation=0,
                version=0,
                terms=rng.standard_normal((n, N_TERMS), dtype=np.float32) * 0.1,
                score=float(rng.uniform(0, 150)) if terminal else None,
                reward_fn=TANK_REWARD,
            )
        )
    return out


def time_updates(rollout: int, minibatch: int, threads: int, repeats: int, epochs: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    agent = PPOAgent(PPOConfig(OBS_DIM, ACT_DIM, rollout_steps=rollout, minibatch_size=minibatch, epochs=epochs))
    rng = np.random.default_rng(0)
    seconds = []
    for i in range(repeats + 1):  # the first update warms up allocator and kernels
        agent.observe(segments(rollout, rng))
        start = time.perf_counter()
        agent.update()
        if i:
            seconds.append(time.perf_counter() - start)
    per_update = statistics.median(seconds)
    minibatches = epochs * -(-rollout // minibatch)
    return {
        "rollout": rollout,
        "minibatch": minibatch,
        "epochs": epochs,
        "torch_threads": threads,
        "seconds_per_update": round(per_update, 4),
        "us_per_env_step": round(per_update / rollout * 1e6, 2),
        "ms_per_minibatch": round(per_update / minibatches * 1e3, 2),
        "us_per_row": round(per_update / (rollout * epochs) * 1e6, 3),
        "env_steps_per_s": round(rollout / per_update),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", metavar="ROLLOUT:MINIBATCH", help=f"default: {', '.join(DEFAULT_SHAPES)}")
    parser.add_argument("--threads", default="1,2", help="torch thread counts (default 1,2)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="timed updates per point, median reported (default 3)")
    args = parser.parse_args()
    results = []
    for shape in args.shape or DEFAULT_SHAPES:
        rollout, minibatch = (int(v) for v in shape.split(":"))
        for threads in (int(t) for t in args.threads.split(",")):
            figures = time_updates(rollout, minibatch, threads, args.repeats, args.epochs)
            print(figures, file=sys.stderr, flush=True)
            results.append(figures)
    print(json.dumps({"bench": "learner", "torch": torch.__version__, "cores": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
