"""The ``arena`` command: ``train``, ``match``, ``replay``, ``serve``, ``worker``, ``gym``, ``export`` and ``compile``.

This module and ``arena.commands`` (one module per command) are the one place that wires the
server to the games: learning bots still reach the server only through ``bot_protocol`` (real
websocket clients on loopback).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import numba_cache
from .commands import compile as compile_command  # not the builtin's name
from .commands import export, gym, match, replay, serve, train, worker
from .commands.options import CommandParser, add_engine_flag, positive_int

__all__ = ["main"]

# Where numba caches, chosen before anything imports numba: here, at import, so the processes a command
# spawns (bots, the evaluator) choose too, as they import this module again as their main module.
numba_cache.apply()


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="arena",
        description="Train game bots with reinforcement learning over websockets.",
        epilog="Run 'arena COMMAND --help' for each command's options. Docs: docs/arena.md, docs/protocol.md.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    train.add_parser(commands)
    match.add_parser(commands)

    league = commands.add_parser(
        "league",
        help="a training run's league: ratings, and a round-robin of the policy it handed back against every member",
        description=(
            "Print the ratings a run's league kept in training (OUT/league), then play a round-robin among the "
            "policy the run handed back (its returned.json, else its newest checkpoint) and every league member "
            "(scripted bots, snapshots, policy files) and print their Elo ratings (a Bradley-Terry fit of all "
            "its rounds at once) and each member's score against each other member."
        ),
        epilog="example: arena league runs/latest --rounds 100",
    )
    league.add_argument("run", type=Path, metavar="RUN_DIR", help="the --out of an 'arena train' run against the league")
    league.add_argument(
        "--rounds",
        type=positive_int,
        default=100,
        help="rounds per pair of members (default: 100; at 20 one pair's score is +-11 points, enough to swap two close bots)",
    )
    league.add_argument("--ticks-per-round", type=positive_int, default=2000, help="round tick cap (default: 2000)")
    league.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    league.add_argument(
        "--panel",
        type=Path,
        metavar="DIR",
        help="also play the returned policy against every Tank Royale bot directory in DIR (NAME/NAME.json), "
        "--panel-rounds rounds each, over Tank Royale's protocol: figures against bots of your choosing, e.g. "
        "a set kept out of every training and tuning choice",
    )
    league.add_argument("--panel-rounds", type=positive_int, default=20, help="rounds against each --panel bot (default: 20)")
    league.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout instead of tables")
    add_engine_flag(league, "the round-robin's battles and scripted bots (a --panel match ticks in numpy: its events need it)")
    replay.add_parser(commands)

    worker.add_parser(commands)
    serve.add_parser(commands)
    gym.add_parser(commands)
    export.add_parser(commands)
    compile_command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "train": train.run,
        "match": match.run,
        "serve": serve.run,
        "export": export.run,
        "gym": gym.run,
        "replay": replay.run,
        "league": _league_command,
        "worker": worker.run,
        "compile": compile_command.run,
    }
    problem = _numba_problem(args)
    if problem is not None:
        print(f"arena {args.command}: error: {problem}", file=sys.stderr)
        return 2
    try:
        return commands[args.command](args)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        print(f"arena {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _numba_problem(args: argparse.Namespace) -> str | None:
    """Why numba cannot serve a command that needs it (PPO's compiled loops, ``--engine numba``), in one line; else None."""
    ppo = getattr(args, "agent", None) == "ppo" and args.command in ("train", "serve")
    engine = getattr(args, "engine", None) == "numba" and getattr(args, "game", "tank") == "tank"
    if ppo:
        return numba_cache.numba_problem("PPO's loss, guards and GAE need it, whichever --engine")
    if engine:
        return numba_cache.numba_problem("--engine numba needs it", ", or --engine numpy")
    if args.command == "compile":
        return numba_cache.numba_problem("arena compile compiles with it")
    return None


def _league_command(args: argparse.Namespace) -> int:
    from .league.commands import league_command  # imported on use: openskill and the game stay out of start-up

    return league_command(args)


if __name__ == "__main__":
    sys.exit(main())
