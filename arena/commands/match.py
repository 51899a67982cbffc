"""``arena match``: headless matches between checkpoints and scripted bots."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .options import (
    SCRIPTED_NAMES,
    _positive_int,
    _stderr_line,
    _turn_timeout_ms,
)


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
    match.add_argument("--rounds", type=_positive_int, default=100, help="rounds to play (default: 100)")
    match.add_argument("--ticks-per-round", type=_positive_int, default=2000, help="round tick cap (default: 2000)")
    match.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    match.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout instead of a table")
    match.add_argument("--deterministic", action="store_true", help="trained policies act with their mean action")
    match.add_argument(
        "--royale-port",
        type=int,
        default=None,
        metavar="P",
        help="wait on 127.0.0.1:P for the royale:NAME bots, started by hand, instead of booting royale:PATH (docs/royale.md)",
    )
    match.add_argument(
        "--turn-timeout-ms",
        type=_turn_timeout_ms,
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


def _match(args: argparse.Namespace) -> int:
    from ..bots.play import PolicyController, ScriptedController, play_match
    from ..bots.policies import load_policy
    from ..games.tank.rules import TankRules
    from ..royale.match import MatchListeners, RoyaleMatch, failure_message, play_royale_match, royale_rules
    from ..royale.seats import RoyaleBotSpec, RoyaleMatchError
    from ..royale.server import RoyaleServerConfig

    royale = any(RoyaleBotSpec.matches(spec) for spec in args.bot) or args.royale_port is not None
    if not 2 <= len(args.bot) <= 8:
        raise ValueError(f"give 2 to 8 --bot, got {len(args.bot)}")
    if args.turn_timeout_ms is not None and not royale:
        raise ValueError("--turn-timeout-ms applies to Tank Royale bots only (royale:PATH or --royale-port)")
    if args.record is not None and not args.record.parent.is_dir():  # before a long match, not after
        raise FileNotFoundError(f"--record {args.record}: no directory {args.record.parent}")
    if args.royale_logs is not None:
        if not royale or args.royale_port is not None:
            raise ValueError("--royale-logs keeps the output of booted Tank Royale bots (royale:PATH, without --royale-port)")
        try:
            args.royale_logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--royale-logs {args.royale_logs}: {exc.strerror or exc}") from None
    for spec in args.bot:
        if spec not in SCRIPTED_NAMES and not RoyaleBotSpec.matches(spec) and not Path(spec).exists():
            raise ValueError(
                f"unknown bot {spec!r}: choose from {', '.join(SCRIPTED_NAMES)}, a policy file (a checkpoint, a run "
                "directory or an exported weights file) or royale:PATH"
            )
    if args.rate:
        from ..league.commands import rate_command

        return rate_command(args, royale)
    # A recording replays only if its rounds ran one after another in one arena (see Recorder).
    n_matches = 1 if args.record is not None or royale else min(50, args.rounds)
    players: list[Any] = []
    names: list[str] = []
    bots: list[dict[str, Any]] = []
    for i, spec in enumerate(args.bot):
        name = spec if spec in SCRIPTED_NAMES else Path(spec.removeprefix("royale:")).name or spec
        if name in names:  # the same bot twice (a mirror match): tell the rows apart
            name = f"{name}#{i + 1}"
        names.append(name)
        if spec in SCRIPTED_NAMES:
            players.append(ScriptedController(spec, n=n_matches, seed=args.seed + i))
            bots.append({"name": name, "kind": "scripted", "spec": spec})
        elif RoyaleBotSpec.matches(spec):
            players.append(RoyaleBotSpec.parse(spec))
            bots.append({"name": name, "kind": "royale", "spec": spec})
        else:
            policy = load_policy(Path(spec))
            players.append(PolicyController(name, policy, seed=args.seed + i, stochastic=not args.deterministic))
            bots.append(
                {
                    "name": name,
                    "kind": "policy",
                    "spec": spec,
                    "generation": policy.generation,
                    "version": policy.version,
                    "deterministic": bool(args.deterministic),
                }
            )
        players[-1].name = name
    rules = royale_rules(args.ticks_per_round) if royale else TankRules(max_ticks=args.ticks_per_round)
    recorder = None
    if args.record is not None:
        from ..replay import Recorder

        recorder = Recorder(names, args.seed, rules, bots)
    if royale:
        timeouts = {} if args.turn_timeout_ms is None else {"turn_timeout": args.turn_timeout_ms / 1000.0}
        config = RoyaleServerConfig(port=args.royale_port or 0, **timeouts)
        plan = RoyaleMatch(args.rounds, args.seed, rules, config, boot_bots=args.royale_port is None,
                           log_dir=args.royale_logs)  # fmt: skip
        result = play_royale_match(players, plan, MatchListeners(observer=recorder, announce=_stderr_line))
    else:
        result = play_match(players, args.rounds, seed=args.seed, n_matches=n_matches, rules=rules, observer=recorder)
    if recorder is not None:
        size = recorder.recording(result).save(args.record)
        print(
            f"arena match: recorded {args.rounds} round(s), {recorder.frames:,} frames to {args.record} ({size:,} bytes)",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
    for row, bot in zip(result["bots"], bots, strict=True):  # type: ignore[call-overload]
        row.update({k: v for k, v in bot.items() if k not in row})  # what each bot was: a policy's version, ...
    # Booted Tank Royale bots that failed mid-game (died, left, raised): the results are printed,
    # then the failures are the command's error (stderr, exit code 2), each with the end of its log.
    failures = result.get("royale", {}).get("failures", []) if royale else []  # type: ignore[union-attr]
    failed = RoyaleMatchError("\n".join(failure_message(f) for f in failures), [f["bot"] for f in failures])
    if args.json:
        print(json.dumps(result), flush=True)
        if failures:
            raise failed
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"arena match: {args.rounds} rounds", show_lines=False)
    for column in ("bot", "wins", "win rate", "mean score", "mean energy left"):
        table.add_column(column, justify="left" if column == "bot" else "right")
    for row in result["bots"]:  # type: ignore[attr-defined]
        table.add_row(
            row["name"],
            str(row["wins"]),
            f"{row['wins'] / args.rounds:.0%}",
            f"{row['mean_score']:.1f}",
            f"{row['mean_energy']:.1f}",
        )
    if "draws" in result:
        table.caption = f"draws (no winner): {result['draws']}; mean round length: {result['mean_round_ticks']:,} ticks"
    Console().print(table)
    if failures:
        sys.stdout.flush()
        raise failed
    return 0
