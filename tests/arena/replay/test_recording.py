"""The file format: atomic saves, and foreign, truncated, corrupt or too-new files refused in one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.replay import Recording, ReplayError


def test_save_is_atomic(tmp_path, recorded):
    """A failed save leaves the previous file intact and no temporary file behind."""
    recording = Recording.load(recorded[0])
    path = tmp_path / "m.replay"
    recording.save(path)
    before = path.read_bytes()
    broken = dataclasses.replace(recording, meta={**recording.meta, "seed": object()})  # not JSON-serializable
    with pytest.raises(TypeError):
        broken.save(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.replay"]


def _rewrite(path: Path, out: Path, **changes: Any) -> None:
    with np.load(path) as npz:
        columns = {name: npz[name] for name in npz.files}
    columns.update(changes)
    np.savez_compressed(out, **columns)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", "truncated or corrupt"),
        ("flip", "truncated or corrupt"),
        ("text", "not an arena replay file"),
        ("foreign_npz", "not an arena replay file"),
        ("newer", "newer arena"),
        ("short_column", "corrupt arena replay"),
    ],
)
def test_bad_files_are_refused_with_one_line(tmp_path, recorded, damage, message):
    """Foreign, truncated, corrupt or too-new files raise ReplayError with a one-line message."""
    path, bad = recorded[0], tmp_path / "bad.npz"
    data = path.read_bytes()
    if damage == "truncate":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        flipped = bytearray(data)
        flipped[len(data) // 3] ^= 0xFF
        bad.write_bytes(bytes(flipped))
    elif damage == "text":
        bad.write_text("hello\n")
    elif damage == "foreign_npz":
        np.savez(bad, a=np.zeros(3))
    elif damage == "newer":
        meta = Recording.load(path).meta
        _rewrite(path, bad, meta=np.frombuffer(json.dumps({**meta, "version": 99}).encode(), np.uint8))
    else:
        with np.load(path) as npz:
            _rewrite(path, bad, tick=npz["tick"][:-1])
    with pytest.raises(ReplayError, match=message) as caught:
        Recording.load(bad)
    assert "\n" not in str(caught.value)
