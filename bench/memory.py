"""Learning benchmark on games that need memory: a recurrent policy beside the memoryless one and sb3-contrib's RecurrentPPO.

Run ``python bench/memory.py [--task NAME]`` (``pip install popgym`` for POPGym's games; sb3-contrib, installed
after torch, for the baseline). Two tasks, each POPGym's (its returns are scaled so an episode's best is **1.0**):

- ``cartpole`` (the default): CartPole showing the cart's position and the pole's angle but no velocities
  (``popgym-PositionOnlyCartPoleEasy-v0``, POPGym 1.0's name for what its paper calls Stateless CartPole): a
  policy must remember the last positions to know where things move. 500,000 steps, 5 seeds. Targets
  (recurrent): median >= 95% of the maximum, worst >= 80%; the memoryless side should stay far below.
- ``repeat-previous``: a pure memory task (``popgym-RepeatPreviousEasy-v0``): a card is dealt each step and the
  policy must name the suit of the card dealt four steps before; +1/48 when right, -1/48 when wrong, so a
  policy without memory scores about -0.5. 100,000 steps, 3 seeds. Target: the recurrent side's median at
  least RecurrentPPO's at the same steps. Every reward here is immediate, so the recurrent side runs with a
  short horizon (``gamma=0.9,gae_lambda=0.5``, chosen on tuning seed 10, never on the benchmark's seeds); the
  same policy at the gym preset's long horizon (gamma 0.999, lambda 0.98) runs beside it, so what the
  horizon buys is on record.

Each of our sides is the README-style command a user types, ``arena gym ENV --steps N --seed S --json`` in
a subprocess, with ``--agent-option recurrent=gru`` (ours, recurrent) and without (ours, memoryless),
at the same budget; the baseline is sb3-contrib's ``RecurrentPPO`` (an LSTM policy) for the same steps, on
one torch thread, evaluated the same way (deterministic, with its state carried through each episode): on
``cartpole`` with RL-Zoo's tuned settings for the same game (``CartPoleNoVel-v1``, :data:`ZOO_CARTPOLE_NO_VEL`),
on ``repeat-previous`` (which RL-Zoo has no settings for) with the library's defaults; ``--baseline-preset``
picks either. A learning result is a distribution: every seed's figure, the median and the
worst seed; a failed seed counts 0. Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # bench/arena.py must not shadow arena
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.gym import aggregate, log, ours  # noqa: E402

GAME = "popgym:popgym-PositionOnlyCartPoleEasy-v0"
MAX_RETURN = 1.0
"""POPGym scales every game's returns so an episode's best is 1.0 (CartPole: 1/200 a step survived)."""
TARGETS = {"steps": 500_000, "median": 0.95 * MAX_RETURN, "worst": 0.80 * MAX_RETURN}


@dataclass(frozen=True)
class Task:
    """One benchmark game: its id, budget, seeds, our sides' ``--agent-option`` lists, and its target."""

    env: str
    steps: int
    seeds: tuple[int, ...]
    sides: dict[str, list[str]]
    """Our sides by name, each its agent options (the recurrent side is ``recurrent``)."""
    targets: dict[str, float] | None
    """``median``/``worst`` for the recurrent side; None: at least RecurrentPPO's median."""
    baseline_preset: str
    """RecurrentPPO's settings (:data:`BASELINE_PRESETS`): the tuned ones where RL-Zoo has them for the game."""


TASKS = {
    "cartpole": Task(GAME, 500_000, (0, 1, 2, 3, 4), {"recurrent": ["recurrent=gru"], "memoryless": []},
                     {"median": TARGETS["median"], "worst": TARGETS["worst"]}, "zoo"),
    "repeat-previous": Task(
        "popgym:popgym-RepeatPreviousEasy-v0", 100_000, (0, 1, 2),
        {"recurrent": ["recurrent=gru", "gamma=0.9", "gae_lambda=0.5"], "recurrent_gym_preset": ["recurrent=gru"],
         "memoryless": ["gamma=0.9", "gae_lambda=0.5"]},
        None, "defaults",
    ),
}  # fmt: skip


ZOO_CARTPOLE_NO_VEL = {
    "n_steps": 32, "batch_size": 256, "n_epochs": 20, "gamma": 0.98, "gae_lambda": 0.8, "ent_coef": 0.0,
    "learning_rate": 0.001, "clip_range": 0.2, "normalize": True,
    "policy_kwargs": {"ortho_init": False, "activation_fn": "relu", "lstm_hidden_size": 64, "enable_critic_lstm": True,
                      "net_arch": {"pi": [64], "vf": [64]}},
}  # fmt: skip
"""RL-Zoo's tuned RecurrentPPO settings for ``CartPoleNoVel-v1`` (its ``recurrentppo.yml``; 8 envs, the learning rate
and clip range falling linearly to 0, observations and rewards normalized by ``VecNormalize``): what a user who
looks the task up would run. Its budget there is 100,000 steps."""

