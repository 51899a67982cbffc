"""Sans-I/O tests of ``tr`` in sessions of a recurrent actor: the ``state`` column, its checks and the recorder's part.

A recurrent run's rows each carry the state their action was chosen from (docs/protocol.md §3.7.1,
§4.7), of the actor's ``state_size``; a memoryless run forbids the column, so its frames are the
bytes they always were.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bot_protocol import (
    FLAG_TRUNCATED,
    ErrorCode,
    PolicyId,
    ProtocolError,
    RewardMode,
    SessionSpec,
    Step,
    StepRecorder,
    TransitionBatch,
    decode_from_bot,
    encode,
)
from tests.bot_protocol.helpers import MAX, SPEC, make_batch, wire_of

STATE = 6
RECURRENT = SessionSpec(4, 2, 3, RewardMode.SCALAR, state_size=STATE)
MIXED = SessionSpec(4, 2, 3, RewardMode.SCALAR, branches=(3,), state_size=STATE)


def stateful(n: int = 4, flags: list[int] | None = None) -> TransitionBatch:
    rng = np.random.default_rng(1)
    return replace(make_batch(n, flags), state=rng.uniform(-1, 1, (n, STATE)).astype(np.float32))


def _refusal(fields: dict, spec: SessionSpec) -> tuple[ErrorCode, str]:
    with pytest.raises(ProtocolError) as info:
        TransitionBatch.from_wire(fields, spec)
    return info.value.code, info.value.message


def test_the_state_column_round_trips_bit_for_bit():
    batch = stateful(5, [0, FLAG_TRUNCATED, 0, 0, 0])
    out = decode_from_bot(encode(batch), RECURRENT, MAX)
    assert isinstance(out, TransitionBatch) and out.state is not None
    assert out.state.shape == (5, STATE) and out.state.tobytes() == batch.state.tobytes()
    assert out.obs.tobytes() == batch.obs.tobytes() and out.next_obs.tobytes() == batch.next_obs.tobytes()


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (lambda f: f.pop("state"), ErrorCode.BAD_FIELD, "state"),
        (lambda f: f.update(state=f["state"][:-4]), ErrorCode.SHAPE, "field 'state' holds 92 bytes, expected 96"),
        (lambda f: f.update(state=np.full((4, STATE), np.nan, np.float32).tobytes()), ErrorCode.NONFINITE, "state"),
        (lambda f: f.update(state=np.full((4, STATE), 1e30, np.float32).tobytes()), ErrorCode.RANGE, "state"),
    ],
    ids=["missing", "wrong-size", "nan", "out-of-range"],
)
def test_a_bad_state_column_is_named(change, code: ErrorCode, words: str):
    fields = wire_of(stateful())
    change(fields)
    got, message = _refusal(fields, RECURRENT)
    assert got is code and words in message, message


def test_a_memoryless_session_forbids_the_column():
    code, message = _refusal(wire_of(stateful()), SPEC)
    assert code is ErrorCode.BAD_FIELD and "state" in message


def test_a_discrete_recurrent_session_reads_both_kinds_of_columns():
    from tests.bot_protocol.helpers import make_discrete_batch

    batch = replace(make_discrete_batch(MIXED, 4), state=np.ones((4, STATE), np.float32))
    out = decode_from_bot(encode(batch), MIXED, MAX)
    assert isinstance(out, TransitionBatch) and out.state is not None and out.state.tolist() == [[1.0] * STATE] * 4


def test_the_recorder_carries_states_and_refuses_their_absence():
    recorder = StepRecorder(4, 2, 3, RewardMode.SCALAR, batch_steps=6, state_size=STATE)
    rows = {"obs": np.zeros((3, 4)), "actions": np.zeros((3, 2)), "logp": np.zeros(3), "reward": np.zeros(3)}
    assert recorder.record(Step(**rows, state=np.full((3, STATE), 0.5)), PolicyId(0, 1)) is None
    batch = recorder.record(Step(**rows, state=np.full((3, STATE), 0.25)), PolicyId(0, 1))
    assert batch is not None and batch.state is not None and batch.state[:, 0].tolist() == [0.5] * 3 + [0.25] * 3
    with pytest.raises(ValueError, match="state= \\(3, 6\\) is required"):
        recorder.record(Step(**rows), PolicyId(0, 1))
    with pytest.raises(ValueError, match="state= is for bots"):
        StepRecorder(4, 2, 3, RewardMode.SCALAR).record(Step(**rows, state=np.zeros((3, STATE))), PolicyId(0, 1))
