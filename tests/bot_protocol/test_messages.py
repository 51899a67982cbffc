"""Sans-I/O tests of bot_protocol.messages: the control messages round-trip, and hello's fields are checked."""

from __future__ import annotations

import msgpack
import pytest

from bot_protocol import (
    Bye,
    Credit,
    Error,
    ErrorCode,
    Hello,
    Limits,
    RewardMode,
    Welcome,
    decode_from_bot,
    decode_from_server,
    encode,
)
from tests.bot_protocol.helpers import MAX, assert_code, reencode
from tests.bot_protocol.helpers import make_weights as _weights

# ── round trips ──────────────────────────────────────────────────────────────


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


# ── refusals ─────────────────────────────────────────────────────────────────


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
