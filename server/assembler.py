"""Turn a bot's columnar ``tr`` batches into per-agent segments (sans-I/O, trainer thread).

A batch interleaves the steps of many agents. Rows are grouped by agent (a stable
sort keeps each agent's rows in time order) and appended to that agent's open
segment, which closes at an episode end, at ``segment_steps``, or when the bot
leaves. Work is per agent and per episode end, never per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from agents.common import Segment, SegmentEnd
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, TransitionBatch
from bot_protocol.batching import concat_batches

from .transition_queue import Arrival

__all__ = ["SegmentAssembler", "SegmentBuilder"]


@dataclass
class _Open:
    """One agent's steps not yet handed to the trainer."""

    episode: int
    chunks: list[dict[str, NDArray[np.float32]]] = field(default_factory=list)
    steps: int = 0
    generation: int = 0
    version: int = 0


class SegmentAssembler:
    """Builds segments for one connection.

    Args:
        bot: the bot id stamped on every segment.
        terms: True for a terms-reward session (``terms``/``score``), False for scalar rewards.
        segment_steps: a segment is cut (and bootstrapped from the next observation) at this length.
    """

    def __init__(self, bot: str, terms: bool, segment_steps: int) -> None:
        self.bot = bot
        self.terms = terms
        self.segment_steps = segment_steps
        self._open: dict[int, _Open] = {}

    @property
    def open_steps(self) -> int:
        """Steps received but not yet in a closed segment."""
        return sum(o.steps for o in self._open.values())

    def add(self, batch: TransitionBatch) -> list[Segment]:
        """Append a validated batch; return the segments it closed."""
        closed: list[Segment] = []
        order = np.argsort(batch.agent, kind="stable")
        agents = batch.agent[order]
        # Row index of each truncated step into next_obs, and of each ended step into score.
        trunc_slot = np.cumsum(batch.flags == FLAG_TRUNCATED) - 1
        end_slot = np.cumsum(batch.flags != 0) - 1
        bounds = np.flatnonzero(np.diff(agents)) + 1
        for rows in np.split(order, bounds):
            agent = int(batch.agent[rows[0]])
            episodes = batch.episode[rows]
            flags = batch.flags[rows]
            start = 0
            for end in [*np.flatnonzero(flags).tolist(), len(rows) - 1]:
                piece = rows[start : end + 1]
                if len(piece) == 0:
                    continue
                # A new episode id without an end flag: the old episode was abandoned; keep it as a cut.
                current = self._open.get(agent)
                if current is not None and current.episode != int(episodes[start]):
                    closed.extend(self._close(agent, SegmentEnd.CUT, next_obs=None))
                self._append(agent, int(episodes[start]), batch, piece, closed)
                flag = int(flags[end])
                if end == len(rows) - 1 and flag == 0:
                    break
                row = rows[end]
                score = float(batch.score[end_slot[row]]) if self.terms and batch.score is not None else None
                if flag == FLAG_TERMINAL:
                    closed.extend(self._close(agent, SegmentEnd.TERMINAL, None, score))
                else:
                    assert flag == FLAG_TRUNCATED and batch.next_obs is not None
                    closed.extend(self._close(agent, SegmentEnd.TRUNCATED, batch.next_obs[trunc_slot[row]], score))
                start = end + 1
        return closed

    def _append(self, agent: int, episode: int, batch: TransitionBatch, rows: NDArray[np.intp], closed: list[Segment]) -> None:
        while len(rows):
            current = self._open.get(agent)
            if current is None:
                current = self._open[agent] = _Open(episode, generation=batch.generation, version=batch.version)
            elif current.steps >= self.segment_steps or current.generation != batch.generation:
                # Cut at the length cap, or where the bot switched to a new generation's weights
                # (a segment is acted by one generation); the next observation bootstraps the cut.
                closed.extend(self._close(agent, SegmentEnd.CUT, batch.obs[rows[0]]))
                continue
            take = rows[: self.segment_steps - current.steps]
            chunk = {"obs": batch.obs[take], "act": batch.act[take], "logp": batch.logp[take]}
            if self.terms:
                assert batch.terms is not None
                chunk["terms"] = batch.terms[take]
            else:
                assert batch.rew is not None
                chunk["rew"] = batch.rew[take]
            current.chunks.append(chunk)
            current.steps += len(take)
            current.version = min(current.version, batch.version)
            rows = rows[len(take) :]

    def _close(
        self, agent: int, end: SegmentEnd, next_obs: NDArray[np.float32] | None, score: float | None = None
    ) -> list[Segment]:
        current = self._open.pop(agent, None)
        if current is None or current.steps == 0:
            return []

        def cat(key: str) -> NDArray[np.float32]:
            return np.concatenate([c[key] for c in current.chunks])

        obs = cat("obs")
        if end is SegmentEnd.CUT and next_obs is None:
            # Bot left (or abandoned the episode) mid-way: nothing it sent is lost, and the
            # open tail is bootstrapped from its last observation — a truncation, never terminal.
            next_obs = obs[-1]
        return [
            Segment(
                bot=self.bot,
                agent=agent,
                obs=obs,
                act=cat("act"),
                logp=cat("logp"),
                end=end,
                next_obs=None if end is SegmentEnd.TERMINAL else np.array(next_obs, dtype=np.float32),
                generation=current.generation,
                version=current.version,
                reward=None if self.terms else cat("rew"),
                terms=cat("terms") if self.terms else None,
                score=score,
            )
        ]

    def close_all(self) -> list[Segment]:
        """Close every open segment as a cut (the bot left); nothing it sent is lost."""
        closed: list[Segment] = []
        for agent in list(self._open):
            closed.extend(self._close(agent, SegmentEnd.CUT, None))
        return closed


