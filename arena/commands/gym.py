"""``arena gym``: train a gymnasium environment in one command, or play it as a bot of a running server."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..defaults import GYM_ENVS, GYM_WORKERS, MIRROR_MODES, TURN_MIRROR, TURN_OPENING
from .options import add_agent_flags, positive_int


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena gym`` to the subcommands of ``arena``."""
    gym = commands.add_parser(
        "gym",
        help="train a gymnasium environment in one command, or play it as a bot of a running server",
        description=(
            "Without --url: start a server and trainer sized from the environment's spaces, play it for --steps, "
            "evaluate the final policy and write a run directory (summary.json, checkpoints/). With --url: play it "
            "as one websocket bot of that server (e.g. 'arena serve --agent td3 --obs-dim 3 --act-dim 1'). Any "
            "space gymnasium can flatten is observed (Discrete one-hot, Dict and Tuple concatenated); Box actions "
            "are mapped from [-1, 1] to their bounds, Discrete, MultiDiscrete and MultiBinary ones are discrete "
            "branches, masked by info['action_mask'] or the env's action_masks(). Needs gymnasium "
            "(pip install -e '.[gym]')."
        ),
        epilog="examples: arena gym CartPole-v1 --steps 100000 --json; "
        "arena gym Pendulum-v1 --url ws://127.0.0.1:8765 --steps 20000",
    )
    gym.add_argument(
        "env",
        help="gymnasium environment id (CartPole-v1, Pendulum-v1), or a PettingZoo module path for a turn-based game "
        "trained by self-play (pettingzoo.classic.connect_four_v3)",
    )
    gym.add_argument("--url", default=None, help="play as a bot of this server instead of starting one (ws://host:port)")
    gym.add_argument(
        "--n-envs",
        type=positive_int,
        default=None,
        help=f"sub-environments in one vector env (default: {GYM_ENVS} with its own server, 1 with --url)",
    )
    gym.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"without --url: bot processes that share the --n-envs games and the steps (default: {GYM_WORKERS})",
    )
    gym.add_argument("--steps", type=positive_int, default=20_000, help="environment steps in all (default: 20000)")
    gym.add_argument("--seed", type=int, default=0, help="seed for the environment, the exploration and the agent")
    gym.add_argument("--name", default="gym", help="bot name shown by the server (default: gym)")
    gym.add_argument("--token", default=os.environ.get("ARENA_TOKEN"), help="bearer token with --url (default: $ARENA_TOKEN)")
    gym.add_argument(
        "--eval-episodes",
        type=int,
        default=10,
        metavar="N",
        help="at the end, play N episodes locally with the final policy acting deterministically and print their "
        "mean return (0 skips it; default: 10)",
    )
    gym.add_argument("--out", type=Path, default=None, help="run directory without --url (default: runs/gym-ENV)")
    gym.add_argument("--json", action="store_true", help="without --url: end with the run's summary as one JSON line")
    gym.add_argument(
        "--opponent",
        default=None,
        metavar="self|random|past|FILE",
        help="turn-based games: who plays the learner's other seats: itself (default), a random legal player, "
        "'past' (half the games itself, half one of its last 20 kept versions, one kept every 10), or the "
        "policy of a checkpoint or weights file; --n-envs games are played side by side, --steps counts the "
        "learner's moves, and --eval-episodes games against a random legal player as each seat end the run",
    )
    gym.add_argument(
        "--opening",
        type=int,
        default=None,
        metavar="N",
        help=f"turn-based games: each game opens with 0 to N uniformly random legal moves, drawn per game and "
        f"never trained on, so self-play meets many positions, not one line; fewer for short games, whose "
        f"outcome a few random moves decide (default: {TURN_OPENING}, measured on connect four)",
    )
    gym.add_argument(
        "--mirror",
        choices=MIRROR_MODES,
        default=None,
        help="turn-based board games: also train on every move seen left-right mirrored, so each pattern is learned "
        "from both sides; 'auto' mirrors a board (rows, columns[, planes]) with one move per column or square whose "
        "rules held left-right in 20 random games, 'on' refuses a game where they did not, 'off' never mirrors "
        f"(default: {TURN_MIRROR})",
    )
    add_agent_flags(gym)


