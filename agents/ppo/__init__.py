"""PPO: the agent, its config, and the minibatch step each device runs."""

from __future__ import annotations

from .agent import PPOAgent
from .config import PPOConfig

__all__ = ["PPOAgent", "PPOConfig"]
