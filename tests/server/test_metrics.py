"""Metrics (server/metrics.py): counters and gauges, and the labels a learner rank puts on every series."""

from __future__ import annotations

from server.metrics import Metrics


def test_constant_labels_go_on_every_exported_series_and_nowhere_else() -> None:
    metrics = Metrics(labels={"rank": "1"})
    metrics.inc("transitions_received", 5)
    metrics.inc("transitions_dropped", 2, reason="stale")
    metrics.set("policy_version", 7)
    text = metrics.render()
    assert 'arena_transitions_received{rank="1"} 5' in text
    assert 'arena_transitions_dropped{rank="1",reason="stale"} 2' in text
    assert 'arena_policy_version{rank="1"} 7' in text
    # Reading values back never needs the rank: code that counts stays the same on every rank.
    assert metrics.counter("transitions_received") == 5
    assert metrics.counter("transitions_dropped", reason="stale") == 2
    assert metrics.gauge("policy_version") == 7


def test_without_labels_the_exposition_is_unchanged() -> None:
    metrics = Metrics()
    metrics.inc("updates")
    assert "arena_updates 1" in metrics.render().splitlines()
