"""The one exception the wire layer raises, its stable codes, and the close codes.

Every way a frame can be wrong ends as a :class:`ProtocolError` carrying a stable
``code`` (machine-readable, part of the contract in ``docs/protocol.md``) and a short
human message. The server maps it to an ``error`` message or a close code; internal
details (msgpack's exception text, stack traces) never reach the peer.
"""

from __future__ import annotations

import enum

__all__ = ["CloseCode", "ErrorCode", "ProtocolError"]


class ErrorCode(enum.StrEnum):
    """Stable error codes sent in ``error`` messages (never renamed, only added)."""

    UNDECODABLE = "undecodable"  # not a msgpack map, trailing bytes, limits exceeded
    BAD_VERSION = "bad_version"  # missing or unsupported ``v``
    UNKNOWN_TYPE = "unknown_type"  # ``t`` names no message we know
    BAD_FIELD = "bad_field"  # a field is missing, of the wrong type or out of range
    SHAPE = "shape"  # an array's byte length or dimension disagrees with the spec
    NONFINITE = "nonfinite"  # NaN or Inf in a float field
    RANGE = "range"  # a finite value beyond the magnitude limit
    BAD_ACTION = "bad_action"  # a discrete action (``dact``) beyond its branch's size
    BAD_MASK = "bad_mask"  # a ``mask`` value other than 0/1, or a branch with no legal action
    ILLEGAL_ACTION = "illegal_action"  # a discrete action its own row's ``mask`` forbids
    UNEXPECTED = "unexpected"  # a valid message at the wrong time (e.g. ``tr`` before ``welcome``)
    NO_CREDIT = "no_credit"  # a ``tr`` sent without flow-control credit
    DUPLICATE = "duplicate"  # a sequence number at or below one already accepted
    BAD_HELLO = "bad_hello"  # ``hello`` declares sizes the run cannot accept
    BAD_WEIGHTS = "bad_weights"  # a weights blob the bot refuses (sha256, version, shapes, header)
    INTERNAL = "internal"  # the server failed handling this connection (sent before close 1011)


class CloseCode(enum.IntEnum):
    """WebSocket close codes the server uses (RFC 6455 section 7.4.1)."""

    NORMAL = 1000  # the bot said ``bye``
    GOING_AWAY = 1001  # server shutting down
    UNSUPPORTED_DATA = 1003  # text frame on this binary-only protocol
    POLICY_VIOLATION = 1008  # bad hello, hello timeout, too many errors, version mismatch
    MESSAGE_TOO_BIG = 1009  # enforced by the websocket library (max_size)
    INTERNAL_ERROR = 1011  # a server bug; logged once


class ProtocolError(Exception):
    """A frame or message that breaks the wire contract.

    Attributes:
        code: stable :class:`ErrorCode`.
        message: short human-readable reason, safe to send to the peer.
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
