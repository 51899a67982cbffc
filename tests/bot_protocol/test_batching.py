"""Sans-I/O tests of bot_protocol.batching: the step recorder and batch splitting."""

from __future__ import annotations

import numpy as np
import pytest

from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    PolicyId,
    RewardMode,
    SessionSpec,
    Step,
    StepRecorder,
    decode_from_bot,
    encode,
)
from tests.bot_protocol.helpers import MAX, TERMS_SPEC, make_batch


def test_recorder_cuts_batches_and_tracks_episodes():
    """Rows become batches of batch_steps; ends bump episode ids; next_obs/score keep row order."""
    rec = StepRecorder(obs_dim=4, act_dim=2, n_agents=2, reward=RewardMode.TERMS, batch_steps=4)
    obs = np.zeros((2, 4), np.float32)
    act = np.zeros((2, 2), np.float32)
    policy = PolicyId(0, 1)
    assert rec.record(Step(obs, act, np.zeros(2), terms=np.zeros((2, 5))), policy) is None
    batch = rec.record(
        Step(
            obs,
            act,
            np.zeros(2),
            terms=np.zeros((2, 5)),
            terminal=[True, False],
            truncated=[False, True],
            next_obs=np.full((2, 4), 7.0),
            score=[10.0, 20.0],
        ),
        policy,
    )
    assert batch is not None and batch.n == 4
    assert batch.flags.tolist() == [0, 0, FLAG_TERMINAL, FLAG_TRUNCATED]
    assert batch.score.tolist() == [10.0, 20.0]
    assert batch.next_obs.tolist() == [[7.0] * 4]
    assert rec.episode.tolist() == [1, 1]
    # A policy swap cuts the held rows so one batch never mixes policy versions.
    assert rec.record(Step(obs, act, np.zeros(2), terms=np.zeros((2, 5))), policy) is None
    swapped = rec.record(Step(obs, act, np.zeros(2), terms=np.zeros((2, 5))), PolicyId(0, 2))
    assert swapped is not None and swapped.version == 1 and swapped.n == 2 and len(rec) == 2
    assert decode_from_bot(encode(swapped), SessionSpec(4, 2, 2, RewardMode.TERMS), MAX).n == 2


def test_recorder_refuses_missing_columns():
    """Bugs in a bot (missing next_obs, wrong mode) surface before anything is sent."""
    rec = StepRecorder(obs_dim=4, act_dim=2, n_agents=1, reward=RewardMode.SCALAR)
    with pytest.raises(ValueError, match="next_obs"):
        rec.record(Step(np.zeros(4), np.zeros(2), [0.0], reward=[1.0], truncated=[True]), PolicyId(0, 0))
    with pytest.raises(ValueError, match="reward"):
        rec.record(Step(np.zeros(4), np.zeros(2), [0.0], terms=np.zeros((1, 5))), PolicyId(0, 0))


def test_split_batch_keeps_conditional_columns_with_their_rows():
    """Splitting a batch gives pieces whose next_obs/score rows belong to their own flagged rows."""
    from bot_protocol.batching import split_batch

    flags = [0, FLAG_TRUNCATED, FLAG_TERMINAL, 0, FLAG_TRUNCATED, 0, FLAG_TERMINAL]
    batch = make_batch(7, flags, terms=True)
    pieces = split_batch(batch, 3)
    assert [p.n for p in pieces] == [3, 3, 1]
    assert np.concatenate([p.next_obs for p in pieces]).tobytes() == batch.next_obs.tobytes()
    assert np.concatenate([p.score for p in pieces]).tobytes() == batch.score.tobytes()
    for piece in pieces:  # each piece is a valid message on its own
        assert decode_from_bot(encode(piece), TERMS_SPEC, MAX).n == piece.n


def test_recorder_copies_rows_so_reused_buffers_cannot_change_them():
    """A bot that reuses one action buffer every tick still sends what it acted with."""
    rec = StepRecorder(obs_dim=4, act_dim=2, n_agents=1, reward=RewardMode.SCALAR, batch_steps=2)
    buffer = np.zeros((1, 2), np.float32)
    for value in (1.0, 2.0):
        buffer[:] = value
        batch = rec.record(Step(np.zeros((1, 4), np.float32), buffer, np.zeros(1, np.float32), reward=[0.0]), PolicyId(0, 0))
    assert batch is not None and batch.act[:, 0].tolist() == [1.0, 2.0]
