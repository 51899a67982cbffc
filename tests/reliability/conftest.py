"""The reliability plan of ``shared/RELIABILITY.md`` (cases D, H, L, C, S, N), by case id.

T1 cases run in the normal suite. T2 cases (long soaks, 1e5 examples, floods) are opt-in:
``ARENA_T2=1 pytest tests/reliability -m t2``. Each test's name starts with its case id
(``test_h10_...``) so ``pytest -k h10`` finds it.
"""

from __future__ import annotations

import os

import pytest

T2 = os.environ.get("ARENA_T2") == "1"
"""True when the opt-in tier-2 cases should run."""

t2 = pytest.mark.skipif(not T2, reason="tier 2 (long): set ARENA_T2=1 to run")
"""Decorate every T2 test with this (and ``pytest.mark.t2``)."""


def examples(t1: int, t2_count: int) -> int:
    """Hypothesis example counts per tier."""
    return t2_count if T2 else t1
