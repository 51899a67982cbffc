"""Segment assembly: rows of many agents → per-agent segments, with the right ends and bootstraps."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from agents import SegmentEnd, segment_rewards
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, N_REWARD_TERMS, TransitionBatch
from server.assembler import SegmentAssembler, SegmentBuilder
from server.rewards import RewardFunction
from server.transition_queue import Arrival, TransitionQueue

OBS = 2


@dataclass(frozen=True)
class WeightedTerms:
    """A made-up game's reward function, injected as a run's would be: the assembler knows no game.

    Tick reward: the terms weighted (column 0 counts 1, column 1 counts -2, the rest 0.1 each);
    round reward: a quarter of the score. Nothing like the tank's, so a test that passes with it
    cannot lean on the tank's shaping.
    """

    n_terms: int = N_REWARD_TERMS

    def tick_reward(self, terms: NDArray[np.float32]) -> NDArray[np.float32]:
        weights = np.full(self.n_terms, 0.1, np.float32)
        weights[:2] = [1.0, -2.0]
        return (terms @ weights).astype(np.float32)

    def round_reward(self, score: NDArray[np.float32] | float) -> NDArray[np.float32]:
        return (np.asarray(score, np.float32) / np.float32(4.0)).astype(np.float32)

    def round_reward_scalar(self, score: float) -> float:
        return score / 4.0


REWARD: RewardFunction = WeightedTerms()


def rows(agents, flags, start=0, episodes=None, next_obs=None, scores=None, version=0) -> TransitionBatch:
    """A batch whose obs row i is [start + i, agent]: easy to trace through segments."""
    n = len(agents)
    obs = np.stack([np.arange(start, start + n), agents], axis=1).astype(np.float32)
    terms = scores is not None
    return TransitionBatch(
        seq=0,
        generation=0,
        version=version,
        agent=np.array(agents, np.uint32),
        episode=np.array(episodes if episodes is not None else [0] * n, np.uint32),
        obs=obs,
        act=np.zeros((n, 1), np.float32),
        logp=np.zeros(n, np.float32),
        flags=np.array(flags, np.uint8),
        rew=None if terms else np.arange(n, dtype=np.float32),
        terms=np.zeros((n, 5), np.float32) if terms else None,
        next_obs=np.array(next_obs if next_obs is not None else np.zeros((0, OBS)), np.float32),
        score=np.array(scores, np.float32) if terms else None,
    )


def test_interleaved_agents_split_into_their_own_segments():
    """Rows of two agents interleaved in one batch become two segments, each in time order."""
    asm = SegmentAssembler("b", terms=False, segment_steps=100)
    T, R = FLAG_TERMINAL, FLAG_TRUNCATED
    out = asm.add(rows([0, 1, 0, 1, 0, 1], [0, 0, 0, 0, T, R], next_obs=[[99, 1]]))
    by_agent = {s.agent: s for s in out}
    assert by_agent[0].obs[:, 0].tolist() == [0, 2, 4] and by_agent[0].end is SegmentEnd.TERMINAL
    assert by_agent[0].next_obs is None
    assert by_agent[1].obs[:, 0].tolist() == [1, 3, 5] and by_agent[1].end is SegmentEnd.TRUNCATED
    assert by_agent[1].next_obs.tolist() == [99, 1]
    assert by_agent[1].reward.tolist() == [1, 3, 5]
    assert asm.open_steps == 0


def test_episode_continues_across_batches_and_is_cut_at_the_length_cap():
    """An episode spanning batches stays one segment until the cap; the cut bootstraps from the next row."""
    asm = SegmentAssembler("b", terms=False, segment_steps=4)
    assert asm.add(rows([0, 0, 0], [0, 0, 0], start=0)) == []
    out = asm.add(rows([0, 0, 0], [0, 0, 0], start=3))
    assert len(out) == 1 and out[0].end is SegmentEnd.CUT
    assert out[0].obs[:, 0].tolist() == [0, 1, 2, 3] and out[0].next_obs.tolist() == [4, 0]
    assert asm.open_steps == 2


def test_disconnect_keeps_open_steps_bootstrapped_from_the_last_observation():
    """close_all turns unfinished episodes into cuts (never terminal): nothing sent is lost."""
    asm = SegmentAssembler("b", terms=False, segment_steps=100)
    asm.add(rows([0, 1, 0], [0, 0, 0]))
    out = asm.close_all()
    assert sorted(s.steps for s in out) == [1, 2]
    assert all(s.end is SegmentEnd.CUT for s in out)
    seg0 = next(s for s in out if s.agent == 0)
    assert seg0.next_obs.tolist() == seg0.obs[-1].tolist()


def test_new_episode_id_without_an_end_flag_cuts_the_old_episode():
    """A bot that abandons an episode (new id, no flag) gets the old one closed as a cut."""
    asm = SegmentAssembler("b", terms=False, segment_steps=100)
    asm.add(rows([0, 0], [0, 0], episodes=[0, 0]))
    out = asm.add(rows([0, 0], [0, 0], start=2, episodes=[1, 1]))
    assert len(out) == 1 and out[0].end is SegmentEnd.CUT and out[0].steps == 2
    assert asm.open_steps == 2


def test_round_scores_follow_their_ended_rows():
    """In terms mode each ended row's score lands on its own segment."""
    asm = SegmentAssembler("b", terms=True, segment_steps=100, reward=REWARD)
    out = asm.add(rows([0, 1, 1], [FLAG_TERMINAL, 0, FLAG_TRUNCATED], next_obs=[[7, 1]], scores=[10.0, 20.0]))
    assert {s.agent: s.score for s in out} == {0: 10.0, 1: 20.0}


