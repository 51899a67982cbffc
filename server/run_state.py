"""What a trainer's run carries besides the agent: its RNG states, its identity, recent returns, copies.

The pieces a checkpoint needs for a bit-exact resume (every RNG the run draws from) and what tells
two runs apart (the code version, a hash of the agent's config), kept out of the trainer so that
:mod:`server.trainer` reads as the loop it is.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import json
import random
from typing import Any

import numpy as np
import torch

__all__ = ["CODE_VERSION", "RecentValues", "capture_rng", "config_hash", "copy_state", "restore_rng"]


class RecentValues:
    """The last ``capacity`` floats, in one array allocated up front.

    Why not a ``deque(maxlen=...)``: it keeps every float object alive until pushed out, so a
    long-running trainer's memory grows for its first ``capacity`` episodes of each run, which a
    leak detector (rightly) cannot tell from a leak. Here nothing is allocated per value.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._values = np.zeros(capacity, dtype=np.float64)
        self._count = 0

    def add(self, value: float) -> None:
        self._values[self._count % len(self._values)] = value
        self._count += 1

    def __len__(self) -> int:
        return min(self._count, len(self._values))

    def mean(self) -> float:
        return float(self._values[: len(self)].mean())

    def tolist(self) -> list[float]:
        """Oldest first."""
        if self._count <= len(self._values):
            return [float(v) for v in self._values[: self._count]]
        start = self._count % len(self._values)
        return [float(v) for v in np.concatenate((self._values[start:], self._values[:start]))]


def copy_state(value: Any) -> Any:
    """A deep copy of an agent's state: tensors cloned, containers rebuilt, anything else deep-copied.

    Why not ``copy.deepcopy``: torch's ``Tensor.__deepcopy__`` leaves small objects behind on
    every call (cloning leaves none), and the trainer copies its rollback state every checkpoint
    interval for as long as it runs; the L2 soak's leak check (docs/reliability.md) flags it.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        copied = copy.copy(value)  # keeps the mapping's type and attributes (a state_dict's _metadata)
        for key, item in value.items():
            copied[key] = copy_state(item)
        return copied
    if isinstance(value, list):
        return [copy_state(item) for item in value]
    if isinstance(value, tuple):
        return tuple(copy_state(item) for item in value)
    return copy.deepcopy(value)


def _code_version() -> str:
    try:
        return importlib.metadata.version("arena-trainer")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


CODE_VERSION = _code_version()
"""The installed ``arena-trainer`` version, recorded in every checkpoint."""


def config_hash(config: Any) -> str:
    """sha256 of the agent's config as canonical JSON: tells two runs' settings apart at a glance."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def _numpy_global_state() -> dict[str, Any]:
    """NumPy's global generator (``np.random.*``) as plain values (``weights_only`` loads them)."""
    state = np.random.get_state(legacy=False)
    assert isinstance(state, dict)
    inner = state["state"]
    return {
        "bit_generator": state["bit_generator"],
        "key": [int(k) for k in inner["key"]],
        "pos": int(inner["pos"]),
        "has_gauss": int(state["has_gauss"]),
        "gauss": float(state["gauss"]),
    }


def _set_numpy_global_state(saved: dict[str, Any]) -> None:
    np.random.set_state(
        {
            "bit_generator": saved["bit_generator"],
            "state": {"key": np.asarray(saved["key"], dtype=np.uint32), "pos": saved["pos"]},
            "has_gauss": saved["has_gauss"],
            "gauss": saved["gauss"],
        }
    )


def capture_rng() -> dict[str, Any]:
    """Every global RNG the run draws from, as values ``torch.load(weights_only=True)`` accepts."""
    return {
        "torch": torch.get_rng_state(),
        **({"torch_cuda": torch.cuda.get_rng_state_all()} if torch.cuda.is_available() else {}),
        "python": list(random.getstate()[1]),
        "python_version": random.getstate()[0],
        "python_gauss": random.getstate()[2],
        "numpy": _numpy_global_state(),
    }


def restore_rng(rng: dict[str, Any]) -> None:
    """Put back what :func:`capture_rng` saved (a missing entry, from an older checkpoint, is left alone)."""
    if "torch" in rng:
        torch.set_rng_state(rng["torch"])
    if "python" in rng:
        random.setstate((rng["python_version"], tuple(rng["python"]), rng["python_gauss"]))
    if "numpy" in rng:
        _set_numpy_global_state(rng["numpy"])
    if "torch_cuda" in rng and torch.cuda.is_available() and len(rng["torch_cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(rng["torch_cuda"])
