"""The wire layer's one exception and its stable codes (bot_protocol/errors.py)."""

from __future__ import annotations

import pytest

from bot_protocol import CloseCode, ErrorCode, ProtocolError


def test_error_codes_are_the_stable_strings_of_the_contract():
    """docs/protocol.md names these strings: they are sent as they are, never renamed."""
    assert {code.value for code in ErrorCode} == {
        "undecodable",
        "bad_version",
        "unknown_type",
        "bad_field",
        "shape",
        "nonfinite",
        "range",
        "bad_action",
        "bad_mask",
        "illegal_action",
        "unexpected",
        "no_credit",
        "duplicate",
        "bad_hello",
        "bad_weights",
        "internal",
    }
    assert ErrorCode.NO_CREDIT == "no_credit" and str(ErrorCode.BAD_FIELD) == "bad_field"
    assert ErrorCode("shape") is ErrorCode.SHAPE


def test_close_codes_are_rfc_6455s():
    assert [int(code) for code in CloseCode] == [1000, 1001, 1003, 1008, 1009, 1011]
    assert CloseCode.POLICY_VIOLATION == 1008


def test_a_protocol_error_carries_its_code_and_a_message_safe_for_the_peer():
    with pytest.raises(ProtocolError) as raised:
        raise ProtocolError(ErrorCode.SHAPE, "obs has 5 columns, expected 4")
    error = raised.value
    assert error.code is ErrorCode.SHAPE and error.message == "obs has 5 columns, expected 4"
    assert str(error) == "shape: obs has 5 columns, expected 4"
