"""Frozen, validated configuration of the server and the trainer thread.

Every limit has a unit and a default; defaults come from measurements on a 2-core
machine summarised in docs/reliability.md; their table is docs/security.md, "Limits".
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServerConfig", "TrainerConfig"]


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MIN_TOKEN_CHARS = 8
"""The shortest bearer token a port accepts (the bot port and the dashboard's alike)."""


def listen_problems(port: int, token: str | None) -> list[str]:
    """What is wrong with a listening port's number and token: one rule for every port we open."""
    problems = []
    if not 0 <= port <= 65535:
        problems.append(f"port must be in [0, 65535], got {port}")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        problems.append(f"token must be at least {MIN_TOKEN_CHARS} characters")
    return problems


@dataclass(frozen=True)
class ServerConfig:
    """The websocket front end: address, auth, transport limits, per-bot protocol limits."""

    host: str = "127.0.0.1"
    """Bind address. Anything but loopback requires a ``token``."""
    port: int = 8765
    """TCP port; 0 picks a free one (tests)."""
    token: str | None = None
    """Bearer token bots must present in the handshake; ``None`` disables auth (loopback only)."""
    # Timeouts (seconds)
    open_timeout: float = 5.0
    """HTTP upgrade deadline (handshake slowloris bound)."""
    hello_timeout: float = 5.0
    """Deadline for the bot's ``hello`` after the upgrade; then close 1008."""
    ping_interval: float | None = 10.0
    """Keepalive ping period; a dead bot is found within ping_interval + ping_timeout. ``None`` disables."""
    ping_timeout: float | None = 10.0
    close_timeout: float = 5.0
    # Limits
    max_message_bytes: int = 1 << 20
    """Largest inbound frame; bigger ones are closed 1009 by websockets before they are buffered."""
    max_batch: int = 1024
    """Most rows in one ``tr`` message."""
    max_queue_frames: int = 4
    """websockets' inbound frame buffer per connection (worst case max_message_bytes x this)."""
    credit_window: int = 8
    """``tr`` messages a bot may have in flight before it must wait for ``credit``."""
    max_abs: float = 1e6
    """Largest float magnitude accepted from a bot."""
    max_connections: int = 512
    """Open bot connections; beyond it the handshake gets HTTP 503."""
    max_connections_per_ip: int | None = 8
    """Open connections from one address; beyond it HTTP 429 (``None``: no cap)."""
    max_handshakes_per_ip_per_s: float | None = 20.0
    """Handshakes per second from one address (bursts of as many); beyond it HTTP 429."""
    auth_failures_before_block: int = 5
    """Bad tokens from one address within ``auth_failure_window`` that block it (HTTP 429)."""
    auth_failure_window: float = 60.0
    auth_block_seconds: float = 60.0
    limit_loopback: bool = False
    """Apply the per-address limits to loopback clients too. Off by default: local bots and a
    reverse proxy on the same host all arrive from 127.0.0.1 (limit per client at the proxy)."""
    tls_cert: str | None = None
    """PEM certificate chain: serve ``wss://`` (TLS >= 1.2). Needs ``tls_key``."""
    tls_key: str | None = None
    """PEM private key of ``tls_cert``."""
    max_agents_per_bot: int = 4096
    segment_steps: int = 256
    """Longest segment the trainer assembles for the agent; longer episodes are cut and bootstrapped."""
    error_budget: int = 10
    """Recoverable errors (answered with ``error``) a bot may cause per ``error_window`` before close 1008."""
    error_window: float = 60.0
    max_undecodable: int = 3
    """Undecodable frames tolerated per connection before close 1008."""
    queue_max_steps: int | None = None
    """Withhold credit once this many steps are queued (``arena serve --queue-steps``); the byte
    capacity is then derived to hold them. ``None``: one update's worth for an on-policy agent,
    ``OFF_POLICY_QUEUED_PUBLISHES`` publishes' worth for an off-policy one (``server.transition_queue``)."""
    queue_max_bytes: int | None = None
    """Capacity of the transition queue in bytes; ``None`` derives 4 x the agent's update batch
    (at least 64 KiB) and, for an on-policy agent, also withholds credit once one update's worth
    of steps is queued (``server.transition_queue.ON_POLICY_QUEUED_UPDATES``); a capacity given here is the only bound.
    Credits are withheld while it is full; if bots' outstanding credits
    still overflow it, the oldest batches are dropped and counted
    (``dropped{reason="queue_full"}``) — a throughput-vs-staleness trade: larger holds more
    stale data for an on-policy learner, smaller throttles bots sooner."""
    # Logging
    loop_lag_interval: float = 0.02
    """Event-loop lag sampling period in seconds."""
    loop_lag_warn: float = 0.1
    """A loop stall longer than this is logged as a warning."""
    gil_switch_interval: float | None = 0.001
    """``sys.setswitchinterval`` set when the server starts (``None`` leaves it alone). Each time
    the loop thread returns from a socket call it must win the GIL back from a busy trainer
    thread, waiting up to this long, many times a turn; shorter than CPython's default keeps
    loop lag down (docs/architecture.md, "Threads and locks")."""

    def __post_init__(self) -> None:
        problems = listen_problems(self.port, self.token)
        if not is_loopback(self.host) and not self.token:
            problems.append(f"binding to {self.host!r} (not loopback) requires a token")
        for name in ("open_timeout", "hello_timeout", "close_timeout", "error_window", "loop_lag_interval", "loop_lag_warn"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        for name in (
            "max_batch",
            "credit_window",
            "max_connections",
            "max_agents_per_bot",
            "segment_steps",
            "error_budget",
            "max_undecodable",
            "max_queue_frames",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_message_bytes < 4096:
            problems.append(f"max_message_bytes must be >= 4096, got {self.max_message_bytes}")
        if self.queue_max_bytes is not None and self.queue_max_bytes < 1:
            problems.append(f"queue_max_bytes must be >= 1, got {self.queue_max_bytes}")
        if self.queue_max_steps is not None and self.queue_max_steps < 1:
            problems.append(f"queue_max_steps must be >= 1, got {self.queue_max_steps}")
        if self.queue_max_steps is not None and self.queue_max_bytes is not None:
            problems.append("give queue_max_steps or queue_max_bytes, not both")
        if not self.max_abs > 0:
            problems.append(f"max_abs must be > 0, got {self.max_abs}")
        if self.max_connections_per_ip is not None and self.max_connections_per_ip < 1:
            problems.append(f"max_connections_per_ip must be >= 1 or None, got {self.max_connections_per_ip}")
        if self.max_handshakes_per_ip_per_s is not None and not self.max_handshakes_per_ip_per_s >= 1:
            problems.append(f"max_handshakes_per_ip_per_s must be >= 1 or None, got {self.max_handshakes_per_ip_per_s}")
        if self.auth_failures_before_block < 1 or not self.auth_failure_window > 0 or not self.auth_block_seconds >= 0:
            problems.append("auth_failures_before_block must be >= 1, auth_failure_window > 0, auth_block_seconds >= 0")
        if self.gil_switch_interval is not None and not 0 < self.gil_switch_interval <= 0.1:
            problems.append(f"gil_switch_interval must be in (0, 0.1] seconds or None, got {self.gil_switch_interval}")
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("tls_cert and tls_key go together")
        if problems:
            raise ValueError("invalid ServerConfig: " + "; ".join(problems))


@dataclass(frozen=True)
class TrainerConfig:
    """The trainer thread: checkpoints and publishing."""

    checkpoint_dir: Path | None = None
    """Where checkpoints go; ``None`` disables them (tests, benchmarks)."""
    checkpoint_interval: float = 30.0
    """Seconds between periodic checkpoints (plus one at shutdown): the most training a crash can cost.
    A save is cheap next to this interval (docs/architecture.md, "Checkpoints")."""
    first_checkpoint_after: float = 5.0
    """Seconds from the first update to the first checkpoint, so a crash early in a run does not cost
    it all (then every ``checkpoint_interval``)."""
    keep_checkpoints: int = 3
    resume: bool = False
    """Load the newest valid checkpoint at start (the generation is bumped)."""
    publish_every: int = 1
    """Publish weights every N updates."""
    idle_wait: float = 0.05
    """Longest the trainer sleeps waiting for data before re-checking its stop flag (seconds)."""
    drain_interval: float = 0.01
    """Seconds the trainer lets arrivals pile up after a drain that emptied the queue without an update.

    Draining each frame as it lands hands the GIL back and forth between the event loop and
    the trainer thousands of times a second; every hand-off can cost the loop up to the
    interpreter's switch interval. Draining in bulk costs the agent at most this much latency
    and the loop nothing (credit is returned by the loop itself)."""
    torch_threads: int | None = None
    """``torch.set_num_threads`` for the trainer; ``None`` leaves one core to the event loop."""
    rollback_after_skips: int = 3
    """Consecutive updates whose every step was skipped as non-finite before the agent rolls
    back to its last good state (the generation is bumped, as after a resume)."""
    max_restarts: int = 10
    """Trainer crashes survived over the server's lifetime (ML-Agents' quota); one more stops the server."""
    restart_interval: float = 60.0
    """Seconds that must pass between two restarts; a faster crash loop stops the server."""

    def __post_init__(self) -> None:
        if self.checkpoint_interval <= 0 or self.idle_wait <= 0 or self.first_checkpoint_after < 0:
            raise ValueError("checkpoint_interval and idle_wait must be > 0 seconds, first_checkpoint_after >= 0")
        if not 0 <= self.drain_interval <= 1:
            raise ValueError("drain_interval must be within [0, 1] seconds")
        if self.keep_checkpoints < 1 or self.publish_every < 1:
            raise ValueError("keep_checkpoints and publish_every must be >= 1")
        if self.resume and self.checkpoint_dir is None:
            raise ValueError("resume needs a checkpoint_dir")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError("torch_threads must be >= 1 or None")
        if self.rollback_after_skips < 1 or self.max_restarts < 0 or not self.restart_interval >= 0:
            raise ValueError("rollback_after_skips must be >= 1, max_restarts >= 0 and restart_interval >= 0")
