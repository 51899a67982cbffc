"""The ``arena`` command: ``train``, ``match``, ``replay``, ``serve``, ``worker``, ``gym`` and ``export``.

This module is the one place that wires the server to the games: learning bots still
reach the server only through ``bot_protocol`` (real websocket clients on loopback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .defaults import (
    MINIBATCHES,
    ROYALE_MATCHES,
    ROYALE_TURNS_PER_S,
    STEPS_PER_AGENT,
    TANK_MATCHES,
    TANK_SEGMENT_STEPS,
    choose_layout,
    tank_ppo_options,
)
from .run_log import MetricsLog, Progress, league_summary, print_summary, summarize, throughput_figures
from .worker_command import run_worker

if TYPE_CHECKING:  # the server is imported on use: it stays out of the CLI's start-up
    from server.rewards import RewardFunction

__all__ = ["main"]

GAMES = ("tank", "reach")
SCRIPTED_NAMES = ("sitting", "spinner", "walker", "tracker")
LEAGUE = "league"
"""``--opponent league`` (the default): train against the league (arena.league)."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one readable line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _turn_timeout_ms(text: str) -> float:
    """``arena match --turn-timeout-ms``: positive and finite (a turn must end)."""
    value = _positive_float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of milliseconds, got {text}")
    return value


