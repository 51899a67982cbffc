"""Segment assembly: rows of many agents → per-agent segments, with the right ends and bootstraps."""

from __future__ import annotations

import numpy as np

from agents import SegmentEnd
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, TransitionBatch
from server.assembler import SegmentAssembler, SegmentBuilder
from server.transition_queue import Arrival, TransitionQueue

OBS = 2


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
    asm = SegmentAssembler("b", terms=True, segment_steps=100)
    out = asm.add(rows([0, 1, 1], [FLAG_TERMINAL, 0, FLAG_TRUNCATED], next_obs=[[7, 1]], scores=[10.0, 20.0]))
    assert {s.agent: s.score for s in out} == {0: 10.0, 1: 20.0}


def test_builder_joins_runs_and_never_bridges_a_gap():
    """Consecutive arrivals are assembled as one; a missing arrival index cuts the open segments."""
    builder = SegmentBuilder(segment_steps=100)
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