def test_terms_rewards_come_from_the_injected_reward_function():
    """The rewards summed for a terms segment, and those the learner will compute, are the run's reward
    function's: its tick rewards of the rows, plus its round reward of the score on the ended row."""
    batch = rows([0, 0, 0], [0, 0, FLAG_TERMINAL], scores=[12.0])
    batch.terms[:] = np.arange(15, dtype=np.float32).reshape(3, 5)
    (segment,) = SegmentAssembler("b", terms=True, segment_steps=100, reward=REWARD).add(batch)
    assert segment.reward_fn is REWARD
    expected = REWARD.tick_reward(batch.terms)
    expected[-1] += REWARD.round_reward(12.0)
    assert segment_rewards(segment).tobytes() == expected.tobytes()
    assert segment.reward_sum == pytest.approx(float(REWARD.tick_reward(batch.terms).sum()) + 3.0)


def test_terms_mode_needs_a_reward_function_of_the_wire_width():
    """Without a reward function a terms session cannot be assembled; one whose term count is not the wire
    format's fixed ``terms`` width (5) is refused when the builder is made, before any row arrives."""
    with pytest.raises(ValueError, match="reward function"):
        SegmentAssembler("b", terms=True, segment_steps=100)
    SegmentAssembler("b", terms=False, segment_steps=100)  # scalar sessions need none
    with pytest.raises(ValueError, match="5 wide"):
        SegmentBuilder(segment_steps=100, reward=WeightedTerms(n_terms=4))
    builder = SegmentBuilder(segment_steps=100)  # a scalar-only run
    with pytest.raises(ValueError, match="reward function"):
        builder.add([Arrival("s", "b", True, 0, rows([0], [FLAG_TERMINAL], scores=[1.0]))])


def test_builder_joins_runs_and_never_bridges_a_gap():
    """Consecutive arrivals are assembled as one; a missing arrival index cuts the open segments."""
    builder = SegmentBuilder(segment_steps=100, reward=REWARD)
    a = [Arrival("s", "b", False, i, rows([0, 0], [0, 0], start=2 * i)) for i in range(3)]
    assert builder.add(a[:2]) == []
    assert builder.open_steps == 4
    gap = Arrival("s", "b", False, 5, rows([0], [FLAG_TERMINAL], start=10))
    out = builder.add([gap])
    assert [s.end for s in out] == [SegmentEnd.CUT, SegmentEnd.TERMINAL]
    assert out[0].obs[:, 0].tolist() == [0, 1, 2, 3] and out[1].obs[:, 0].tolist() == [10]
    out = builder.add([Arrival("s", "b", False, 6, rows([0], [0], start=11)), Arrival("s", "b", False, 7, None)])
    assert len(out) == 1 and out[0].end is SegmentEnd.CUT and builder.open_steps == 0


