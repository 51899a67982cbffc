"""Sans-I/O tests of ``tr`` in sessions with discrete branches: the dact and mask columns, their codes, the packed act.

A session with branches reads ``dact`` (uint32, one column per branch) and an optional
``mask`` (uint8, one column per discrete action); the batch it checks carries one packed
float block in ``act``. A continuous-only session refuses both columns and is otherwise
untouched: its frames are the bytes they always were.
"""

from __future__ import annotations

from dataclasses import replace

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    ErrorCode,
    ProtocolError,
    RewardMode,
    SessionSpec,
    TransitionBatch,
    TransitionHeader,
    assemble_batches,
    decode_from_bot,
    encode,
)
from tests.bot_protocol.helpers import MAX, SPEC, TERMS_SPEC, assert_code, make_batch, make_discrete_batch, mutate, wire_of

DISCRETE = SessionSpec(4, 0, 3, RewardMode.SCALAR, branches=(5,))
MULTI = SessionSpec(4, 0, 3, RewardMode.SCALAR, branches=(3, 1, 4))
MIXED = SessionSpec(4, 2, 3, RewardMode.TERMS, branches=(3, 2))
SPACES = [DISCRETE, MULTI, MIXED]


def _frame(batch: TransitionBatch, **changes) -> dict:
    """``batch``'s decoded wire map with fields replaced (None removes one)."""
    fields = wire_of(batch)
    for key, value in changes.items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    return fields


def _refusal(fields: dict, spec: SessionSpec) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        TransitionBatch.from_wire(fields, spec)
    return info.value.code


# ── round trips ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("spec", SPACES, ids=["discrete", "multi-discrete", "mixed"])
@pytest.mark.parametrize("masked", [True, False])
def test_discrete_batch_round_trips_into_the_packed_block(spec, masked):
    """Every column survives bit for bit; act comes back as [act | dact | mask] (ones without a mask)."""
    flags = [0, FLAG_TRUNCATED, 0, FLAG_TERMINAL, 0, 0]
    batch = make_discrete_batch(spec, 6, flags, masked=masked)
    out = decode_from_bot(encode(batch), spec, MAX)
    assert isinstance(out, TransitionBatch) and out.dact is None and out.mask is None
    space = spec.actions
    assert out.act.dtype == np.float32 and out.act.shape == (6, space.packed_width)
    assert out.act.tobytes() == space.pack(batch.act, batch.dact, batch.mask).tobytes()
    cont, dact, legal = space.unpack(out.act)
    assert cont.tobytes() == batch.act.tobytes() and dact.tolist() == batch.dact.tolist()
    assert legal.all() if not masked else legal.tolist() == batch.mask.astype(bool).tolist()
    for name in ("agent", "episode", "obs", "logp", "flags", "rew", "terms", "next_obs", "score"):
        a, b = getattr(batch, name), getattr(out, name)
        assert (a is None and b is None) or a.tobytes() == b.tobytes(), name


@pytest.mark.parametrize("act", [None, b""])
def test_without_continuous_dims_act_is_absent_or_empty(act):
    """act_dim 0: the act field may be left out or sent as an empty bin."""
    batch = make_discrete_batch(DISCRETE, 4)
    out = TransitionBatch.from_wire(_frame(batch, act=act), DISCRETE)
    assert out.act.shape == (4, DISCRETE.actions.packed_width)


def test_the_bot_side_batch_sends_dact_and_mask_as_the_wire_types():
    """to_wire writes dact as <u4 and mask as u1 rows, and counts them in nbytes."""
    batch = make_discrete_batch(MULTI, 3)
    wire = wire_of(batch)
    assert wire["dact"] == batch.dact.astype("<u4").tobytes() and len(wire["dact"]) == 3 * 3 * 4
    assert wire["mask"] == batch.mask.tobytes() and len(wire["mask"]) == 3 * 8
    assert batch.nbytes == make_batch(3).nbytes - 3 * 2 * 4 + 3 * 3 * 4 + 3 * 8  # act of width 0 here


