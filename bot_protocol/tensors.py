"""Weights as safetensors bytes, written and read with numpy alone, with hard limits.

safetensors is a language-neutral, code-free format (8-byte little-endian header
length, a JSON header, then raw little-endian data), so bots in any language can load
our weights. We write and read it here without the ``safetensors`` package so a bot
needs nothing but numpy, and so a hostile blob is bounded before anything is
allocated: header size, entry count, dtypes, shapes and offsets are all checked
against the data actually present. The test suite cross-checks both directions
against the official package.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError

__all__ = ["MAX_ENTRIES", "MAX_HEADER_BYTES", "decode_tensors", "encode_tensors"]

MAX_HEADER_BYTES = 1 << 20
"""A header above 1 MiB is refused before it is parsed (docs/reliability.md, S4)."""
MAX_ENTRIES = 1024
"""Most tensors in one blob; our actors have fewer than 20."""
MAX_DIMS = 8

_DTYPES: dict[str, np.dtype[np.float32]] = {"F32": np.dtype("<f4")}


def encode_tensors(tensors: Mapping[str, NDArray[np.float32]]) -> bytes:
    """Pack float32 arrays into safetensors bytes (names sorted; the header padded to 8 bytes)."""
    header: dict[str, object] = {}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(tensors[name])), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    raw_header = json.dumps(header, separators=(",", ":")).encode()
    raw_header += b" " * (-len(raw_header) % 8)  # the format pads the header with spaces to alignment
    return struct.pack("<Q", len(raw_header)) + raw_header + b"".join(chunks)


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.BAD_WEIGHTS, message)


def decode_tensors(
    data: bytes, *, max_header_bytes: int = MAX_HEADER_BYTES, max_entries: int = MAX_ENTRIES
) -> dict[str, NDArray[np.float32]]:
    """Parse safetensors bytes into read-only float32 arrays (copied out of ``data``).

    Raises:
        ProtocolError: ``bad_weights`` for any malformed, oversized or inconsistent blob.
    """
    if len(data) < 8:
        raise _bad("weights blob shorter than its 8-byte header length")
    (header_len,) = struct.unpack_from("<Q", data, 0)
    if header_len > max_header_bytes:
        raise _bad(f"weights header of {header_len} bytes exceeds {max_header_bytes}")
    if 8 + header_len > len(data):
        raise _bad("weights header runs past the end of the blob")
    try:
        header = json.loads(bytes(data[8 : 8 + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: also integers past 4300 digits
        raise _bad("weights header is not valid JSON") from None
    if not isinstance(header, dict):
        raise _bad("weights header must be a JSON object")
    header.pop("__metadata__", None)
    if len(header) > max_entries:
        raise _bad(f"weights header lists {len(header)} tensors, more than {max_entries}")
    body = memoryview(data)[8 + header_len :]
    spans: list[tuple[int, int]] = []
    tensors: dict[str, NDArray[np.float32]] = {}
    for name, entry in header.items():
        if not isinstance(entry, dict):
            raise _bad(f"tensor {name[:64]!r}: entry must be an object")
        raw_dtype = entry.get("dtype")
        dtype = _DTYPES.get(raw_dtype) if isinstance(raw_dtype, str) else None
        if dtype is None:
            raise _bad(f"tensor {name[:64]!r}: dtype must be F32")
        shape = entry.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 31 for d in shape)
        ):
            raise _bad(f"tensor {name[:64]!r}: bad shape")
        offsets = entry.get("data_offsets")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= len(body)
        ):
            raise _bad(f"tensor {name[:64]!r}: data offsets out of range")
        count = 1
        for d in shape:
            count *= d
        if offsets[1] - offsets[0] != count * dtype.itemsize:
            raise _bad(f"tensor {name[:64]!r}: {offsets[1] - offsets[0]} bytes do not hold shape {shape}")
        spans.append((offsets[0], offsets[1]))
        array = np.frombuffer(body[offsets[0] : offsets[1]], dtype=dtype).reshape(shape).copy()
        array.flags.writeable = False
        tensors[name] = array
    spans.sort()
    for (_, end), (start, _) in itertools.pairwise(spans):
        if start < end:
            raise _bad("tensor data regions overlap")
    return tensors