def test_queue_drops_oldest_batches_but_never_end_markers():
    """Past capacity the oldest batches go (counted by the callback); end-of-session markers stay."""
    dropped = []
    queue = TransitionQueue(max_bytes=3 * rows([0], [0]).nbytes, on_dropped=dropped.append)
    queue.put(Arrival("s", "b", False, 0, None))
    for i in range(5):
        queue.put(Arrival("t", "b", False, i, rows([0], [0])))
    kept = queue.drain()
    assert [a.index for a in dropped] == [0, 1]
    assert kept[0].batch is None and [a.index for a in kept[1:]] == [2, 3, 4]


# ── the bulk assembler against a row-by-row model ────────────────────────────


def reference_segments(drains: list[list[Arrival]], segment_steps: int) -> list[tuple]:
    """The assembly rules applied one row at a time, in each session's arrival order (obviously right, slow).

    A row's version is the oldest version among the batches of its session's run in that drain
    (consecutive arrival numbers, one generation): the assembler joins those batches and stamps
    their rows with it, so lag is never understated.
    """
    out: list[tuple] = []
    open_: dict[tuple[str, int], dict] = {}
    last_index: dict[str, int] = {}

    def close(key, end, next_obs=None, score=None):
        seg = open_.pop(key, None)
        if seg is None:
            return
        obs = np.array(seg["obs"])
        if end is SegmentEnd.CUT and next_obs is None:
            next_obs = obs[-1]
        nxt = None if end is SegmentEnd.TERMINAL else tuple(np.asarray(next_obs).tolist())
        out.append((seg["bot"], key[1], tuple(obs[:, 0].tolist()), end, nxt, seg["gen"], seg["ver"], tuple(seg["rew"]), score))

    def close_session(session):
        for key in [k for k in open_ if k[0] == session]:
            close(key, SegmentEnd.CUT)

    for drain in drains:
        runs: dict[str, list[list[Arrival]]] = {}
        for arrival in drain:
            own = runs.setdefault(arrival.session, [])
            if arrival.batch is None:
                continue
            prev = own[-1][-1] if own else None
            if prev is not None and arrival.index == prev.index + 1 and arrival.batch.generation == prev.batch.generation:
                own[-1].append(arrival)
            else:
                own.append([arrival])
        run_version = {id(a): min(b.batch.version for b in run) for own in runs.values() for run in own for a in run}
        for arrival in drain:
            session, batch = arrival.session, arrival.batch
            if batch is None:
                close_session(session)
                last_index.pop(session, None)
                continue
            if session in last_index and arrival.index != last_index[session] + 1:
                close_session(session)
            last_index[session] = arrival.index
            version = run_version[id(arrival)]
            truncated = ended = 0
            for i in range(batch.n):
                key = (session, int(batch.agent[i]))
                episode, flag = int(batch.episode[i]), int(batch.flags[i])
                seg = open_.get(key)
                if seg is not None and seg["episode"] != episode:
                    close(key, SegmentEnd.CUT)
                    seg = None
                if seg is not None and (len(seg["obs"]) >= segment_steps or seg["gen"] != batch.generation):
                    close(key, SegmentEnd.CUT, batch.obs[i])
                    seg = None
                if seg is None:
                    seg = open_[key] = {
                        "bot": arrival.bot,
                        "episode": episode,
                        "gen": batch.generation,
                        "ver": version,
                        "obs": [],
                        "rew": [],
                    }
                seg["obs"].append(batch.obs[i])
                seg["rew"].append(float(batch.terms[i, 0] if arrival.terms else batch.rew[i]))
                seg["ver"] = min(seg["ver"], version)
                if flag:
                    score = float(batch.score[ended]) if arrival.terms else None
                    ended += 1
                    if flag == FLAG_TERMINAL:
                        close(key, SegmentEnd.TERMINAL, score=score)
                    else:
                        close(key, SegmentEnd.TRUNCATED, batch.next_obs[truncated], score)
                        truncated += 1
    return out


