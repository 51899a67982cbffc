"""``arena train``: server, trainer thread and headless arena in one process."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..defaults import (
    MINIBATCHES,
    ROYALE_MATCHES,
    ROYALE_TURNS_PER_S,
    STEPS_PER_AGENT,
    TANK_MATCHES,
)
from .options import GAMES, add_agent_flags, add_server_flags, opponent_kind, positive_float, positive_int


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena train`` to the subcommands of ``arena``."""
    train = commands.add_parser(
        "train",
        help="train a policy: server, trainer thread and headless arena in one process",
        description=(
            "Start the training server and its trainer thread, connect learning bots to it over a "
            "loopback websocket, and play headless arena matches against scripted opponents until the "
            "budget is spent. The learning bots act with a local copy of the policy and hot-swap new "
            "weights between ticks. Writes metrics.jsonl, checkpoints/, returned.json (the policy it hands back: the best "
            "it evaluated, which 'arena match --bot OUT' and 'arena export OUT' use), summary.json, learning_curve.png "
            "and a one-page report (report.html, report.png: the curve, the returned policy against each "
            "scripted bot, throughput) to --out. Ctrl-C stops cleanly with a final checkpoint."
        ),
        epilog="example: arena train --opponent sitting --opponent spinner --minutes 10 --out runs/tank",
    )
    add_agent_flags(train)
    train.add_argument(
        "--game", choices=GAMES, default="tank", help="tank: the Robocode-style arena (default); reach: a tiny test game"
    )
    train.add_argument(
        "--opponent",
        action="append",
        type=opponent_kind,
        metavar="league|NAME|FILE|royale:PATH",
        help="league (the default): the scripted ladder matched by PFSP (snapshots of the learner and self-play: "
        "--league-option, off by default) "
        "(docs/arena.md, 'The league'); with league, each FILE given too (a checkpoint, run directory or weights "
        "file) joins it. Without league, the opponents are fixed: scripted names (sitting, spinner, walker, "
        "tracker), policy FILEs or Tank Royale bot directories (royale:PATH, one bot process per match, see "
        "docs/royale.md), spread over the matches",
    )
    train.add_argument(
        "--league-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a league parameter, repeatable (docs/arena.md, 'The league'); each with its default: " + _league_defaults(),
    )
    train.add_argument(
        "--matches",
        type=positive_int,
        default=None,
        help=f"parallel matches per learning bot (default: {TANK_MATCHES}; reach: 16); PPO's rollout is "
        f"matches x bots x {STEPS_PER_AGENT} steps, in {MINIBATCHES} minibatches",
    )
    train.add_argument(
        "--bots",
        type=positive_int,
        default=None,
        help="learning bot connections as threads of this process (default: see --workers)",
    )
    train.add_argument(
        "--royale-matches",
        type=positive_int,
        default=None,
        help=f"with the league: parallel matches against each royale:PATH bot, one bot process each, played by a "
        f"learning bot of their own at the bots' pace (default: {ROYALE_MATCHES}; docs/royale.md)",
    )
    train.add_argument(
        "--royale-turns-per-s",
        type=positive_float,
        default=None,
        help=f"with the league: the most turns a second of its Tank Royale share (default: {ROYALE_TURNS_PER_S:g}; "
        "unpaced, official-API bots starve the learner on a small machine)",
    )
    train.add_argument(
        "--workers",
        type=int,
        default=None,
        help="run N learning bots in worker processes (tank only). Default: 1 worker process with 2+ cores, "
        "else 1 bot thread (summary.json says which and why); --workers 0 forces threads. See docs/arena.md",
    )
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=positive_float, default=None, help="wall-clock budget (default: 5; reach: 1)")
    budget.add_argument("--rounds", type=positive_int, default=None, help="stop after this many finished rounds (tank)")
    budget.add_argument("--steps", type=positive_int, default=None, help="stop after this many ticks per learning bot")
    train.add_argument(
        "--ticks-per-round", type=positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )
    train.add_argument(
        "--engine",
        choices=("numpy", "numba"),
        default="numba",
        help="the learning bots' tank engine and scripted opponents: numba (default; compiled) or numpy (the "
        "reference); the same game bit for bit. numba compiles for 10-20 s on a machine's first run, before the "
        "budget starts, then loads from its cache (the run says where; see 'arena compile'). PPO needs numba "
        "with either engine (docs/arena.md)",
    )
    train.add_argument("--seed", type=int, default=0, help="seed for the games and the agent (default: 0)")
    train.add_argument("--out", type=Path, default=Path("runs/latest"), help="output directory (default: runs/latest)")
    train.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    train.add_argument(
        "--eval-rounds",
        type=int,
        default=50,
        metavar="N",
        help="every minute of training and at its end, the policy plays N rounds against each scripted bot; the run "
        "returns the best of these (OUT/returned.json) and its match table is the report's "
        "(tank; 0 skips it and returns the last policy; default: 50, a few seconds of a core each)",
    )
    train.add_argument("--no-report", action="store_true", help="write no report.html/report.png and skip the evaluation")
    train.add_argument(
        "--json", action="store_true", help="end with summary.json's object as one line on stdout instead of a table"
    )
    train.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write every metrics row as TensorBoard scalars to OUT/tensorboard (needs pip install -e '.[tensorboard]')",
    )
    add_server_flags(train, default_port=0)


def _league_defaults() -> str:
    """``KEY (default)`` for every league parameter, read from ``LeagueConfig`` so the help cannot drift from it."""
    from dataclasses import fields

    from ..league import LeagueConfig

    def shown(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{f.name} ({shown(f.default)})" for f in fields(LeagueConfig))


def _train(args: argparse.Namespace) -> int:
    from .train_plan import TrainPlan
    from .train_run import run_training

    return run_training(TrainPlan.from_flags(args))