# ── shapes and fields ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"dact": None}, ErrorCode.BAD_FIELD),  # required with branches
        ({"dact": [0, 1, 2, 0]}, ErrorCode.BAD_FIELD),  # an array, not bin
        ({"dact": bytes(4 * 4 * 2 - 4)}, ErrorCode.SHAPE),
        ({"dact": bytes(4 * 4 * 2 + 4)}, ErrorCode.SHAPE),
        ({"dact": bytes(2 * 4 * 2)}, ErrorCode.SHAPE),  # uint16 bytes
        ({"mask": bytes(4 * 5 - 1)}, ErrorCode.SHAPE),
        ({"mask": bytes(4 * 5 * 4)}, ErrorCode.SHAPE),  # a float32 mask
        ({"mask": "1"}, ErrorCode.BAD_FIELD),
        ({"act": bytes(4 * 4 * 3)}, ErrorCode.SHAPE),  # 3 continuous dims, the session has 2
        ({"act": None}, ErrorCode.BAD_FIELD),  # required when there are continuous dims
    ],
)
def test_discrete_column_shapes(changes, code):
    """Wrong byte lengths are refused as shape, missing or mistyped columns as bad_field."""
    batch = make_discrete_batch(MIXED, 4)
    assert_code(code, mutate(batch, **changes), MIXED)


def test_act_bytes_refused_when_there_are_no_continuous_dims():
    assert_code(ErrorCode.SHAPE, mutate(make_discrete_batch(DISCRETE, 4), act=bytes(16)), DISCRETE)


@pytest.mark.parametrize("key", ["dact", "mask"])
@pytest.mark.parametrize("spec", [SPEC, TERMS_SPEC])
def test_a_continuous_session_refuses_the_discrete_columns(key, spec):
    """dact or mask in a session without branches is bad_field, even well-formed (through the fast path's reader too)."""
    batch = make_batch(4, [0, FLAG_TERMINAL, 0, 0], terms=spec is TERMS_SPEC)
    fields = _frame(batch, **{key: bytes(4)})
    with pytest.raises(ProtocolError) as info:
        TransitionHeader.from_wire(fields, spec)
    assert info.value.code is ErrorCode.BAD_FIELD and key in info.value.message
    assert_code(ErrorCode.BAD_FIELD, msgpack.packb(fields, use_bin_type=True), spec)


# ── values: bad_action, bad_mask, illegal_action ─────────────────────────────


def _bad(kind: str, batch: TransitionBatch, spec: SessionSpec) -> TransitionBatch:
    """``batch`` made wrong in one value of row 2 the way ``kind`` says."""
    space = spec.actions
    dact, mask = batch.dact.copy(), batch.mask.copy()
    last = space.n_branches - 1
    start, size = space.offsets[last], space.branches[last]
    if kind == "bad_action":
        dact[2, last] = size
    elif kind == "not_0_or_1":
        mask[2, start] = 2
    elif kind == "empty_branch":
        mask[2, start : start + size] = 0
    elif kind == "illegal_action":
        mask[2, start + dact[2, last]] = 0
        mask[2, start + (dact[2, last] + 1) % size] = 1
    return replace(batch, dact=dact, mask=mask)


VALUE_ERRORS = [
    ("bad_action", ErrorCode.BAD_ACTION),
    ("not_0_or_1", ErrorCode.BAD_MASK),
    ("empty_branch", ErrorCode.BAD_MASK),
    ("illegal_action", ErrorCode.ILLEGAL_ACTION),
]


@pytest.mark.parametrize("spec", [DISCRETE, MIXED], ids=["discrete", "mixed"])
@pytest.mark.parametrize(("kind", "code"), VALUE_ERRORS)
def test_value_errors_through_from_wire(spec, kind, code):
    """Each bad discrete value is refused with its own code by TransitionBatch.from_wire."""
    batch = _bad(kind, make_discrete_batch(spec, 4), spec)
    assert _refusal(wire_of(batch), spec) is code
    assert_code(code, encode(batch), spec)


def _headers(spec: SessionSpec, batches: list[TransitionBatch]) -> list[TransitionHeader]:
    return [TransitionHeader.from_wire(wire_of(b), spec) for b in batches]


@pytest.mark.parametrize("spec", [DISCRETE, MIXED], ids=["discrete", "mixed"])
@pytest.mark.parametrize(("kind", "code"), VALUE_ERRORS)
def test_value_errors_through_assemble_batches_on_several_frames(spec, kind, code):
    """A bad frame among good ones: explained with its code, or None for the one-by-one pass; alone, the good ones join."""
    frames = [make_discrete_batch(spec, 4, seq=s, seed=s) for s in (1, 2, 3)]
    frames[1] = _bad(kind, frames[1], spec)
    headers = _headers(spec, frames)
    with pytest.raises(ProtocolError) as info:
        assemble_batches(headers, spec, explain=True)
    assert info.value.code is code
    assert assemble_batches(headers, spec, explain=False) is None
    assert assemble_batches([headers[0], headers[2]], spec, explain=False).n == 8


