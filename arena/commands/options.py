"""The argparse pieces more than one ``arena`` command shares: the parser, value types and flag sets.

What a command says while it runs (its dashboard, what it resumed, warnings) is in
:mod:`arena.commands.announce`.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..defaults import ENGINE, TANK_SEGMENT_STEPS

__all__ = [
    "CHECKPOINT_INTERVAL",
    "ENGINE_NAMES",
    "GAMES",
    "LEAGUE",
    "REPLAY_CHECKPOINT_INTERVAL",
    "SCRIPTED_NAMES",
    "CommandParser",
    "add_agent_flags",
    "add_engine_flag",
    "add_server_flags",
    "check_scripted_name",
    "finite_milliseconds",
    "is_scripted_name",
    "opponent_kind",
    "parse_agent_options",
    "positive_float",
    "positive_int",
]

GAMES = ("tank", "reach")
SCRIPTED_NAMES = ("sitting", "spinner", "walker", "tracker", "drawn")
"""Every scripted bot a command takes by name: the ladder, then ``drawn`` (new parts every round, not in the ladder).
``drawn:movements=A+B,targetings=C,power_rules=D`` names the population narrowed to those families (checked where
the bot is built: :func:`is_scripted_name` only recognises the form)."""
LEAGUE = "league"
"""``--opponent league`` (the default): train against the league (arena.league)."""
ENGINE_NAMES = ("numpy", "numba")
"""``--engine``'s choices (``arena.games.tank.engine.ENGINES``, not imported here: numpy stays out of the CLI's start)."""


class CommandParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one readable line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


CHECKPOINT_INTERVAL = 30.0
"""``--checkpoint-interval``'s default: a crash costs at most 30 s of training (docs/architecture.md, "Checkpoints")."""
REPLAY_CHECKPOINT_INTERVAL = 300.0
"""With ``--save-replay`` every checkpoint holds the replay buffer (up to hundreds of MB): a longer default."""


def positive_float(text: str) -> float:
    """An argparse type: a number > 0 (a duration, a rate)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def finite_milliseconds(text: str) -> float:
    """An argparse type: a positive, finite number of milliseconds (``arena match --turn-timeout-ms``: a turn must end)."""
    value = positive_float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of milliseconds, got {text}")
    return value


def is_scripted_name(text: str) -> bool:
    """Whether ``text`` names a scripted bot: one of ``SCRIPTED_NAMES``, or a narrowed population ``drawn:...``."""
    return text in SCRIPTED_NAMES or text.startswith("drawn:")


def check_scripted_name(text: str) -> None:
    """ValueError (one line) for a ``drawn:...`` name whose parts or families are unknown; nothing for the other
    names. Imports the population's module (and numba) only for such a name."""
    if text.startswith("drawn:"):
        from ..games.tank.drawn import population_ranges

        population_ranges(text)


def opponent_kind(text: str) -> str:
    """``--opponent``: ``league``, a scripted name, ``royale:PATH`` or an existing policy file."""
    if text == LEAGUE or is_scripted_name(text) or text.startswith("royale:") or Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from {LEAGUE}, {', '.join(SCRIPTED_NAMES)}, drawn:PARTS, royale:PATH or a "
        "policy file: a checkpoint, a run directory or an exported weights file)"
    )


def add_agent_flags(parser: argparse._ActionsContainer) -> None:
    """``--agent``, ``--device``, ``--save-replay`` and ``--agent-option`` (``arena train`` and ``arena serve``)."""
    parser.add_argument(
        "--agent",
        choices=["ppo", "ddpg", "td3"],
        default="ppo",
        help="learning algorithm: ppo (on-policy), ddpg or td3 (off-policy, replay buffer) (default: ppo)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="torch device for training, e.g. cpu or cuda; on cuda the updates run as CUDA graphs (default: cpu)",
    )
    parser.add_argument(
        "--save-replay",
        action="store_true",
        help="ddpg/td3: put the replay buffer in checkpoints so --resume continues exactly "
        "(default: off; resume then re-runs a warm-up)",
    )
    parser.add_argument(
        "--agent-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one field of the agent's config, e.g. entropy_coef=0.001 or hidden=128,128 "
        "(repeatable; see docs/agents.md for the fields; values are checked before anything starts)",
    )


