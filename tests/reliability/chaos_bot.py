"""Helper processes for the chaos cases of ``test_chaos.py`` (run with ``python -m tests.reliability.chaos_bot``).

Two commands:

``bot URL NAME``
    A real bot process to ``kill -9`` (C1): a :class:`BlockingBotClient` playing one endless
    round (no episode ever ends, so every step it sends is "mid-round") until it is killed.
    Imports numpy, msgpack and websockets only (no torch). The test starts the same bot as a
    multiprocessing target (:func:`run_bot_logged`) from a forkserver that has these imports
    preloaded, so a bot process starts in ~20 ms instead of ~0.6 s of CPU.

``replay DIR PHASE... [--agent AGENT]...``
    The restart-determinism driver (C8): feeds one recorded transition stream (made from
    fixed seeds, never from a global generator) to ``agents.make_agent`` and writes what the
    test compares. ``straight`` runs all ``K`` rounds; ``first`` runs the first ``K/2`` and
    writes a real checkpoint through :class:`server.trainer.Trainer` (which adds the torch
    and Python generator states); ``resume`` — run in a fresh process — resumes from that
    checkpoint and runs the rest. Every run starts with the same seeding, as a program
    would, and every round draws once from each global generator (standing in for any
    consumer of them), so a generator state the checkpoint lacks shows up as a difference.
    The test runs ``straight`` and ``first`` in its own process (:func:`run_replay`) and
    only ``resume`` through this command.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

K_ROUNDS = 20
"""Rounds of the C8 stream (each runs at least one update)."""
ROUND_STEPS = 64
OBS_DIM, ACT_DIM = 5, 2
AGENT_OPTIONS: dict[str, dict[str, Any]] = {
    "ppo": {"hidden": (16, 16), "rollout_steps": ROUND_STEPS, "minibatch_size": 16, "epochs": 2, "seed": 3},
    "td3": {
        "hidden": (16, 16),
        "batch_size": 32,
        "buffer_size": 4096,
        "warmup_steps": ROUND_STEPS,
        "updates_per_publish": 8,
        "utd_ratio": 0.125,  # 8 gradient steps (4 cycles) per round: one update() call
        "save_replay": True,
        "seed": 3,
    },
}


# ── bot ──────────────────────────────────────────────────────────────────────


def run_bot(url: str, name: str, seed: int, n_agents: int, batch_steps: int, tick_sleep: float) -> None:
    """Play an endless round as one bot until killed (or until the connection is lost)."""
    from bot_protocol.client import BlockingBotClient, ClientConfig

    rng = np.random.default_rng(seed)
    config = ClientConfig(url, name, 4, 2, n_agents=n_agents, batch_steps=batch_steps, reconnect=False)
    bot = BlockingBotClient(config, seed=seed)
    bot.connect()
    obs = rng.standard_normal((n_agents, 4)).astype(np.float32)
    while True:
        actions, logp = bot.act(obs)
        reward = rng.standard_normal(n_agents).astype(np.float32)
        bot.record(obs, actions, logp, reward=reward)  # no terminal, no truncation: the round never ends
        obs = (obs + 0.1 * rng.standard_normal(obs.shape)).astype(np.float32)
        time.sleep(tick_sleep)


def run_bot_logged(log: str, url: str, name: str, seed: int) -> None:
    """:func:`run_bot` with defaults, its stdout and stderr going to ``log`` (a multiprocessing target)."""
    import os

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    run_bot(url, name, seed, n_agents=4, batch_steps=16, tick_sleep=0.01)


# ── replay (C8) ──────────────────────────────────────────────────────────────


def seed_process() -> None:
    """What every process does at start-up: seed every global generator, one torch thread."""
    import random

    import torch

    torch.manual_seed(1234)
    random.seed(1234)
    np.random.seed(1234)
    torch.set_num_threads(1)  # bitwise results need the same reduction order in every process


def recorded_round(i: int) -> list[Any]:
    """Round ``i`` of the recorded stream: 64 steps in two segments (a terminal or a cut, then a cut)."""
    from agents import Segment, SegmentEnd

    rng = np.random.default_rng(10_000 + i)
    segments = []
    for part, steps in enumerate((40, ROUND_STEPS - 40)):
        end = SegmentEnd.TERMINAL if (i + part) % 3 == 0 else SegmentEnd.CUT
        segments.append(
            Segment(
                bot="recorded",
                agent=part,
                obs=rng.standard_normal((steps, OBS_DIM)).astype(np.float32),
                act=rng.uniform(-1, 1, (steps, ACT_DIM)).astype(np.float32),
                logp=rng.normal(-2.0, 0.1, steps).astype(np.float32),
                end=end,
                next_obs=None if end is SegmentEnd.TERMINAL else rng.standard_normal(OBS_DIM).astype(np.float32),
                generation=0,
                version=i,
                reward=rng.standard_normal(steps).astype(np.float32),
            )
        )
    return segments


def play_rounds(agent: Any, rounds: range) -> int:
    """Feed ``rounds`` of the stream, updating while the agent is ready; returns the update count."""
    import random

    import torch

    updates = 0
    for i in rounds:
        agent.observe(recorded_round(i))
        while agent.ready():
            agent.update()
            updates += 1
        # One draw from each global generator per round: any consumer of them (exploration,
        # augmentation, a library) would advance them like this.
        torch.rand(1)
        random.random()
        np.random.random()
    return updates


def next_draws(agent: Any) -> dict[str, Any]:
    """The next 10 draws of every generator in play (global ones and the agent's own)."""
    import random

    import torch

    draws: dict[str, Any] = {
        "torch": torch.rand(10),
        "python": [random.random() for _ in range(10)],
        "numpy": torch.from_numpy(np.random.random(10)),
    }
    for name in ("generator", "sample_generator", "noise_generator"):
        generator = getattr(agent, name, None)
        if generator is not None:
            draws[f"agent.{name}"] = torch.rand(10, generator=generator)
    return draws


def run_replay(phase: str, agent_name: str, directory: Path) -> None:
    import torch

    from agents import make_agent
    from server.config import TrainerConfig
    from server.metrics import Metrics
    from server.trainer import Trainer
    from server.transition_queue import TransitionQueue

    seed_process()
    agent = make_agent(agent_name, OBS_DIM, ACT_DIM, **AGENT_OPTIONS[agent_name])
    half = K_ROUNDS // 2
    store = directory / f"{agent_name}-checkpoints"
    if phase == "straight":
        updates = play_rounds(agent, range(K_ROUNDS))
    elif phase == "first":
        trainer = Trainer(agent, TransitionQueue(1 << 20), Metrics(), TrainerConfig(checkpoint_dir=store))
        updates = play_rounds(agent, range(half))
        trainer.save_checkpoint()
        assert trainer.metrics.counter("checkpoints") == 1, "the checkpoint was not written"
        return
    else:
        trainer = Trainer(agent, TransitionQueue(1 << 20), Metrics(), TrainerConfig(checkpoint_dir=store, resume=True))
        assert trainer.generation == 1, f"resume did not find the checkpoint (generation {trainer.generation})"
        updates = play_rounds(agent, range(half, K_ROUNDS))
    final = {"agent": agent.state_dict(), "updates": updates}
    final["draws"] = next_draws(agent)
    torch.save(final, directory / f"{agent_name}-{phase}.pt")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chaos_bot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    bot = commands.add_parser("bot")
    bot.add_argument("url")
    bot.add_argument("name")
    bot.add_argument("--seed", type=int, default=0)
    bot.add_argument("--agents", type=int, default=4)
    bot.add_argument("--batch-steps", type=int, default=16)
    bot.add_argument("--tick-sleep", type=float, default=0.01, help="seconds per tick (a 100 Hz game)")
    replay = commands.add_parser("replay")
    replay.add_argument("directory", type=Path)
    replay.add_argument("phases", nargs="+", choices=["straight", "first", "resume"], help="run in this order")
    replay.add_argument("--agent", action="append", choices=sorted(AGENT_OPTIONS), help="repeat; default: all")
    args = parser.parse_args(argv)
    if args.command == "bot":
        run_bot(args.url, args.name, args.seed, args.agents, args.batch_steps, args.tick_sleep)
    else:
        for agent in args.agent or sorted(AGENT_OPTIONS):
            for phase in args.phases:  # each starts with the same seeding, like a new program
                run_replay(phase, agent, args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
