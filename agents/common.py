"""What every agent shares: the segment type that crosses threads, rewards, GAE, advantage guards.

A :class:`Segment` is one agent's consecutive steps from one bot, held in plain numpy
arrays. Segments are built from the bots' batches and consumed by the agent; they never
hold tensors (a tensor freed on another thread than its owner's can take that thread down;
plain arrays are safe to hand over).

A terms-mode segment carries the run's :class:`TermsReward`, the game's reward function
that turns its raw terms into rewards: the learning code applies it and never knows the
game (this package imports none; the tank's is ``arena.games.tank.rewards.TANK_REWARD``).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Segment",
    "SegmentEnd",
    "TermsReward",
    "compute_gae",
    "compute_gae_flat",
    "normalize_advantages",
    "segment_return",
    "segment_rewards",
]


class TermsReward(Protocol):
    """A game's reward function for raw reward terms: what a terms-mode segment's rewards are.

    Defined by the game (the tank's is ``arena.games.tank.rewards.TANK_REWARD``) and handed in by
    whoever makes segments (the server's assembler, from the function it was started with),
    so the shaping is game knowledge the learners only call. The server's
    ``server.RewardFunction`` is this plus what the wire and the assembler need.
    """

    def tick_reward(self, terms: NDArray[np.float32]) -> NDArray[np.float32]:
        """Per-row rewards of a (n, n_terms) float32 block of raw terms: (n,) float32."""
        ...

    def round_reward(self, score: NDArray[np.float32] | float) -> NDArray[np.float32]:
        """The round-end bonus of a score (or of each of an array of scores), as float32."""
        ...


class SegmentEnd(enum.Enum):
    """How a segment's last step ends, which decides its bootstrap value."""

    TERMINAL = "terminal"
    """A natural end (death, win): nothing follows, the bootstrap value is 0."""
    TRUNCATED = "truncated"
    """A time limit: the episode had a future, bootstrapped from ``next_obs``."""
    CUT = "cut"
    """Mid-episode: a length cut or a disconnect; bootstrapped from ``next_obs`` like a truncation."""


@dataclass(frozen=True, eq=False)
class Segment:
    """Consecutive steps of one agent of one bot, acted by one policy generation.

    Exactly one of ``reward`` (scalar mode) or ``terms`` (terms mode) is set. ``score``
    is the round score when a terms-mode episode ended at the last step.
    """

    bot: str
    agent: int
    obs: NDArray[np.float32]  # (T, obs_dim)
    act: NDArray[np.float32]  # (T, act_dim)
    logp: NDArray[np.float32]  # (T,)
    end: SegmentEnd
    next_obs: NDArray[np.float32] | None  # (obs_dim,) unless end is TERMINAL
    generation: int
    version: int
    """Oldest policy version that acted in this segment (its lag is measured from it)."""
    reward: NDArray[np.float32] | None = None  # (T,)
    terms: NDArray[np.float32] | None = None  # (T, n_terms)
    score: float | None = None
    reward_sum: float | None = None
    """``segment_rewards(self).sum()`` (in float64), when whoever made the segment had it cheaply:
    the server's assembler sums a whole drain's rewards at once for the trainer's episode returns,
    where a numpy reduction per segment (a dozen in terms mode) cost more than the rest of the
    segment's bookkeeping. ``None``: compute it (:func:`segment_return`)."""
    reward_fn: TermsReward | None = None
    """Terms mode: the run's reward function, which :func:`segment_rewards` applies to ``terms`` and
    ``score`` (the segment carries it because the learner must not know the game). None in scalar mode."""
    state: NDArray[np.float32] | None = None
    """(T, state_size): a recurrent policy's state before each step, as the bot acted from it; None: memoryless."""
    next_state: NDArray[np.float32] | None = None
    """(state_size,): the state after the last step, where known (a split's head: the tail's first state);
    None with ``state``: the learner steps its own core from the last row to bootstrap."""

    def __post_init__(self) -> None:
        assert (self.reward is None) != (self.terms is None), "a segment has either rewards or reward terms"
        assert self.terms is None or self.reward_fn is not None, "a terms-mode segment needs its reward function"
        assert (self.end is SegmentEnd.TERMINAL) == (self.next_obs is None), "only a terminal segment lacks next_obs"
        assert len(self.obs) == len(self.act) == len(self.logp) > 0, "columns of one segment differ in length"

    @classmethod
    def trusted(cls, **values: Any) -> Segment:
        """A segment from values already known to hold the invariants; every field must be given.

        The trainer's assembler makes one per closed segment (hundreds per drain) from batches
        the decoder checked, on the thread that shares the GIL with the event loop. A frozen
        dataclass sets each of its fields through ``object.__setattr__`` and then runs
        :meth:`__post_init__`, a third more per segment than filling the instance directly.
        """
        assert values.keys() == _SEGMENT_FIELDS, "Segment.trusted needs every field"
        segment = object.__new__(cls)
        segment.__dict__.update(values)
        return segment

    @property
    def steps(self) -> int:
        return len(self.obs)

    @property
    def nbytes(self) -> int:
        arrays = (self.obs, self.act, self.logp, self.next_obs, self.reward, self.terms, self.state, self.next_state)
        return sum(a.nbytes for a in arrays if a is not None)

    def split(self, steps: int) -> tuple[Segment, Segment]:
        """The first ``steps`` steps as a cut (bootstrapped from the next step's observation), and the rest.

        An on-policy update takes exactly its rollout: taken whole, the segment that crosses the
        rollout's end would add a small extra minibatch per epoch, a full step's overhead for a
        gradient of mostly noise (docs/agents.md, "The update's cost on the CPU").
        """
        if not 0 < steps < self.steps:
            raise ValueError(f"split point must be inside the segment (1..{self.steps - 1}), got {steps}")
        head = dataclasses.replace(
            self, obs=self.obs[:steps], act=self.act[:steps], logp=self.logp[:steps], end=SegmentEnd.CUT,
            next_obs=self.obs[steps], reward=None if self.reward is None else self.reward[:steps],
            terms=None if self.terms is None else self.terms[:steps], score=None, reward_sum=None,
            state=None if self.state is None else self.state[:steps],
            next_state=None if self.state is None else self.state[steps],
        )  # fmt: skip
        tail = dataclasses.replace(
            self, obs=self.obs[steps:], act=self.act[steps:], logp=self.logp[steps:],
            reward=None if self.reward is None else self.reward[steps:],
            terms=None if self.terms is None else self.terms[steps:], reward_sum=None,
            state=None if self.state is None else self.state[steps:],
        )  # fmt: skip
        return head, tail


_SEGMENT_FIELDS = frozenset(f.name for f in fields(Segment))


def segment_rewards(segment: Segment) -> NDArray[np.float32]:
    """Per-step rewards: the bot's scalars, or the reward function's tick rewards plus its round reward at the end."""
    if segment.reward is not None:
        return segment.reward.astype(np.float32, copy=True)
    assert segment.terms is not None and segment.reward_fn is not None
    rewards = segment.reward_fn.tick_reward(segment.terms)
    if segment.score is not None:
        rewards[-1] += segment.reward_fn.round_reward(segment.score)
    return rewards


def segment_return(segment: Segment) -> float:
    """The sum of the segment's per-step rewards (as :func:`segment_rewards` defines them)."""
    if segment.reward_sum is not None:
        return segment.reward_sum
    rewards = segment.reward if segment.reward is not None else segment_rewards(segment)
    return float(rewards.sum(dtype=np.float64))


def compute_gae(
    rewards: list[NDArray[np.float32]],
    values: list[NDArray[np.float32]],
    last_values: NDArray[np.float32],
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Generalized Advantage Estimation per segment, never across segments.

    Paper: https://arxiv.org/abs/1506.02438.

    Args:
        rewards, values: one array per segment, same lengths.
        last_values: per segment, the value after its last step: 0 after a natural end,
            V(next_obs) after a truncation or cut.

    Returns:
        (advantages, returns) concatenated in segment order; returns = advantages + values.
    """
    lengths = np.array([len(r) for r in rewards], dtype=np.int64)
    flat_rewards = np.concatenate(rewards).astype(np.float32, copy=False) if rewards else np.zeros(0, np.float32)
    flat_values = np.concatenate(values).astype(np.float32, copy=False) if values else np.zeros(0, np.float32)
    return compute_gae_flat(flat_rewards, flat_values, lengths, last_values, gamma, lam)


def compute_gae_flat(
    rewards: NDArray[np.float32],
    values: NDArray[np.float32],
    lengths: NDArray[np.int64],
    last_values: NDArray[np.float32],
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """:func:`compute_gae` of segments laid end to end: ``lengths[i]`` steps each, ``sum(lengths)`` in all.

    One compiled backward sweep (numba, compiled on first use and cached on disk), much cheaper
    than a numpy sweep vectorized across segments (docs/agents.md, "The update's cost on the
    CPU"). Float32 arithmetic throughout.
    """
    if len(rewards) != len(values) or int(lengths.sum()) != len(rewards) or len(last_values) != len(lengths):
        raise ValueError(
            f"GAE: {len(rewards)} rewards, {len(values)} values and segment lengths summing to "
            f"{int(lengths.sum())} must agree, with one last value per segment ({len(last_values)} for {len(lengths)})"
        )
    global _gae
    if _gae is None:
        from numba import njit  # here, not at import: a process that never trains never loads numba

        _gae = njit(cache=True, nogil=True)(_gae_sweep)
    rewards, values = np.asarray(rewards, np.float32), np.asarray(values, np.float32)
    advantages = np.empty(len(rewards), np.float32)
    returns = np.empty(len(rewards), np.float32)
    last = np.asarray(last_values, dtype=np.float32)
    _gae(rewards, values, lengths, last, np.float32(gamma), np.float32(gamma * lam), advantages, returns)
    return advantages, returns


def _gae_sweep(
    rewards: NDArray[np.float32],
    values: NDArray[np.float32],
    lengths: NDArray[np.int64],
    last_values: NDArray[np.float32],
    gamma: np.float32,
    decay: np.float32,
    advantages: NDArray[np.float32],
    returns: NDArray[np.float32],
) -> None:
    stop = 0
    for segment in range(lengths.shape[0]):
        stop += lengths[segment]
    for segment in range(lengths.shape[0] - 1, -1, -1):
        start = stop - lengths[segment]
        next_value = last_values[segment]
        acc = np.float32(0.0)
        for t in range(stop - 1, start - 1, -1):
            delta = rewards[t] + gamma * next_value - values[t]
            acc = delta + decay * acc
            advantages[t] = acc
            returns[t] = acc + values[t]
            next_value = values[t]
        stop = start


_gae: Any = None


def normalize_advantages(advantages: NDArray[np.float32]) -> tuple[NDArray[np.float32], str]:
    """Normalize with the seed's guards; returns the advantages and which branch ran.

    - any non-finite advantage → all zeros (a poisoned batch becomes a no-op update);
    - variance < 1e-8 → center only: float32 noise is ~1e-12 in a constant-reward round,
      and dividing by it amplifies noise 1e4x and can drift the policy into exp() overflow;
    - otherwise (a - mean) / sqrt(var + 1e-8).
    """
    if advantages.size == 0 or not np.isfinite(advantages).all() or np.abs(advantages).max() >= 1e30:
        return np.zeros_like(advantages), "zeroed"
    mean = advantages.mean(dtype=np.float64)
    var = advantages.var(dtype=np.float64)
    if var < 1e-8:
        return (advantages - mean).astype(np.float32), "centered"
    return ((advantages - mean) / np.sqrt(var + 1e-8)).astype(np.float32), "normalized"
