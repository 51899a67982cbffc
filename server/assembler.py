"""Turn bots' columnar ``tr`` batches into per-agent segments (sans-I/O, trainer thread).

Everything one drain of the queue brought is assembled in one pass: the rows of every batch
are joined, one stable sort by (run, agent) puts each agent's rows together in time order,
and piece boundaries come from whole-array comparisons, so the Python work is per piece,
never per row, frame or bot. Why: this runs on the trainer thread, which shares the GIL with
the event loop, and per-bot numpy calls took that time from the loop serving bots
(docs/architecture.md, "The life of one step", step 5).

A segment inside one drain is a view of that drain's packed float32 matrix; one that spans
drains is copied together when it closes. In terms mode the run's
:class:`~server.rewards.RewardFunction` sets the terms width and turns terms into rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from agents.common import Segment, SegmentEnd
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, TransitionBatch

from .rewards import RewardFunction, check_reward_function
from .transition_queue import Arrival

__all__ = ["SegmentAssembler", "SegmentBuilder"]


@dataclass(frozen=True)
class _Layout:
    """Columns of the packed float32 rows: obs | act | logp | rew (scalar mode) or terms (terms mode) | state
    (a recurrent actor's rows only).

    One matrix instead of four arrays: a piece is one slice and a segment spanning drains is
    one ``np.concatenate``, where four columns would cost four numpy calls.
    """

    obs_dim: int
    act_dim: int
    terms: bool
    n_terms: int
    """Width of the terms columns in terms mode: the reward function's ``n_terms`` (unused in scalar mode)."""
    state_size: int = 0

    @property
    def values_end(self) -> int:
        """Where the reward columns end (and a recurrent actor's state begins)."""
        return self.obs_dim + self.act_dim + 1 + (self.n_terms if self.terms else 1)

    @property
    def width(self) -> int:
        return self.values_end + self.state_size

    def obs(self, rows: NDArray[np.float32]) -> NDArray[np.float32]:
        return rows[..., : self.obs_dim]

    def rewards(self, rows: NDArray[np.float32], reward: RewardFunction | None) -> NDArray[np.float32]:
        """Per-row rewards of a (T, width) block: the scalars, or the reward function's tick rewards of the terms."""
        start = self.obs_dim + self.act_dim + 1
        if not self.terms:
            return rows[:, start]
        assert reward is not None, "terms mode needs the run's reward function"
        return reward.tick_reward(rows[:, start : self.values_end])

    def split(self, rows: NDArray[np.float32]) -> tuple[NDArray[np.float32], ...]:
        """obs, act, logp, values: views of a (T, width) block."""
        d, a = self.obs_dim, self.act_dim
        values = rows[:, d + a + 1 : self.values_end] if self.terms else rows[:, d + a + 1]
        return rows[:, :d], rows[:, d : d + a], rows[:, d + a], values

    def state(self, rows: NDArray[np.float32]) -> NDArray[np.float32] | None:
        """A recurrent actor's states of a (T, width) block (a view), or None for memoryless rows."""
        return rows[:, self.values_end :] if self.state_size else None


class _Open:
    """One agent's steps not yet handed to the trainer; ``steps == 0``: no segment is open.

    Made once per agent and reused for each of its segments. Why: a fresh object, list and
    float per segment churn Python's free lists, and tracemalloc charges a recycled block to
    the line that first allocated it, so the L2 soak's leak check (docs/reliability.md) reads
    that churn as a leak. The reward sum is accumulated in place in a float64 array for the
    same reason.
    """

    __slots__ = ("chunks", "episode", "generation", "layout", "reward_sum", "steps", "version")

    def __init__(self, layout: _Layout) -> None:
        self.episode = 0
        self.generation = 0
        self.version = 0
        self.layout = layout
        self.chunks: list[NDArray[np.float32]] = []
        self.steps = 0
        self.reward_sum = np.zeros(1, dtype=np.float64)

    def begin(self, episode: int, generation: int, version: int, layout: _Layout) -> None:
        self.episode = episode
        self.generation = generation
        self.version = version
        self.layout = layout

    def clear(self) -> None:
        self.chunks.clear()  # the views go: nothing of a closed segment stays alive here
        self.steps = 0
        self.reward_sum[0] = 0.0


class SegmentAssembler:
    """The open segments of one connection.

    Args:
        bot: the bot id stamped on every segment.
        terms: True for a terms-reward session (``terms``/``score``), False for scalar rewards.
        segment_steps: a segment is cut (and bootstrapped from the next observation) at this length.
        reward: the run's reward function; required in terms mode (it turns the terms into the
            rewards summed here, and every segment carries it to the learner), ignored otherwise.
            Its ``n_terms`` must be the wire format's ``terms`` width (checked here).

    Raises:
        ValueError: a terms session without a reward function, or one of another width than the wire's.
    """

    def __init__(self, bot: str, terms: bool, segment_steps: int, reward: RewardFunction | None = None) -> None:
        if terms and reward is None:
            raise ValueError("a terms-mode session needs the run's reward function (reward=...)")
        self.bot = bot
        self.terms = terms
        self.segment_steps = segment_steps
        self.reward = check_reward_function(reward) if terms else None
        """The reward function in terms mode, None in scalar mode."""
        self._open: dict[int, _Open] = {}

    @property
    def open_steps(self) -> int:
        """Steps received but not yet in a closed segment."""
        return sum(o.steps for o in self._open.values())

    def add(self, batch: TransitionBatch) -> list[Segment]:
        """Append a validated batch; return the segments it closed."""
        return assemble([_Run(self, [batch])])

    def close_all(self) -> list[Segment]:
        """Close every open segment as a cut (the bot left); nothing it sent is lost."""
        closed: list[Segment] = []
        for agent in list(self._open):
            self._close(agent, SegmentEnd.CUT, None, None, closed)
        return closed

    def _append(
        self, agent: int, episode: int, stamp: tuple[int, int], layout: _Layout, rows: NDArray[np.float32],
        span: tuple[int, int], rewards: tuple[float, NDArray[np.float64]], closed: list[Segment],
    ) -> None:  # fmt: skip
        """Add packed rows ``span`` = ``(start, stop)`` (one agent, one episode, in time order) to the agent's open
        segment; ``stamp`` is the ``(generation, version)`` that acted them.

        ``rewards`` is ``(their sum, cumulative)`` with ``cumulative[i]`` the sum of ``rows[:i + 1]``'s rewards,
        for the rare piece a length cut splits.
        """
        (generation, version), (start, stop), (reward_sum, cumulative) = stamp, span, rewards
        whole = (start, stop)
        current = self._open.get(agent)
        if current is None:
            current = self._open[agent] = _Open(layout)
        elif current.steps and current.episode != episode:
            # A new episode id without an end flag: the old episode was abandoned; keep it as a cut.
            self._close(agent, SegmentEnd.CUT, None, None, closed)
        while start < stop:
            if not current.steps:
                current.begin(episode, generation, version, layout)
            elif current.steps >= self.segment_steps or current.generation != generation:
                # Cut at the length cap, or where the bot switched to a new generation's weights
                # (a segment is acted by one generation); the next observation bootstraps the cut.
                next_state = layout.state(rows[start : start + 1])  # a recurrent actor's: the next row's own
                self._close(agent, SegmentEnd.CUT, layout.obs(rows[start]), None, closed, next_state)
                continue
            take = min(stop, start + self.segment_steps - current.steps)
            current.chunks.append(rows[start:take])
            current.steps += take - start
            if (start, take) == whole:
                current.reward_sum[0] += reward_sum
            else:
                current.reward_sum[0] += cumulative[take - 1] - (cumulative[start - 1] if start else 0.0)
            if version < current.version:
                current.version = version
            start = take

    def _close(
        self, agent: int, end: SegmentEnd, next_obs: NDArray[np.float32] | None, score: float | None, closed: list[Segment],
        next_state: NDArray[np.float32] | None = None,
    ) -> None:  # fmt: skip
        current = self._open.get(agent)
        if current is None or current.steps == 0:
            return
        # One drain's piece is a view (no copy); pieces of several drains are copied together.
        rows = current.chunks[0] if len(current.chunks) == 1 else np.concatenate(current.chunks)
        current_layout = current.layout
        obs, act, logp, values = current_layout.split(rows)
        reward_sum = float(current.reward_sum[0])
        generation, version = current.generation, current.version
        current.clear()
        if score is not None:  # segment_rewards adds the round reward to the last step
            assert self.reward is not None  # scores come in terms mode only
            reward_sum += self.reward.round_reward_scalar(score)
        if end is SegmentEnd.CUT and next_obs is None:
            # Bot left (or abandoned the episode) mid-way: nothing it sent is lost, and the
            # open tail is bootstrapped from its last observation — a truncation, never terminal.
            next_obs = obs[-1]
        closed.append(
            Segment.trusted(
                bot=self.bot,
                agent=agent,
                obs=obs,
                act=act,
                logp=logp,
                end=end,
                next_obs=None if end is SegmentEnd.TERMINAL else next_obs,
                generation=generation,
                version=version,
                reward=None if self.terms else values,
                terms=values if self.terms else None,
                score=score,
                reward_sum=reward_sum,
                reward_fn=self.reward,
                state=current_layout.state(rows),
                next_state=None if next_state is None else next_state[0],
            )
        )


@dataclass
class _Run:
    """Consecutive batches of one session (one generation, no gap), assembled together."""

    assembler: SegmentAssembler
    batches: list[TransitionBatch]


def _cat(parts: Sequence[NDArray[np.float32] | None], width: tuple[int, ...]) -> NDArray[np.float32]:
    """Join optional per-batch arrays; a missing one counts as zero rows."""
    present = [p for p in parts if p is not None]
    if len(present) == 1:
        return present[0]
    return np.concatenate(present) if present else np.empty((0, *width), np.float32)


class _Scratch:
    """A reusable (rows, width) float32 matrix per layout, grown as needed."""

    def __init__(self) -> None:
        self._arrays: dict[_Layout, NDArray[np.float32]] = {}

    def get(self, layout: _Layout, rows: int) -> NDArray[np.float32]:
        array = self._arrays.get(layout)
        if array is None or len(array) < rows:
            array = self._arrays[layout] = np.empty(
                (max(rows, 2 * len(array) if array is not None else 0), layout.width), np.float32
            )
        return array[:rows]


def assemble(runs: Sequence[_Run], scratch: _Scratch | None = None) -> list[Segment]:
    """Assemble runs of several sessions in one pass; each run's rows follow its session's open segments.

    All runs share one reward mode (and reward function) and at most one run per session may be
    given (a session's next run must see this one's effect on its open segments). Three phases,
    each whole-array work or one call per piece: pack the rows, cut them into pieces, hand the
    pieces out.
    """
    closed: list[Segment] = []
    batches = [batch for run in runs for batch in run.batches if batch.n]
    if not batches:
        return closed
    drain = _pack(runs, batches, scratch if scratch is not None else _Scratch())
    runs_with_rows = [run for run in runs if any(batch.n for batch in run.batches)]
    pieces = _cut(drain, _sort_key(runs_with_rows, batches, drain.agent))
    _hand_out(drain, pieces, runs_with_rows, closed)
    return closed


@dataclass(frozen=True)
class _Drain:
    """One pass's rows joined in arrival order: the packed matrix and the columns beside it."""

    layout: _Layout
    reward: RewardFunction | None
    packed: NDArray[np.float32]
    """(rows, width) in arrival order; scratch, reused across drains (:func:`_cut` sorts it into a fresh matrix)."""
    agent: NDArray[np.uint32]
    episode: NDArray[np.uint32]
    flags: NDArray[np.uint8]
    next_obs: NDArray[np.float32] | None
    """One row per truncated step, in arrival order."""
    score: NDArray[np.float32] | None
    """One row per ended step, in arrival order (terms mode)."""


def _pack(runs: Sequence[_Run], batches: list[TransitionBatch], scratch: _Scratch) -> _Drain:
    """Join the rows of ``batches`` (every non-empty batch of ``runs``, in order) into one packed matrix.

    The matrix is ``scratch``'s: a fresh multi-MB array each drain would be page-faulted in again.
    """
    terms, reward = runs[0].assembler.terms, runs[0].assembler.reward
    assert all(run.assembler.terms == terms for run in runs), "one pass takes one reward mode"
    assert all(run.assembler.reward is reward for run in runs), "one pass takes one reward function"
    first = batches[0]
    state_size = 0 if first.state is None else first.state.shape[1]
    layout = _Layout(first.obs.shape[1], first.act.shape[1], terms, reward.n_terms if reward is not None else 0, state_size)
    n = sum(batch.n for batch in batches)
    packed = scratch.get(layout, n)
    d, a = layout.obs_dim, layout.act_dim
    if len(batches) == 1:
        packed[:, :d] = first.obs
        packed[:, d : d + a] = first.act
        packed[:, d + a] = first.logp
        values_one = first.terms if terms else first.rew
        packed[:, d + a + 1 : layout.values_end] = values_one.reshape(n, -1)  # type: ignore[union-attr]
        if state_size:
            packed[:, layout.values_end :] = first.state
        return _Drain(layout, reward, packed, first.agent, first.episode, first.flags, first.next_obs, first.score)
    np.concatenate([b.obs for b in batches], out=packed[:, :d])
    np.concatenate([b.act for b in batches], out=packed[:, d : d + a])
    np.concatenate([b.logp for b in batches], out=packed[:, d + a])
    values = [(b.terms if terms else b.rew).reshape(b.n, -1) for b in batches]  # type: ignore[union-attr]
    np.concatenate(values, out=packed[:, d + a + 1 : layout.values_end])
    if state_size:
        np.concatenate([b.state for b in batches], out=packed[:, layout.values_end :])  # type: ignore[misc]
    return _Drain(
        layout,
        reward,
        packed,
        agent=np.concatenate([b.agent for b in batches]),
        episode=np.concatenate([b.episode for b in batches]),
        flags=np.concatenate([b.flags for b in batches]),
        next_obs=_cat([b.next_obs for b in batches], (d,)),
        score=_cat([b.score for b in batches], ()),
    )


def _sort_key(runs_with_rows: list[_Run], batches: list[TransitionBatch], agent: NDArray[np.uint32]) -> NDArray[np.integer]:
    """Each row's (run, agent) as one integer, ``run << 32 | agent``; the agent alone when one run has rows."""
    if len(runs_with_rows) == 1:
        return agent
    run_of_batch = [i for i, run in enumerate(runs_with_rows) for batch in run.batches if batch.n]
    row_run = np.repeat(np.asarray(run_of_batch, dtype=np.uint64), [batch.n for batch in batches])
    return (row_run << np.uint64(32)) | agent.astype(np.uint64)


@dataclass(frozen=True)
class _Pieces:
    """A drain's rows in (run, agent) order, cut into pieces: one agent, one episode, in time order.

    Per piece, as Python lists (the hand-out loop reads one item each): its last row, sort key,
    episode, end flag and reward sum.
    """

    rows: NDArray[np.float32]
    """The drain's packed rows, sorted (a fresh matrix: segments keep views of it)."""
    cumulative: NDArray[np.float64]
    """Running reward sum over ``rows``: a piece a length cut splits takes its share from it."""
    ends: list[int]
    keys: list[int]
    episodes: list[int]
    flags: list[int]
    sums: list[float]
    slots: dict[int, tuple[int, int]]
    """Flagged piece → (its ``next_obs`` row, its ``score`` row): see :func:`_slots`."""


def _cut(drain: _Drain, key: NDArray[np.integer]) -> _Pieces:
    """Sort the rows by ``key`` (stable: each agent's rows stay in time order) and find where pieces end."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    sorted_episodes = drain.episode[order]
    sorted_flags = drain.flags[order]
    # A piece ends at the last row of a (run, agent), at an end flag, or where the episode id changes.
    last = np.empty(len(key), dtype=bool)
    last[-1] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=last[:-1])
    last[:-1] |= sorted_episodes[1:] != sorted_episodes[:-1]
    last |= sorted_flags != 0
    ends = np.flatnonzero(last)
    rows = drain.packed[order]
    # Every piece's reward sum from one running sum over the drain (float64), for the trainer's
    # episode returns: a numpy reduction per segment (a dozen calls in terms mode) cost more there.
    cumulative = np.cumsum(drain.layout.rewards(rows, drain.reward), dtype=np.float64)
    piece_flags = sorted_flags[ends]
    return _Pieces(
        rows=rows,
        cumulative=cumulative,
        ends=ends.tolist(),
        keys=sorted_key[ends].tolist(),
        episodes=sorted_episodes[ends].tolist(),
        flags=piece_flags.tolist(),
        sums=np.diff(cumulative[ends], prepend=0.0).tolist(),
        slots=_slots(drain.flags, order[ends], piece_flags),
    )


def _slots(
    flags: NDArray[np.uint8], arrived_at: NDArray[np.intp], piece_flags: NDArray[np.uint8]
) -> dict[int, tuple[int, int]]:
    """Flagged piece → (its ``next_obs`` row, its ``score`` row).

    Those columns hold one row per truncated (``next_obs``) or ended (``score``) step in
    joined-batch order, so a piece's slot counts the such rows that arrived up to its last
    row (``arrived_at``: each piece's last row in arrival order).
    """
    flagged = np.flatnonzero(piece_flags)
    if not len(flagged):
        return {}
    last_rows = arrived_at[flagged]
    truncated_slot = (np.cumsum(flags == FLAG_TRUNCATED) - 1)[last_rows].tolist()
    ended_slot = (np.cumsum(flags != 0) - 1)[last_rows].tolist()
    return dict(zip(flagged.tolist(), zip(truncated_slot, ended_slot, strict=True), strict=True))


def _hand_out(drain: _Drain, pieces: _Pieces, runs_with_rows: list[_Run], closed: list[Segment]) -> None:
    """Append each piece to its session's open segment, in order; a flagged piece then closes it."""
    stamps = [(run.assembler, run.batches[0].generation, min(b.version for b in run.batches)) for run in runs_with_rows]
    single = len(runs_with_rows) == 1
    layout, rows, cumulative, slots = drain.layout, pieces.rows, pieces.cumulative, pieces.slots
    next_obs, scores = drain.next_obs, drain.score if layout.terms else None
    start = 0
    for piece, (end, key_value, episode, flag, reward_sum) in enumerate(
        zip(pieces.ends, pieces.keys, pieces.episodes, pieces.flags, pieces.sums, strict=True)
    ):
        assembler, generation, version = stamps[0 if single else key_value >> 32]
        agent = key_value & 0xFFFFFFFF
        assembler._append(
            agent, episode, (generation, version), layout, rows, (start, end + 1), (reward_sum, cumulative), closed
        )
        start = end + 1
        if flag == 0:
            continue
        truncated_at, ended_at = slots[piece]
        score = float(scores[ended_at]) if scores is not None else None
        if flag == FLAG_TERMINAL:
            assembler._close(agent, SegmentEnd.TERMINAL, None, score, closed)
        else:
            assert flag == FLAG_TRUNCATED and next_obs is not None
            assembler._close(agent, SegmentEnd.TRUNCATED, next_obs[truncated_at], score, closed)


class SegmentBuilder:
    """Trainer-side: turns drained :class:`~server.transition_queue.Arrival` s into segments.

    Keeps one :class:`SegmentAssembler` per live session. A drain's arrivals are split by
    session (each session's own order kept) into runs of consecutive batches, and the first
    run of every session is assembled in one pass (then the second runs, if any: a gap or a
    new generation starts one). A gap in a session's arrival numbers (a batch dropped from a
    full queue) cuts that session's open segments, so no segment ever spans missing steps.

    ``reward`` is the run's reward function for terms-mode sessions (see :class:`SegmentAssembler`);
    without one only scalar sessions can be assembled (the server refuses terms-mode ``hello`` s then).
    Its ``n_terms`` is checked against the wire format's ``terms`` width here, at construction.
    """

    def __init__(self, segment_steps: int, reward: RewardFunction | None = None) -> None:
        self.segment_steps = segment_steps
        self.reward = check_reward_function(reward)
        self._sessions: dict[str, tuple[SegmentAssembler, int]] = {}
        self._scratch = _Scratch()

    @property
    def open_steps(self) -> int:
        return sum(assembler.open_steps for assembler, _ in self._sessions.values())

    def add(self, arrivals: list[Arrival]) -> list[Segment]:
        runs: dict[str, list[list[Arrival]]] = {}
        ended: list[str] = []
        for arrival in arrivals:
            own = runs.setdefault(arrival.session, [])
            if arrival.batch is None:
                ended.append(arrival.session)
                continue
            if (
                own and arrival.index == own[-1][-1].index + 1 and arrival.batch.generation == own[-1][-1].batch.generation  # type: ignore[union-attr]
            ):
                own[-1].append(arrival)
            else:
                own.append([arrival])
        closed: list[Segment] = []
        for phase in range(max((len(own) for own in runs.values()), default=0)):
            by_mode: dict[bool, list[_Run]] = {}
            for own in runs.values():
                if phase < len(own):
                    run = self._start_run(own[phase], closed)
                    by_mode.setdefault(run.assembler.terms, []).append(run)
            for mode_runs in by_mode.values():
                closed.extend(assemble(mode_runs, self._scratch))
        for session in ended:
            entry = self._sessions.pop(session, None)
            if entry is not None:
                closed.extend(entry[0].close_all())
        return closed

    def _start_run(self, run: list[Arrival], closed: list[Segment]) -> _Run:
        first = run[0]
        entry = self._sessions.get(first.session)
        if entry is None:
            assembler = SegmentAssembler(first.bot, first.terms, self.segment_steps, self.reward)
        else:
            assembler, last_index = entry
            if first.index != last_index + 1:  # batches were dropped in between: never bridge the gap
                closed.extend(assembler.close_all())
        self._sessions[first.session] = (assembler, run[-1].index)
        return _Run(assembler, [a.batch for a in run if a.batch is not None])
