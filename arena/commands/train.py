"""``arena train``: server, trainer thread and headless arena in one process; its flags.

The flags become a :class:`~arena.commands.train_plan.TrainPlan`, which
:func:`~arena.commands.train_run.run_training` plays.
"""

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
from .options import (
    GAMES,
    add_agent_flags,
    add_engine_flag,
    add_server_flags,
    opponent_kind,
    positive_float,
    positive_int,
)

DESCRIPTION = (
    "Start the training server and its trainer thread, connect learning bots to it over a loopback websocket, "
    "and play headless arena matches against the league (or the --opponent mix) until the budget is spent. The "
    "bots act with a local copy of the policy and swap in new weights between ticks. Ctrl-C stops cleanly with a "
    "final checkpoint."
)
NOTES: tuple[tuple[str, str], ...] = (
    ("--opponent", "league (the default): the scripted ladder and the drawn population matched by PFSP, with "
     "snapshots of the learner and self-play by --league-option (off by default); each FILE given beside it joins it "
     "(a checkpoint, a run directory or an exported weights file), each royale:PATH plays the league's Tank Royale "
     "share (docs/royale.md). Without league the opponents are fixed: scripted names, policy FILEs or royale:PATH "
     "bots (one bot process per match), spread over the matches."),
    ("--workers", "the learning bots run in N worker processes, each with its own GIL (default: 1 with 2+ cores, "
     "else 1 bot thread: summary.json says which and why). --workers 0 forces threads (--bots)."),
    ("--engine", "numba compiles for 10-20 s on a machine's first run, before the budget starts, then loads from "
     "its cache (the run says where; see 'arena compile'). PPO needs numba with either engine."),
    ("--eval-rounds", "every minute of training (in a niced process) and at its end the policy plays N rounds "
     "against each scripted bot, a few seconds of a core; the run returns the best of these (OUT/returned.json), "
     "replays it on fresh seeds, and that match table is the report's."),
    ("OUT", "metrics.jsonl, checkpoints/, returned.json (the policy handed back, which 'arena match --bot OUT' and "
     "'arena export OUT' use), summary.json, learning_curve.png and a one-page report (report.html, report.png)."),
    ("more", "docs/arena.md, 'Training in the arena': every flag, its default and the measurements behind it."),
)  # fmt: skip
"""The epilog's notes: what a flag's one-line help leaves out, by flag (or topic)."""
EXAMPLE = "example: arena train --opponent sitting --opponent spinner --minutes 10 --out runs/tank"


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena train`` to the subcommands of ``arena``: one-line helps in groups, the longer notes in the epilog."""
    train = commands.add_parser(
        "train",
        help="train a policy: server, trainer thread and headless arena in one process",
        description=_wrap(DESCRIPTION),
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the notes keep their table layout (wrapped here)
    )
    learns = train.add_argument_group("what it learns")
    add_agent_flags(learns)
    learns.add_argument(
        "--game", choices=GAMES, default="tank", help="tank: the Robocode-style arena (default); reach: a tiny test game"
    )
    learns.add_argument("--seed", type=int, default=0, help="seed for the games and the agent (default: 0)")
    learns.add_argument(
        "--observation",
        choices=("full", "radar"),
        default="full",
        help="tank: what the learner sees: full (the enemy's exact state every tick, the default) or radar (the "
        "enemy as its own radar last scanned it, Tank Royale's information; pair it with --agent-option recurrent=gru)",
    )
    _add_opponent_flags(train.add_argument_group("opponents"))
    _add_bot_flags(train.add_argument_group("learning bots"))
    _add_budget_flags(train.add_argument_group("budget"))
    _add_output_flags(train.add_argument_group("outputs"))
    add_server_flags(train.add_argument_group("server"), default_port=0)


def _add_opponent_flags(group: argparse._ArgumentGroup) -> None:
    """Whom the learning bots play: the league or a fixed mix, the league's parameters, its Tank Royale share."""
    group.add_argument(
        "--opponent",
        action="append",
        type=opponent_kind,
        metavar="league|NAME|FILE|royale:PATH",
        help="whom the learning bots play, repeatable (default: league; see the notes)",
    )
    group.add_argument(
        "--league-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a league parameter, repeatable (docs/arena.md, 'The league'); the keys and defaults are in the notes",
    )
    group.add_argument(
        "--royale-matches",
        type=positive_int,
        default=None,
        help=f"with the league: parallel matches against each royale:PATH bot, a bot process each (default: {ROYALE_MATCHES})",
    )
    group.add_argument(
        "--royale-turns-per-s",
        type=positive_float,
        default=None,
        help=f"with the league: the most turns a second of its Tank Royale share (default: {ROYALE_TURNS_PER_S:g})",
    )


