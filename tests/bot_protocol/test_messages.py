"""Sans-I/O tests of wire format v1: golden bytes, round trips, and every refusal — no sockets."""

from __future__ import annotations

import hashlib
import struct
import time

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    Architecture,
    Bye,
    Credit,
    Error,
    ErrorCode,
    Hello,
    Limits,
    Policy,
    ProtocolError,
    RewardMode,
    SessionSpec,
    StepRecorder,
    TransitionBatch,
    Weights,
    Welcome,
    decode_from_bot,
    decode_from_server,
    decode_tensors,
    encode,
    encode_tensors,
)

MAX = 1 << 20
SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.SCALAR)
TERMS_SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.TERMS)


def make_batch(n: int = 4, flags: list[int] | None = None, terms: bool = False, seq: int = 5) -> TransitionBatch:
    rng = np.random.default_rng(0)
    f = np.array(flags if flags is not None else [0] * n, dtype=np.uint8)
    n_trunc = int((f == FLAG_TRUNCATED).sum())
    n_end = int((f != 0).sum())
    return TransitionBatch(
        seq=seq,
        generation=0,
        version=3,
        agent=(np.arange(n) % 3).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, 4)).astype(np.float32),
        act=rng.standard_normal((n, 2)).astype(np.float32),
        logp=rng.standard_normal(n).astype(np.float32),
        flags=f,
        rew=None if terms else rng.standard_normal(n).astype(np.float32),
        terms=rng.standard_normal((n, 5)).astype(np.float32) if terms else None,
        next_obs=rng.standard_normal((n_trunc, 4)).astype(np.float32),
        score=rng.standard_normal(n_end).astype(np.float32) if terms else None,
    )


def wire_of(batch: TransitionBatch) -> dict:
    return msgpack.unpackb(encode(batch), raw=False)


def reencode(fields: dict) -> bytes:
    return msgpack.packb(fields, use_bin_type=True)


def assert_code(code: ErrorCode, data: bytes, spec: SessionSpec | None = SPEC) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_from_bot(data, spec, MAX)
    assert info.value.code is code, info.value


# ── golden bytes ─────────────────────────────────────────────────────────────


def test_credit_golden_bytes():
    """Serializing a credit yields these exact bytes; parsing them yields the credit."""
    golden = bytes.fromhex("84a17601a174a6637265646974a56772616e7404a361636b07")
    assert encode(Credit(grant=4, ack=7)) == golden
    assert decode_from_server(golden) == Credit(grant=4, ack=7)


def test_hello_golden_bytes():
    """Serializing a hello yields these exact bytes; parsing them yields the hello."""
    hello = Hello("bot", 4, 2, 3, RewardMode.SCALAR, "x")
    golden = bytes.fromhex(
        "88a17601a174a568656c6c6fa46e616d65a3626f74a76f62735f64696d04a76163745f64696d02a86e5f6167656e747303"
        "a6726577617264a67363616c6172a6636c69656e74a178"
    )
    assert encode(hello) == golden
    assert decode_from_bot(golden, None, MAX) == hello


# ── round trips ──────────────────────────────────────────────────────────────


def _weights() -> Weights:
    blob = encode_tensors(
        {"l0.weight": np.ones((2, 4), np.float32), "l0.bias": np.zeros(2, np.float32), "log_std": np.full(2, -0.5, np.float32)}
    )
    arch = Architecture("gaussian_mlp", (4, 2), "tanh", -3.0, 0.0)
    return Weights(1, 7, arch, blob, hashlib.sha256(blob).digest())


@pytest.mark.parametrize(
    "message",
    [
        Credit(grant=8, ack=0),
        Error("shape", "bad", 12),
        Error("internal", "oops", None),
        _weights(),
        Welcome("bot-1", "abc", "ppo", Limits(), 8, _weights(), {"noise": 0.1}),
    ],
)
def test_server_messages_round_trip(message):
    """Every server → bot message decodes to itself."""
    assert decode_from_server(encode(message)) == message


@pytest.mark.parametrize("message", [Hello("b", 4, 2), Hello("b", 4, 2, 7, RewardMode.TERMS), Bye("done"), Bye()])
def test_bot_messages_round_trip(message):
    """hello and bye decode to themselves."""
    assert decode_from_bot(encode(message), None, MAX) == message


