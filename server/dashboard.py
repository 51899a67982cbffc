"""The live dashboard: a web page and a read-only *observer* websocket, on a port of their own.

Why a port of its own: the bot port refuses every browser (``origins=[None]``, against
cross-site websocket hijacking) and speaks binary msgpack; the page needs plain HTTP,
JSON and a same-origin websocket. A second ``serve()`` on the server's event loop costs
one listening socket and no thread, and keeps the bot port's rules untouched.

Why it costs the bots nothing: the dashboard never hooks the ingest path. One timer task
on the loop takes one :class:`~server.stats.ServerStats` snapshot (with its bot rows) every
``push_interval`` seconds, and forwards the newest match frame at most ``frame_fps`` times a
second. It reads nothing else of the server: what it needs of it is :class:`DashboardHost`
(snapshots, the shared admission, the metrics its own counters go to, the port's TLS and
token). Other threads hand data over without waking the loop: :meth:`Dashboard.publish_frame`
is one reference assignment (latest wins), :meth:`Dashboard.publish_stats` one append under
a lock.

Backpressure: each observer has one sender task that, when woken, sends what is due *now*
(stats since its cursors, the newest frame); nothing is queued per observer, so a slow
browser skips frames instead of buffering them, and one whose socket cannot take a message
within ``send_timeout`` seconds is aborted.

Observer protocol (``arena.observe.v1``, JSON text frames, server → browser only):

- ``{"type": "hello", "protocol", "agent", "push_interval", "frame_fps", "history"}`` once;
- ``{"type": "stats", "t", "samples": [...], "updates": [...], "bots": [...], "health": {...}}``
  every ``push_interval``; ``samples`` and ``updates`` hold only rows the observer has not
  seen yet (the whole history right after ``hello``, in chunks of at most 200 rows each),
  ``bots`` is the full current table;
- ``{"type": "frame", "seq", "frame", "header"?}`` at most ``frame_fps`` times a second;
  ``header`` only when it differs from the last one sent to this observer. Both follow
  :mod:`arena.games.tank.snapshot` exactly.

Anything an observer sends closes its connection with 1008 (policy violation).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import importlib.resources
import ipaddress
import itertools
import json
import logging
import math
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.typing import Subprotocol

from .admission import Admission
from .config import ServerConfig, is_loopback, url_host
from .http_common import bearer_matches, json_body, page_response, peer_address, secret_matches, tls_context
from .metrics import Metrics
from .stats import DEFAULT_RATE_WINDOW, BotRates, ServerStats

__all__ = ["OBSERVE_PATH", "SUBPROTOCOL", "Dashboard", "DashboardConfig", "DashboardHost", "static_asset"]

logger = logging.getLogger(__name__)

SUBPROTOCOL = Subprotocol("arena.observe.v1")
"""The observer websocket's subprotocol; a client must offer it (HTTP 400 otherwise)."""
OBSERVE_PATH = "/observe"

