"""Collect a vectorized bot's steps into columnar ``tr`` batches (sans-I/O).

A bot driving ``n_agents`` agents calls :meth:`StepRecorder.record` once per tick
with one :class:`Step` (a row per agent); the recorder assigns episode ids, keeps the conditional
columns (``next_obs`` for truncated steps, ``score`` for ended steps) in row order,
and hands back a :class:`~bot_protocol.transitions.TransitionBatch` when enough rows
have piled up. Every batch carries exactly one policy identity, so rows acted with
different weights are never mixed. A bot acting in discrete branches records each row's
``dact`` and, when it masks actions, its ``mask``; they are checked here as the server checks
them, so a bad one surfaces in the bot with the code the server would answer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .actions import ActionSpace
from .messages import RewardMode
from .policy_id import PolicyId
from .transitions import FLAG_TERMINAL, FLAG_TRUNCATED, N_REWARD_TERMS, TransitionBatch

__all__ = ["Step", "StepRecorder", "concat_batches", "split_batch"]


class Step(NamedTuple):
    """One tick of a vectorized bot: what each agent saw and did, and what followed.

    Every array has one row per agent of ``agents`` (default: all, in order). ``reward``
    (scalar mode) or ``terms`` (terms mode, ``(n, 5)``) is required. ``next_obs`` is required
    when any agent is truncated; ``score`` is required in terms mode when any agent ended;
    rows of other agents in these two arrays are ignored. ``dact`` is required, and ``mask``
    allowed, only when the bot acts in discrete branches; ``actions`` may then be ``None``
    when it has no continuous dims. A ``NamedTuple`` because it is built and unpacked once
    per tick on the bot's hot path, which a tuple does in one step.
    """

    obs: ArrayLike
    actions: ArrayLike
    logp: ArrayLike
    reward: ArrayLike | None = None
    terms: ArrayLike | None = None
    terminal: ArrayLike | None = None
    """True where the agent's episode ended naturally (it wins over a simultaneous ``truncated``)."""
    truncated: ArrayLike | None = None
    """True where the agent's episode was cut by a time limit (bootstrapped from ``next_obs``)."""
    next_obs: ArrayLike | None = None
    score: ArrayLike | None = None
    agents: ArrayLike | None = None
    dact: ArrayLike | None = None
    """(n, n_branches): the action each agent took in each discrete branch."""
    mask: ArrayLike | None = None
    """(n, sum(branches)), bools or 0/1: the actions that were legal (absent: all of them)."""
    state: ArrayLike | None = None
    """(n, state_size): a recurrent policy's state each agent acted from (required exactly when ``state_size`` > 0)."""


