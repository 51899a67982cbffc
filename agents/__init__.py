"""Learning algorithms, pure torch + numpy: no websockets, no server.

``make_agent(name, obs_dim, act_dim, **overrides)`` builds an agent behind the
:class:`agents.base.Agent` interface the trainer thread drives.
"""

from __future__ import annotations

from typing import Any

from .base import Agent
from .checkpoint import CheckpointInvalid, CheckpointStore
from .common import (
    Segment,
    SegmentEnd,
    TermsReward,
    compute_gae,
    normalize_advantages,
    segment_return,
    segment_rewards,
)
from .ppo import PPOAgent, PPOConfig
from .replay import ReplayBuffer
from .td3 import TD3Agent, TD3Config, ddpg_config

__all__ = [
    "AGENTS",
    "Agent",
    "CheckpointInvalid",
    "CheckpointStore",
    "PPOAgent",
    "PPOConfig",
    "ReplayBuffer",
    "Segment",
    "SegmentEnd",
    "TD3Agent",
    "TD3Config",
    "TermsReward",
    "agent_from_checkpoint",
    "compute_gae",
    "ddpg_config",
    "make_agent",
    "normalize_advantages",
    "segment_return",
    "segment_rewards",
]

AGENTS = ("ppo", "ddpg", "td3")
"""Algorithm names accepted by :func:`make_agent`."""


def make_agent(name: str, obs_dim: int, act_dim: int, **overrides: Any) -> Agent:
    """Build an agent by name; ``overrides`` are fields of its config dataclass.

    Raises:
        ValueError: unknown name or an invalid config value.
    """
    if name == "ppo":
        return PPOAgent(PPOConfig(obs_dim=obs_dim, act_dim=act_dim, **overrides))
    if name == "td3":
        return TD3Agent(TD3Config(obs_dim=obs_dim, act_dim=act_dim, **overrides))
    if name == "ddpg":
        return TD3Agent(ddpg_config(obs_dim, act_dim, **overrides))
    raise ValueError(f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}")


def agent_from_checkpoint(state: dict[str, Any]) -> Agent:
    """Rebuild the agent a checkpoint's ``agent`` entry describes, with its weights loaded.

    Raises:
        ValueError: an unknown algorithm or a config this version cannot build.
    """
    algo = state.get("algo")
    config = dict(state.get("config", {}))
    if "hidden" in config:
        config["hidden"] = tuple(config["hidden"])
    agent: Agent
    if algo == "ppo":
        agent = PPOAgent(PPOConfig(**config))
    elif algo in ("td3", "ddpg"):
        agent = TD3Agent(TD3Config(**config))
    else:
        raise ValueError(f"checkpoint holds an unknown agent {algo!r}")
    agent.load_state_dict(state)
    return agent