def run(args: argparse.Namespace) -> int:
    """``arena gym``: its own server and trainer, or a bot of ``--url``; the exit code."""
    from ..bots.turn_bot import is_module_path

    if args.url is None:
        from .gym_local import GymPlan, run_local

        plan = GymPlan.from_flags(args)
        if is_module_path(args.env):
            from .gym_turns import run_turns

            return run_turns(plan)
        turn_flags = (
            ("--opponent", args.opponent is not None),
            ("--opening", args.opening is not None),
            ("--mirror", args.mirror is not None),
        )
        for flag, given in turn_flags:
            if given:
                raise ValueError(f"{flag} applies to turn-based games (a PettingZoo module path)")
        return run_local(plan)
    if is_module_path(args.env):
        raise ValueError("turn-based games train with arena gym's own server: leave out --url")
    given_flags = (
        ("--out", args.out is not None),
        ("--json", args.json),
        ("--agent-option", args.agent_option),
        ("--opponent", args.opponent is not None),
        ("--opening", args.opening is not None),
        ("--mirror", args.mirror is not None),
        ("--workers", args.workers is not None),
    )
    for flag, given in given_flags:
        if given:
            raise ValueError(f"{flag} applies when arena gym runs its own server (without --url)")
    return _play(args)


def _play(args: argparse.Namespace) -> int:
    """A gymnasium environment played as a bot of a running server."""
    import numpy as np

    from bot_protocol.client import HandshakeRejected

    from ..bots.gym_bot import GymBot, make_env

    n_envs = args.n_envs or 1
    try:
        environment = make_env(args.env, n_envs)
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # gymnasium's own errors (unknown id, bad kwargs) are not ours to type
        raise ValueError(f"cannot make {args.env!r}: {exc}") from None
    try:
        bot = GymBot(args.url, environment, token=args.token, seed=args.seed, name=args.name)
    except ValueError:
        environment.close()
        raise
    try:
        bot.connect()
    except (OSError, TimeoutError, HandshakeRejected) as exc:
        bot.close()
        raise ValueError(f"cannot connect to {args.url}: {exc}") from None
    if args.eval_episodes < 0:
        bot.close()
        raise ValueError(f"--eval-episodes must be >= 0, got {args.eval_episodes}")
    print(f"arena gym: {args.env} x {n_envs} playing as bot {args.name!r} of {args.url}", flush=True)
    returns: list[float] = []
    done = 0
    policy = None
    started = time.monotonic()
    try:
        while done < args.steps:
            result = bot.run(min(2_000, args.steps - done))
            done += result.steps
            returns.extend(result.episode_returns)
            recent = f"{np.mean(returns[-10:]):.1f}" if returns else "–"
            policy = result.policy or policy
            version = result.policy.version if result.policy is not None else 0
            print(
                f"steps={done:,}  episodes={len(returns)}  mean return (last 10)={recent}  "
                f"policy version={version}  env steps/s={done / max(time.monotonic() - started, 1e-6):,.0f}",
                flush=True,
            )
    except KeyboardInterrupt:
        print("arena gym: interrupted", file=sys.stderr)
        return 130
    finally:
        bot.close()
    if args.eval_episodes and policy is not None:
        from ..bots.gym_bot import evaluate

        scores = evaluate(policy, args.env, episodes=args.eval_episodes, seed=args.seed + 1)
        print(
            f"arena gym: evaluation of policy version {policy.version}: mean return {np.mean(scores):.1f} "
            f"(± {np.std(scores):.1f}) over {len(scores)} episodes, acting deterministically",
            flush=True,
        )
    return 0