def _opponent_kind(text: str) -> str:
    """``--opponent``: ``league``, a scripted name, ``royale:PATH`` or an existing policy file."""
    if text in (LEAGUE, *SCRIPTED_NAMES) or text.startswith("royale:") or Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from {LEAGUE}, {', '.join(SCRIPTED_NAMES)}, royale:PATH or a policy file: "
        "a checkpoint, a run directory or an exported weights file)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="arena",
        description="Train game bots with reinforcement learning over websockets.",
        epilog="Run 'arena COMMAND --help' for each command's options. Docs: docs/arena.md, docs/protocol.md.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = commands.add_parser(
        "train",
        help="train a policy: server, trainer thread and headless arena in one process",
        description=(
            "Start the training server and its trainer thread, connect learning bots to it over a "
            "loopback websocket, and play headless arena matches against scripted opponents until the "
            "budget is spent. The learning bots act with a local copy of the policy and hot-swap new "
            "weights between ticks. Writes metrics.jsonl, checkpoints/, summary.json, learning_curve.png "
            "and a one-page report (report.html, report.png: the curve, the final policy against each "
            "scripted bot, throughput) to --out. Ctrl-C stops cleanly with a final checkpoint."
        ),
        epilog="example: arena train --opponent sitting --opponent spinner --minutes 10 --out runs/tank",
    )
    _add_agent_flags(train)
    train.add_argument(
        "--game", choices=GAMES, default="tank", help="tank: the Robocode-style arena (default); reach: a tiny test game"
    )
    train.add_argument(
        "--opponent",
        action="append",
        type=_opponent_kind,
        metavar="league|NAME|FILE|royale:PATH",
        help="league (the default): the scripted ladder, snapshots of the learner and self-play, matched by PFSP "
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
        help="a league parameter: snapshot_every (updates, default 200), max_snapshots (8), self_share (0.2), "
        "floor_share (0.2), exponent (2), win_rate_memory (100 rounds), draw_value (0: a draw is no win), "
        "snapshots_as_one (false; true: the snapshots are one member of the draw); repeatable",
    )
    train.add_argument(
        "--matches",
        type=_positive_int,
        default=None,
        help=f"parallel matches per learning bot (default: {TANK_MATCHES}; reach: 16); PPO's rollout is "
        f"matches x bots x {STEPS_PER_AGENT} steps, in {MINIBATCHES} minibatches",
    )
    train.add_argument(
        "--bots",
        type=_positive_int,
        default=None,
        help="learning bot connections as threads of this process (default: see --workers)",
    )
    train.add_argument(
        "--royale-matches",
        type=_positive_int,
        default=None,
        help=f"with the league: parallel matches against each royale:PATH bot, one bot process each, played by a "
        f"learning bot of their own at the bots' pace (default: {ROYALE_MATCHES}; docs/royale.md)",
    )
    train.add_argument(
        "--royale-turns-per-s",
        type=_positive_float,
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
    budget.add_argument("--minutes", type=_positive_float, default=None, help="wall-clock budget (default: 5; reach: 1)")
    budget.add_argument("--rounds", type=_positive_int, default=None, help="stop after this many finished rounds (tank)")
    budget.add_argument("--steps", type=_positive_int, default=None, help="stop after this many ticks per learning bot")
    train.add_argument(
        "--ticks-per-round", type=_positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )
    train.add_argument("--seed", type=int, default=0, help="seed for the games and the agent (default: 0)")
    train.add_argument("--out", type=Path, default=Path("runs/latest"), help="output directory (default: runs/latest)")
    train.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    train.add_argument(
        "--eval-rounds",
        type=int,
        default=50,
        metavar="N",
        help="after training, the final policy plays N rounds against each scripted bot for the report's match table "
        "(tank; 0 skips it; default: 50, a few seconds)",
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
    _add_server_flags(train, default_port=0)

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
        help="play a round-robin instead: every pair of --bot plays --rounds rounds 1v1, then print their openskill "
        "ratings (mu, sigma, mu - 3 sigma) and each pair's score",
    )

    league = commands.add_parser(
        "league",
        help="a training run's league: ratings, and a round-robin of the final policy against every member",
        description=(
            "Print the ratings a run's league kept in training (OUT/league), then play a round-robin among the "
            "final policy and every league member (scripted bots, snapshots, policy files) and print their openskill "
            "ratings and each member's score against each other member."
        ),
        epilog="example: arena league runs/latest --rounds 20",
    )
    league.add_argument("run", type=Path, metavar="RUN_DIR", help="the --out of an 'arena train' run against the league")
    league.add_argument("--rounds", type=_positive_int, default=20, help="rounds per pair of members (default: 20)")
    league.add_argument("--ticks-per-round", type=_positive_int, default=2000, help="round tick cap (default: 2000)")
    league.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    league.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout instead of tables")

    replay = commands.add_parser(
        "replay",
        help="watch, render or verify a match recorded with 'arena match --record'",
        description=(
            "Show a recording. --to OUT.gif renders an animated GIF (OUT.mp4 an H.264 video, with the video extra: "
            "pip install -e '.[video]'); --verify re-simulates the match from its seed and recorded actions and "
            "checks every frame; with neither, a viewer page is served on 127.0.0.1 until Ctrl-C."
        ),
        epilog="example: arena replay match.replay --to match.gif --round 1 --stride 3",
    )
    replay.add_argument("file", type=Path, help="a recording from 'arena match --record FILE'")
    replay.add_argument(
        "--to",
        type=Path,
        default=None,
        metavar="OUT",
        help="write an animation: OUT.gif, or OUT.mp4 with the video extra (pip install -e '.[video]')",
    )
    replay.add_argument(
        "--verify", action="store_true", help="re-simulate the match and compare every frame (exit 1 if any differs)"
    )
    replay.add_argument(
        "--round",
        type=_positive_int,
        action="append",
        default=None,
        metavar="N",
        help="only this round (repeatable; default: all)",
    )
    replay.add_argument(
        "--stride",
        type=_positive_int,
        default=2,
        metavar="K",
        help="animation: draw every K-th tick (default: 2; 3-4 for long rounds)",
    )
    replay.add_argument("--fps", type=_positive_float, default=25.0, help="animation frames per second, <= 50 (default: 25)")
    replay.add_argument(
        "--width", type=_positive_int, default=480, metavar="PX", help="animation width in pixels (default: 480)"
    )
    replay.add_argument("--port", type=int, default=0, help="viewer port on 127.0.0.1, 0 = any free (default: 0)")

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
        choices=SCRIPTED_NAMES,
        help="scripted opponent; repeat for a mix spread over the matches (default: sitting)",
    )
    worker.add_argument(
        "--matches", type=_positive_int, default=TANK_MATCHES, help=f"parallel matches (default: {TANK_MATCHES})"
    )
    worker.add_argument(
        "--seed", type=int, default=None, help="seed of the games and the exploration (default: a random one, printed)"
    )
    worker.add_argument("--name", default=None, help="bot name shown by the server (default: worker-HOSTNAME)")
    worker_budget = worker.add_mutually_exclusive_group()
    worker_budget.add_argument("--minutes", type=_positive_float, default=None, help="stop after this long (default: never)")
    worker_budget.add_argument("--rounds", type=_positive_int, default=None, help="stop after this many finished rounds")
    worker.add_argument(
        "--ticks-per-round", type=_positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )

    serve = commands.add_parser(
        "serve",
        help="run the server and trainer alone, for your own bots",
        description=(
            "Serve the websocket training endpoint for external bots (see docs/protocol.md). The run's "
            "observation and action sizes default to the tank arena's; bots declaring other sizes are "
            "refused. Stop with Ctrl-C or SIGTERM: bots get close code 1001 and a final checkpoint is written."
        ),
    )
    _add_agent_flags(serve)
    serve.add_argument(
        "--obs-dim", type=_positive_int, default=None, help="observation size bots must declare (default: tank's)"
    )
    serve.add_argument("--act-dim", type=_positive_int, default=None, help="action size bots must declare (default: tank's)")
    serve.add_argument(
        "--agents",
        type=_positive_int,
        default=TANK_MATCHES,
        help=f"PPO at the tank's sizes: agents the bots will bring in all, which sizes the rollout (agents x "
        f"{STEPS_PER_AGENT} steps, as arena train) (default: {TANK_MATCHES}, one 'arena worker')",
    )
    serve.add_argument("--out", type=Path, default=Path("runs/serve"), help="checkpoints and metrics (default: runs/serve)")
    serve.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    serve.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write every metrics row as TensorBoard scalars to OUT/tensorboard (needs pip install -e '.[tensorboard]')",
    )
    serve.add_argument("--seed", type=int, default=0, help="seed for the agent")
    _add_server_flags(serve, default_port=8765)
    serve.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain: serve wss:// (needs --tls-key)")
    serve.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")

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
    gym.add_argument("--n-envs", type=_positive_int, default=1, help="sub-environments in one vector env (default: 1)")
    gym.add_argument("--steps", type=_positive_int, default=20_000, help="environment steps in all (default: 20000)")
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

    export = commands.add_parser(
        "export",
        help="write a checkpoint's policy in the bot-ready weights format",
        description=(
            "Write the policy of CHECKPOINT as one encoded 'weights' message — exactly what bots receive "
            "online (msgpack: arch, safetensors tensors, sha256; see docs/protocol.md) — for bots that load "
            "weights offline. bot_protocol.Policy and 'arena match --bot FILE' read it. CHECKPOINT may also be a run "
            "directory (its newest checkpoint) or, with --royale, an exported weights file."
        ),
    )
    export.add_argument(
        "checkpoint",
        type=Path,
        help="a checkpoint file (*.pt with its .json manifest) or a run directory; with --royale also a weights file",
    )
    export.add_argument("-o", "--output", type=Path, required=True, help="file to write (e.g. policy.weights)")
    export_as = export.add_mutually_exclusive_group()
    export_as.add_argument(
        "--royale", action="store_true", help="write a Tank Royale bot directory OUTPUT instead (see docs/royale.md)"
    )
    export_as.add_argument(
        "--onnx",
        action="store_true",
        help="write the actor as an ONNX model OUTPUT (e.g. policy.onnx) for game engines (onnxruntime; see docs/export.md)",
    )
    return parser