class StepRecorder:
    """Accumulates steps for up to ``n_agents`` agents and cuts them into batches.

    Args:
        obs_dim, act_dim, n_agents, reward: the shapes declared in ``hello``.
        batch_steps: rows per batch; :meth:`record` returns a batch once this many are held.
        branches: the discrete branches declared in ``hello`` (none: a continuous-only bot).
        state_size: the run's recurrent state width (``weights.arch.recurrent``): every row then needs ``state``.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        reward: RewardMode,
        batch_steps: int = 64,
        branches: tuple[int, ...] = (),
        state_size: int = 0,
    ) -> None:
        if batch_steps < 1:
            raise ValueError(f"batch_steps must be >= 1, got {batch_steps}")
        self.obs_dim, self.act_dim, self.n_agents, self.reward = obs_dim, act_dim, n_agents, reward
        self.space = ActionSpace(act_dim, branches)
        self.state_size = state_size
        self.batch_steps = batch_steps
        self.episode = np.zeros(n_agents, dtype=np.uint32)
        self._identity: PolicyId | None = None
        self._rows: list[dict[str, NDArray[np.generic]]] = []
        self._held = 0
        self._all_agents = np.arange(n_agents, dtype=np.uint32)

    def __len__(self) -> int:
        return self._held

    def record(self, step: Step, policy: PolicyId) -> TransitionBatch | None:
        """Add ``step``: one row for each agent in ``step.agents`` (default: all, in order), acted by ``policy``.

        Returns:
            A batch to send when the policy changed (the held rows are cut first —
            then call :meth:`flush` is not needed, the new rows stay held) or when
            ``batch_steps`` rows are held; otherwise ``None``.

        Raises:
            ValueError: on a shape or mode mismatch (a bug in the bot, caught before the wire).
            ProtocolError: ``bad_action``, ``bad_mask`` or ``illegal_action``: a ``dact`` or
                ``mask`` the server would refuse (nothing of the step is recorded).
        """
        obs, actions, logp, reward, terms, terminal, truncated, next_obs, score, agents, dact, mask, state = step
        ids = self._all_agents if agents is None else np.asarray(agents, dtype=np.uint32)
        n = len(ids)
        obs_a = _rows(obs, (n, self.obs_dim), "obs")
        act_a = _rows(np.zeros((n, 0)) if actions is None and not self.act_dim else actions, (n, self.act_dim), "actions")
        discrete = self._discrete(dact, mask, n)
        logp_a = _rows(logp, (n,), "logp")
        term = np.zeros(n, bool) if terminal is None else np.asarray(terminal, dtype=bool).reshape(n)
        trunc = np.zeros(n, bool) if truncated is None else np.asarray(truncated, dtype=bool).reshape(n)
        trunc = trunc & ~term  # a natural end wins over a simultaneous time limit
        flags = (term * FLAG_TERMINAL + trunc * FLAG_TRUNCATED).astype(np.uint8)
        row: dict[str, NDArray[np.generic]] = {
            "agent": ids,
            "episode": self.episode[ids].copy(),
            "obs": obs_a,
            "act": act_a,
            "logp": logp_a,
            "flags": flags,
            **discrete,
        }
        if self.state_size:
            if state is None:
                raise ValueError(f"state= ({n}, {self.state_size}) is required: this bot's policy is recurrent")
            row["state"] = _rows(state, (n, self.state_size), "state")
        elif state is not None:
            raise ValueError("state= is for bots of a recurrent policy (a recorder made with state_size > 0)")
        if self.reward is RewardMode.SCALAR:
            if reward is None or terms is not None:
                raise ValueError("scalar-reward bots pass reward=, not terms=")
            row["rew"] = _rows(reward, (n,), "reward")
        else:
            if terms is None:
                raise ValueError("terms-reward bots pass terms= (n, 5)")
            row["terms"] = _rows(terms, (n, N_REWARD_TERMS), "terms")
            ended = flags != 0
            if ended.any():
                if score is None:
                    raise ValueError("terms-reward bots pass score= when an agent's episode ends")
                row["score"] = _rows(score, (n,), "score")[ended]
        if trunc.any():
            if next_obs is None:
                raise ValueError("next_obs= is required when an agent is truncated")
            row["next_obs"] = _rows(next_obs, (n, self.obs_dim), "next_obs")[trunc]
        self.episode[ids[flags != 0]] += 1

        out = None
        if self._identity is not None and policy != self._identity and self._held:
            out = self.flush()
        self._identity = policy
        self._rows.append(row)
        self._held += n
        if out is None and self._held >= self.batch_steps:
            out = self.flush()
        return out

    def _discrete(self, dact: ArrayLike | None, mask: ArrayLike | None, n: int) -> dict[str, NDArray[np.generic]]:
        """A step's ``dact`` (and ``mask``) rows as the wire's integers, checked; none for a continuous-only bot."""
        space = self.space
        if not space.branches:
            if dact is not None or mask is not None:
                raise ValueError("dact= and mask= are for bots whose hello lists discrete branches")
            return {}
        if dact is None:
            raise ValueError(f"dact= ({n}, {space.n_branches}) is required: this bot acts in discrete branches")
        taken = np.array(dact, dtype=np.int64)  # a copy, like every recorded row
        if taken.shape != (n, space.n_branches):
            try:
                taken = taken.reshape(n, space.n_branches)
            except ValueError:
                raise ValueError(f"dact has shape {taken.shape}, expected {(n, space.n_branches)}") from None
        flags = None if mask is None else space.mask_of(mask, n)
        space.check(taken, flags)
        row: dict[str, NDArray[np.generic]] = {"dact": taken.astype(np.uint32)}
        if flags is not None:
            row["mask"] = flags
        return row

    def flush(self) -> TransitionBatch | None:
        """Cut every held row into one batch (``seq`` 0: the client stamps it when sending)."""
        if not self._held:
            return None
        assert self._identity is not None, "rows held without a policy identity"
        rows, self._rows, self._held = self._rows, [], 0

        def cat(key: str, shape: tuple[int, ...]) -> NDArray[np.float32] | None:
            parts = [r[key] for r in rows if key in r]
            return np.concatenate(parts) if parts else np.zeros(shape, np.float32)

        identity = self._identity
        return TransitionBatch(
            seq=0,
            generation=identity.generation,
            version=identity.version,
            agent=np.concatenate([r["agent"] for r in rows]).astype(np.uint32),
            episode=np.concatenate([r["episode"] for r in rows]).astype(np.uint32),
            obs=np.concatenate([r["obs"] for r in rows]).astype(np.float32),
            act=np.concatenate([r["act"] for r in rows]).astype(np.float32),
            logp=np.concatenate([r["logp"] for r in rows]).astype(np.float32),
            flags=np.concatenate([r["flags"] for r in rows]).astype(np.uint8),
            rew=cat("rew", (0,)) if self.reward is RewardMode.SCALAR else None,
            terms=cat("terms", (0, N_REWARD_TERMS)) if self.reward is RewardMode.TERMS else None,
            next_obs=cat("next_obs", (0, self.obs_dim)),
            score=cat("score", (0,)) if self.reward is RewardMode.TERMS else None,
            dact=np.concatenate([r["dact"] for r in rows]) if self.space.branches else None,
            mask=_joined_masks([(len(r["agent"]), r.get("mask")) for r in rows]),
            state=np.concatenate([r["state"] for r in rows]) if self.state_size else None,
        )


def _rows(value: ArrayLike, shape: tuple[int, ...], name: str) -> NDArray[np.float32]:
    # Always a copy: callers reuse their buffers tick after tick, and held rows must not change.
    array = np.array(value, dtype=np.float32)
    if array.shape != shape:
        try:
            array = array.reshape(shape)
        except ValueError:
            raise ValueError(f"{name} has shape {array.shape}, expected {shape}") from None
    return array


def split_batch(batch: TransitionBatch, max_rows: int) -> list[TransitionBatch]:
    """Cut a batch into consecutive pieces of at most ``max_rows`` rows.

    The conditional columns follow their rows: ``next_obs`` rows belong to truncated
    steps and ``score`` rows to ended steps, each in row order.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    if batch.n <= max_rows:
        return [batch]
    truncated_before = np.concatenate([[0], np.cumsum(batch.flags == FLAG_TRUNCATED)])
    ended_before = np.concatenate([[0], np.cumsum(batch.flags != 0)])
    pieces = []
    for start in range(0, batch.n, max_rows):
        stop = min(start + max_rows, batch.n)
        rows = slice(start, stop)
        t0, t1 = truncated_before[start], truncated_before[stop]
        e0, e1 = ended_before[start], ended_before[stop]
        pieces.append(
            replace(
                batch,
                agent=batch.agent[rows],
                episode=batch.episode[rows],
                obs=batch.obs[rows],
                act=batch.act[rows],
                logp=batch.logp[rows],
                flags=batch.flags[rows],
                rew=None if batch.rew is None else batch.rew[rows],
                terms=None if batch.terms is None else batch.terms[rows],
                next_obs=None if batch.next_obs is None else batch.next_obs[t0:t1],
                score=None if batch.score is None else batch.score[e0:e1],
                dact=None if batch.dact is None else batch.dact[rows],
                mask=None if batch.mask is None else batch.mask[rows],
                state=None if batch.state is None else batch.state[rows],
            )
        )
    return pieces