_STATIC: dict[str, tuple[str, str]] = {
    "/": ("dashboard.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/match.js": ("match.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
"""URL path → (file in ``server/static``, content type). ``/`` needs the token; the rest is public code."""

_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""No inline script, no third party: the page can talk only to this port (CSP 3 ``'self'`` covers ws://)."""

_MAX_STAT_KEYS = 64
"""Keys kept per trainer stats row (a runaway hook cannot grow every message)."""
_ROWS_PER_MESSAGE = 200
"""Most samples (and most update rows) in one stats message. A new observer's replay of the
whole history goes out in chunks, each encoded separately with the loop free in between:
encoded at once, 10 minutes of history (1.4 MB of JSON) held this loop 46 ms."""


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
        problems = []
        if not 0 <= self.port <= 65535:
            problems.append(f"port must be in [0, 65535], got {self.port}")
        if self.token is not None and len(self.token) < 8:
            problems.append("token must be at least 8 characters")
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


class _Observer:
    """One browser: its connection, what it has been sent, and a wake-up for its sender task."""

    def __init__(self, connection: ServerConnection, next_sample: int, next_update: int) -> None:
        self.connection = connection
        self.wake = asyncio.Event()
        self.stats_due = True
        self.next_sample = next_sample
        self.next_update = next_update
        self.frame_seq = -1
        self.header: Mapping[str, Any] | None = None
        self.sender: asyncio.Task[None] | None = None


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


class Dashboard:
    """Serves the dashboard page and streams stats and match frames to observers.

    Runs on the event loop of a started :class:`~server.app.TrainingServer` (its snapshots'
    bot rows are loop-thread state), on a port of its own.

    Args:
        server: the training server to show; :meth:`start` must run on its event loop.
        config: address, auth and limits.

    Raises:
        ValueError: a non-loopback ``host`` without any token.

    Lifecycle: :meth:`start` after ``server.start()``; :meth:`close` before ``server.close()``
    (observers get 1001 while the server's state is still readable).
    """

    def __init__(self, server: DashboardHost, config: DashboardConfig | None = None) -> None:
        self.server = server
        self.config = config or DashboardConfig()
        self._token = self.config.token if self.config.token is not None else server.config.token
        if self._token is None and not is_loopback(self.config.host):
            raise ValueError(f"dashboard on {self.config.host!r} (not loopback) requires a token")
        self._files = _load_static()
        self._server: Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._observers: set[_Observer] = set()
        self._closing = False
        self._started = time.monotonic()
        # Loop-thread state: samples, update rows, per-bot rates.
        self._samples: deque[dict[str, Any]] = deque(maxlen=self.config.history)
        self._updates: deque[dict[str, Any]] = deque(maxlen=self.config.update_history)
        self._sample_ids = itertools.count()
        self._update_ids = itertools.count()
        self._next_sample = 0
        self._next_update = 0
        self._bots: list[dict[str, Any]] = []
        self._health: dict[str, Any] = {}
        self._agent = ""
        """The learner's name, from the newest snapshot (the observers' ``hello`` carries it)."""
        self._bot_rates = BotRates(self.config.rate_window, self._started)
        self._last_update_seen = -1.0
        self._stats_cache: dict[tuple[int, int], tuple[str, tuple[int, int]]] = {}
        """Encoded stats message and the cursors after it, by the cursors before it (cleared each sample)."""
        self._frame_cache: dict[tuple[int, bool], str | None] = {}
        self._oversize_logged = False
        self._tick_failed_logged = False
        # Cross-thread hand-over.
        self._inbox_lock = threading.Lock()  # guards _inbox and _stats_published, nothing else
        self._inbox: deque[dict[str, Any]] = deque(maxlen=self.config.update_history)
        self._stats_published = False
        """Set by the first publish_stats: from then on the trainer's last_metrics is not polled."""
        self._frame_ids = itertools.count()
        self._latest_frame: tuple[int, Mapping[str, Any], Mapping[str, Any]] | None = None
        """(seq, header, frame), replaced whole by publish_frame: one reference assignment, atomic."""
        self._frame_announced = -1
        self._last_frame_at = -math.inf
        self._describe_metrics()

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Bind and start the sampling timer. Call on the training server's event loop, after its start()."""
        cfg = self.config
        self._server = await serve(
            self._handler,
            cfg.host,
            cfg.port,
            process_request=self._process_request,
            subprotocols=[SUBPROTOCOL],
            compression=None,  # small JSON at 20 fps: deflate's per-connection memory buys nothing
            server_header=None,
            open_timeout=cfg.open_timeout,
            ping_interval=cfg.ping_interval,
            ping_timeout=cfg.ping_timeout,
            close_timeout=cfg.close_timeout,
            max_size=cfg.max_inbound_bytes,
            max_queue=1,
            ssl=tls_context(self.server.config.tls_cert, self.server.config.tls_key),  # the bot port's certificate
            # websockets logs every plain HTTP answer ("connection rejected (200 OK)") at INFO:
            # under a name of their own, an entry point can quiet page loads without losing ours.
            logger=logging.getLogger(f"{__name__}.http"),
        )
        self._take_sample()  # a new observer gets a first point at once
        self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="dashboard-ticker")
        logger.info("dashboard on %s", self.url)

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The page's address (without the token)."""
        scheme = "https" if self.server.config.tls_cert else "http"
        return f"{scheme}://{url_host(self.config.host)}:{self.port}/"

    @property
    def observers(self) -> int:
        return len(self._observers)

    async def close(self) -> None:
        """Close observers with 1001, stop the timer and the listener (idempotent)."""
        if self._closing:
            return
        self._closing = True
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._server is not None:
            self._server.close(close_connections=True)
            await self._server.wait_closed()
        logger.info("dashboard closed")

    async def __aenter__(self) -> Dashboard:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ── other threads → dashboard ────────────────────────────────────────────

    def publish_stats(self, stats: Mapping[str, Any]) -> None:
        """Record one trainer update's stats (any thread; the trainer's ``update_hook`` or the CLI's log).

        Keeps the numeric values (non-finite ones become ``null``), stamped with the dashboard's
        clock, rounded to 6 significant digits. Keys are free: the page charts
        ``rollout/ep_rew_mean``, ``rollout/win_rate_last_100`` and ``train/*_loss``; other keys
        travel along for other views.
        """
        row: dict[str, Any] = {"t": round(time.monotonic() - self._started, 3)}
        for key, value in itertools.islice(stats.items(), _MAX_STAT_KEYS):
            if isinstance(value, int | float) and not isinstance(value, bool):
                row[str(key)[:64]] = _finite(value)
        with self._inbox_lock:
            self._inbox.append(row)
            self._stats_published = True

    def publish_frame(self, header: Mapping[str, Any], frame: Mapping[str, Any]) -> None:
        """Offer the newest frame of the match on show (any thread; never blocks, never queues).

        ``header`` and ``frame`` are :func:`arena.games.tank.snapshot.header` / ``frame`` dicts; the
        caller must not mutate them afterwards. An unsent frame is simply replaced: observers
        get the newest one at most ``frame_fps`` times a second.
        """
        self._latest_frame = (next(self._frame_ids), header, frame)
        self._last_frame_at = time.monotonic()

    def frame_wanted(self) -> bool:
        """Whether a new frame would be shown now: an observer is connected and the last frame is a
        frame period old. Lets a game loop skip building frames nobody would see (any thread)."""
        return bool(self._observers) and time.monotonic() - self._last_frame_at >= 1.0 / self.config.frame_fps

    # ── sampling (loop thread) ───────────────────────────────────────────────

    async def _tick(self) -> None:
        """Sample every ``push_interval``; between samples, wake observers for new frames."""
        loop = asyncio.get_running_loop()
        frame_period = 1.0 / self.config.frame_fps
        next_sample = loop.time() + self.config.push_interval
        while True:
            now = loop.time()
            try:
                if now >= next_sample:
                    next_sample = max(next_sample + self.config.push_interval, now + frame_period)
                    self._take_sample()
                    for observer in self._observers:
                        observer.stats_due = True
                        observer.wake.set()
                latest = self._latest_frame
                if latest is not None and latest[0] != self._frame_announced:
                    self._frame_announced = latest[0]
                    for observer in self._observers:
                        observer.wake.set()
            except Exception:  # a bug here must not end the charts for good: log once, keep ticking
                if not self._tick_failed_logged:
                    self._tick_failed_logged = True
                    logger.exception("dashboard sampling failed")
            wait = next_sample - loop.time()
            await asyncio.sleep(max(0.0, min(wait, frame_period) if self._observers else wait))

    def _take_sample(self) -> None:
        """One chart point from one server snapshot, plus the bot table and any new update rows."""
        stats = self.server.stats(bots=self.config.max_bots_listed)
        now = stats.taken_at
        lag, policy_lag = stats.loop_lag, stats.policy_lag
        i = next(self._sample_ids)
        self._samples.append(
            {
                "i": i,
                "t": round(now - self._started, 3),
                "transitions_per_s": round(stats.received_per_s, 1),
                "trained_per_s": round(stats.trained_per_s, 1),
                "transitions_received": stats.transitions_received,
                "policy_version": stats.policy.version,
                "generation": stats.policy.generation,
                "policy_lag_min": policy_lag.min,
                "policy_lag_avg": policy_lag.avg,
                "policy_lag_max": policy_lag.max,
                "loop_lag_p50_ms": _ms(lag.p50) if lag is not None else None,  # None only off the loop thread
                "loop_lag_p99_ms": _ms(lag.p99) if lag is not None else None,
                "loop_lag_max_ms": _ms(lag.max) if lag is not None else None,
                "connected_bots": stats.connected_bots,
                "queue_steps": stats.queue_steps,
                "observers": len(self._observers),
            }
        )
        self._next_sample = i + 1
        for row in self._drain_updates(stats):
            row["i"] = j = next(self._update_ids)
            self._updates.append(row)
            self._next_update = j + 1
        self._bots = self._bot_table(stats)
        healthy, self._health = stats.health()
        self._health["healthy"] = healthy
        self._agent = stats.agent
        self._stats_cache.clear()
        self.server.metrics.set("dashboard_observers", len(self._observers))

    def _drain_updates(self, stats: ServerStats) -> list[dict[str, Any]]:
        with self._inbox_lock:
            rows, published = list(self._inbox), self._stats_published
            self._inbox.clear()
        if published:
            return rows
        # Nobody calls publish_stats (a bare TrainingServer): take the trainer's newest update
        # from the snapshot instead (the trainer never mutates a stats dict after storing it).
        last = stats.last_update
        updates = last.get("updates", -1.0)
        if updates == self._last_update_seen:
            return []
        self._last_update_seen = updates
        row: dict[str, Any] = {"t": round(stats.taken_at - self._started, 3)}
        for key, value in itertools.islice(last.items(), _MAX_STAT_KEYS):
            row[key] = _finite(value)
        return [row]

    def _bot_table(self, stats: ServerStats) -> list[dict[str, Any]]:
        """One row per bot in the snapshot; its rate from its steps between samples (:class:`~server.stats.BotRates`)."""
        now = stats.taken_at
        rates = self._bot_rates.update(stats)
        return [
            {
                "id": bot.bot_id,
                "name": bot.name,
                "client": bot.client[:60],
                "agents": bot.agents,
                "reward": bot.reward,
                "generation": bot.policy.generation,
                "version": bot.policy.version,
                "version_is": bot.policy_is,
                "steps": bot.steps,
                "transitions_per_s": round(rates[bot.bot_id], 1),
                "connected_s": round(now - bot.connected_at, 1),
                "last_seen_s": round(now - bot.last_frame_at, 1),
            }
            for bot in stats.bots
        ]

    # ── HTTP side: auth, page, assets ────────────────────────────────────────

    def _authorized(self, request: Request) -> bool:
        """Bearer header (as bots) or ``?token=`` (browsers cannot set headers on a websocket)."""
        if self._token is None:
            return True
        if bearer_matches(request.headers, self._token):
            return True
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query, max_num_fields=8)
        supplied = query.get("token", [""])[-1]
        return secret_matches(supplied, self._token)

    def _same_origin(self, request: Request) -> bool:
        """A browser's websocket must come from this page (cross-site websocket hijacking)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # not a browser: auth alone decides
        return urllib.parse.urlsplit(origin).netloc.lower() == request.headers.get("Host", "").lower()

    def _host_allowed(self, request: Request) -> bool:
        """Without a token, only loopback host names (a DNS-rebinding page names its own host)."""
        if self._token is not None:
            return True
        host = urllib.parse.urlsplit("//" + request.headers.get("Host", "")).hostname or ""
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urllib.parse.urlsplit(request.path).path
        if path == "/healthz":
            healthy, body = self.server.stats().health()
            body["observers"] = len(self._observers)
            status = http.HTTPStatus.OK if healthy else http.HTTPStatus.SERVICE_UNAVAILABLE
            return page_response(status, json_body(body), "application/json")
        if path in _STATIC and path != "/":
            name, content_type = _STATIC[path]
            return page_response(http.HTTPStatus.OK, self._files[name], content_type, cache=True)
        if path == "/favicon.ico":
            return page_response(http.HTTPStatus.NO_CONTENT, b"")
        if path not in ("/", OBSERVE_PATH):
            return page_response(http.HTTPStatus.NOT_FOUND, "not found\n")
        if not self._host_allowed(request):
            self.server.metrics.inc("observers_rejected", reason="host")
            return page_response(http.HTTPStatus.FORBIDDEN, "unexpected Host header\n")
        authorized = self._authorized(request)
        # The bot port's admission, shared: bad tokens here count toward the same per-address
        # block, so a second port is no second chance at guessing the token.
        refusal = self.server.admission.check(peer_address(connection), authorized)
        if refusal is not None:
            self.server.metrics.inc("observers_rejected", reason="rate_limited")
            response = page_response(http.HTTPStatus(refusal.status), refusal.reason + "\n")
            if refusal.retry_after is not None:
                response.headers["Retry-After"] = str(refusal.retry_after)
            return response
        if not authorized:
            self.server.metrics.inc("observers_rejected", reason="unauthorized")
            response = page_response(http.HTTPStatus.UNAUTHORIZED, "missing or invalid token\n")
            response.headers["WWW-Authenticate"] = 'Bearer realm="arena"'
            return response
        if path == "/":
            name, content_type = _STATIC[path]
            response = page_response(http.HTTPStatus.OK, self._files[name], content_type)
            response.headers["Content-Security-Policy"] = _PAGE_CSP
            response.headers["X-Frame-Options"] = "DENY"
            return response
        if not self._same_origin(request):
            self.server.metrics.inc("observers_rejected", reason="origin")
            return page_response(http.HTTPStatus.FORBIDDEN, "cross-origin observer refused\n")
        if self._closing:
            return page_response(http.HTTPStatus.SERVICE_UNAVAILABLE, "dashboard shutting down\n")
        if len(self._observers) >= self.config.max_observers:
            self.server.metrics.inc("observers_rejected", reason="capacity")
            return page_response(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many observers\n")
        return None  # upgrade to the observer websocket

    # ── observers (loop thread) ──────────────────────────────────────────────

    async def _handler(self, connection: ServerConnection) -> None:
        if len(self._observers) >= self.config.max_observers:  # handshakes that raced past the HTTP check
            self.server.metrics.inc("observers_rejected", reason="capacity")
            await connection.close(CloseCode.TRY_AGAIN_LATER, "too many observers")
            return
        start_sample = self._samples[0]["i"] if self._samples else self._next_sample
        start_update = self._updates[0]["i"] if self._updates else self._next_update
        observer = _Observer(connection, start_sample, start_update)
        hello = {
            "type": "hello",
            "protocol": SUBPROTOCOL,
            "agent": self._agent,
            "push_interval": self.config.push_interval,
            "frame_fps": self.config.frame_fps,
            "history": self.config.history,
        }
        try:
            await connection.send(json.dumps(hello))
        except ConnectionClosed:
            return
        self._observers.add(observer)
        observer.sender = asyncio.get_running_loop().create_task(self._sender(observer), name="dashboard-observer")
        observer.wake.set()
        logger.info("observer connected from %s (%d open)", peer_address(connection) or "?", len(self._observers))
        try:
            async for _ in connection:
                self.server.metrics.inc("observers_rejected", reason="sent_data")
                await connection.close(CloseCode.POLICY_VIOLATION, "observers are read-only")
                break
        except ConnectionClosed:
            pass
        finally:
            self._observers.discard(observer)
            observer.sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await observer.sender
            logger.info("observer disconnected (%d open)", len(self._observers))

    async def _sender(self, observer: _Observer) -> None:
        """Send what is due when woken: stats since the observer's cursors, then the newest frame."""
        connection = observer.connection
        while connection.state is State.OPEN:
            await observer.wake.wait()
            observer.wake.clear()
            if observer.stats_due:
                observer.stats_due = False
                if not await self._send(connection, self._stats_message(observer)):
                    return
                if observer.next_sample < self._next_sample or observer.next_update < self._next_update:
                    observer.stats_due = True  # more of a replay to come: the next chunk after a loop turn
                    observer.wake.set()
                    await asyncio.sleep(0)
            latest = self._latest_frame
            if latest is not None and latest[0] != observer.frame_seq:
                seq, header, _ = latest
                text = self._frame_message(latest, with_header=header != observer.header)
                observer.frame_seq = seq
                if text is not None:
                    if not await self._send(connection, text):
                        return
                    observer.header = header

    async def _send(self, connection: ServerConnection, text: str) -> bool:
        """Send one message; abort the connection if it cannot drain within ``send_timeout``."""
        try:
            async with asyncio.timeout(self.config.send_timeout):
                await connection.send(text)
        except ConnectionClosed:
            return False
        except TimeoutError:
            logger.warning(
                "aborting observer %s: nothing drained for %.0f s", peer_address(connection) or "?", self.config.send_timeout
            )
            self.server.metrics.inc("observers_aborted", reason="write_stalled")
            connection.transport.abort()
            return False
        return True

    def _stats_message(self, observer: _Observer) -> str:
        """The next rows after the observer's cursors, which it advances (encoded once per cursor pair per sample)."""
        key = (observer.next_sample, observer.next_update)
        cached = self._stats_cache.get(key)
        if cached is None:
            samples = _rows_from(self._samples, observer.next_sample)
            updates = _rows_from(self._updates, observer.next_update)
            message = {
                "type": "stats",
                "t": round(time.monotonic() - self._started, 3),
                "samples": samples,
                "updates": updates,
                "bots": self._bots,
                "health": self._health,
            }
            text = json.dumps(message, separators=(",", ":"), allow_nan=False)
            cursors = (
                samples[-1]["i"] + 1 if samples else observer.next_sample,
                updates[-1]["i"] + 1 if updates else observer.next_update,
            )
            cached = self._stats_cache[key] = (text, cursors)
        text, (observer.next_sample, observer.next_update) = cached
        return text

    def _frame_message(self, latest: tuple[int, Mapping[str, Any], Mapping[str, Any]], with_header: bool) -> str | None:
        """The frame message (encoded once per frame and variant); None if it cannot be sent."""
        seq, header, frame = latest
        if self._frame_cache and next(iter(self._frame_cache))[0] != seq:
            self._frame_cache.clear()
        key = (seq, with_header)
        if key in self._frame_cache:
            return self._frame_cache[key]
        message: dict[str, Any] = {"type": "frame", "seq": seq, "frame": frame}
        if with_header:
            message["header"] = header
        text: str | None
        try:
            text = json.dumps(message, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:  # not JSON (NaN, numpy scalars): the publisher's bug
            text = None
            self._log_bad_frame(f"frame {seq} is not plain JSON ({exc})")
        if text is not None and len(text) > self.config.max_frame_bytes:
            text = None
            self._log_bad_frame(f"frame {seq} encodes to more than max_frame_bytes={self.config.max_frame_bytes}")
        self._frame_cache[key] = text
        return text

    def _log_bad_frame(self, why: str) -> None:
        if not self._oversize_logged:
            self._oversize_logged = True
            logger.warning("dropping match frames: %s (logged once)", why)

    def _describe_metrics(self) -> None:
        d = self.server.metrics.describe
        d("dashboard_observers", "Open dashboard observer connections.")
        d("observers_rejected", "Dashboard requests or observers refused, by reason.")
        d("observers_aborted", "Observers aborted because their socket drained nothing, by reason.")


def _rows_from(rows: deque[dict[str, Any]], first: int, limit: int = _ROWS_PER_MESSAGE) -> list[dict[str, Any]]:
    """Up to ``limit`` rows from the one whose ``i`` is ``first`` (``rows`` holds consecutive ``i``)."""
    if not rows:
        return []
    start = max(0, first - rows[0]["i"])
    return list(itertools.islice(rows, start, start + limit))


def _ms(seconds: float) -> float:
    """Seconds as milliseconds, to the charts' resolution."""
    return round(seconds * 1000, 2)


def _finite(value: Any) -> float | None:
    """A stat as JSON can carry it: 6 significant digits (the charts show fewer), ``None`` if not finite."""
    number = float(value)
    return float(f"{number:.6g}") if math.isfinite(number) else None


def static_asset(name: str) -> bytes:
    """One of the page's files by name, e.g. ``match.js`` (``drawFrame``, which ``arena replay`` reuses)."""
    if name not in {file for file, _ in _STATIC.values()}:
        raise KeyError(f"no dashboard asset named {name!r}")
    return (importlib.resources.files("server") / "static" / name).read_bytes()


def _load_static() -> dict[str, bytes]:
    """The page's files, read once (a few KiB): serving them never touches the disk."""
    folder = importlib.resources.files("server") / "static"
    return {name: (folder / name).read_bytes() for name, _ in _STATIC.values()}