def _add_bot_flags(group: argparse._ArgumentGroup) -> None:
    """How many matches, bots (threads or worker processes) and which tank engine they play on."""
    group.add_argument(
        "--matches",
        type=positive_int,
        default=None,
        help=f"parallel matches per learning bot (default: {TANK_MATCHES}; reach: 16); PPO's rollout is "
        f"matches x bots x {STEPS_PER_AGENT} steps, in {MINIBATCHES} minibatches",
    )
    group.add_argument(
        "--bots", type=positive_int, default=None, help="learning bots as threads of this process (default: see --workers)"
    )
    group.add_argument("--workers", type=int, default=None, help="learning bots as worker processes (tank; see the notes)")
    add_engine_flag(group, "the learning bots, their scripted opponents and the evaluations")


def _add_budget_flags(group: argparse._ArgumentGroup) -> None:
    """When the run stops (minutes, rounds or ticks, one of them) and how long a round may last."""
    budget = group.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=positive_float, default=None, help="wall-clock budget (default: 5; reach: 1)")
    budget.add_argument("--rounds", type=positive_int, default=None, help="stop after this many finished rounds (tank)")
    budget.add_argument("--steps", type=positive_int, default=None, help="stop after this many ticks per learning bot")
    group.add_argument(
        "--ticks-per-round", type=positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )


def _add_output_flags(group: argparse._ArgumentGroup) -> None:
    """Where the run writes, whether it resumes, how it evaluates and what it prints at its end."""
    group.add_argument("--out", type=Path, default=Path("runs/latest"), help="output directory (default: runs/latest)")
    group.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    group.add_argument(
        "--eval-rounds",
        type=int,
        default=50,
        metavar="N",
        help="rounds against each scripted bot per evaluation (tank; default: 50; 0 returns the last policy; see the notes)",
    )
    group.add_argument("--no-report", action="store_true", help="write no report.html/report.png and skip the evaluation")
    group.add_argument(
        "--json", action="store_true", help="end with summary.json's object as one line on stdout instead of a table"
    )
    group.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write every metrics row as TensorBoard scalars to OUT/tensorboard (needs pip install -e '.[tensorboard]')",
    )


def _epilog() -> str:
    """:data:`NOTES` as a two-column table, with the league's parameters and their defaults, then :data:`EXAMPLE`."""
    notes = [*NOTES[:1], ("--league-option", "KEY (default): " + _league_defaults()), *NOTES[1:]]
    name_width = max(len(name) for name, _ in notes) + 2
    lines = ["notes:"]
    lines += [_wrap(text, f"  {name:<{name_width}}", " " * (name_width + 2)) for name, text in notes]
    return "\n".join([*lines, "", EXAMPLE])


def _wrap(text: str, first: str = "", rest: str = "") -> str:
    """``text`` wrapped to the terminal's width as argparse wraps the help, the lines after the first indented ``rest``."""
    import shutil
    import textwrap

    width = max(60, shutil.get_terminal_size().columns - 2)
    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _league_defaults() -> str:
    """``KEY (default)`` for every league parameter, read from ``LeagueConfig`` so the help cannot drift from it."""
    from dataclasses import fields

    from ..league import LeagueConfig

    def shown(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{f.name} ({shown(f.default)})" for f in fields(LeagueConfig))


def run(flags: argparse.Namespace) -> int:
    """``arena train``: the plan of the parsed ``flags``, then the run (:mod:`arena.commands.train_run`)."""
    from .train_plan import TrainPlan
    from .train_run import run_training

    return run_training(TrainPlan.from_flags(flags))
