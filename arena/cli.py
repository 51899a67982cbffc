"""The ``arena`` command: ``arena train`` (server + trainer + built-in bots) and ``arena serve``.

This module is the one place that wires the server to the games: bots still reach
the server only through ``bot_protocol`` (real websocket clients on loopback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main"]

logger = logging.getLogger("arena")

GAMES = ("reach",)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one readable line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="arena",
        description="Train game bots with reinforcement learning over websockets.",
        epilog="Run 'arena COMMAND --help' for each command's options.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = commands.add_parser(
        "train",
        help="train a policy: server, trainer thread and built-in bots in one process",
        description=(
            "Start the training server and its trainer thread, connect built-in bots to it over "
            "websocket (loopback), and train until the time or step budget is spent. Writes "
            "metrics.jsonl, checkpoints/, summary.json and learning_curve.png to --out."
        ),
    )
    train.add_argument("--agent", choices=["ppo"], default="ppo", help="learning algorithm (default: ppo)")
    train.add_argument("--game", choices=GAMES, default="reach", help="built-in game the bots play (default: reach)")
    train.add_argument("--bots", type=_positive_int, default=2, help="bot connections, one thread each (default: 2)")
    train.add_argument("--agents-per-bot", type=_positive_int, default=8, help="games each bot plays at once (default: 8)")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=_positive_float, default=None, help="wall-clock budget (default: 1)")
    budget.add_argument("--steps", type=_positive_int, default=None, help="environment steps per bot connection")
    train.add_argument("--seed", type=int, default=0, help="seed for the bots' games and the agent")
    train.add_argument("--out", type=Path, default=Path("runs/latest"), help="output directory (default: runs/latest)")
    train.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    _add_server_flags(train, default_port=0)

    serve = commands.add_parser(
        "serve",
        help="run the server and trainer alone, for your own bots",
        description=(
            "Serve the websocket training endpoint for external bots (see docs/protocol.md). The run's "
            "observation and action sizes are fixed by --obs-dim and --act-dim; bots declaring other sizes "
            "are refused. Stop with Ctrl-C or SIGTERM: bots get close code 1001 and a final checkpoint is written."
        ),
    )
    serve.add_argument("--agent", choices=["ppo"], default="ppo", help="learning algorithm (default: ppo)")
    serve.add_argument("--obs-dim", type=_positive_int, required=True, help="observation size every bot must declare")
    serve.add_argument("--act-dim", type=_positive_int, required=True, help="action size every bot must declare")
    serve.add_argument("--out", type=Path, default=Path("runs/serve"), help="checkpoints and metrics (default: runs/serve)")
    serve.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    serve.add_argument("--seed", type=int, default=0, help="seed for the agent")
    _add_server_flags(serve, default_port=8765)
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "train":
            return _train(args)
        return _serve(args)
    except (ValueError, FileNotFoundError, PermissionError) as exc:
        print(f"arena {args.command}: error: {exc}", file=sys.stderr)
        return 2


# ── arena train ──────────────────────────────────────────────────────────────


class _MetricsLog:
    """Appends one JSON line per update to ``metrics.jsonl`` (trainer thread)."""

    def __init__(self, path: Path, started: float) -> None:
        self.path = path
        self.started = started
        self.lock = threading.Lock()
        self.rows: list[dict[str, float]] = []

    def __call__(self, stats: dict[str, float]) -> None:
        row = {"wall_seconds": round(time.monotonic() - self.started, 3), **stats}
        with self.lock:
            self.rows.append(row)
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")


def _train(args: argparse.Namespace) -> int:
    from agents import make_agent
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    from .reach import ACT_DIM, OBS_DIM, play_reach

    if args.resume and not (args.out / "checkpoints").is_dir():
        raise FileNotFoundError(f"--resume: no checkpoints in {args.out / 'checkpoints'}")
    args.out.mkdir(parents=True, exist_ok=True)
    minutes = args.minutes if args.minutes is not None or args.steps is not None else 1.0
    started = time.monotonic()
    log = _MetricsLog(args.out / "metrics.jsonl", started)
    agent = make_agent(args.agent, OBS_DIM, ACT_DIM, seed=args.seed)
    server = TrainingServer(
        agent,
        ServerConfig(host=args.host, port=args.port, token=args.token),
        TrainerConfig(
            checkpoint_dir=args.out / "checkpoints", checkpoint_interval=args.checkpoint_interval, resume=args.resume
        ),
        update_hook=log,
    )
    deadline = started + minutes * 60 if minutes is not None else None
    stop = threading.Event()
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run_bot(i: int) -> None:
        try:
            steps = args.steps if args.steps is not None else 10**12
            results[i] = play_reach(
                running.url,
                n_agents=args.agents_per_bot,
                steps=steps,
                token=args.token,
                seed=args.seed * 1000 + i,
                name=f"{args.game}{i}",
                stop=stop,
            )
        except BaseException as exc:  # reported once below; the other bots keep going
            errors.append(exc)

    print(
        f"arena train: {args.agent} on '{args.game}', {args.bots} bot(s) x {args.agents_per_bot} games, output in {args.out}"
    )
    running = ServerThread(server).start()
    interrupted = False
    try:
        bots = [threading.Thread(target=run_bot, args=(i,), name=f"bot-{i}", daemon=True) for i in range(args.bots)]
        for bot in bots:
            bot.start()
        with _Progress(server, started) as progress:
            while any(b.is_alive() for b in bots):
                if deadline is not None and time.monotonic() >= deadline:
                    stop.set()
                progress.update()
                time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        print("\narena train: interrupted; stopping bots and writing a final checkpoint…", file=sys.stderr)
    finally:
        stop.set()
        running.stop()  # bots get 1001, the trainer joins, the final checkpoint is written
    if errors:
        print(f"arena train: a bot failed: {errors[0]!r}", file=sys.stderr)
    summary = _summarize(args, server, results, time.monotonic() - started, log)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    curve = _plot_curve(log.rows, args.out / "learning_curve.png")
    print(json.dumps(summary))
    print(
        f"arena train: wrote {args.out / 'summary.json'}, {args.out / 'metrics.jsonl'}, {args.out / 'checkpoints'}/"
        + (f", {curve}" if curve else "")
    )
    return 130 if interrupted else (1 if errors else 0)


def _summarize(
    args: argparse.Namespace, server: Any, results: dict[int, Any], wall: float, log: _MetricsLog
) -> dict[str, Any]:
    returns = [r for game, _ in results.values() for r in game.finished]
    trainer = server.trainer
    return {
        "agent": args.agent,
        "game": args.game,
        "generation": trainer.generation,
        "policy_version": trainer.version,
        "updates": trainer.updates,
        "episodes": len(returns),
        "transitions": int(server.metrics.counter("transitions_received")),
        "transitions_trained": int(server.metrics.counter("transitions_trained")),
        "wall_seconds": round(wall, 1),
        "mean_return_first_100": round(float(sum(returns[:100]) / max(len(returns[:100]), 1)), 3),
        "mean_return_last_100": round(float(sum(returns[-100:]) / max(len(returns[-100:]), 1)), 3),
    }


def _plot_curve(rows: list[dict[str, float]], path: Path) -> Path | None:
    points = [(r["wall_seconds"], r["rollout/ep_rew_mean"]) for r in rows if "rollout/ep_rew_mean" in r]
    if not points:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("arena train: matplotlib not installed (pip install 'arena-trainer[plot]'); no learning curve", file=sys.stderr)
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([p[0] / 60 for p in points], [p[1] for p in points])
    ax.set_xlabel("minutes")
    ax.set_ylabel("mean episode return (last 100)")
    ax.set_title("learning curve")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


class _Progress:
    """A live rich table on a terminal; a plain line every 10 s otherwise (CI logs)."""

    def __init__(self, server: Any, started: float) -> None:
        self.server = server
        self.started = started
        self.live: Any = None
        self._last_plain = 0.0
        self._last = (started, 0.0)

    def __enter__(self) -> _Progress:
        if sys.stdout.isatty():
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)

    def _figures(self) -> dict[str, str]:
        server, trainer = self.server, self.server.trainer
        now = time.monotonic()
        received = server.metrics.counter("transitions_received")
        then, before = self._last
        rate = (received - before) / max(now - then, 1e-6)
        self._last = (now, received)
        m = trainer.last_metrics
        lag = server.lag.percentiles()
        return {
            "elapsed": f"{now - self.started:.0f} s",
            "policy version": str(trainer.version),
            "updates": str(trainer.updates),
            "bots connected": str(len(server.sessions)),
            "transitions": f"{int(received):,}",
            "transitions/s": f"{rate:,.0f}",
            "episodes": str(int(server.metrics.counter("episodes"))),
            "mean return (last 100)": f"{m.get('rollout/ep_rew_mean', float('nan')):.2f}",
            "policy loss": f"{m.get('train/policy_loss', float('nan')):.4f}",
            "value loss": f"{m.get('train/value_loss', float('nan')):.4f}",
            "approx KL": f"{m.get('train/approx_kl', float('nan')):.4f}",
            "loop lag p99": f"{lag['p99'] * 1000:.1f} ms",
        }

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title="arena train", show_header=False)
        for key, value in self._figures().items():
            table.add_row(key, value)
        return table

    def update(self) -> None:
        if self.live is not None:
            self.live.update(self._table())
        elif time.monotonic() - self._last_plain >= 10:
            self._last_plain = time.monotonic()
            figures = self._figures()
            print("  ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


# ── arena serve ──────────────────────────────────────────────────────────────


def _serve(args: argparse.Namespace) -> int:
    from agents import make_agent
    from server import ServerConfig, TrainerConfig, TrainingServer

    if args.resume and not (args.out / "checkpoints").is_dir():
        raise FileNotFoundError(f"--resume: no checkpoints in {args.out / 'checkpoints'}")
    config = ServerConfig(host=args.host, port=args.port, token=args.token)  # validates host/token first
    args.out.mkdir(parents=True, exist_ok=True)
    log = _MetricsLog(args.out / "metrics.jsonl", time.monotonic())
    server = TrainingServer(
        make_agent(args.agent, args.obs_dim, args.act_dim, seed=args.seed),
        config,
        TrainerConfig(
            checkpoint_dir=args.out / "checkpoints", checkpoint_interval=args.checkpoint_interval, resume=args.resume
        ),
        update_hook=log,
    )
    logging.getLogger("server").setLevel(logging.INFO)

    async def run() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        async with server:
            print(
                f"arena serve: {args.agent} listening on {server.url} (obs {args.obs_dim}, act {args.act_dim}); "
                f"health at {server.url.replace('ws', 'http', 1)}/healthz; Ctrl-C stops",
                flush=True,
            )
            await stopping.wait()
            print("arena serve: stopping (bots get 1001, final checkpoint)…", flush=True)

    try:
        asyncio.run(run())
    except OSError as exc:
        print(f"arena serve: error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
