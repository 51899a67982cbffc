"""Sans-I/O tests of bot_protocol.tensors: the safetensors weights blobs the decoder refuses."""

from __future__ import annotations

import struct

import pytest

from bot_protocol import ErrorCode, ProtocolError, decode_tensors


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