def test_float_checks_come_before_discrete_ones():
    """A frame with both a NaN and a bad action is refused for the NaN (the values pass's order)."""
    batch = _bad("bad_action", make_discrete_batch(MIXED, 4), MIXED)
    obs = batch.obs.copy()
    obs[0, 0] = np.nan
    assert _refusal(wire_of(replace(batch, obs=obs)), MIXED) is ErrorCode.NONFINITE
    agent = np.array([0, 1, 2, 7], np.uint32)  # an agent past n_agents: bad_field, before any value
    assert _refusal(wire_of(replace(batch, agent=agent)), MIXED) is ErrorCode.BAD_FIELD


# ── joining frames ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("spec", SPACES, ids=["discrete", "multi-discrete", "mixed"])
def test_several_discrete_frames_join_in_order(spec):
    """The server joins frames of a discrete session as of any other: rows in order, a frame without a mask all legal."""
    flags = [[0, FLAG_TRUNCATED, 0], [FLAG_TERMINAL, 0, 0], [0, 0, FLAG_TRUNCATED]]
    frames = [make_discrete_batch(spec, 3, flags[i], masked=i != 1, seq=i + 1, seed=i) for i in range(3)]
    batch = assemble_batches(_headers(spec, frames), spec, explain=True)
    assert batch is not None and batch.n == 9 and batch.seq == 3
    masks = [f.mask if f.mask is not None else np.ones((3, spec.actions.n_logits), np.uint8) for f in frames]
    expected = spec.actions.pack(
        np.concatenate([f.act for f in frames]), np.concatenate([f.dact for f in frames]), np.concatenate(masks)
    )
    assert batch.act.tobytes() == expected.tobytes()
    assert batch.obs.tobytes() == np.concatenate([f.obs for f in frames]).tobytes()
    assert batch.next_obs.tobytes() == np.concatenate([f.next_obs for f in frames]).tobytes()
    assert batch.flags.tolist() == [f for row in flags for f in row]


def test_frames_without_masks_join_without_one():
    frames = [make_discrete_batch(MULTI, 2, masked=False, seq=s, seed=s) for s in (1, 2)]
    batch = assemble_batches(_headers(MULTI, frames), MULTI, explain=True)
    assert MULTI.actions.unpack(batch.act)[2].all()


# ── continuous sessions: unchanged ───────────────────────────────────────────


@pytest.mark.parametrize("terms", [False, True])
def test_continuous_frames_are_the_bytes_they_were(terms):
    """A continuous bot's frame is the old map, in the old order; decoded, it has no discrete columns."""
    batch = make_batch(4, [0, FLAG_TRUNCATED, FLAG_TERMINAL, 0], terms=terms)
    assert batch.dact is None and batch.mask is None
    old = {"v": 1, "t": "tr", "seq": 5, "gen": 0, "ver": 3, "n": 4}
    old |= {"agent": batch.agent.tobytes(), "episode": batch.episode.tobytes(), "obs": batch.obs.tobytes()}
    old |= {"act": batch.act.tobytes(), "logp": batch.logp.tobytes(), "flags": batch.flags.tobytes()}
    old |= {"terms": batch.terms.tobytes()} if terms else {"rew": batch.rew.tobytes()}
    old |= {"next_obs": batch.next_obs.tobytes()}
    old |= {"score": batch.score.tobytes()} if terms else {}
    assert encode(batch) == msgpack.packb(old, use_bin_type=True)
    out = decode_from_bot(encode(batch), TERMS_SPEC if terms else SPEC, MAX)
    assert out.dact is None and out.mask is None and out.act.tobytes() == batch.act.tobytes()


def test_continuous_frames_take_the_fast_path(monkeypatch):
    """A well-formed continuous frame never reaches the checked reader; a discrete session's always does."""

    def refuse(*args):
        raise AssertionError("took the checked reader")

    monkeypatch.setattr(TransitionHeader, "_from_wire_checked", classmethod(refuse))
    for terms in (False, True):
        batch = make_batch(4, [0, FLAG_TRUNCATED, FLAG_TERMINAL, 0], terms=terms)
        TransitionHeader.from_wire(wire_of(batch), TERMS_SPEC if terms else SPEC)
    with pytest.raises(AssertionError, match="checked reader"):
        TransitionHeader.from_wire(wire_of(make_discrete_batch(DISCRETE)), DISCRETE)
