"""The reliability plan of docs/reliability.md (cases D, H, L, C, S, N), by case id.

T1 cases run in the normal suite. T2 cases (long soaks, 1e5 examples, floods) are opt-in:
``ARENA_T2=1 pytest tests/reliability -m t2``. Each test's name starts with its case id
(``test_h10_...``) so ``pytest -k h10`` finds it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

T2 = os.environ.get("ARENA_T2") == "1"
"""True when the opt-in tier-2 cases should run."""

t2 = pytest.mark.skipif(not T2, reason="tier 2 (long): set ARENA_T2=1 to run")
"""Decorate every T2 test with this (and ``pytest.mark.t2``)."""


def examples(t1: int, t2_count: int) -> int:
    """Hypothesis example counts per tier."""
    return t2_count if T2 else t1


def load_fuzz_target(name: str) -> ModuleType:
    """Import ``fuzz/<name>.py`` (the fuzz targets are scripts, not a package) to reuse its inputs."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "fuzz" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
