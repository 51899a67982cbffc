"""A PPO rollout packed as one matrix, and a minibatch's columns of it.

Why one matrix: a minibatch is then one row gather (``index_select``) instead of one per column,
and a CUDA graph gathers it into one static input.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["Minibatch", "pack", "packed_width"]


class Minibatch(NamedTuple):
    """One minibatch: observations, actions, old log-probs, advantages and returns (row-aligned)."""

    obs: Tensor
    actions: Tensor
    old_logp: Tensor
    adv: Tensor
    ret: Tensor

    @classmethod
    def of(cls, rows: Tensor, obs_dim: int, act_dim: int) -> Minibatch:
        """The columns of packed rollout ``rows`` (see :func:`pack`), as views."""
        o, a = obs_dim, act_dim
        return cls(rows[:, :o], rows[:, o : o + a], rows[:, o + a], rows[:, o + a + 1], rows[:, o + a + 2])


def pack(obs: Tensor, actions: Tensor, old_logp: Tensor, adv: Tensor, ret: Tensor) -> Tensor:
    """The rollout as one matrix, a row per step: ``obs | actions | old_logp | adv | ret``."""
    return torch.cat([obs, actions, old_logp[:, None], adv[:, None], ret[:, None]], dim=1)


def packed_width(obs_dim: int, act_dim: int) -> int:
    """The width of a :func:`pack` matrix."""
    return obs_dim + act_dim + 3
