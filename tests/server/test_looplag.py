"""The event-loop lag monitor (server/looplag.py): it samples wake-up lateness, warns on a stall, reports percentiles."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from server.looplag import LoopLagMonitor


def test_percentiles_are_zero_before_the_first_sample_and_follow_the_window():
    monitor = LoopLagMonitor(window=100)
    assert monitor.percentiles() == {"p50": 0.0, "p99": 0.0, "max": 0.0}
    monitor.samples.extend(i / 1000 for i in range(101))  # 0 .. 100 ms: the window keeps the last 100
    assert len(monitor.samples) == 100
    lag = monitor.percentiles()
    assert lag["p50"] == pytest.approx(0.0505) and lag["p99"] == pytest.approx(0.09901) and lag["max"] == 0.1
    monitor.reset()
    assert monitor.percentiles()["max"] == 0.0


async def test_a_blocked_loop_is_measured_and_logged_as_a_stall(caplog):
    monitor = LoopLagMonitor(interval=0.005, warn_after=0.05)
    with caplog.at_level(logging.WARNING, logger="server.looplag"):
        monitor.start()
        await asyncio.sleep(0.05)  # a few on-time wake-ups
        time.sleep(0.12)  # what a GIL-holding trainer does to the loop
        await asyncio.sleep(0.03)
        await monitor.stop()
    lag = monitor.percentiles()
    assert len(monitor.samples) >= 3 and min(monitor.samples) >= 0.0
    assert lag["max"] >= 0.1 and lag["p50"] < lag["max"]  # the stall is one late wake-up among on-time ones
    assert any("event loop stalled for" in record.getMessage() for record in caplog.records)
    count = len(monitor.samples)
    await asyncio.sleep(0.02)
    assert len(monitor.samples) == count  # stopped: no more samples


async def test_stop_without_start_is_harmless():
    await LoopLagMonitor().stop()
