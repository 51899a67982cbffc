"""The learner alone: one PPO update of the tank arena's shape, timed on an idle core.

This is the one-core figure the end-to-end benchmarks (``bench/throughput.py``) hold the trainer
thread against: the same ``PPOAgent.update`` on synthetic segments of the tank's sizes (25 -> 5,
reward terms, 256-step segments, the tank's PPO options), with no server, no bot and no other
thread. Each shape is timed twice, updates interleaved so both see the same machine: the fused
step (``PPOConfig.fused``, the default) and the plain modules through autograd (the reference).
Progress goes to stderr; the last stdout line is one JSON object: for each (step, rollout,
minibatch, torch threads) the seconds per update, the microseconds per environment step (all
epochs) and per minibatch row, the fused step's speedup over the reference, and the floor: the
milliseconds of a step's matrix products alone (:func:`gemm_floor_ms`).

    python bench/learner.py                      # the default shapes, one torch thread
    python bench/learner.py --shape 32768:4096 --threads 1,2 --repeats 15
    python bench/learner.py --space connect-four --shape 4096:256 --epochs 10

``--space connect-four`` times the discrete actor instead: connect four's shape (84 -> 64 -> 64 -> 7
masked logits, no continuous dims, the turn-based preset of ``arena gym``), on random boards and masks.
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
from arena.defaults import TANK_PPO, turn_ppo_options  # noqa: E402
from arena.games.tank.rewards import N_TERMS, TANK_REWARD  # noqa: E402

OBS_DIM, ACT_DIM, SEGMENT_STEPS = 25, 5, 256
DEFAULT_SHAPES = ("8192:1024", "2048:256", "32768:4096")
TARGET_SPEEDUP = 2.0
"""Gradient steps a second of the fused step over the reference's, at the same shape, that the learner's issue asked for."""
STEPS = ("autograd", "fused")
"""``PPOConfig.fused``: False (the plain modules through autograd, today's reference) and True."""
SPACES = ("tank", "connect-four")
BOARD_DIM, COLUMNS = 84, 7
"""Connect four's observation (two 6 x 7 planes) and its one branch of seven columns."""


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


def board_segments(steps: int, rng: np.random.Generator) -> list[Segment]:
    """``steps`` moves of connect-four-shaped data: 0/1 planes, masked columns, games of about seven moves a seat."""
    out, start = [], 0
    while start < steps:
        n = min(int(rng.integers(3, 12)), steps - start)
        mask = rng.random((n, COLUMNS)) < 0.85
        mask[np.arange(n), rng.integers(0, COLUMNS, n)] = True  # a legal column at least
        taken = np.array([rng.choice(np.flatnonzero(row)) for row in mask], dtype=np.float32)
        reward = np.zeros(n, dtype=np.float32)
        reward[-1] = rng.choice([-1.0, 0.0, 1.0])
        out.append(
            Segment(
                bot="bench",
                agent=len(out),
                obs=(rng.random((n, BOARD_DIM)) < 0.25).astype(np.float32),
                act=np.concatenate([taken[:, None], mask.astype(np.float32)], axis=1),
                logp=rng.normal(-1.9, 0.3, n).astype(np.float32),
                end=SegmentEnd.TERMINAL,
                next_obs=None,
                generation=0,
                version=0,
                reward=reward,
            )
        )
        start += n
    return out


def config_for(space: str, rollout: int, minibatch: int, epochs: int, fused: bool) -> PPOConfig:
    """The tank's PPO options, or connect four's (the turn-based preset), at this shape."""
    shape = {"rollout_steps": rollout, "minibatch_size": minibatch, "epochs": epochs, "fused": fused}
    if space == "tank":
        return PPOConfig(OBS_DIM, ACT_DIM, **{**TANK_PPO, **shape})
    return PPOConfig(BOARD_DIM, 0, branches=(COLUMNS,), **{**turn_ppo_options(1), **shape})


def time_updates(
    rollout: int, minibatch: int, threads: int, repeats: int, epochs: int, space: str = "tank"
) -> list[dict[str, Any]]:
    """The fused step and the autograd reference, their updates interleaved so both see the same machine."""
    torch.set_num_threads(threads)
    agents = {step: PPOAgent(config_for(space, rollout, minibatch, epochs, step == "fused")) for step in STEPS}
    make_segments = segments if space == "tank" else board_segments
    rng = np.random.default_rng(0)
    seconds: dict[str, list[float]] = {step: [] for step in STEPS}
    for i in range(repeats + 1):  # the first update warms up allocator and kernels
        data = make_segments(rollout, rng)
        for step, agent in agents.items():
            agent.observe(data)
            start = time.perf_counter()
            agent.update()
            if i:
                seconds[step].append(time.perf_counter() - start)
    return [
        {"space": space, **figures(step, rollout, minibatch, threads, epochs, statistics.median(seconds[step]))}
        for step in STEPS
    ]


def gemm_floor_ms(minibatch: int, threads: int, repeats: int = 200, obs_dim: int = OBS_DIM, head: int = ACT_DIM) -> float:
    """Milliseconds of the matrix products alone in one minibatch step (the tank's sizes by default): the floor.

    A step's products: the forward of both 25 -> 64 -> 64 -> (5 | 1) networks (their first layers as
    one 25 -> 128 product), and in the backward one weight-gradient product per layer and one
    input-gradient product per layer but the first. Timed back to back on fresh operands of the
    step's shapes; what a step costs above this is elementwise work, the optimizer and overhead.
    """
    torch.set_num_threads(threads)
    n, width = minibatch, 64
    x = torch.randn(n, obs_dim)
    w1 = torch.randn(2 * width, obs_dim)
    h = torch.randn(n, width)
    w2 = torch.randn(width, width)
    heads = {head: torch.randn(head, width), 1: torch.randn(1, width)}
    grads = {head: torch.randn(n, head), 1: torch.randn(n, 1)}

    def products() -> None:
        x.mm(w1.t())  # both first layers
        for out in (head, 1):  # actor, critic
            h.mm(w2.t())  # hidden layer forward
            h.mm(heads[out].t())  # head forward
            grads[out].t().mm(h)  # head weight gradient
            grads[out].mm(heads[out])  # head input gradient
            h.t().mm(h)  # hidden weight gradient
            h.mm(w2)  # hidden input gradient
            h.t().mm(x)  # first layer weight gradient

    for _ in range(20):
        products()
    start = time.perf_counter()
    for _ in range(repeats):
        products()
    return (time.perf_counter() - start) / repeats * 1e3


def figures(step: str, rollout: int, minibatch: int, threads: int, epochs: int, per_update: float) -> dict[str, Any]:
    minibatches = epochs * -(-rollout // minibatch)
    return {
        "step": step,
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
    parser.add_argument("--threads", default="1", help="torch thread counts, comma-separated (default 1: the learner's core)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per update (default 2, the tank's)")
    parser.add_argument("--repeats", type=int, default=7, help="timed updates per point, median reported (default 7)")
    parser.add_argument(
        "--space", choices=SPACES, default="tank", help="the tank's continuous actor, or connect four's masked one"
    )
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    speedups: list[dict[str, Any]] = []
    for shape in args.shape or DEFAULT_SHAPES:
        rollout, minibatch = (int(v) for v in shape.split(":"))
        for threads in (int(t) for t in args.threads.split(",")):
            pair = time_updates(rollout, minibatch, threads, args.repeats, args.epochs, args.space)
            for point in pair:
                print(point, file=sys.stderr, flush=True)
            reference, fused = pair
            speedup = reference["seconds_per_update"] / fused["seconds_per_update"]
            sizes = (OBS_DIM, ACT_DIM) if args.space == "tank" else (BOARD_DIM, COLUMNS)
            floor = gemm_floor_ms(minibatch, threads, obs_dim=sizes[0], head=sizes[1])
            print(
                f"  fused / autograd gradient steps per second: {speedup:.2f}x; the products alone: {floor:.2f} ms a step",
                file=sys.stderr,
                flush=True,
            )
            results.extend(pair)
            where = {"space": args.space, "rollout": rollout, "minibatch": minibatch, "torch_threads": threads}
            speedups.append(
                {
                    **where,
                    "speedup": round(speedup, 2),
                    "target_speedup": TARGET_SPEEDUP,
                    "met": speedup >= TARGET_SPEEDUP,
                    "gemm_floor_ms_per_minibatch": round(floor, 2),
                }
            )
    print(
        json.dumps(
            {"bench": "learner", "torch": torch.__version__, "cores": os.cpu_count(), "results": results, "speedup": speedups}
        )
    )


if __name__ == "__main__":
    main()