BASELINE_PRESETS = ("zoo", "defaults")


def recurrent_ppo(env: str, steps: int, seed: int, episodes: int, preset: str = "defaults") -> dict[str, Any]:
    """sb3-contrib's RecurrentPPO (LSTM) for ``steps``; evaluated deterministically, its state carried.

    ``preset`` "defaults" is the library's own settings; "zoo" is :data:`ZOO_CARTPOLE_NO_VEL`.
    """
    import gymnasium as gym
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    venv = make_vec_env(env, n_envs=8, seed=seed)
    if preset == "zoo":
        settings = dict(ZOO_CARTPOLE_NO_VEL)
        settings["policy_kwargs"] = {**settings["policy_kwargs"], "activation_fn": torch.nn.ReLU}
        lr, clip = settings.pop("learning_rate"), settings.pop("clip_range")
        if settings.pop("normalize"):
            venv = VecNormalize(venv)
        model = RecurrentPPO(
            "MlpLstmPolicy", venv, seed=seed, device="cpu", learning_rate=lambda left: left * lr,
            clip_range=lambda left: left * clip, **settings,
        )  # fmt: skip
    else:
        model = RecurrentPPO("MlpLstmPolicy", venv, seed=seed, device="cpu")
    started = time.monotonic()
    model.learn(total_timesteps=steps)
    seconds = time.monotonic() - started
    normalizer = venv if isinstance(venv, VecNormalize) else None
    one = gym.make(env)
    returns = []
    obs, _ = one.reset(seed=seed + 10_000)
    for _ in range(episodes):
        total, done, state, start = 0.0, False, None, np.ones((1,), dtype=bool)
        while not done:
            seen = np.asarray(obs)[None]
            if normalizer is not None:
                seen = normalizer.normalize_obs(seen)
            action, state = model.predict(seen, state=state, episode_start=start, deterministic=True)
            start = np.zeros((1,), dtype=bool)
            obs, reward, terminated, truncated, _ = one.step(int(action[0]))
            total += float(reward)
            done = bool(terminated or truncated)
        returns.append(total)
        obs, _ = one.reset()
    return {"seed": seed, "preset": preset, "eval_mean_return": float(np.mean(returns)),
            "train_seconds": round(seconds, 1)}  # fmt: skip


