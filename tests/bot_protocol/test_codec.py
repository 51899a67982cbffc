"""Sans-I/O tests of bot_protocol.codec: golden bytes, and every frame the decode boundary refuses — no sockets."""

from __future__ import annotations

import struct
import time

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    Credit,
    ErrorCode,
    Hello,
    Limits,
    RewardMode,
    SessionSpec,
    TransitionBatch,
    decode_from_bot,
    decode_from_server,
    encode,
)
from tests.bot_protocol.helpers import MAX, assert_code, make_batch

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


def test_discrete_hello_and_tr_golden_bytes_of_the_protocols_worked_example():
    """docs/protocol.md §9.3's bytes: a hello with branches and a tr with dact and mask, byte for byte."""
    hello = Hello("bot", 2, 1, 2, RewardMode.SCALAR, "x", (3, 2))
    golden_hello = bytes.fromhex(
        "89a17601a174a568656c6c6fa46e616d65a3626f74a76f62735f64696d02a76163745f64696d01a86e5f6167656e747302"
        "a6726577617264a67363616c6172a6636c69656e74a178a86272616e63686573920302"
    )
    assert encode(hello) == golden_hello and decode_from_bot(golden_hello, None, MAX) == hello
    batch = TransitionBatch(
        seq=0,
        generation=0,
        version=3,
        agent=np.array([0, 1], np.uint32),
        episode=np.array([0, 0], np.uint32),
        obs=np.array([[0.5, -1.0], [0.0, 2.0]], np.float32),
        act=np.array([[0.25], [-0.5]], np.float32),
        logp=np.array([-1.5, -2.25], np.float32),
        flags=np.array([0, 1], np.uint8),
        rew=np.array([0.5, -1.0], np.float32),
        dact=np.array([[2, 1], [1, 1]], np.uint32),
        mask=np.array([[1, 0, 1, 1, 1], [1, 1, 0, 0, 1]], np.uint8),
    )
    golden_tr = bytes.fromhex(
        "8fa17601a174a27472a373657100a367656e00a376657203a16e02a56167656e74c4080000000001000000a7657069736f6465"
        "c4080000000000000000a36f6273c4100000003f000080bf0000000000000040a3616374c4080000803e000000bfa46c6f6770"
        "c4080000c0bf000010c0a5666c616773c4020001a464616374c41002000000010000000100000001000000a46d61736bc40a"
        "01000101010101000001a3726577c4080000003f000080bf"
    )
    assert encode(batch) == golden_tr
    spec = SessionSpec(2, 1, 2, RewardMode.SCALAR, Limits(), (3, 2))
    checked = decode_from_bot(golden_tr, spec, MAX)
    assert isinstance(checked, TransitionBatch)
    np.testing.assert_array_equal(checked.act, [[0.25, 2, 1, 1, 0, 1, 1, 1], [-0.5, 1, 1, 1, 1, 0, 0, 1]])


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


def test_bin_map_keys_rejected():
    """Keys must be msgpack strings: bin keys (which strict_map_key admits) are refused too."""
    assert_code(ErrorCode.UNDECODABLE, msgpack.packb({b"v": 1, "v": 1, "t": "hello"}, use_bin_type=True), None)
