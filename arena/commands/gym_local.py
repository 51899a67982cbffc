"""``arena gym ENV_ID`` without ``--url``: its own server and trainer, sized from the env's spaces, then an evaluation.

Why: the first thing a newcomer tries is the most familiar game in reinforcement learning, and it
should train in one command, as ``arena train`` does for the tank. :meth:`GymPlan.from_flags` reads
the flags once (a bad value is one line, exit 2); :func:`run_local` starts a
:class:`~server.TrainingServer` on a loopback port, plays the env as one bot of it for ``--steps``,
evaluates the final policy and writes the run directory (``summary.json``, ``checkpoints/``). The
bot plays in a child process (:mod:`arena.bots.bot_process`): in this one it would share the
trainer's GIL.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..defaults import GYM_ENVS, GYM_WORKERS, MIRROR_MODES, TURN_MIRROR, TURN_OPENING, gym_ppo_options, turn_ppo_options
from .options import parse_agent_options

__all__ = ["GymPlan", "Say", "run_local", "summary_of"]

PROGRESS_STEPS = 10_000
"""Environment steps between two progress lines."""


@dataclass(frozen=True)
class GymPlan:
    """One local ``arena gym`` run, decided."""

    env: str
    n_envs: int
    steps: int
    seed: int
    agent: str
    agent_options: Mapping[str, Any]
    """``--agent-option``'s overrides of the agent's config (over the gym preset: :meth:`options_for`)."""
    out: Path
    eval_episodes: int
    json: bool
    name: str
    opponent: str
    """Turn-based games: who plays the learner's other seats (``self``, ``random``, ``past`` or a policy's file)."""
    opening: int = TURN_OPENING
    """Turn-based games: each game opens with 0 to ``opening`` random moves, drawn per game."""
    workers: int = 1
    """Bot processes sharing the ``n_envs`` games (:meth:`~arena.bots.bot_process.BotJob.split`)."""
    mirror: str = TURN_MIRROR
    """Turn-based games: ``auto``, ``on`` or ``off``, whether every row is also sent left-right mirrored
    (:data:`arena.defaults.TURN_MIRROR`)."""

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= self.n_envs:
            raise ValueError(f"--workers must be 1 to --n-envs ({self.n_envs}) bot processes, got {self.workers}")
        if self.mirror not in MIRROR_MODES:
            raise ValueError(f"--mirror must be one of {', '.join(MIRROR_MODES)}, got {self.mirror!r}")

    def options_for(self, agents: int, turns: bool = False, image: tuple[int, int, int] | None = None) -> dict[str, Any]:
        """The agent's config overrides for ``agents`` parallel agents: the preset (PPO), then ``--agent-option``.

        ``turns``: a turn-based game's preset (:func:`arena.defaults.turn_ppo_options`), not a gymnasium game's.
        ``image``: the observation space's image shape, which a ``conv`` option reads unless ``image`` is given too.

        Raises:
            ValueError: ``conv`` over an observation that is no image, without ``image`` to say where one is.
        """
        preset: dict[str, Any] = {}
        if self.agent == "ppo":
            preset = turn_ppo_options(agents) if turns else gym_ppo_options(agents)
        options = {**preset, **self.agent_options}
        if options.get("conv") and not options.get("image"):
            if image is None:
                raise ValueError(
                    "--agent-option conv needs an image: the observation space is not a 2-D or 3-D Box, "
                    "so say where the image is with --agent-option image=HEIGHT,WIDTH,CHANNELS"
                )
            options["image"] = image
        return options

    @classmethod
    def from_flags(cls, flags: argparse.Namespace) -> GymPlan:
        """The plan of ``flags`` (read, never written).

        Raises:
            ValueError: a flag's value cannot be used (one line for the user).
        """
        if flags.eval_episodes < 0:
            raise ValueError(f"--eval-episodes must be >= 0, got {flags.eval_episodes}")
        n_envs = flags.n_envs or GYM_ENVS
        options = parse_agent_options(flags.agent, flags.agent_option)
        out = flags.out or Path("runs") / f"gym-{_safe(flags.env)}"
        opponent = flags.opponent or "self"
        if opponent not in ("self", "random", "past") and not Path(opponent).exists():
            raise ValueError(f"--opponent {opponent!r}: expected self, random, past, or a checkpoint or weights file")
        opening = TURN_OPENING if flags.opening is None else flags.opening
        if opening < 0:
            raise ValueError(f"--opening must be >= 0 random moves, got {opening}")
        return cls(
            flags.env,
            n_envs,
            flags.steps,
            flags.seed,
            flags.agent,
            options,
            out,
            flags.eval_episodes,
            flags.json,
            flags.name,
            opponent,
            opening,
            GYM_WORKERS if flags.workers is None else flags.workers,
            flags.mirror or TURN_MIRROR,
        )


def _safe(env: str) -> str:
    """An env id as a folder name: ``ALE/Pong-v5`` → ``ALE-Pong-v5``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in env)


