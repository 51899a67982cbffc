"""``arena gym``: play a gymnasium environment as a bot of a running server."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from .options import positive_int


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena gym`` to the subcommands of ``arena``."""
    gym = commands.add_parser(
        "gym",
        help="play a gymnasium environment as a bot of a running server",
        description=(
            "Connect to a training server (e.g. 'arena serve --agent td3 --obs-dim 3 --act-dim 1') and play "
            "a gymnasium environment as one websocket bot: observations flattened to float32, actions "
            "mapped from [-1, 1] to the environment's bounds, terminated and truncated kept apart. "
            "Needs gymnasium (pip install -e '.[gym]')."
        ),
        epilog="example: arena gym Pendulum-v1 --url ws://127.0.0.1:8765 --steps 20000",
    )
    gym.add_argument("env", help="gymnasium environment id, e.g. Pendulum-v1")
    gym.add_argument("--url", default="ws://127.0.0.1:8765", help="server URL (default: ws://127.0.0.1:8765)")
    gym.add_argument("--n-envs", type=positive_int, default=1, help="sub-environments in one vector env (default: 1)")
    gym.add_argument("--steps", type=positive_int, default=20_000, help="environment steps in all (default: 20000)")
    gym.add_argument("--seed", type=int, default=0, help="seed for the environment and the exploration noise")
    gym.add_argument("--name", default="gym", help="bot name shown by the server (default: gym)")
    gym.add_argument("--token", default=os.environ.get("ARENA_TOKEN"), help="bearer token (default: $ARENA_TOKEN)")
    gym.add_argument(
        "--eval-episodes",
        type=int,
        default=10,
        metavar="N",
        help="at the end, play N episodes locally with the newest policy's mean action and print their mean return "
        "(0 skips it; default: 10)",
    )


def run(args: argparse.Namespace) -> int:
    """``arena gym``: a gymnasium environment played as a bot of a running server; the exit code."""
    import numpy as np

    from bot_protocol.client import HandshakeRejected

    from ..bots.gym_bot import GymBot, make_env

    try:
        environment = make_env(args.env, args.n_envs)
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
    print(f"arena gym: {args.env} x {args.n_envs} playing as bot {args.name!r} of {args.url}", flush=True)
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
            f"(± {np.std(scores):.1f}) over {len(scores)} episodes with the mean action",
            flush=True,
        )
    return 0