@pytest.mark.parametrize("terms", [False, True])
def test_transition_batch_round_trip_bitwise(terms):
    """A batch with truncations and ends survives encode → decode bit for bit."""
    batch = make_batch(6, [0, FLAG_TRUNCATED, 0, FLAG_TERMINAL, 0, FLAG_TRUNCATED], terms=terms)
    out = decode_from_bot(encode(batch), TERMS_SPEC if terms else SPEC, MAX)
    assert isinstance(out, TransitionBatch)
    assert (out.seq, out.generation, out.version) == (batch.seq, batch.generation, batch.version)
    for name in ("agent", "episode", "obs", "act", "logp", "flags", "rew", "terms", "next_obs", "score"):
        a, b = getattr(batch, name), getattr(out, name)
        if a is None:
            assert b is None
        else:
            assert a.tobytes() == b.tobytes(), name
    assert out.next_obs.shape == (2, 4)


# ── refusals ─────────────────────────────────────────────────────────────────


def test_trailing_bytes_rejected():
    """A valid message followed by one more byte is undecodable (parser differentials)."""
    assert_code(ErrorCode.UNDECODABLE, encode(Hello("b", 4, 2)) + b"\x00", None)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b"\x93\x01\x02\x03",
        msgpack.packb([1, 2]),
        b"\xdd\xff\xff\xff\xff",
        b"\xdf\xff\xff\xff\xff",
        b"\xc6\xff\xff\xff\xff",
        b"\xdb\xff\xff\xff\xff",
    ],
)
def test_garbage_and_giant_headers_rejected(data):
    """Garbage, non-map frames and headers claiming 4 G elements are refused with one error type."""
    assert_code(ErrorCode.UNDECODABLE, data, None)


def test_many_small_containers_are_refused_before_they_pile_up():
    """A frame of thousands of tiny maps is refused after MAX_CONTAINERS of them, not after building all."""
    inner = b"\x81\xa1k\x80"  # {"k": {}}
    data = b"\xdf" + struct.pack(">I", 40) + b"".join(b"\xa2" + f"{i:02d}".encode() + inner for i in range(40))
    assert_code(ErrorCode.UNDECODABLE, data, None)


def test_amplification_frame_rejected_cheaply():
    """1 MiB of empty arrays inside an array32 is refused in well under a millisecond per frame."""
    data = b"\xdd" + struct.pack(">I", MAX) + b"\x90" * MAX
    start = time.perf_counter()
    assert_code(ErrorCode.UNDECODABLE, data, None)
    assert time.perf_counter() - start < 0.5  # generous bound on a noisy machine; measured ~0.01 ms


def test_deep_nesting_rejected():
    """Nesting beyond the container limit is refused, including far past msgpack's own limit."""
    for depth in (20, 1025, 100_000):
        data = b"\x81\xa1a" * depth + b"\xc0"
        assert_code(ErrorCode.UNDECODABLE, data, None)


def test_ext_types_and_non_string_keys_rejected():
    """Ext types (incl. timestamps) and integer map keys are refused."""
    assert_code(ErrorCode.UNDECODABLE, msgpack.packb({"v": 1, "t": "hello", "x": msgpack.ExtType(1, b"ab")}), None)
    assert_code(ErrorCode.UNDECODABLE, b"\xd6\xff\x00\x00\x00\x00", None)  # timestamp ext
    assert_code(ErrorCode.UNDECODABLE, msgpack.packb({1: 1, "v": 1, "t": "hello"}), None)


def test_version_and_type_checks():
    """Missing/other versions and unknown types get their own codes."""
    assert_code(ErrorCode.BAD_VERSION, msgpack.packb({"t": "hello"}), None)
    assert_code(ErrorCode.BAD_VERSION, msgpack.packb({"v": 2, "t": "hello"}), None)
    assert_code(ErrorCode.BAD_VERSION, msgpack.packb({"v": True, "t": "hello"}), None)
    assert_code(ErrorCode.UNKNOWN_TYPE, msgpack.packb({"v": 1, "t": "launch_missiles"}), None)
    assert_code(ErrorCode.BAD_FIELD, msgpack.packb({"v": 1}), None)
    assert_code(ErrorCode.UNEXPECTED, encode(make_batch()), None)  # tr before the handshake


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("name", "", ErrorCode.BAD_FIELD),
        ("name", "x" * 65, ErrorCode.BAD_FIELD),
        ("obs_dim", 0, ErrorCode.BAD_FIELD),
        ("obs_dim", 1.5, ErrorCode.BAD_FIELD),
        ("act_dim", True, ErrorCode.BAD_FIELD),
        ("n_agents", 10**6, ErrorCode.BAD_FIELD),
        ("reward", "points", ErrorCode.BAD_FIELD),
    ],
)
def test_hello_field_checks(field, value, code):
    """Each hello field is type- and range-checked."""
    fields = msgpack.unpackb(encode(Hello("b", 4, 2)), raw=False)
    fields[field] = value
    assert_code(code, reencode(fields), None)