def as_tuples(segments) -> list[tuple]:
    return [
        (
            s.bot,
            s.agent,
            tuple(s.obs[:, 0].tolist()),
            s.end,
            None if s.next_obs is None else tuple(s.next_obs.tolist()),
            s.generation,
            s.version,
            tuple((s.terms[:, 0] if s.terms is not None else s.reward).tolist()),
            s.score,
        )
        for s in segments
    ]


@st.composite
def drained_streams(draw):
    """Arrivals of 1-3 sessions (scalar or terms mode), interleaved, then cut into drains."""
    row_id = 0
    per_session: list[list[Arrival]] = []
    for s in range(draw(st.integers(1, 3))):
        terms = draw(st.booleans())
        generation, index, arrivals = 0, 0, []
        for _ in range(draw(st.integers(1, 5))):
            n = draw(st.integers(1, 10))
            agents = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
            episodes = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
            flags = draw(st.lists(st.sampled_from([0, 0, 0, FLAG_TERMINAL, FLAG_TRUNCATED]), min_size=n, max_size=n))
            generation += draw(st.sampled_from([0, 0, 0, 1]))
            index += draw(st.sampled_from([1, 1, 1, 2]))  # 2: a batch dropped in between
            obs = np.stack([np.arange(row_id, row_id + n), np.full(n, s)], axis=1).astype(np.float32)
            row_id += n
            n_trunc, n_end = flags.count(FLAG_TRUNCATED), n - flags.count(0)
            batch = TransitionBatch(
                seq=index, generation=generation, version=draw(st.integers(0, 3)),
                agent=np.array(agents, np.uint32), episode=np.array(episodes, np.uint32), obs=obs,
                act=np.zeros((n, 1), np.float32), logp=np.zeros(n, np.float32), flags=np.array(flags, np.uint8),
                rew=None if terms else obs[:, 0] + 0.5,
                terms=np.repeat(obs[:, :1] + 0.5, 5, axis=1) if terms else None,
                next_obs=-np.arange(1, n_trunc + 1, dtype=np.float32)[:, None].repeat(OBS, axis=1) - 1000 * s,
                score=np.arange(n_end, dtype=np.float32) + 100 * s if terms else None,
            )  # fmt: skip
            arrivals.append(Arrival(f"s{s}", f"bot{s}", terms, index, batch))
        if draw(st.booleans()):
            arrivals.append(Arrival(f"s{s}", f"bot{s}", terms, index + 1, None))
        per_session.append(arrivals)
    merged: list[Arrival] = []
    while any(per_session):
        pick = draw(st.sampled_from([i for i, own in enumerate(per_session) if own]))
        merged.append(per_session[pick].pop(0))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(merged) - 1)), max_size=4))))
    bounds = [0, *cuts, len(merged)]
    return [merged[a:b] for a, b in itertools.pairwise(bounds) if a < b]


@settings(max_examples=300, deadline=None)
@given(drains=drained_streams(), segment_steps=st.sampled_from([1, 2, 3, 100]))
def test_bulk_assembly_matches_the_row_by_row_rules(drains, segment_steps):
    """However arrivals of several bots and modes interleave and are drained, the bulk assembler closes
    exactly the segments the row-by-row rules close: same rows, ends, bootstraps, versions, scores."""
    builder = SegmentBuilder(segment_steps, reward=REWARD)
    got = [segment for drain in drains for segment in builder.add(drain)]
    key = lambda t: (t[0], t[1], t[2])  # noqa: E731
    assert sorted(as_tuples(got), key=key) == sorted(reference_segments(drains, segment_steps), key=key)
    for segment in got:
        assert segment.obs.dtype == segment.act.dtype == segment.logp.dtype == np.float32
        # The drain-wide running sum gives each segment what summing its own rewards gives.
        expected = float(segment_rewards(segment).astype(np.float64).sum())
        assert segment.reward_sum == pytest.approx(expected, rel=1e-6, abs=1e-3)
