"""``arena serve``: the server and trainer alone, for your own bots."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..defaults import (
    DISTRIBUTED_TIMEOUT,
    STEPS_PER_AGENT,
    TANK_MATCHES,
)
from ..outputs.run_log import MetricsLog
from .announce import announce_dashboard, attach_tensorboard, resume_line
from .options import add_agent_flags, add_server_flags, positive_float, positive_int
from .server_plan import ServerPlan, TankShape, make_server


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena serve`` to the subcommands of ``arena``."""
    serve = commands.add_parser(
        "serve",
        help="run the server and trainer alone, for your own bots",
        description=(
            "Serve the websocket training endpoint for external bots (see docs/protocol.md). The run's "
            "observation and action sizes default to the tank arena's; bots declaring other sizes are "
            "refused. Stop with Ctrl-C or SIGTERM: bots get close code 1001 and a final checkpoint is written."
        ),
    )
    add_agent_flags(serve)
    serve.add_argument(
        "--obs-dim", type=positive_int, default=None, help="observation size bots must declare (default: tank's)"
    )
    serve.add_argument("--act-dim", type=positive_int, default=None, help="action size bots must declare (default: tank's)")
    serve.add_argument(
        "--agents",
        type=positive_int,
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
    add_server_flags(serve, default_port=8765)
    serve.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain: serve wss:// (needs --tls-key)")
    serve.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    serve.add_argument(
        "--distributed",
        action="store_true",
        help="be one learner rank of several, started by torchrun (ppo): each rank serves its own bots on --port + its "
        "local rank and all ranks train one policy, gradients averaged; rank 0 writes --out. See docs/deploy.md",
    )
    serve.add_argument(
        "--collective-timeout",
        type=positive_float,
        default=DISTRIBUTED_TIMEOUT,
        metavar="S",
        help=f"--distributed: seconds a rank waits for the others before it gives up (default: {DISTRIBUTED_TIMEOUT:g})",
    )


def run(args: argparse.Namespace) -> int:
    """``arena serve``: the server and trainer alone, until SIGINT or SIGTERM; the exit code."""
    from server import ListenError

    group, flags = None, args
    if args.distributed:
        joined = _join_learner_group(args)
        if joined is None:
            return 2
        group, flags = joined
    started = _start(flags, group)
    if started is None:
        return 1
    server, log, sizes = started
    try:
        asyncio.run(_serve_until_stopped(server, flags, group, sizes))
    except ListenError as exc:  # names the port: the bots' or the dashboard's
        print(f"arena serve: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if log.tensorboard is not None:
            log.tensorboard.close()
    if group is not None:
        return _leave_learner_group(group, server.failed)
    if server.failed is not None:
        print(f"arena serve: error: the trainer failed beyond its restart quota: {server.failed!r}", file=sys.stderr)
        return 1
    return 0


def _start(flags: argparse.Namespace, group: Any) -> tuple[Any, MetricsLog, tuple[int, int]] | None:
    """The run's server (not yet serving), its metrics log and the (obs, act) sizes bots must declare.

    None after a one-line error: another learner rank went away before this one had its starting state.
    """
    from server.distributed import RankLost

    from ..games.tank.actions import ACT_DIM
    from ..games.tank.observation import OBS_DIM
    from ..games.tank.rewards import TANK_REWARD
    from ..outputs.tensorboard import ServerScalars

    obs_dim, act_dim = flags.obs_dim or OBS_DIM, flags.act_dim or ACT_DIM
    tank = TankShape(flags.agents) if (obs_dim, act_dim) == (OBS_DIM, ACT_DIM) else None  # the tank's PPO defaults
    writes = group is None or group.is_leader  # rank 0 alone writes --out
    # Terms-mode bots get the tank's shaping at any sizes, as they always have: the tank is serve's game.
    plan = ServerPlan.from_flags(flags, (obs_dim, act_dim), TANK_REWARD, tank, writes)
    if flags.agent == "ppo":
        # PPO's numba kernels now, before any bot: left to the first update, numba's import and load (or compile)
        # would run in the trainer thread, holding the GIL the event loop needs for seconds.
        from .compile import compile_kernels

        compiled = compile_kernels(ppo=True, tank=False)
        if compiled is not None:  # stderr: stdout's first line stays the address scripts read
            print(f"arena serve: {compiled[0]}", file=sys.stderr, flush=True)
    scalars: list[Any] = []  # the server's figures for each row, once the server exists (as in arena train)
    log = MetricsLog(
        flags.out / "metrics.jsonl" if writes else None, time.monotonic(), extra=lambda: scalars[0]() if scalars else {}
    )
    try:
        server = make_server(plan, log, group)
    except RankLost as exc:  # another rank went away before this one had its starting state
        print(f"arena serve: error: {exc}", file=sys.stderr)
        return None
    scalars.append(ServerScalars(server))
    log.dashboard = server.dashboard
    if writes:
        flags.out.mkdir(parents=True, exist_ok=True)
    if flags.tensorboard:
        attach_tensorboard(log, flags.out, vars(flags), "arena serve")
    logging.getLogger("server").setLevel(logging.INFO)
    logging.getLogger("server.dashboard.http").setLevel(logging.WARNING)  # not one line per page load
    return server, log, (obs_dim, act_dim)


async def _serve_until_stopped(server: Any, flags: argparse.Namespace, group: Any, sizes: tuple[int, int]) -> None:
    """Serve bots until SIGINT, SIGTERM or a trainer failure beyond its quota; leaving ``server`` closes it."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    async with server:
        shape = ""
        if flags.agent == "ppo":
            cfg = server.trainer.agent.config
            shape = f", rollout {cfg.rollout_steps:,} steps in minibatches of {cfg.minibatch_size:,}"
        rank = f"rank {group.rank} of {group.world_size}: " if group is not None else ""
        obs_dim, act_dim = sizes
        print(
            f"arena serve: {rank}{flags.agent} listening on {server.url} (obs {obs_dim}, act {act_dim}{shape}); "
            f"health at {server.url.replace('ws', 'http', 1)}/healthz; Ctrl-C stops",
            flush=True,
        )
        announce_dashboard(server, flags.token)
        if flags.resume:
            print(resume_line("arena serve", server.trainer), flush=True)
        waiters = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(server.wait_failed())]
        watcher = asyncio.ensure_future(_say_when_caught_up(server))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in [*waiters, watcher]:
            waiter.cancel()
        print("arena serve: stopping (bots get 1001, final checkpoint)…", flush=True)


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


def _join_learner_group(args: argparse.Namespace) -> tuple[Any, argparse.Namespace] | None:
    """This process's learner rank (``--distributed``) and its flags (port, outputs and resume set per rank);
    None after a one-line error (not under torchrun, not ppo, no rendezvous). ``args`` is left as parsed."""
    from server.distributed import DistributedConfig, LearnerGroup

    if args.agent != "ppo":
        print(f"arena serve: error: --distributed trains ppo (every rank runs updates of one size); not {args.agent}",
              file=sys.stderr)  # fmt: skip
        return None
    cuda = str(args.device).startswith("cuda")
    rank: dict[str, Any] = {}
    try:
        config = DistributedConfig.from_environment(timeout=args.collective_timeout, backend="nccl" if cuda else "gloo")
        if cuda:
            rank["device"] = f"cuda:{config.local_rank}"  # one GPU per rank on a host
        group = LearnerGroup(config)
    except (ValueError, RuntimeError) as exc:
        print(f"arena serve: error: {exc}", file=sys.stderr)
        return None
    if args.port:
        rank["port"] = args.port + config.local_rank  # one bot port per rank on a host
    if not group.is_leader:
        rank.update(dashboard_port=-1, tensorboard=False)  # rank 0 shows and writes the run
        rank["resume"] = False  # rank 0's checkpoints reach it through the group, not the disk (another host's)
    elif config.restart and (args.out / "checkpoints").is_dir():
        rank["resume"] = True  # torchrun restarted the group: carry on from rank 0's newest checkpoint
    return group, argparse.Namespace(**{**vars(args), **rank})


def _leave_learner_group(group: Any, failed: BaseException | None) -> int:
    """Exit code of a learner rank: 0 when stopped, 1 (one line) when the group or the trainer failed.

    A failed rank leaves without tearing the process group down: the others are gone or stuck,
    and torchrun, seeing the exit, stops them and restarts the group if its policy allows.
    """
    if failed is None:
        group.close()
        return 0
    print(f"arena serve: error: {failed}", file=sys.stderr, flush=True)
    return 1