def _mutate(batch: TransitionBatch, **changes) -> bytes:
    fields = wire_of(batch)
    for key, value in changes.items():
        if value is None:
            fields.pop(key)
        else:
            fields[key] = value
    return reencode(fields)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"obs": np.zeros((4, 5), np.float32).tobytes()}, ErrorCode.SHAPE),  # wrong obs_dim
        ({"obs": np.zeros((4, 4), np.float64).tobytes()}, ErrorCode.SHAPE),  # float64 bytes
        ({"act": np.zeros((4, 3), np.float32).tobytes()}, ErrorCode.SHAPE),
        ({"logp": b""}, ErrorCode.SHAPE),
        ({"n": 0}, ErrorCode.BAD_FIELD),
        ({"n": -1}, ErrorCode.BAD_FIELD),
        ({"n": 5}, ErrorCode.SHAPE),
        ({"n": 2000}, ErrorCode.BAD_FIELD),  # beyond max_batch
        ({"agent": np.array([0, 1, 2, 3], np.uint32).tobytes()}, ErrorCode.BAD_FIELD),  # agent >= n_agents
        ({"flags": np.array([0, 3, 0, 0], np.uint8).tobytes()}, ErrorCode.BAD_FIELD),
        ({"flags": np.array([0, 4, 0, 0], np.uint8).tobytes()}, ErrorCode.BAD_FIELD),
        ({"obs": None}, ErrorCode.BAD_FIELD),
        ({"obs": [1.0, 2.0]}, ErrorCode.BAD_FIELD),  # float arrays are never msgpack arrays
        ({"seq": -1}, ErrorCode.BAD_FIELD),
        ({"terms": np.zeros((4, 5), np.float32).tobytes()}, ErrorCode.BAD_FIELD),  # terms in a scalar session
        ({"flags": np.array([0, 2, 0, 0], np.uint8).tobytes()}, ErrorCode.SHAPE),  # truncation without next_obs (§7.1)
    ],
)
def test_batch_shape_and_field_checks(changes, code):
    """Shapes come from the session spec; every mismatch is refused with a stable code."""
    assert_code(code, _mutate(make_batch(), **changes))


@pytest.mark.parametrize("field", ["obs", "act", "logp", "rew"])
@pytest.mark.parametrize(
    ("value", "code"),
    [(np.nan, ErrorCode.NONFINITE), (np.inf, ErrorCode.NONFINITE), (-np.inf, ErrorCode.NONFINITE), (2e6, ErrorCode.RANGE)],
)
def test_nonfinite_and_out_of_range_values(field, value, code):
    """NaN, ±Inf and |x| > max_abs in any float field are refused."""
    batch = make_batch()
    array = getattr(batch, field).copy()
    array.flat[-1] = value
    assert_code(code, _mutate(batch, **{field: array.astype(np.float32).tobytes()}))


def test_terms_session_requires_scores_for_ended_steps():
    """In terms mode every ended step needs a score row; rew is refused."""
    batch = make_batch(4, [0, FLAG_TERMINAL, 0, 0], terms=True)
    assert isinstance(decode_from_bot(encode(batch), TERMS_SPEC, MAX), TransitionBatch)
    assert_code(ErrorCode.SHAPE, _mutate(batch, score=None), TERMS_SPEC)  # left out while the flags call for a row (§7.1)
    assert_code(ErrorCode.SHAPE, _mutate(batch, score=np.zeros(2, np.float32).tobytes()), TERMS_SPEC)
    assert_code(ErrorCode.BAD_FIELD, _mutate(batch, rew=np.zeros(4, np.float32).tobytes()), TERMS_SPEC)


# ── weights blobs ────────────────────────────────────────────────────────────


