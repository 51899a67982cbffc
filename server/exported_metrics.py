"""Every series the bot port exports, described in one place (docs/protocol.md, "/healthz and /metrics", lists them).

Counters without labels start at 0, and ``frames_rejected`` has a series at 0 for every
error code a bot can get after its handshake, so a scrape never has to tell "0" from
"absent". Who increments what: the protocol counters :mod:`server.bot_connection`, the
transport's :mod:`server.app` and :mod:`server.delivery`, the learning ones :mod:`server.trainer`.
"""

from __future__ import annotations

from bot_protocol import ErrorCode

from .metrics import Metrics

__all__ = ["describe_server_metrics"]

_ZERO_COUNTERS = {
    "transitions_received": "Steps accepted from bots.",
    "transitions_trained": "Steps consumed by an update.",
    "updates": "Updates the trainer ran (each publishes a policy version).",
    "weights_sent": "weights messages sent to bots.",
    "episodes": "Episodes (rounds) that ended in the steps trained.",
    "bots_connected": "Handshakes completed.",
    "bots_disconnected": "Bot connections that ended.",
    "checkpoints": "Checkpoints written.",
    "checkpoint_failures": "Checkpoints that failed to write (the previous ones are intact).",
    "trainer_restarts": "Trainer thread restarts after a crash.",
    "nan_skips": "Minibatch steps skipped for non-finite losses or gradients.",
    "frames_accepted": "tr frames accepted.",
    "frame_groups": "Groups of accepted tr frames (frames that arrived together are checked and queued as one).",
    "seq_gaps": "Accepted tr frames whose seq skipped ahead of every seq the session had seen (accepted or refused).",
    "seq_gap_frames": "Sequence numbers skipped over by those gaps.",
}
"""Counters without labels, exported from the start at 0 (a scrape never has to tell "0" from "absent")."""

_NOT_REJECTIONS = (ErrorCode.BAD_VERSION, ErrorCode.BAD_WEIGHTS, ErrorCode.BAD_HELLO, ErrorCode.INTERNAL)
"""Codes no frame is rejected (recoverably) with after the handshake: a wrong ``v`` ends the connection, its
error then close 1008 (``frames_closed{reason="bad_version"}``), ``bad_hello`` refuses the handshake
(``handshakes_rejected``), ``bad_weights`` goes from bot to server, ``internal`` precedes close 1011."""
_ERROR_CODES_SENT = tuple(str(code) for code in ErrorCode if code not in _NOT_REJECTIONS)
"""Codes of the errors a bot can get after its handshake: ``frames_rejected``'s label values."""


def describe_server_metrics(metrics: Metrics) -> None:
    """Describe every series docs/protocol.md lists; counters without labels start at 0, so they are always exported."""
    d = metrics.describe
    for name, text in _ZERO_COUNTERS.items():
        d(name, text)
        metrics.inc(name, 0.0)
    for code in _ERROR_CODES_SENT:  # an error code never sent is still a series at 0
        metrics.inc("frames_rejected", 0.0, code=code)
    d("transitions_dropped", "Accepted steps not trained on, by reason.")
    d("frames_rejected", "Frames answered with an error message, by its (documented) error code.")
    d("frames_closed", "Frames answered by closing the connection, by reason (text_frame, too_many_undecodable, "
                       "too_big: the 1009 size limit, all without an error; bad_version, after its error).")  # fmt: skip
    d("handshakes_rejected", "Connections refused before or at hello, by reason (HTTP refusals included).")
    d("rollbacks", "Updates undone by the trainer's guards, by reason.")
    d("connected_bots", "Open bot connections.")
    d("queue_bytes", "Payload bytes in the transition queue.")
    d("policy_version", "Newest published policy version.")
    d("policy_lag", "Versions between the acting and the current policy (last update).")
    d("bots_aborted", "Connections aborted by the server, by reason (write_stalled: read nothing for ping_timeout).")
    d("loop_lag_seconds", "Event-loop wake-up lateness over the recent window.")
    d("update_seconds", "Wall time of the last update.")
