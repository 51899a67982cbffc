"""The bot port's series (server/exported_metrics.py): described once, and never absent where 0 is meant."""

from __future__ import annotations

from bot_protocol import ErrorCode
from server.exported_metrics import describe_server_metrics
from server.metrics import Metrics


def test_counters_without_labels_and_every_post_handshake_error_code_start_at_zero():
    metrics = Metrics()
    describe_server_metrics(metrics)
    for name in ("transitions_received", "transitions_trained", "updates", "weights_sent", "checkpoints", "nan_skips"):
        assert metrics.counter(name) == 0.0
    codes = set(metrics.by_label("frames_rejected", "code"))
    assert codes == {str(c) for c in ErrorCode} - {"bad_weights", "bad_hello", "internal"}
    assert all(value == 0.0 for value in metrics.by_label("frames_rejected", "code").values())
    text = metrics.render()
    assert "arena_updates 0\n" in text and 'arena_frames_rejected{code="no_credit"} 0\n' in text
    assert "# HELP arena_transitions_received Steps accepted from bots.\n" in text


def test_series_with_labels_are_described_before_their_first_value():
    metrics = Metrics()
    describe_server_metrics(metrics)
    metrics.inc("transitions_dropped", 3, reason="queue_full")
    metrics.set("loop_lag_seconds", 0.01, stat="p99")
    text = metrics.render()
    assert "# HELP arena_transitions_dropped Accepted steps not trained on, by reason.\n" in text
    assert "# HELP arena_loop_lag_seconds Event-loop wake-up lateness over the recent window.\n" in text
    assert 'arena_transitions_dropped{reason="queue_full"} 3\n' in text