def hot_swap_probe(seed: int, updates: int = 12, episodes: int = 512) -> dict[str, float]:
    """Keep or reset the state at a hot-swap? A cue shown on an episode's first of 4 steps, answered on its last.

    A GRU actor learns the task through PPO (the numpy ``Policy`` acting as a bot would); then every
    episode is acted by the policy of one update for its first two steps and by the next update's for
    the last two, the way a swap lands mid-episode, once keeping the state and once resetting it.
    Returns the share of right answers each way (and with no swap at all).
    """
    import numpy as np
    import torch

    from agents import PPOAgent, PPOConfig, Segment, SegmentEnd
    from bot_protocol import Architecture, Policy, Weights

    torch.manual_seed(seed)
    agent = PPOAgent(
        PPOConfig(obs_dim=3, act_dim=0, branches=(2,), hidden=(32,), recurrent="gru", recurrent_size=16,
                  sequence_length=4, rollout_steps=512, minibatch_size=64, epochs=4, learning_rate=3e-3, seed=seed)
    )  # fmt: skip
    rng = np.random.default_rng(seed)

    def policy() -> Policy:
        arch, tensors = agent.export_actor()
        return Policy.from_weights(Weights.pack(0, agent.updates, Architecture.from_mapping(arch), tensors))

    def play(first: Policy, second: Policy, n: int, reset: bool, train: bool) -> float:
        cues = rng.integers(2, size=n)
        state = first.initial_state(n)
        rows = []
        for t in range(4):
            acting = first if t < 2 else second
            if t == 2 and reset:
                state = acting.initial_state(n)
            obs = np.zeros((n, 3), np.float32)
            obs[np.arange(n), cues] = 1.0 if t == 0 else 0.0
            obs[:, 2] = 1.0 if t == 3 else 0.0
            (_, logp, dact), next_state = acting.step(obs, state, rng)
            rows.append((obs, state, dact[:, 0], logp))
            state = next_state
        right = rows[-1][2] == cues
        if train:
            segments = [
                Segment("bot", e, np.stack([r[0][e] for r in rows]),
                        np.array([[float(r[2][e]), 1.0, 1.0] for r in rows], np.float32),
                        np.array([r[3][e] for r in rows], np.float32), SegmentEnd.TERMINAL, None, generation=0,
                        version=agent.updates, reward=np.array([0, 0, 0, 1.0 if right[e] else -1.0], np.float32),
                        state=np.stack([r[1][e] for r in rows]))
                for e in range(n)
            ]  # fmt: skip
            agent.observe(segments)
            agent.update()
        return float(right.mean())

    for _ in range(updates - 1):
        now = policy()
        play(now, now, 128, reset=False, train=True)
    before = policy()
    play(before, before, 128, reset=False, train=True)
    after = policy()
    return {
        "no_swap": play(after, after, episodes, reset=False, train=False),
        "swap_keep_state": play(before, after, episodes, reset=False, train=False),
        "swap_reset_state": play(before, after, episodes, reset=True, train=False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="cartpole", help="game and budget (default: cartpole)")
    parser.add_argument("--env", help="another game needing memory (a probe; default: the task's)")
    parser.add_argument("--steps", type=int, help="environment steps per run (default: the task's)")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the task's)")
    parser.add_argument("--eval-episodes", type=int, default=20, help="evaluation episodes per run (default: 20)")
    parser.add_argument("--no-memoryless", action="store_true", help="only the recurrent side(s) of ours")
    parser.add_argument("--no-baseline", action="store_true", help="skip sb3-contrib's RecurrentPPO")
    parser.add_argument("--baseline-only", action="store_true", help="only sb3-contrib's RecurrentPPO")
    parser.add_argument(
        "--baseline-preset", choices=BASELINE_PRESETS,
        help="RecurrentPPO's settings: RL-Zoo's tuned CartPoleNoVel ones (zoo) or the library's (defaults); "
        "default: the task's",
    )  # fmt: skip
    parser.add_argument(
        "--swap-probe", action="store_true", help="only the hot-swap probe: keep or reset the state at new weights"
    )
    parser.add_argument(
        "--agent-option", action="append", default=[], metavar="NAME=VALUE", help="added to the recurrent side (a probe)"
    )
    args = parser.parse_args()
    task = TASKS[args.task]
    env, steps = args.env or task.env, args.steps or task.steps
    seeds = args.seeds or list(task.seeds)
    started = time.monotonic()
    if args.swap_probe:
        probes = {seed: hot_swap_probe(seed) for seed in seeds}
        print(json.dumps({"bench": "memory", "probe": "hot_swap", "seeds": probes}))
        return 0
    sides = {name: [*options, *args.agent_option] if name == "recurrent" else options
             for name, options in task.sides.items()
             if not (args.baseline_only or (args.no_memoryless and "recurrent" not in name))}  # fmt: skip
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="arena-bench-memory-") as root:
        for side, options in sides.items():
            runs = []
            for seed in seeds:
                runs.append(ours(env, steps, seed, args.eval_episodes, Path(root) / f"{side}{seed}", options))
                log(started, f"ours, {side}, seed {seed}: {runs[-1]}")
            results[side] = {"agent_options": options, "seeds": runs, **aggregate(runs)}
    if args.no_baseline:
        results["recurrent_ppo"] = {"skipped": "--no-baseline"}
    else:
        try:
            import sb3_contrib  # noqa: F401
        except ImportError:
            results["recurrent_ppo"] = {"skipped": "sb3-contrib is not installed (pip install sb3-contrib after torch)"}
        else:
            preset = args.baseline_preset or task.baseline_preset
            runs = []
            for seed in seeds:
                runs.append(recurrent_ppo(env, steps, seed, args.eval_episodes, preset))
                log(started, f"RecurrentPPO, seed {seed}: {runs[-1]}")
            results["recurrent_ppo"] = {"preset": preset, "seeds": runs, **aggregate(runs)}
    at_budget = env == task.env and steps == task.steps and not args.agent_option
    recurrent = results.get("recurrent", {})
    targets: dict[str, Any] | None = None
    met = None
    if args.baseline_only:
        pass
    elif at_budget and task.targets is not None:
        targets = {"steps": steps, **task.targets}
        met = recurrent["median"] >= task.targets["median"] and recurrent["worst"] >= task.targets["worst"]
    elif at_budget and "median" in results["recurrent_ppo"]:
        targets = {"steps": steps, "median": results["recurrent_ppo"]["median"], "of": "RecurrentPPO's median"}
        met = recurrent["median"] >= targets["median"]
    print(
        json.dumps(
            {
                "bench": "memory",
                "task": args.task,
                "env": env,
                "steps": steps,
                "max_return": MAX_RETURN,
                "kind": "evaluation" if at_budget else "probe",
                **results,
                "targets": targets,
                "targets_met": met,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
