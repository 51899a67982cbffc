"""The server ``arena train`` and ``arena serve`` start, planned once from their flags.

Why a plan: the flags used to travel as ``args`` through six modules, with new attributes written
onto it on the way (the tank's agent count, whether it trains against the league) and read back
with ``getattr``. :meth:`ServerPlan.from_flags` reads the parsed flags once, checks every value
before anything starts (a bad one is one line and exit 2), and :func:`make_server` builds the
server from the plan alone.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..defaults import TANK_SEGMENT_STEPS, tank_ppo_options
from .options import CHECKPOINT_INTERVAL, REPLAY_CHECKPOINT_INTERVAL, parse_agent_options

if TYPE_CHECKING:  # the server is imported on use: it stays out of the CLI's start-up
    from server import DashboardConfig, ServerConfig, TrainerConfig
    from server.rewards import RewardFunction

__all__ = ["ServerPlan", "TankShape", "make_server"]


@dataclass(frozen=True)
class TankShape:
    """What sizes PPO for the tank arena: ``agents`` (matches x bots) set the rollout; ``league`` the entropy bonus."""

    agents: int
    league: bool = False


@dataclass(frozen=True)
class ServerPlan:
    """Agent, wire limits, trainer and dashboard of one server, every value checked."""

    agent: str
    obs_dim: int
    act_dim: int
    agent_options: Mapping[str, Any]
    server: ServerConfig
    trainer: TrainerConfig
    dashboard: DashboardConfig | None
    reward: RewardFunction | None
    """The game's reward function for terms-mode bots (the tank's), or None: bots send scalar rewards."""
    out: Path

    @classmethod
    def from_flags(
        cls,
        flags: argparse.Namespace,
        sizes: tuple[int, int],
        reward: RewardFunction | None,
        tank: TankShape | None = None,
        writes: bool = True,
    ) -> ServerPlan:
        """The plan of ``flags`` (read, never written) for bots of ``sizes`` (obs, act).

        ``tank`` sizes the tank's PPO defaults; ``writes``: this process keeps the checkpoints
        (a learner rank other than 0 of ``serve --distributed`` does not).

        Raises:
            ValueError, FileNotFoundError: a flag's value cannot be used (one line for the user).
        """
        from server import TrainerConfig

        if flags.resume and not (flags.out / "checkpoints").is_dir():
            raise FileNotFoundError(f"--resume: no checkpoints in {flags.out / 'checkpoints'}")
        interval = flags.checkpoint_interval or (
            REPLAY_CHECKPOINT_INTERVAL if getattr(flags, "save_replay", False) else CHECKPOINT_INTERVAL
        )
        return cls(
            agent=flags.agent,
            obs_dim=sizes[0],
            act_dim=sizes[1],
            agent_options=_agent_options(flags, tank),
            server=_server_config(flags, flags.agent == "ppo" and tank is not None),
            trainer=TrainerConfig(
                checkpoint_dir=flags.out / "checkpoints" if writes else None,
                checkpoint_interval=interval,
                resume=flags.resume and writes,
                torch_threads=flags.torch_threads,
            ),
            dashboard=_dashboard_config(flags),
            reward=reward,
            out=flags.out,
        )


def make_server(plan: ServerPlan, log: Callable[[dict[str, float]], None], group: Any = None) -> Any:
    """The ``TrainingServer`` of ``plan``; ``log`` gets every update's metrics, ``group`` is ``serve --distributed``'s."""
    from agents import make_agent
    from server import TrainingServer

    return TrainingServer(
        make_agent(plan.agent, plan.obs_dim, plan.act_dim, **plan.agent_options),
        plan.server,
        plan.trainer,
        update_hook=log,
        dashboard=plan.dashboard,
        reward=plan.reward,
        group=group,
    )


def _agent_options(flags: argparse.Namespace, tank: TankShape | None) -> dict[str, Any]:
    """Config overrides for ``make_agent`` from the command line (checked before anything starts)."""
    import torch

    device = str(flags.device)
    try:
        kind = torch.device(device).type
    except RuntimeError as exc:
        raise ValueError(f"--device {device!r}: {exc}") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this torch build sees no CUDA device")
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"--device {device}: only cpu and cuda are supported")
    options: dict[str, Any] = {"seed": flags.seed, "device": device}
    if flags.agent == "ppo" and tank is not None:
        options.update(tank_ppo_options(tank.agents, league=tank.league))
    options.update(parse_agent_options(flags.agent, flags.agent_option))
    if flags.agent in ("ddpg", "td3"):
        options["save_replay"] = bool(flags.save_replay)
    elif flags.save_replay:
        raise ValueError("--save-replay applies to ddpg and td3 only (ppo keeps no replay buffer)")
    return options


def _dashboard_config(flags: argparse.Namespace) -> DashboardConfig | None:
    from server import DashboardConfig

    if flags.dashboard_port == -1:
        return None
    if not -1 <= flags.dashboard_port <= 65535:
        raise ValueError(f"--dashboard-port must be -1 (off), 0 (any free) or a TCP port, got {flags.dashboard_port}")
    return DashboardConfig(host=flags.dashboard_host or flags.host, port=flags.dashboard_port, token=flags.token)


def _server_config(flags: argparse.Namespace, tank_ppo: bool) -> ServerConfig:
    """The wire's limits; ``tank_ppo``: the tank's PPO, whose segments default to ``TANK_SEGMENT_STEPS``."""
    from server import ServerConfig
    from server.config import is_loopback

    cert, key = getattr(flags, "tls_cert", None), getattr(flags, "tls_key", None)
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"{flag} {path}: no such file")
    extra: dict[str, Any] = {"credit_window": flags.credit_window} if flags.credit_window else {}
    if flags.queue_steps:
        extra["queue_max_steps"] = flags.queue_steps
    if flags.segment_steps:
        extra["segment_steps"] = flags.segment_steps
    elif tank_ppo:
        extra["segment_steps"] = TANK_SEGMENT_STEPS
    config = ServerConfig(
        host=flags.host,
        port=flags.port,
        token=flags.token,
        tls_cert=str(cert) if cert else None,
        tls_key=str(key) if key else None,
        **extra,
    )  # validated first: a refused config is one line, with no warning before it
    if cert is None and not is_loopback(flags.host):
        logging.getLogger("arena").warning(
            "serving on %s without TLS: put a TLS-terminating proxy in front, or use --tls-cert", flags.host
        )
    return config
