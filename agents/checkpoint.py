"""Atomic, verified checkpoints: never half-written, never unpickled unsafely.

Write: temp file in the same directory → flush → fsync → ``os.replace`` → fsync the
directory, then a JSON manifest (with the checkpoint's sha256) written the same way.
A crash at any point leaves either the previous checkpoint set or the new one,
plus at most a ``*.tmp`` that the next start deletes.

Read: only a checkpoint whose manifest sha256 matches is loaded, with
``torch.load(weights_only=True)`` and no fallback (CVE-2025-32434, CVE-2026-24747);
a torn or tampered file is skipped in favour of the previous one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["CheckpointInvalid", "CheckpointStore", "check_torch_version"]

logger = logging.getLogger(__name__)

MIN_TORCH = (2, 10)
_NAME = re.compile(r"^ckpt-(\d{4,})-(\d{9,})\.pt$")


class CheckpointInvalid(Exception):
    """A checkpoint file that is torn, tampered with or not loadable safely."""


def check_torch_version(version: str = torch.__version__) -> None:
    """Refuse torch < 2.10, whose ``weights_only`` loader had code-execution CVEs."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < MIN_TORCH:
        raise RuntimeError(
            f"torch {version} is too old: >= {MIN_TORCH[0]}.{MIN_TORCH[1]} is required for safe checkpoint loading "
            "(CVE-2025-32434, CVE-2026-24747)"
        )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


class CheckpointStore:
    """A directory of checkpoints named ``ckpt-<generation>-<version>.pt`` plus ``.json`` manifests.

    Args:
        directory: created with mode 0700 if missing; file names are generated here only.
        keep: newest checkpoints kept; older ones are deleted after each successful save.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        check_torch_version()
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.failures = 0
        for stale in self.directory.glob("*.tmp"):  # left by a crash in the middle of a write
            with contextlib.suppress(OSError):
                stale.unlink()

    def save(self, state: dict[str, Any], policy: tuple[int, int]) -> Path:
        """Write the checkpoint of ``policy`` (its generation and version; the server's ``PolicyId`` is
        one) atomically and prune old ones.

        Raises:
            OSError: the disk refused (full, EIO); the previous checkpoints are untouched
                and the temp file is removed. ``failures`` counts these.
        """
        buffer = io.BytesIO()
        torch.save(state, buffer)
        data = buffer.getvalue()
        generation, version = policy
        path = self.directory / f"ckpt-{generation:04d}-{version:09d}.pt"
        manifest = {
            "file": path.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "generation": generation,
            "version": version,
            "created_unix": time.time(),
            "torch": torch.__version__,
        }
        try:
            _atomic_write(path, data)
            _atomic_write(path.with_suffix(".json"), json.dumps(manifest, indent=1).encode())
        except OSError:
            self.failures += 1
            raise
        self._prune()
        return path

    def checkpoints(self) -> list[Path]:
        """Checkpoint files, newest (highest generation, version) first."""
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: tuple(int(g) for g in _NAME.match(p.name).groups()), reverse=True)  # type: ignore[union-attr]

    def highest_generation(self) -> int:
        """The largest generation named by any checkpoint file here (valid or not); -1 if none."""
        names = (_NAME.match(p.name) for p in self.directory.iterdir())
        return max((int(m.group(1)) for m in names if m), default=-1)

    def _prune(self) -> None:
        for old in self.checkpoints()[self.keep :]:
            for p in (old, old.with_suffix(".json")):
                with contextlib.suppress(OSError):
                    p.unlink()

    @staticmethod
    def load_file(path: Path, map_location: str = "cpu") -> dict[str, Any]:
        """Load one checkpoint after verifying its manifest.

        Raises:
            CheckpointInvalid: missing or mismatched manifest, torn zip, or a pickle that
                asks for anything beyond tensors and plain containers.
        """
        try:
            manifest = json.loads(path.with_suffix(".json").read_text())
            data = path.read_bytes()
        except (OSError, ValueError) as exc:
            raise CheckpointInvalid(f"{path.name}: manifest or file unreadable ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("sha256") != hashlib.sha256(data).hexdigest():
            raise CheckpointInvalid(f"{path.name}: sha256 does not match its manifest")
        try:
            state = torch.load(io.BytesIO(data), weights_only=True, map_location=map_location)
        except Exception as exc:  # UnpicklingError, zip/CRC errors, ...: all mean "do not use this file"
            raise CheckpointInvalid(f"{path.name}: not a safe checkpoint ({type(exc).__name__})") from None
        if not isinstance(state, dict):
            raise CheckpointInvalid(f"{path.name}: top level is not a dict")
        return state

    def load_latest(self, map_location: str = "cpu") -> tuple[dict[str, Any], Path] | None:
        """The newest checkpoint that verifies, falling back past invalid ones; ``None`` if none."""
        for path in self.checkpoints():
            try:
                return self.load_file(path, map_location), path
            except CheckpointInvalid as exc:
                logger.warning("skipping checkpoint: %s", exc)
        return None
