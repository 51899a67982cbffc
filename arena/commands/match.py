"""``arena match``: headless matches between checkpoints and scripted bots; its flags.

The flags become a :class:`~arena.commands.match_plan.MatchPlan`, which
:func:`~arena.commands.match_run.run_match` plays.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .options import add_engine_flag, finite_milliseconds, positive_int


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena match`` to the subcommands of ``arena``."""
    match = commands.add_parser(
        "match",
        help="headless matches between checkpoints and scripted bots",
        description=(
            "Play rounds in which every --bot has one tank (1v1 with two bots, free-for-all with more). "
            "A bot is a scripted name (sitting, spinner, walker, tracker), a checkpoint (*.pt with its "
            ".json manifest beside it), a run directory (its newest checkpoint) or a weights file from "
            "'arena export'. Trained policies sample their actions as in training "
            "(--deterministic: their mean action). Prints wins, mean score and mean energy left per bot."
        ),
        epilog="example: arena match --bot runs/latest --bot tracker --rounds 200",
    )
    match.add_argument(
        "--bot",
        action="append",
        required=True,
        help="scripted name, policy file or royale:PATH (Tank Royale bot); give 2 to 8",
    )
    match.add_argument("--rounds", type=positive_int, default=100, help="rounds to play (default: 100)")
    match.add_argument("--ticks-per-round", type=positive_int, default=2000, help="round tick cap (default: 2000)")
    match.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    match.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout instead of a table")
    match.add_argument("--deterministic", action="store_true", help="trained policies act with their mean action")
    add_engine_flag(match, "the rounds and the scripted bots (a Tank Royale match ticks in numpy: its events need it)")
    match.add_argument(
        "--royale-port",
        type=int,
        default=None,
        metavar="P",
        help="wait on 127.0.0.1:P for the royale:NAME bots, started by hand, instead of booting royale:PATH (docs/royale.md)",
    )
    match.add_argument(
        "--turn-timeout-ms",
        type=finite_milliseconds,
        default=None,
        metavar="MS",
        help="Tank Royale bots: the longest a turn waits for their intents, in milliseconds; a bot that answers later "
        "skips the turn (default: 30, Tank Royale's standard; the next turn starts as soon as every bot answered)",
    )
    match.add_argument(
        "--royale-logs",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each booted Tank Royale bot's output (stdout and stderr) in DIR/NAME.log, NAME as in the results "
        "(DIR is created; older logs of the same name are replaced). Without it the logs are deleted after the match. "
        "Either way a bot that fails (exits, dies, never connects, or raises: a Python traceback in its log) is an "
        "error that quotes the end of its log",
    )
    match.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="also record every tick of every round to FILE for 'arena replay' (1v1: 60-75 bytes a tick). The rounds "
        "are then played one after another in one arena, not 50 side by side: about 1 ms a tick, so 100 rounds take "
        "1-3 minutes, and the figures differ from an unrecorded run with the same seed",
    )

    match.add_argument(
        "--rate",
        action="store_true",
        help="play a round-robin instead: every pair of --bot plays --rounds rounds 1v1, then print their Elo "
        "ratings (a Bradley-Terry fit of all the rounds at once), each bot's score and each pair's score",
    )


def run(flags: argparse.Namespace) -> int:
    """``arena match``: the plan of the parsed ``flags``, then the match (:mod:`arena.commands.match_run`)."""
    from .match_plan import MatchPlan
    from .match_run import run_match

    return run_match(MatchPlan.from_flags(flags))
