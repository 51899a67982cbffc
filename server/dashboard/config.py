"""What a dashboard is built from: its own settings, and the narrow view of the server it shows.

Why a module of its own: the observer server (:mod:`server.dashboard`), the read model it
streams (:mod:`server.dashboard.feed`) and its HTTP gate (:mod:`server.dashboard.http_gate`) all
take these two. Kept apart from all three, and free of I/O, none of them has to import
another just for its types, and the settings can be read without the websocket machinery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from ..admission import Admission
from ..config import ServerConfig, listen_problems
from ..metrics import Metrics
from ..stats import DEFAULT_RATE_WINDOW, ServerStats

__all__ = ["DashboardConfig", "DashboardHost"]


@dataclass(frozen=True)
class DashboardConfig:
    """The dashboard's own listening socket, auth and limits (the bot port's are in ``ServerConfig``)."""

    host: str = "127.0.0.1"
    """Bind address. Anything but loopback requires a token (here or on the training server)."""
    port: int = 8766
    """TCP port; 0 picks a free one (tests)."""
    token: str | None = None
    """Bearer token for the page and the observer socket. ``None``: the training server's token,
    so the dashboard is open only when the bot port is too (loopback without a token)."""
    # Timing (seconds)
    push_interval: float = 0.5
    """Period of stats samples (the charts' resolution) and of stats messages to observers."""
    frame_fps: float = 20.0
    """Most match frames per second sent to each observer; newer frames replace unsent ones."""
    rate_window: float = DEFAULT_RATE_WINDOW
    """Transitions/s are averaged over this many seconds: trained steps arrive a whole update at a
    time, so a rate per sample would be all spikes. Must be >= ``push_interval``. A ``TrainingServer``
    built with this config takes it for the rate window of every view (``server.stats``); the bot
    table's per-bot rates are smoothed over it."""
    open_timeout: float = 5.0
    """HTTP request / websocket upgrade deadline (slowloris bound)."""
    ping_interval: float | None = 20.0
    """Keepalive ping period; ``None`` disables."""
    ping_timeout: float | None = 20.0
    close_timeout: float = 2.0
    send_timeout: float = 10.0
    """An observer whose socket cannot take one message within this long is aborted (its browser stalled)."""
    # Limits
    history: int = 1200
    """Stats samples kept and replayed to a new observer (1200 x 0.5 s = 10 minutes of charts)."""
    update_history: int = 2000
    """Trainer update rows kept and replayed to a new observer."""
    max_observers: int = 8
    """Open observer connections; beyond it the handshake gets HTTP 503."""
    max_bots_listed: int = 256
    """Rows of the bot table (the longest-connected bots first)."""
    max_frame_bytes: int = 256 << 10
    """Largest encoded match frame; a bigger one is dropped (and logged once)."""
    max_inbound_bytes: int = 1024
    """Largest frame an observer may send before websockets closes it 1009 (any frame closes it 1008)."""

    def __post_init__(self) -> None:
        problems = listen_problems(self.port, self.token)
        for name in ("push_interval", "frame_fps", "rate_window", "open_timeout", "close_timeout", "send_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("ping_interval", "ping_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                problems.append(f"{name} must be > 0 seconds or None, got {value!r}")
        if self.rate_window < self.push_interval:
            problems.append(f"rate_window must be >= push_interval ({self.push_interval}), got {self.rate_window}")
        if self.frame_fps > 60:
            problems.append(f"frame_fps must be <= 60 (a browser draws no faster), got {self.frame_fps}")
        for name in ("history", "update_history", "max_observers", "max_bots_listed"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_frame_bytes < 1024 or self.max_inbound_bytes < 125:
            problems.append("max_frame_bytes must be >= 1024 and max_inbound_bytes >= 125 (a close frame's size)")
        if problems:
            raise ValueError("invalid DashboardConfig: " + "; ".join(problems))


class DashboardHost(Protocol):
    """What the dashboard needs of the server it shows (a :class:`~server.app.TrainingServer` is one).

    Kept this narrow so the dashboard depends on the read model, not on the server's parts:
    everything it shows comes from :meth:`stats`; the rest is what it shares with the bot
    port (the admission's per-address blocks, the certificate and token) and where its own
    counters go.
    """

    @property
    def config(self) -> ServerConfig: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def admission(self) -> Admission: ...

    def stats(self, bots: int = 0) -> ServerStats: ...