def _blob_with_header(header: dict, data: bytes = b"") -> bytes:
    import json

    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        struct.pack("<Q", 2 << 20) + b"{}",  # header length beyond the 1 MiB cap
        struct.pack("<Q", 100) + b"{}",  # header runs past the end
        _blob_with_header({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, b"\x00" * 8),
        _blob_with_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\x00" * 4),
        _blob_with_header({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b""),
        _blob_with_header(
            {
                "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]},
            },
            b"\x00" * 8,
        ),
        _blob_with_header({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(1100)}),
        _blob_with_header([1, 2]),  # type: ignore[arg-type]
        struct.pack("<Q", 3) + b"\xff\xfe\xfd",
    ],
)
def test_bad_weight_blobs_rejected(blob):
    """Oversized headers, wrong dtypes, bad offsets, overlaps and entry floods are refused."""
    with pytest.raises(ProtocolError) as info:
        decode_tensors(blob)
    assert info.value.code is ErrorCode.BAD_WEIGHTS


def test_policy_rejects_wrong_shapes_and_bad_digest():
    """A bot keeps its policy unless the blob's digest and every tensor shape check out."""
    weights = _weights()
    Policy.from_weights(weights)  # the good one builds
    with pytest.raises(ProtocolError):
        Policy.from_weights(Weights(1, 8, weights.arch, weights.tensors, b"\x00" * 32))
    wrong = Architecture("gaussian_mlp", (5, 2), "tanh", -3.0, 0.0)
    with pytest.raises(ProtocolError):
        Policy.from_weights(Weights(1, 8, wrong, weights.tensors, weights.sha256))


# ── the step recorder ────────────────────────────────────────────────────────


def test_recorder_cuts_batches_and_tracks_episodes():
    """Rows become batches of batch_steps; ends bump episode ids; next_obs/score keep row order."""
    rec = StepRecorder(obs_dim=4, act_dim=2, n_agents=2, reward=RewardMode.TERMS, batch_steps=4)
    obs = np.zeros((2, 4), np.float32)
    act = np.zeros((2, 2), np.float32)
    kw = {"generation": 0, "version": 1}
    assert rec.record(obs, act, np.zeros(2), terms=np.zeros((2, 5)), **kw) is None
    batch = rec.record(
        obs,
        act,
        np.zeros(2),
        terms=np.zeros((2, 5)),
        terminal=[True, False],
        truncated=[False, True],
        next_obs=np.full((2, 4), 7.0),
        score=[10.0, 20.0],
        **kw,
    )
    assert batch is not None and batch.n == 4
    assert batch.flags.tolist() == [0, 0, FLAG_TERMINAL, FLAG_TRUNCATED]
    assert batch.score.tolist() == [10.0, 20.0]
    assert batch.next_obs.tolist() == [[7.0] * 4]
    assert rec.episode.tolist() == [1, 1]
    # A policy swap cuts the held rows so one batch never mixes policy versions.
    assert rec.record(obs, act, np.zeros(2), terms=np.zeros((2, 5)), **kw) is None
    swapped = rec.record(obs, act, np.zeros(2), terms=np.zeros((2, 5)), generation=0, version=2)
    assert swapped is not None and swapped.version == 1 and swapped.n == 2 and len(rec) == 2
    assert decode_from_bot(encode(swapped), SessionSpec(4, 2, 2, RewardMode.TERMS), MAX).n == 2


def test_recorder_refuses_missing_columns():
    """Bugs in a bot (missing next_obs, wrong mode) surface before anything is sent."""
    rec = StepRecorder(obs_dim=4, act_dim=2, n_agents=1, reward=RewardMode.SCALAR)
    with pytest.raises(ValueError, match="next_obs"):
        rec.record(np.zeros(4), np.zeros(2), [0.0], reward=[1.0], truncated=[True], generation=0, version=0)
    with pytest.raises(ValueError, match="reward"):
        rec.record(np.zeros(4), np.zeros(2), [0.0], terms=np.zeros((1, 5)), generation=0, version=0)


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
        batch = rec.record(
            np.zeros((1, 4), np.float32), buffer, np.zeros(1, np.float32), reward=[0.0], generation=0, version=0
        )
    assert batch is not None and batch.act[:, 0].tolist() == [1.0, 2.0]


def test_bin_map_keys_rejected():
    """Keys must be msgpack strings: bin keys (which strict_map_key admits) are refused too."""
    assert_code(ErrorCode.UNDECODABLE, msgpack.packb({b"v": 1, "v": 1, "t": "hello"}, use_bin_type=True), None)
