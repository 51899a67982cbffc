"""``arena worker``: a learning bot process for a remote ``arena serve``; its flags.

The flags become a :class:`~arena.commands.worker_plan.WorkerPlan`, which
:func:`~arena.commands.worker_run.run_worker` plays.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..defaults import TANK_MATCHES
from .options import SCRIPTED_NAMES, add_engine_flag, is_scripted_name, positive_float, positive_int


def _scripted(text: str) -> str:
    """``--opponent``'s type: a scripted bot's name (its families are checked when the bot is built)."""
    if not is_scripted_name(text):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(SCRIPTED_NAMES)} or drawn:PARTS)")
    return text


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena worker`` to the subcommands of ``arena``."""
    worker = commands.add_parser(
        "worker",
        help="a learning bot for a remote 'arena serve': plays tank matches until stopped",
        description=(
            "Connect to a training server started with 'arena serve' and play 1v1 tank matches against scripted "
            "opponents as one learning bot (tank 0 of --matches matches, acting with the server's latest policy). "
            "Waits and retries with backoff while the server is not up yet, and reconnects when it restarts "
            "(docker compose starts services in any order). Stops at the budget or on SIGTERM/SIGINT (says bye, "
            "exit 0). Prints a progress line about every 10 s."
        ),
        epilog="example: arena worker --url ws://trainer:8765 --opponent tracker --matches 16 --seed 1",
    )
    worker.add_argument("--url", required=True, help="server URL, ws://HOST:PORT or wss://HOST:PORT")
    worker.add_argument("--token", default=os.environ.get("ARENA_TOKEN"), help="bearer token (default: $ARENA_TOKEN)")
    worker.add_argument(
        "--opponent",
        action="append",
        type=_scripted,
        help=f"scripted opponent ({', '.join(SCRIPTED_NAMES)} or drawn:PARTS); repeat for a mix spread over the "
        "matches (default: sitting)",
    )
    worker.add_argument(
        "--matches", type=positive_int, default=TANK_MATCHES, help=f"parallel matches (default: {TANK_MATCHES})"
    )
    worker.add_argument(
        "--seed", type=int, default=None, help="seed of the games and the exploration (default: a random one, printed)"
    )
    worker.add_argument("--name", default=None, help="bot name shown by the server (default: worker-HOSTNAME)")
    budget = worker.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=positive_float, default=None, help="stop after this long (default: never)")
    budget.add_argument("--rounds", type=positive_int, default=None, help="stop after this many finished rounds")
    worker.add_argument(
        "--ticks-per-round", type=positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )
    add_engine_flag(worker, "its battles and scripted opponents")


def run(flags: argparse.Namespace) -> int:
    """``arena worker``: the plan of the parsed ``flags``, then the bot (:mod:`arena.commands.worker_run`)."""
    from .worker_plan import WorkerPlan
    from .worker_run import run_worker

    return run_worker(WorkerPlan.from_flags(flags))