def _add_agent_flags(parser: argparse.ArgumentParser) -> None:
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


def _parse_agent_options(agent: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings → config overrides, typed after the config field they name."""
    import dataclasses

    from agents import PPOConfig, TD3Config

    fields = {f.name: f for f in dataclasses.fields(PPOConfig if agent == "ppo" else TD3Config)}
    fixed = {"obs_dim", "act_dim", "seed", "device"}  # set by the game and by their own flags
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


def _agent_options(args: argparse.Namespace) -> dict[str, Any]:
    """Config overrides for ``make_agent`` from the command line (checked before anything starts)."""
    import torch

    device = str(args.device)
    try:
        kind = torch.device(device).type
    except RuntimeError as exc:
        raise ValueError(f"--device {device!r}: {exc}") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this torch build sees no CUDA device")
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"--device {device}: only cpu and cuda are supported")
    options: dict[str, Any] = {"seed": args.seed, "device": device}
    tank_agents = getattr(args, "tank_agents", None)
    if args.agent == "ppo" and tank_agents is not None:
        options.update(tank_ppo_options(tank_agents, league=getattr(args, "tank_league", False)))
    options.update(_parse_agent_options(args.agent, args.agent_option))
    if args.agent in ("ddpg", "td3"):
        options["save_replay"] = bool(args.save_replay)
    elif args.save_replay:
        raise ValueError("--save-replay applies to ddpg and td3 only (ppo keeps no replay buffer)")
    return options


def _add_server_flags(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address; non-loopback needs --token (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=default_port, help=f"TCP port, 0 = any free (default: {default_port})")
    parser.add_argument(
        "--token",
        default=os.environ.get("ARENA_TOKEN"),
        help="bearer token bots must send, >= 8 characters (default: $ARENA_TOKEN, else no auth on loopback)",
    )
    parser.add_argument(
        "--checkpoint-interval", type=_positive_float, default=120.0, help="seconds between checkpoints (default: 120)"
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
        type=_positive_int,
        default=None,
        help="torch threads of the trainer (default: usable cores - 1, at least 1: the other core runs the "
        "event loop or the learning bot; see docs/architecture.md, 'Cores')",
    )
    parser.add_argument(
        "--credit-window",
        type=_positive_int,
        default=None,
        help="'tr' messages each bot may have in flight (default: 8). 32 lets fast bots feed a fast trainer "
        "~1.3-1.9x more transitions/s in 64-step frames (bench/loop.py); when the trainer is the bottleneck, more in flight "
        "means more of it dropped oldest-first. See docs/architecture.md, 'Credit window'",
    )
    parser.add_argument(
        "--queue-steps",
        type=_positive_int,
        default=None,
        metavar="N",
        help="withhold credit once N steps wait in the server's queue (default: one PPO update's worth; for DDPG/TD3 "
        "16 publishes' worth, 1,024 steps at their defaults, so a fast bot waits for the trainer and the update-to-data "
        "ratio holds). Smaller: fresher data, bots wait more",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "train": _train,
        "match": _match,
        "serve": _serve,
        "export": _export,
        "gym": _gym,
        "replay": _replay,
        "league": _league_command,
        "worker": run_worker,
    }
    try:
        return commands[args.command](args)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        print(f"arena {args.command}: error: {exc}", file=sys.stderr)
        return 2


# ── arena gym ────────────────────────────────────────────────────────────────


def _gym(args: argparse.Namespace) -> int:
    import numpy as np

    from bot_protocol.client import HandshakeRejected

    from .gym_bot import GymBot, make_env

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
        from .gym_bot import evaluate

        scores = evaluate(policy, args.env, episodes=args.eval_episodes, seed=args.seed + 1)
        print(
            f"arena gym: evaluation of policy version {policy.version}: mean return {np.mean(scores):.1f} "
            f"(± {np.std(scores):.1f}) over {len(scores)} episodes with the mean action",
            flush=True,
        )
    return 0


# ── arena train ──────────────────────────────────────────────────────────────


def _make_server(
    args: argparse.Namespace,
    obs_dim: int,
    act_dim: int,
    log: Callable[[dict[str, float]], None],
    reward: RewardFunction | None,
) -> Any:
    """The server both `train` and `serve` run: agent, limits, checkpoints in ``--out``, metrics log.

    ``reward`` is the game's reward function for terms-mode bots (``TANK_REWARD`` for the tank),
    or None for a game whose bots send scalar rewards: the server owns no shaping of its own.
    """
    from agents import make_agent
    from server import TrainerConfig, TrainingServer

    if args.resume and not (args.out / "checkpoints").is_dir():
        raise FileNotFoundError(f"--resume: no checkpoints in {args.out / 'checkpoints'}")
    return TrainingServer(
        make_agent(args.agent, obs_dim, act_dim, **_agent_options(args)),
        _server_config(args),
        TrainerConfig(
            checkpoint_dir=args.out / "checkpoints",
            checkpoint_interval=args.checkpoint_interval,
            resume=args.resume,
            torch_threads=args.torch_threads,
        ),
        update_hook=log,
        dashboard=_dashboard_config(args),
        reward=reward,
    )


def _dashboard_config(args: argparse.Namespace) -> Any:
    from server import DashboardConfig

    if args.dashboard_port == -1:
        return None
    if not -1 <= args.dashboard_port <= 65535:
        raise ValueError(f"--dashboard-port must be -1 (off), 0 (any free) or a TCP port, got {args.dashboard_port}")
    return DashboardConfig(host=args.dashboard_host or args.host, port=args.dashboard_port, token=args.token)


def _announce_dashboard(server: Any, token: str | None) -> None:
    if server.dashboard is not None:
        hint = "?token=<your token>" if token else ""
        print(f"dashboard: {server.dashboard.url.rstrip('/')}/{hint}", flush=True)


def _server_config(args: argparse.Namespace) -> Any:
    from server import ServerConfig
    from server.config import is_loopback

    cert, key = getattr(args, "tls_cert", None), getattr(args, "tls_key", None)
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"{flag} {path}: no such file")
    extra: dict[str, Any] = {"credit_window": args.credit_window} if getattr(args, "credit_window", None) else {}
    if getattr(args, "queue_steps", None):
        extra["queue_max_steps"] = args.queue_steps
    if getattr(args, "tank_agents", None) is not None and args.agent == "ppo":
        extra["segment_steps"] = TANK_SEGMENT_STEPS
    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token,
        tls_cert=str(cert) if cert else None,
        tls_key=str(key) if key else None,
        **extra,
    )  # validated first: a refused config is one line, with no warning before it
    if cert is None and not is_loopback(args.host):
        logging.getLogger("arena").warning(
            "serving on %s without TLS: put a TLS-terminating proxy in front, or use --tls-cert", args.host
        )
    return config


def _train(args: argparse.Namespace) -> int:
    from server import ListenError, ServerThread

    from .play import MatchLog, play_learning_bot
    from .reach import ACT_DIM as REACH_ACT
    from .reach import OBS_DIM as REACH_OBS
    from .reach import play_reach
    from .report import plot_curve, write_report
    from .royale.server import RoyaleMatchError
    from .tank.engine import ACT_DIM, OBS_DIM, TankRules
    from .tank.rewards import TANK_REWARD
    from .tensorboard import ServerScalars

    tank = args.game == "tank"
    out_existed = args.out.exists()
    if not tank and (args.opponent or args.rounds or args.workers or args.league_option):
        raise ValueError("--opponent, --league-option, --rounds and --workers apply to --game tank only")
    if args.eval_rounds < 0:
        raise ValueError(f"--eval-rounds must be >= 0, got {args.eval_rounds}")
    opponents = args.opponent or [LEAGUE]
    royale = [o for o in opponents if o.startswith("royale:")]
    # With the league, Tank Royale bots are its share of a learning bot of their own (their pace is
    # the bots'); without it they are fixed opponents of the learning bots' own matches.
    royale_share = royale if LEAGUE in opponents else []
    opponents = [o for o in opponents if o not in royale_share]
    if args.workers and royale and not royale_share:
        raise ValueError("royale:PATH opponents play with --bots (threads of this process), not --workers")
    if (args.royale_matches is not None or args.royale_turns_per_s is not None) and not royale_share:
        raise ValueError(
            "--royale-matches and --royale-turns-per-s apply to Tank Royale bots in the league "
            "(--opponent league --opponent royale:PATH)"
        )
    _check_royale_bots(royale)
    layout = choose_layout(args.workers, args.bots, threads_only=bool(royale and not royale_share) or not tank)
    args.workers, args.bots = layout.workers, layout.bots
    league, table = _league(args, opponents) if tank else (None, None)
    if args.matches is None:
        args.matches = TANK_MATCHES if tank else 16
    args.tank_agents = args.matches * (args.workers or args.bots) if tank else None  # sizes PPO's rollout
    args.tank_league = tank and LEAGUE in opponents  # and PPO's entropy bonus (arena.defaults.LEAGUE_PPO)
    rules = TankRules(max_ticks=args.ticks_per_round)
    minutes = args.minutes
    if minutes is None and args.rounds is None and args.steps is None:
        minutes = 5.0 if tank else 1.0
    started = time.monotonic()
    rounds_log = MatchLog()
    server_figures: list[ServerScalars] = []  # set once the server exists; rows start after it does

    if table is not None:
        rounds_log.listener = lambda results: table.add([(w, sc, _member_name(o), d) for w, sc, o, d in results])

    def extra() -> dict[str, float]:
        row = server_figures[0]() if server_figures else {}
        if tank:
            row.update({"rollout/rounds": rounds_log.rounds, "rollout/win_rate_last_100": rounds_log.win_rate_last_100})
        if table is not None:
            row.update(table.metrics())
        return row

    log = MetricsLog(args.out / "metrics.jsonl", started, extra=extra)
    obs_dim, act_dim = (OBS_DIM, ACT_DIM) if tank else (REACH_OBS, REACH_ACT)
    server = _make_server(args, obs_dim, act_dim, log, TANK_REWARD if tank else None)  # reach bots send scalars
    server_figures.append(ServerScalars(server))
    log.dashboard = server.dashboard
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tensorboard:
        _attach_tensorboard(log, args, "arena train")
    stop = threading.Event()
    reach_games: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run_bot(i: int) -> None:
        seed = args.seed * 1000 + i
        try:
            if tank:
                from .royale.train import play_with_royale_opponents  # royale:PATH opponents: Tank Royale bots, booted

                def play(mix: list[str], n_matches: int, hooks: dict[str, Any]) -> None:
                    play_learning_bot(
                        running.url,
                        mix,
                        n_matches=n_matches,
                        stop=stop,
                        rules=rules,
                        token=args.token,
                        seed=seed,
                        name=f"tank{i}",
                        log=rounds_log,
                        league=None if league is None else functools.partial(league.build, worker=i),
                        **hooks,
                    )

                view = _match_view(server.dashboard, args.agent, opponents) if i == 0 else None
                play_with_royale_opponents(opponents, lambda _: args.matches, rules, play, _train_line, view)
            else:
                reach_games[i], _ = play_reach(
                    running.url,
                    n_agents=args.matches,
                    steps=args.steps or 10**12,
                    token=args.token,
                    seed=seed,
                    name=f"reach{i}",
                    stop=stop,
                )
        except BaseException as exc:  # reported once below; the other bots keep going
            errors.append(exc)
            stop.set()

    what = (
        (f"vs the league ({league.describe()})" if league is not None else f"vs {', '.join(opponents)}")
        if tank
        else "on 'reach'"
    )
    if royale_share:
        share = args.royale_matches or ROYALE_MATCHES
        names = ", ".join(map(_member_name, royale_share))
        pace = args.royale_turns_per_s or ROYALE_TURNS_PER_S
        what += f" + its Tank Royale share ({names}: {share} match(es) each at {pace:g} turns/s, 1 worker process)"
    n_bots = args.workers or args.bots
    where = "worker process(es)" if args.workers else "bot thread(s)"
    print(
        f"arena train: {args.agent} {what}, {n_bots} {where} x {args.matches} matches ({layout.reason}), output in {args.out}",
        flush=True,
    )
    try:
        running = ServerThread(server).start()
    except ListenError as exc:  # a busy port: one line, exit 2, and no empty directories left behind
        for directory in (args.out / "checkpoints", *([] if out_existed else [args.out])):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only if empty
        raise ValueError(str(exc)) from None
    _announce_dashboard(server, args.token)
    if args.resume:
        print(_resume_line("arena train", server.trainer), flush=True)
    interrupted = False
    pool = None
    share_pool = None
    try:
        if args.workers:
            from .workers import WorkerPool

            pool = WorkerPool(
                args.workers, running.url, opponents, args.matches, args.ticks_per_round, args.token, args.seed, league
            )
            pool.start()
            bots_alive: Callable[[], bool] = pool.alive
        else:
            bots = [threading.Thread(target=run_bot, args=(i,), name=f"bot-{i}", daemon=True) for i in range(args.bots)]
            for bot in bots:
                bot.start()

            def bots_alive() -> bool:
                return any(b.is_alive() for b in bots)

        if royale_share:  # the league's Tank Royale share: a worker process of its own (its own GIL), beside the bots
            from .workers import WorkerPool

            share = args.royale_matches or ROYALE_MATCHES
            share_pool = WorkerPool(1, running.url, royale_share, share * len(royale_share), args.ticks_per_round,
                                    args.token, args.seed + 1, name="royale", royale_matches=share,
                                    turns_per_s=args.royale_turns_per_s or ROYALE_TURNS_PER_S)  # fmt: skip
            share_pool.start()

        with Progress(server, started, rounds_log if tank else None, table) as progress:
            while bots_alive():
                for each in (pool, share_pool):
                    if each is not None:
                        each.collect(rounds_log)
                elapsed = time.monotonic() - started
                if (
                    (minutes is not None and elapsed >= minutes * 60)
                    or (args.rounds is not None and rounds_log.rounds >= args.rounds)
                    or (tank and args.steps is not None and rounds_log.ticks >= args.steps * args.matches * n_bots)
                ) or server.failed is not None:
                    stop.set()
                    if pool is not None:
                        pool.stop.set()
                progress.update()
                if table is not None:
                    table.save_every(args.out / "league" / "table.json", seconds=10.0)
                time.sleep(0.25)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        print("\narena train: interrupted; stopping bots and writing a final checkpoint…", file=sys.stderr)
    finally:
        stop.set()
        played_until = time.monotonic()  # rates end here, not after the shutdown below
        if pool is not None:
            pool.close(rounds_log)
            errors.extend(RuntimeError(f"worker exited with code {code}") for code in pool.failed())
        if share_pool is not None:  # it stops its Tank Royale bot processes on the way out
            share_pool.close(rounds_log)
            if share_pool.failed():  # the league trained on without it: said, not fatal
                _train_line(f"the Tank Royale share's worker exited with code {share_pool.failed()[0]}")
        trainer_cpu = server.trainer.cpu_seconds()  # read while its thread lives
        running.stop()  # bots get 1001, the trainer joins, the final checkpoint is written
        if log.tensorboard is not None:
            log.tensorboard.close()
    if server.failed is not None:
        print(f"arena train: the trainer failed beyond its restart quota: {server.failed!r}", file=sys.stderr)
        errors.append(server.failed)
    elif errors and isinstance(errors[0], RoyaleMatchError):  # its Tank Royale opponents all failed to boot
        print(f"arena train: error: {str(errors[0]).splitlines()[0]}", file=sys.stderr)
        return 2
    elif errors:
        print(f"arena train: a bot failed: {errors[0]!r}", file=sys.stderr)
    summary = summarize(args, server, time.monotonic() - started, rounds_log if tank else None, reach_games, opponents)
    summary["layout"] = layout.as_dict()
    if table is not None and league is not None:
        table.save(args.out / "league" / "table.json")
        summary["league"] = league_summary(league, table)
    summary["throughput"] = throughput_figures(server, rounds_log if tank else None, pool, trainer_cpu, played_until)
    evaluation = None if interrupted or args.no_report or not tank else _evaluate(args)
    if evaluation is not None:
        summary["evaluation"] = evaluation
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.no_report:
        curve = plot_curve(log.rows, args.out / "learning_curve.png", tank)
        pictures = [curve] if curve else []
    else:
        settings = {"matches": args.matches, "bots": args.bots, "workers": args.workers, "seed": args.seed,
                    "ticks_per_round": args.ticks_per_round, "minutes": minutes, "resumed": args.resume}  # fmt: skip
        pictures = write_report(args.out, log.rows, summary, evaluation, settings=settings)
    if args.json:
        print(json.dumps(summary))
    else:
        print_summary(summary)
    outputs = [args.out / "summary.json", args.out / "metrics.jsonl", args.out / "checkpoints", *pictures]
    if log.tensorboard is not None:
        outputs.append(log.tensorboard.logdir)
    print("arena train: wrote " + ", ".join(str(p) for p in outputs))
    return 130 if interrupted else (1 if errors else 0)


def _check_royale_bots(kinds: list[str]) -> None:
    """Each ``royale:PATH`` names a Tank Royale bot directory (else one line and exit 2, before anything starts)."""
    from .royale.booter import find_bot

    for kind in kinds:
        try:
            find_bot(Path(kind.removeprefix("royale:")))
        except (FileNotFoundError, ValueError) as exc:
            raise ValueError(f"--opponent {kind}: {exc}") from None


def _member_name(opponent: str) -> str:
    """A league member's name in tables: ``royale:PATH`` as ``royale:NAME`` (the bot directory's name)."""
    return f"royale:{Path(opponent.removeprefix('royale:')).name}" if opponent.startswith("royale:") else opponent


def _train_line(message: str) -> None:
    print(f"arena train: {message}", file=sys.stderr, flush=True)


def _league(args: argparse.Namespace, opponents: list[str]) -> tuple[Any, Any]:
    """(the league's spec, its ratings table) for ``--opponent league``, else (None, None) with the files checked."""
    from .league.commands import check_policy_file, league_spec, load_table
    from .league.ratings import LeagueTable

    files = [o for o in opponents if o not in (LEAGUE, *SCRIPTED_NAMES) and not o.startswith("royale:")]
    if LEAGUE not in opponents:
        if args.league_option:
            raise ValueError("--league-option applies to the league (--opponent league, the default)")
        for file in files:
            check_policy_file(file)
        return None, None
    directory = args.out / "league"
    spec = league_spec(files, args.league_option, directory, args.resume, exclusive=(args.workers or args.bots) == 1)
    table = (load_table(directory) if spec.resume else None) or LeagueTable()
    return spec, table


def _evaluate(args: argparse.Namespace) -> dict[str, Any] | None:
    """The final checkpoint against each scripted bot (``--eval-rounds``); None when skipped or impossible."""
    from .report import evaluate_against_scripted

    if args.eval_rounds == 0:
        return None
    print(f"arena train: evaluating the final policy, {args.eval_rounds} rounds against each scripted bot…", flush=True)
    try:
        return evaluate_against_scripted(
            args.out, rounds_per_opponent=args.eval_rounds, seed=args.seed, ticks_per_round=args.ticks_per_round
        )
    except (FileNotFoundError, ValueError) as exc:  # no checkpoint written (e.g. a disk error): report without it
        print(f"arena train: no evaluation: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("arena train: evaluation interrupted; the report has no match table", file=sys.stderr)
    return None


def _match_view(dashboard: Any, agent: str, opponents: list[str]) -> Callable[[Any], None] | None:
    """Feed match 0 of a bot thread to the dashboard's live view (one bool check per tick unless watched)."""
    if dashboard is None:
        return None
    from .tank import snapshot

    header: dict[str, Any] | None = None

    def watch(battle: Any) -> None:
        nonlocal header
        if dashboard.frame_wanted():
            if header is None:
                header = snapshot.header(battle, [f"learner ({agent})", opponents[0]])
            dashboard.publish_frame(header, snapshot.frame(battle, 0))

    return watch


# ── arena match ──────────────────────────────────────────────────────────────


def _match(args: argparse.Namespace) -> int:
    from .play import PolicyController, ScriptedController, play_match
    from .policies import load_policy
    from .royale.server import RoyaleBotSpec, RoyaleServerConfig, play_royale_match, royale_rules
    from .tank.engine import TankRules

    royale = any(RoyaleBotSpec.matches(spec) for spec in args.bot) or args.royale_port is not None
    if not 2 <= len(args.bot) <= 8:
        raise ValueError(f"give 2 to 8 --bot, got {len(args.bot)}")
    if args.turn_timeout_ms is not None and not royale:
        raise ValueError("--turn-timeout-ms applies to Tank Royale bots only (royale:PATH or --royale-port)")
    if args.record is not None and not args.record.parent.is_dir():  # before a long match, not after
        raise FileNotFoundError(f"--record {args.record}: no directory {args.record.parent}")
    for spec in args.bot:
        if spec not in SCRIPTED_NAMES and not RoyaleBotSpec.matches(spec) and not Path(spec).exists():
            raise ValueError(
                f"unknown bot {spec!r}: choose from {', '.join(SCRIPTED_NAMES)}, a policy file (a checkpoint, a run "
                "directory or an exported weights file) or royale:PATH"
            )
    if args.rate:
        from .league.commands import rate_command

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
        from .replay import Recorder

        recorder = Recorder(names, args.seed, rules, bots)
    if royale:
        timeouts = {} if args.turn_timeout_ms is None else {"turn_timeout": args.turn_timeout_ms / 1000.0}
        config = RoyaleServerConfig(port=args.royale_port or 0, **timeouts)
        result = play_royale_match(
            players, args.rounds, args.seed, rules, config, args.royale_port is None, recorder, announce=_stderr_line
        )
    else:
        result = play_match(players, args.rounds, seed=args.seed, n_matches=n_matches, rules=rules, observer=recorder)
    if recorder is not None:
        size = recorder.recording(result).save(args.record)
        print(
            f"arena match: recorded {args.rounds} round(s), {recorder.frames:,} frames to {args.record} ({size:,} bytes)",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
    if args.json:
        print(json.dumps(result))
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
    return 0


def _league_command(args: argparse.Namespace) -> int:
    from .league.commands import league_command  # imported on use: openskill and the game stay out of start-up

    return league_command(args)


def _stderr_line(message: str) -> None:
    print(f"arena match: {message}", file=sys.stderr, flush=True)


# ── arena replay ─────────────────────────────────────────────────────────────


def _replay(args: argparse.Namespace) -> int:
    from .replay import Recording, RenderConfig, make_viewer, render, serve_viewer, verify

    recording = Recording.load(args.file)
    rounds = tuple(args.round or ())
    for rnd in rounds:
        recording.round_frames(rnd)  # a ValueError naming the recorded rounds
    config = RenderConfig(width=args.width, stride=args.stride, fps=args.fps, rounds=rounds)  # checked before any work
    what = f"{' vs '.join(recording.names)}, {len(recording.rounds)} round(s), {recording.n_frames:,} frames"
    if args.verify:
        checked = verify(recording)
        if checked.mismatch is not None:
            print(
                f"arena replay: error: {args.file}: the re-simulation departs at {checked.mismatch.describe()}",
                file=sys.stderr,
            )
            return 1
        print(f"arena replay: {args.file}: {what}: re-simulated, every frame identical", flush=True)
    if args.to is not None:
        frames = render(recording, args.to, config)
        print(f"arena replay: wrote {args.to} ({frames:,} frames, {args.to.stat().st_size:,} bytes)", flush=True)
    if args.verify or args.to is not None:
        return 0
    try:
        from server.dashboard import static_asset  # the CLI wires the dashboard's drawFrame into the viewer

        server = make_viewer(recording, static_asset("match.js"), args.port, rounds)
    except OSError as exc:
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"arena replay: {what}; viewer at http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)", flush=True)
    serve_viewer(server, stop)
    return 0


# ── arena worker ─────────────────────────────────────────────────────────────


# ── arena serve ──────────────────────────────────────────────────────────────


def _serve(args: argparse.Namespace) -> int:
    from server import ListenError

    from .tank.engine import ACT_DIM, OBS_DIM
    from .tank.rewards import TANK_REWARD
    from .tensorboard import ServerScalars

    obs_dim, act_dim = args.obs_dim or OBS_DIM, args.act_dim or ACT_DIM
    args.tank_agents = args.agents if (obs_dim, act_dim) == (OBS_DIM, ACT_DIM) else None  # the tank's PPO defaults
    scalars: list[Any] = []  # the server's figures for each row, once the server exists (as in arena train)
    log = MetricsLog(args.out / "metrics.jsonl", time.monotonic(), extra=lambda: scalars[0]() if scalars else {})
    # Terms-mode bots get the tank's shaping at any sizes, as they always have: the tank is serve's game.
    server = _make_server(args, obs_dim, act_dim, log, TANK_REWARD)
    scalars.append(ServerScalars(server))
    log.dashboard = server.dashboard
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tensorboard:
        _attach_tensorboard(log, args, "arena serve")
    logging.getLogger("server").setLevel(logging.INFO)
    logging.getLogger("server.dashboard.http").setLevel(logging.WARNING)  # not one line per page load

    async def run() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        async with server:
            shape = ""
            if args.agent == "ppo":
                cfg = server.trainer.agent.config
                shape = f", rollout {cfg.rollout_steps:,} steps in minibatches of {cfg.minibatch_size:,}"
            print(
                f"arena serve: {args.agent} listening on {server.url} (obs {obs_dim}, act {act_dim}{shape}); "
                f"health at {server.url.replace('ws', 'http', 1)}/healthz; Ctrl-C stops",
                flush=True,
            )
            _announce_dashboard(server, args.token)
            if args.resume:
                print(_resume_line("arena serve", server.trainer), flush=True)
            waiters = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(server.wait_failed())]
            watcher = asyncio.ensure_future(_say_when_caught_up(server))
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in [*waiters, watcher]:
                waiter.cancel()
            print("arena serve: stopping (bots get 1001, final checkpoint)…", flush=True)

    try:
        asyncio.run(run())
    except ListenError as exc:  # names the port: the bots' or the dashboard's
        print(f"arena serve: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if log.tensorboard is not None:
            log.tensorboard.close()
    if server.failed is not None:
        print(f"arena serve: error: the trainer failed beyond its restart quota: {server.failed!r}", file=sys.stderr)
        return 1
    return 0


async def _say_when_caught_up(server: Any, every: float = 0.5) -> None:
    """Print one line each time the bots have gone and the trainer has worked off what they sent.

    A bot faster than the trainer ends before its last steps are trained; this line tells the
    user when the run's numbers are final (``arena gym`` ends, then ``arena serve`` says so).
    """
    backlog = False
    while True:
        await asyncio.sleep(every)
        books = server.accounting()
        # Caught up: nothing queued and no update owed (a plain read of the agent's budget; a PPO
        # rollout short of full waits for more bots, it is not owed).
        if server.sessions or books["queued"] or server.trainer.agent.ready():
            backlog = backlog or bool(books["received"])
            continue
        if backlog:
            backlog = False
            pending = books["pending_in_agent"]
            held = f", {pending:,} held by the agent for its next update" if pending else ""
            print(
                f"arena serve: no bots connected and the trainer caught up: {books['received']:,} steps received, "
                f"{books['trained']:,} trained{held} (policy version {server.trainer.version})",
                flush=True,
            )


def _attach_tensorboard(log: MetricsLog, args: argparse.Namespace, command: str) -> None:
    """``--tensorboard``: every metrics row also as TensorBoard scalars; a missing package is one line, not an error."""
    from .tensorboard import ScalarLogger, TensorBoardUnavailable

    try:
        log.tensorboard = ScalarLogger(args.out / "tensorboard")
        log.tensorboard.add_config({k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()})
    except TensorBoardUnavailable as exc:
        print(f"{command}: {exc}", file=sys.stderr)


def _resume_line(command: str, trainer: Any) -> str:
    """What ``--resume`` resumed: the checkpoint, the new generation and the version it continues."""
    if trainer.resumed_from is None:
        return f"{command}: no valid checkpoint to resume from; starting fresh as generation {trainer.generation}"
    return (
        f"{command}: resumed from {trainer.resumed_from.name}: generation {trainer.generation}, version "
        f"{trainer.version}, {trainer.updates:,} updates and {trainer.steps_trained:,} steps trained before"
    )


# ── arena export ─────────────────────────────────────────────────────────────


def _export(args: argparse.Namespace) -> int:
    from .policies import export_weights

    if args.royale:
        from .royale.export import export_royale_bot

        weights = export_royale_bot(args.checkpoint, args.output)
        print(f"arena export: wrote the Tank Royale bot {args.output}/ (version {weights.generation}.{weights.version})")
        return 0
    if args.onnx:
        return _export_onnx(args)
    weights = export_weights(args.checkpoint, args.output)
    print(
        f"arena export: wrote {args.output} ({args.output.stat().st_size:,} bytes): {weights.arch.kind} "
        f"{'→'.join(map(str, weights.arch.layers))}, generation {weights.generation}, version {weights.version}"
    )
    return 0


def _export_onnx(args: argparse.Namespace) -> int:
    from .policies import load_weights
    from .tank.engine import ACT_DIM, OBS_DIM

    try:
        from .onnx_export import OPSET, export_onnx
    except ModuleNotFoundError as exc:  # onnx/onnxscript are the export extra
        raise ValueError(f"--onnx needs {exc.name}: pip install -e '.[export]'") from None
    weights = load_weights(args.checkpoint)
    layers = weights.arch.layers
    tank = layers[0] == OBS_DIM and layers[-1] == ACT_DIM
    game = (
        {
            "arena.game": "tank",
            "arena.action_low": "-1",
            "arena.action_high": "1",
            "arena.observation": f"the tank arena's {OBS_DIM} columns, docs/arena.md 'Observation'",
        }
        if tank
        else {}
    )
    export_onnx(weights, args.output, game)
    outputs = "mean, log_std" if weights.arch.kind == "gaussian_mlp" else "action"
    print(
        f"arena export: wrote {args.output} ({args.output.stat().st_size:,} bytes, ONNX opset {OPSET}): {weights.arch.kind} "
        f"{'→'.join(map(str, layers))}, input obs (batch, {layers[0]}), outputs {outputs}; "
        f"generation {weights.generation}, version {weights.version}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