def run_local(plan: GymPlan) -> int:
    """Train ``plan.env`` through a server of this process, evaluate, write the run directory; the exit code."""
    from agents import make_agent
    from bot_protocol import Policy, Weights
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    from ..bots.bot_process import BotJob, BotProcess, BotProcessError
    from ..bots.gym_bot import evaluate
    from ..bots.gym_spaces import ActionMap, ObservationMap

    environment = _make(plan)
    try:
        vectorized = plan.n_envs > 1
        obs_space = environment.single_observation_space if vectorized else environment.observation_space
        act_space = environment.single_action_space if vectorized else environment.action_space
        observations = ObservationMap.from_space(obs_space)
        obs_dim = observations.obs_dim
        actions = ActionMap.from_space(act_space).actions
        extra = {"branches": actions.branches} if actions.branches else {}
        options = plan.options_for(plan.n_envs, image=observations.image)
        agent = make_agent(plan.agent, obs_dim, actions.continuous, seed=plan.seed, **extra, **options)
    finally:
        environment.close()  # it told us its spaces; the bot process makes its own
    plan.out.mkdir(parents=True, exist_ok=True)
    checkpoints = TrainerConfig(checkpoint_dir=plan.out / "checkpoints")
    server = TrainingServer(agent, ServerConfig(host="127.0.0.1", port=0), checkpoints)
    say = Say(plan.json)
    say(f"arena gym: {plan.env} ({obs_dim} observations, {actions.describe()}) x {plan.n_envs}, {plan.agent}, "
        f"{plan.steps:,} steps; run directory {plan.out}")  # fmt: skip
    returns: list[float] = []
    started = time.monotonic()
    with ServerThread(server) as running:
        job = BotJob(running.url, plan.env, plan.n_envs, plan.seed, plan.name, plan.steps, PROGRESS_STEPS)
        done = 0
        try:
            with BotProcess(job, plan.workers) as bot:
                for played in bot:
                    done += played.steps
                    returns.extend(played.returns)
                    if hasattr(agent, "set_progress"):  # PPO's learning rate falls over --steps
                        agent.set_progress(min(1.0, done / plan.steps))
                    recent = f"{sum(returns[-20:]) / len(returns[-20:]):.1f}" if returns else "-"
                    say(f"steps={done:,}  episodes={len(returns)}  mean return (last 20)={recent}  "
                        f"env steps/s={done / max(time.monotonic() - started, 1e-6):,.0f}")  # fmt: skip
        except BotProcessError as exc:
            print(f"arena gym: error: {exc}", file=sys.stderr, flush=True)
            return 1
    seconds = time.monotonic() - started
    generation, version = server.trainer.generation, server.trainer.version
    arch, tensors = agent.export_actor()
    policy = Policy.from_weights(Weights.pack(generation, version, arch, tensors))
    scores = evaluate(policy, plan.env, plan.eval_episodes, seed=plan.seed + 10_000) if plan.eval_episodes else []
    summary = summary_of(plan, done, seconds, version, scores, returns, options)
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if scores:
        say(f"arena gym: the final policy (v{version}) returned {summary['eval_mean_return']:.1f} "
            f"(± {summary['eval_std_return']:.1f}) over {len(scores)} episodes, acting deterministically")  # fmt: skip
    say(f"arena gym: wrote {plan.out / 'summary.json'} and {plan.out / 'checkpoints'}")
    if plan.json:
        print(json.dumps(summary), flush=True)
    return 0


def _make(plan: GymPlan) -> Any:
    from ..bots.gym_bot import make_env

    try:
        return make_env(plan.env, plan.n_envs)
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # gymnasium's own errors (unknown id, bad kwargs) are not ours to type
        raise ValueError(f"cannot make {plan.env!r}: {exc}") from None


def summary_of(
    plan: GymPlan,
    steps: int,
    seconds: float,
    version: int,
    scores: list[float],
    returns: list[float],
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """``summary.json``: what was run, for how long, and what the final policy scored."""
    mean = sum(scores) / len(scores) if scores else None
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores)) if mean is not None else None
    return {
        "env": plan.env,
        "agent": plan.agent,
        "steps": steps,
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / max(seconds, 1e-9), 1),
        "n_envs": plan.n_envs,
        "workers": plan.workers,
        "seed": plan.seed,
        "policy_version": version,
        "eval_episodes": len(scores),
        "eval_mean_return": mean,
        "eval_std_return": std,
        "eval_returns": scores,
        "training_episodes": len(returns),
        "agent_options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
        "run_dir": str(plan.out),
    }


class Say:
    """Progress lines: stdout, or stderr when ``--json`` keeps stdout for the JSON object."""

    def __init__(self, json_mode: bool) -> None:
        self.stream = sys.stderr if json_mode else sys.stdout

    def __call__(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