def concat_batches(batches: list[TransitionBatch]) -> TransitionBatch:
    """Join consecutive batches of one session into one (rows in order; conditional columns follow).

    The result carries the last ``seq`` and the *oldest* policy version, so lag measured
    from it is never understated. All batches must share one generation.
    """
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    assert all(b.generation == first.generation for b in batches), "one session never mixes generations"

    def cat(name: str) -> NDArray[np.float32] | None:
        parts = [getattr(b, name) for b in batches]
        return None if parts[0] is None else np.concatenate(parts)

    return TransitionBatch(
        seq=batches[-1].seq,
        generation=first.generation,
        version=min(b.version for b in batches),
        agent=np.concatenate([b.agent for b in batches]),
        episode=np.concatenate([b.episode for b in batches]),
        obs=np.concatenate([b.obs for b in batches]),
        act=np.concatenate([b.act for b in batches]),
        logp=np.concatenate([b.logp for b in batches]),
        flags=np.concatenate([b.flags for b in batches]),
        rew=cat("rew"),
        terms=cat("terms"),
        next_obs=cat("next_obs"),
        score=cat("score"),
        dact=None if first.dact is None else np.concatenate([b.dact for b in batches]),
        mask=_joined_masks([(b.n, b.mask) for b in batches]),
        state=cat("state"),
    )


def _joined_masks(parts: list[tuple[int, NDArray[np.generic] | None]]) -> NDArray[np.uint8] | None:
    """Parts' ``mask`` rows in order, all ones (every action legal) for a part of ``n`` rows without one.

    ``None`` when no part has a mask: the frame then sends none, and the server reads all ones.
    """
    present = [mask for _, mask in parts if mask is not None]
    if not present:
        return None
    width = present[0].shape[1]
    return np.concatenate([np.ones((n, width), np.uint8) if mask is None else mask for n, mask in parts])