class SegmentBuilder:
    """Trainer-side: turns drained :class:`~server.transition_queue.Arrival` s into segments.

    Keeps one :class:`SegmentAssembler` per live session. Consecutive batches of a session
    in one drain are joined first, so the per-agent work runs once per drain instead of
    once per frame. A gap in a session's arrival numbers (a batch dropped from a full queue)
    cuts that session's open segments, so no segment ever spans missing steps.
    """

    def __init__(self, segment_steps: int) -> None:
        self.segment_steps = segment_steps
        self._sessions: dict[str, tuple[SegmentAssembler, int]] = {}

    @property
    def open_steps(self) -> int:
        return sum(assembler.open_steps for assembler, _ in self._sessions.values())

    def add(self, arrivals: list[Arrival]) -> list[Segment]:
        closed: list[Segment] = []
        run: list[Arrival] = []
        for arrival in arrivals:
            if run and (
                arrival.session != run[-1].session
                or arrival.batch is None
                or arrival.index != run[-1].index + 1
                or arrival.batch.generation != run[-1].batch.generation  # type: ignore[union-attr]
            ):
                closed.extend(self._feed(run))
                run = []
            if arrival.batch is None:
                closed.extend(self._end(arrival.session))
            else:
                run.append(arrival)
        closed.extend(self._feed(run))
        return closed

    def _feed(self, run: list[Arrival]) -> list[Segment]:
        if not run:
            return []
        first = run[0]
        closed: list[Segment] = []
        entry = self._sessions.get(first.session)
        if entry is None:
            assembler = SegmentAssembler(first.bot, first.terms, self.segment_steps)
        else:
            assembler, last_index = entry
            if first.index != last_index + 1:  # batches were dropped in between: never bridge the gap
                closed.extend(assembler.close_all())
        batches = [a.batch for a in run if a.batch is not None]
        closed.extend(assembler.add(concat_batches(batches)))
        self._sessions[first.session] = (assembler, run[-1].index)
        return closed

    def _end(self, session: str) -> list[Segment]:
        entry = self._sessions.pop(session, None)
        return entry[0].close_all() if entry is not None else []
