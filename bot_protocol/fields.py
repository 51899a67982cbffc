"""Readers and validators for the fields of a decoded msgpack map: the one place a wire value is trusted.

Every message's ``from_wire`` (:mod:`bot_protocol.messages` for the control messages,
:mod:`bot_protocol.transitions` for ``tr``) builds itself from these, so every field of
every message is refused the same way: a :class:`ProtocolError` with a stable code that
names the field (``bad_field`` for a missing field, a wrong type or an integer out of
range; ``shape``, ``nonfinite`` and ``range`` for float blocks). Keeping them apart from
the message classes lets both message modules share them without importing each other,
and keeps the wire types (the dtypes of ``bin`` blocks, the ``uint64`` range) in one spot.

The readers have public names (``read_*``, :func:`check_floats`, :func:`f32_bytes`)
because two modules import them; they are still internal to ``bot_protocol`` (the package
does not re-export them) and describe no message. The limits a field is held to (string
lengths, dimensions) are protocol constants: they live in :mod:`bot_protocol.messages`
and are passed in by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError

__all__ = [
    "F32",
    "MAX_U64",
    "U8",
    "U32",
    "check_floats",
    "f32_bytes",
    "read_block",
    "read_bytes",
    "read_field",
    "read_float",
    "read_floats",
    "read_int",
    "read_map",
    "read_str",
]

MAX_U64 = 2**64 - 1
"""Largest value of the ``uint64`` integer fields (``seq``, ``gen``, ``ver``, ``ack``, ``ref``)."""

F32 = np.dtype("<f4")
"""Every float ``bin`` block: little-endian float32, C order."""
U32 = np.dtype("<u4")
"""The ``agent`` and ``episode`` blocks: little-endian uint32."""
U8 = np.dtype("u1")
"""The ``flags`` block: one byte per step."""


def read_field(m: Mapping[str, Any], key: str) -> Any:
    """The value of a required field, of any type."""
    try:
        return m[key]
    except KeyError:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"missing field {key!r}") from None


def read_int(m: Mapping[str, Any], key: str, lo: int, hi: int) -> int:
    """An integer (not a bool) in ``[lo, hi]``."""
    value = read_field(m, key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be an integer")
    if not lo <= value <= hi:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} = {value} outside [{lo}, {hi}]")
    return value


def read_float(m: Mapping[str, Any], key: str) -> float:
    """A finite number (integers accepted, bools not)."""
    value = read_field(m, key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not np.isfinite(value):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a finite number")
    return float(value)


def read_str(m: Mapping[str, Any], key: str, max_len: int) -> str:
    """A string of at most ``max_len`` characters."""
    value = read_field(m, key)
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a string")
    if len(value) > max_len:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} longer than {max_len} characters")
    return value


def read_map(m: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A nested map with string keys."""
    value = read_field(m, key)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a map with string keys")
    return value


def read_bytes(m: Mapping[str, Any], key: str) -> bytes:
    """A ``bin`` field."""
    value = read_field(m, key)
    if not isinstance(value, bytes):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be bin")
    return value


def read_block(m: Mapping[str, Any], key: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> NDArray[Any]:
    """A ``bin`` field reinterpreted as an array of exactly ``shape`` (no copy)."""
    raw = read_bytes(m, key)
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        raise ProtocolError(
            ErrorCode.SHAPE, f"field {key!r} holds {len(raw)} bytes, expected {expected} for shape {list(shape)} {dtype.str}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def read_floats(m: Mapping[str, Any], key: str, shape: tuple[int, ...], max_abs: float) -> NDArray[np.float32]:
    """A float32 block of exactly ``shape``, checked by :func:`check_floats`."""
    array = read_block(m, key, F32, shape)
    check_floats(key, array, max_abs)
    return array


def check_floats(name: str, array: NDArray[np.float32], max_abs: float) -> None:
    """Reject NaN/Inf (``nonfinite``) and magnitudes above ``max_abs`` (``range``)."""
    if array.size == 0:
        return
    # Compared as Python floats (float64): a float32 bound would round an unusual max_abs and
    # let a value a hair above it through. errstate: a signalling NaN must not warn (with
    # warnings as errors that would escape as something other than ProtocolError).
    with np.errstate(invalid="ignore", over="ignore"):
        # Fast path: two reductions, no temporaries. NaN fails both comparisons and Inf the
        # bound, so anything wrong falls through to the exact checks below.
        if float(array.max()) <= max_abs and float(array.min()) >= -max_abs:
            return
        if not np.isfinite(array).all():
            raise ProtocolError(ErrorCode.NONFINITE, f"field {name!r} holds NaN or Inf")
        if float(np.abs(array).max()) > max_abs:
            raise ProtocolError(ErrorCode.RANGE, f"field {name!r} holds a value beyond ±{max_abs:g}")


def f32_bytes(array: NDArray[Any]) -> bytes:
    """The wire form of a float block: ``array`` as contiguous little-endian float32."""
    return np.ascontiguousarray(array, dtype=F32).tobytes()
