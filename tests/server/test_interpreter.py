"""Process-wide interpreter settings while a server runs (server/interpreter.py): applied, then put back as they were."""

from __future__ import annotations

import gc
import sys

import pytest

from server.interpreter import InterpreterTuning


@pytest.fixture
def unfrozen() -> None:
    if gc.get_freeze_count():
        pytest.skip("something else in this process froze the collector")


def test_apply_freezes_the_collector_and_sets_the_switch_interval_and_restore_puts_both_back(unfrozen):
    before = sys.getswitchinterval()
    tuning = InterpreterTuning(switch_interval=0.002)
    try:
        tuning.apply()
        assert sys.getswitchinterval() == pytest.approx(0.002) and gc.get_freeze_count() > 0
    finally:
        tuning.restore()
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0
    tuning.restore()  # idempotent
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0


def test_a_collector_frozen_by_someone_else_stays_frozen_and_none_leaves_the_interval(unfrozen):
    before = sys.getswitchinterval()
    gc.freeze()
    try:
        tuning = InterpreterTuning(switch_interval=None)
        tuning.apply()
        assert sys.getswitchinterval() == before
        tuning.restore()
        assert gc.get_freeze_count() > 0  # not this object's freeze to undo
    finally:
        gc.unfreeze()
    assert sys.getswitchinterval() == before


def test_restore_before_apply_changes_nothing():
    before = sys.getswitchinterval()
    InterpreterTuning(switch_interval=0.05).restore()
    assert sys.getswitchinterval() == before
