"""Sans-I/O tests of bot_protocol.batching: the step recorder and batch splitting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    ErrorCode,
    PolicyId,
    ProtocolError,
    RewardMode,
    SessionSpec,
    Step,
    StepRecorder,
    decode_from_bot,
    encode,
)
from bot_protocol.batching import concat_batches, split_batch
from tests.bot_protocol.helpers import MAX, TERMS_SPEC, make_batch, wire_of


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


# ── discrete branches: dact and mask ─────────────────────────────────────────

MIXED_SPEC = SessionSpec(4, 2, 2, RewardMode.SCALAR, branches=(3, 2))


def _discrete_step(n: int = 2, mask=None, dact=None, **other) -> Step:
    dact = [[2, 1], [0, 0]][:n] if dact is None else dact
    return Step(np.ones((n, 4)), np.full((n, 2), 0.5), np.zeros(n), reward=np.zeros(n), dact=dact, mask=mask, **other)


def test_recorder_keeps_dact_and_mask_rows_and_the_server_reads_them():
    """A discrete bot's rows carry dact and mask; steps recorded without a mask are all legal."""
    rec = StepRecorder(4, 2, 2, RewardMode.SCALAR, batch_steps=4, branches=(3, 2))
    legal = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]], bool)
    assert rec.record(_discrete_step(mask=legal), PolicyId(0, 1)) is None
    batch = rec.record(_discrete_step(), PolicyId(0, 1))
    assert batch is not None and batch.dact.dtype == np.uint32 and batch.mask.dtype == np.uint8
    assert batch.dact.tolist() == [[2, 1], [0, 0]] * 2
    assert batch.mask.tolist() == legal.astype(int).tolist() + [[1] * 5] * 2
    out = decode_from_bot(encode(batch), MIXED_SPEC, MAX)
    assert out.act.tobytes() == MIXED_SPEC.actions.pack(batch.act, batch.dact, batch.mask).tobytes()


def test_a_discrete_only_recorder_needs_no_actions_and_sends_no_mask_unless_given():
    rec = StepRecorder(4, 0, 1, RewardMode.SCALAR, batch_steps=1, branches=(4,))
    batch = rec.record(Step(np.ones((1, 4)), None, [0.0], reward=[1.0], dact=[[3]]), PolicyId(0, 0))
    assert batch.act.shape == (1, 0) and batch.mask is None and "mask" not in wire_of(batch)
    spec = SessionSpec(4, 0, 1, RewardMode.SCALAR, branches=(4,))
    assert spec.actions.unpack(decode_from_bot(encode(batch), spec, MAX).act)[1].tolist() == [[3]]


@pytest.mark.parametrize(
    ("step", "code"),
    [
        (_discrete_step(dact=[[3, 0], [0, 0]]), ErrorCode.BAD_ACTION),
        (_discrete_step(dact=[[-1, 0], [0, 0]]), ErrorCode.BAD_ACTION),
        (_discrete_step(mask=[[1, 1, 1, 0, 0], [1] * 5]), ErrorCode.BAD_MASK),
        (_discrete_step(mask=[[1, 1, 2, 1, 1], [1] * 5]), ErrorCode.BAD_MASK),
        (_discrete_step(mask=[[1, 1, 0, 1, 1], [1] * 5]), ErrorCode.ILLEGAL_ACTION),  # row 0 took action 2 of branch 0
    ],
)
def test_recorder_refuses_what_the_server_would_with_its_code(step, code):
    """A bad dact or mask surfaces in the bot with the server's code, and nothing of the step is held."""
    rec = StepRecorder(4, 2, 2, RewardMode.SCALAR, branches=(3, 2))
    with pytest.raises(ProtocolError) as info:
        rec.record(step, PolicyId(0, 0))
    assert info.value.code is code and len(rec) == 0


def test_recorder_refuses_missing_or_stray_discrete_columns():
    with pytest.raises(ValueError, match="dact= "):
        StepRecorder(4, 2, 2, RewardMode.SCALAR, branches=(3, 2)).record(_discrete_step()._replace(dact=None), PolicyId(0, 0))
    with pytest.raises(ValueError, match="dact has shape"):
        StepRecorder(4, 2, 2, RewardMode.SCALAR, branches=(3, 2)).record(_discrete_step(dact=[1, 2, 0]), PolicyId(0, 0))
    for stray in ({"dact": [[0]] * 2}, {"dact": None, "mask": [[1]] * 2}):
        with pytest.raises(ValueError, match="hello lists discrete branches"):
            StepRecorder(4, 2, 2, RewardMode.SCALAR).record(_discrete_step()._replace(**stray), PolicyId(0, 0))
    with pytest.raises(ValueError, match="act_dim must be >= 1 unless"):
        StepRecorder(4, 0, 2, RewardMode.SCALAR)


def test_split_and_concat_keep_dact_and_mask_with_their_rows():
    rec = StepRecorder(4, 2, 2, RewardMode.SCALAR, batch_steps=100, branches=(3, 2))
    for t in range(3):
        rec.record(
            _discrete_step(mask=np.ones((2, 5)) if t == 1 else None, truncated=[t == 2, False], next_obs=np.ones((2, 4))),
            PolicyId(0, 0),
        )
    batch = rec.flush()
    pieces = split_batch(batch, 4)
    assert [p.n for p in pieces] == [4, 2]
    assert np.concatenate([p.dact for p in pieces]).tobytes() == batch.dact.tobytes()
    assert np.concatenate([p.mask for p in pieces]).tobytes() == batch.mask.tobytes()
    assert concat_batches(pieces).mask.tobytes() == batch.mask.tobytes()
    unmasked = replace(pieces[1], mask=None)
    assert concat_batches([pieces[0], unmasked]).mask.tolist() == batch.mask.tolist()  # the rows without a mask: all ones
    for piece in pieces:
        assert decode_from_bot(encode(piece), MIXED_SPEC, MAX).n == piece.n
