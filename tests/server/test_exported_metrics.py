"""The bot port's series (server/exported_metrics.py): described once, and never absent where 0 is meant."""

from __future__ import annotations

import ast
from pathlib import Path

from bot_protocol import ErrorCode
from server.exported_metrics import describe_server_metrics
from server.metrics import Metrics

SERVER = Path(__file__).resolve().parents[2] / "server"


def counters_incremented_without_labels() -> set[str]:
    """Every ``<metrics>.inc("name", ...)`` in server/ that passes no label."""
    names = set()
    for path in SERVER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "inc"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and not node.keywords
            ):
                names.add(node.args[0].value)
    return names


def test_counters_without_labels_and_every_post_handshake_error_code_start_at_zero():
    metrics = Metrics()
    describe_server_metrics(metrics)
    for name in ("transitions_received", "transitions_trained", "updates", "weights_sent", "checkpoints", "nan_skips"):
        assert metrics.counter(name) == 0.0
    codes = set(metrics.by_label("frames_rejected", "code"))
    # bad_version after the handshake ends the connection: counted in frames_closed, not here.
    assert codes == {str(c) for c in ErrorCode} - {"bad_version", "bad_weights", "bad_hello", "internal"}
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


def test_every_counter_the_server_increments_without_labels_is_exported_from_the_start():
    """A fresh scrape lists them all at 0 (it once lacked frames_accepted, frame_groups, seq_gaps, seq_gap_frames)."""
    names = counters_incremented_without_labels()
    assert {"frames_accepted", "frame_groups", "seq_gaps", "seq_gap_frames", "updates"} <= names  # the scan finds them
    metrics = Metrics()
    describe_server_metrics(metrics)
    text = metrics.render()
    for name in sorted(names):
        assert f"arena_{name} 0\n" in text, name
