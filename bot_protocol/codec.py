"""The one decode boundary: bytes in, a checked message out — or one :class:`ProtocolError`.

msgpack with default limits lets a small hostile frame expand into many times its size in
Python objects, where explicit limits refuse it at once (docs/reliability.md, M11). So every
inbound frame is unpacked exactly once, with explicit limits, no ext types, string keys only,
and trailing bytes refused (another language's decoder might read them differently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from .errors import ErrorCode, ProtocolError
from .messages import (
    MAX_MESSAGE_TEXT,
    PROTOCOL_VERSION,
    Bye,
    Credit,
    Error,
    Hello,
    Message,
    SessionSpec,
    Weights,
    Welcome,
)
from .transitions import TransitionBatch

__all__ = ["decode_from_bot", "decode_from_server", "encode", "message_from_bot", "unpack"]

MAX_CONTAINER_LEN = 64
"""Largest msgpack array or map anywhere in a frame; the schema needs < 20."""
MAX_CONTAINERS = 16
"""Most maps plus arrays in one frame; the schema uses at most 5 (welcome → weights → arch → layers)."""

_FROM_BOT: dict[str, type[Message]] = {m.TYPE: m for m in (Hello, TransitionBatch, Bye, Error)}
_FROM_SERVER: dict[str, type[Message]] = {m.TYPE: m for m in (Welcome, Weights, Credit, Error)}


def encode(message: Message) -> bytes:
    """Serialize a message into one binary frame: a msgpack map with ``v`` and ``t`` first."""
    frame: bytes = msgpack.packb({"v": PROTOCOL_VERSION, "t": message.TYPE, **message.to_wire()}, use_bin_type=True)
    return frame


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError("ext types are not part of the protocol")


def unpack(data: bytes, max_bin_len: int) -> tuple[str, Mapping[str, Any]]:
    """Unpack a frame into its type and map, enforcing every structural limit.

    Raises:
        ProtocolError: ``undecodable`` for anything that is not one bounded msgpack
            map; ``bad_version`` for a missing or different ``v``; ``bad_field`` for a
            missing or non-string ``t``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProtocolError(ErrorCode.UNDECODABLE, "frames must be binary")
    containers = 0

    def count(container: Any) -> Any:
        # Called by msgpack for every map and array as it is built: a frame can never hold
        # more than MAX_CONTAINERS of them, so a 1 MiB frame of nested empty maps (which
        # would otherwise become ~0.5 M dicts) is refused after a few hundred bytes of work.
        nonlocal containers
        containers += 1
        if containers > MAX_CONTAINERS:
            raise ValueError("too many containers")
        if type(container) is dict and not all(type(key) is str for key in container):
            raise ValueError("map keys must be strings")  # msgpack's strict_map_key still admits bin keys
        return container

    try:
        obj = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            use_list=False,
            object_hook=count,
            list_hook=count,
            max_bin_len=max_bin_len,
            max_str_len=max(MAX_MESSAGE_TEXT, 1024),
            max_array_len=MAX_CONTAINER_LEN,
            max_map_len=MAX_CONTAINER_LEN,
            max_ext_len=0,
            ext_hook=_refuse_ext,  # max_ext_len=0 still admits zero-length ext objects
        )
    except msgpack.ExtraData:
        raise ProtocolError(ErrorCode.UNDECODABLE, "trailing bytes after the message") from None
    except Exception:  # msgpack raises ValueError, FormatError, StackError, UnicodeDecodeError, ...
        # Never echo the decoder's own text: it may be security-sensitive (websockets does the same).
        raise ProtocolError(ErrorCode.UNDECODABLE, "not a valid msgpack message within the limits") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.UNDECODABLE, "a message must be a msgpack map")
    version = obj.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:  # not 1.0, not True
        raise ProtocolError(ErrorCode.BAD_VERSION, f"unsupported protocol version (this server speaks v{PROTOCOL_VERSION})")
    kind = obj.get("t")
    if not isinstance(kind, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, "missing message type 't'")
    return kind, obj


def decode_from_bot(data: bytes, spec: SessionSpec | None, max_bin_len: int) -> Message:
    """Decode a bot's frame. ``tr`` needs the session's ``spec`` (shapes come from it, not the bot).

    Raises:
        ProtocolError: with a stable code; see ``docs/protocol.md``.
    """
    kind, m = unpack(data, max_bin_len)
    return message_from_bot(kind, m, spec)


def message_from_bot(kind: str, m: Mapping[str, Any], spec: SessionSpec | None) -> Message:
    """Second half of :func:`decode_from_bot`, for callers that act on the type first (credit)."""
    cls = _FROM_BOT.get(kind)
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {kind[:32]!r}")
    if cls is TransitionBatch:
        if spec is None:
            raise ProtocolError(ErrorCode.UNEXPECTED, "'tr' before the hello/welcome handshake")
        return TransitionBatch.from_wire(m, spec)
    return cls.from_wire(m)  # type: ignore[attr-defined, no-any-return]


def decode_from_server(data: bytes, max_bin_len: int = 256 << 20) -> Message:
    """Decode a server's frame (what a bot client receives).

    Raises:
        ProtocolError: with a stable code.
    """
    kind, m = unpack(data, max_bin_len)
    cls = _FROM_SERVER.get(kind)
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {kind[:32]!r}")
    return cls.from_wire(m)  # type: ignore[attr-defined, no-any-return]