def parse_agent_options(agent: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings → config overrides, typed after the config field they name."""
    import dataclasses

    from agents import PPOConfig, TD3Config

    fields = {f.name: f for f in dataclasses.fields(PPOConfig if agent == "ppo" else TD3Config)}
    fixed = {"obs_dim", "act_dim", "branches", "seed", "device"}  # set by the game and by their own flags
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in fields or name in fixed:
            known = ", ".join(sorted(set(fields) - fixed))
            raise ValueError(f"--agent-option {pair!r}: expected NAME=VALUE with NAME one of: {known}")
        default = fields[name].default
        try:
            if text.strip().lower() == "none":
                value: Any = None  # the config itself says whether None is allowed
            elif isinstance(default, bool):
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError("expected true or false")
                value = text.lower() in ("true", "1")
            elif isinstance(default, tuple):
                value = tuple(int(v) for v in text.split(",") if v.strip())
            elif isinstance(default, int):
                value = int(text)
            elif isinstance(default, str):
                value = text
            else:
                value = float(text)
        except ValueError as exc:
            raise ValueError(f"--agent-option {pair!r}: {exc}") from None
        options[name] = value
    return options


def add_engine_flag(parser: argparse._ActionsContainer, runs: str) -> None:
    """``--engine``: the tank engine that ``runs`` (the command's battles and scripted bots, in words) run on."""
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default=ENGINE,
        help=f"the tank engine of {runs}: numba (default; compiled once per machine in 10-20 s, then loaded from "
        "its cache: see 'arena compile') or numpy (the reference); the same game bit for bit",
    )


def add_server_flags(parser: argparse._ActionsContainer, default_port: int) -> None:
    """The server's address, token, checkpoints, dashboard, threads and wire limits (``arena train`` and ``arena serve``)."""
    parser.add_argument("--host", default="127.0.0.1", help="bind address; non-loopback needs --token (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=default_port, help=f"TCP port, 0 = any free (default: {default_port})")
    parser.add_argument(
        "--token",
        default=os.environ.get("ARENA_TOKEN"),
        help="bearer token bots must send, >= 8 characters (default: $ARENA_TOKEN, else no auth on loopback)",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=positive_float,
        default=None,
        help=f"seconds between checkpoints, the most training a crash can cost (default: {CHECKPOINT_INTERVAL:g}, the "
        f"first 5 s after the first update; with --save-replay {REPLAY_CHECKPOINT_INTERVAL:g}: the buffer is large)",
    )
    dashboard_default = 0 if default_port == 0 else -1  # train: on, any free port; serve: off unless asked
    parser.add_argument(
        "--dashboard-port",
        type=int,
        default=dashboard_default,
        help="live dashboard (web page) port, 0 = any free, -1 = off "
        f"(default: {'0' if dashboard_default == 0 else '-1'}); it uses --token like the bots",
    )
    parser.add_argument("--dashboard-host", default=None, help="dashboard bind address (default: --host)")
    parser.add_argument(
        "--torch-threads",
        type=positive_int,
        default=None,
        help="torch threads of the trainer (default: usable cores - 1, at least 1: the other core runs the "
        "event loop or the learning bot; see docs/architecture.md, 'Cores')",
    )
    parser.add_argument(
        "--credit-window",
        type=positive_int,
        default=None,
        help="'tr' messages each bot may have in flight (default: 8). 32 lets fast bots feed a fast trainer "
        "~1.3-1.9x more transitions/s in 64-step frames (bench/loop.py); when the trainer is the bottleneck, more in flight "
        "means more of it dropped oldest-first. See docs/architecture.md, 'Credit window'",
    )
    parser.add_argument(
        "--queue-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="withhold credit once N steps wait in the server's queue (default: one PPO update's worth; for DDPG/TD3 "
        "16 publishes' worth, 1,024 steps at their defaults, so a fast bot waits for the trainer and the update-to-data "
        "ratio holds). Smaller: fresher data, bots wait more",
    )
    parser.add_argument(
        "--segment-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"cut each agent's trajectory into segments of at most N steps for the learner (default: {TANK_SEGMENT_STEPS} "
        "for the tank's PPO, else 256). Longer: less bootstrapping across cuts, more policy lag (docs/agents.md)",
    )
