"""Write a file so that a reader sees the old version or the new one, never half of either.

A recording is often the only copy of a long match, and a GIF may be overwritten in place by
``arena replay --to``; a crash or a full disk in the middle of a plain ``open(path, "wb")``
would destroy the previous file. Both the recording writer and the GIF writer go through here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["write_atomic"]


def write_atomic(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """``write`` into a temp file beside ``path``, fsync it, rename it over ``path``, fsync the directory.

    The temp file sits in the same directory so the rename stays on one filesystem (and is
    atomic); it is removed if ``write`` raises, so a failed write leaves nothing behind.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory; the rename is done
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
