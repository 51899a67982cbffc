"""The live dashboard: a web page and a read-only *observer* websocket, on a port of their own.

Why a port of its own: the bot port refuses every browser (``origins=[None]``, against
cross-site websocket hijacking) and speaks binary msgpack; the page needs plain HTTP, JSON
and a same-origin websocket. A second ``serve()`` on the server's event loop costs one
listening socket and no thread.

Why it costs the bots nothing: the dashboard never hooks the ingest path. One timer task
takes a :class:`~server.stats.ServerStats` snapshot every ``push_interval`` seconds and
forwards the newest match frame at most ``frame_fps`` times a second. Each observer has one
sender task that sends what is due *now*; nothing is queued per observer, so a slow browser
skips frames, and one that cannot take a message within ``send_timeout`` is aborted.

This module is the listener, the timer and the senders; the config is in
:mod:`server.dashboard.config`, the messages in :mod:`server.dashboard.feed`, the HTTP checks
in :mod:`server.dashboard.http_gate` (their public names are re-exported here). Anything an
observer sends closes it with 1008.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State

from ..config import is_loopback, url_host
from ..http_common import peer_address, tls_context
from .config import DashboardConfig, DashboardHost
from .feed import SUBPROTOCOL, Cursors, ObserverFeed
from .http_gate import OBSERVE_PATH, DashboardHttp, static_asset

__all__ = ["OBSERVE_PATH", "SUBPROTOCOL", "Dashboard", "DashboardConfig", "DashboardHost", "static_asset"]

logger = logging.getLogger("server.dashboard")  # the name it had as one module: logging configs keep working


class _Observer:
    """One browser: its connection, what it has been sent, and a wake-up for its sender task."""

    def __init__(self, connection: ServerConnection, cursors: Cursors) -> None:
        self.connection = connection
        self.wake = asyncio.Event()
        self.stats_due = True
        self.cursors = cursors
        self.frame_seq = -1
        self.header: Mapping[str, Any] | None = None
        self.sender: asyncio.Task[None] | None = None


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
        token = self.config.token if self.config.token is not None else server.config.token
        if token is None and not is_loopback(self.config.host):
            raise ValueError(f"dashboard on {self.config.host!r} (not loopback) requires a token")
        self._http = DashboardHttp(server, token, self.config.max_observers)
        self._server: Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._observers: set[_Observer] = set()
        self._closing = False
        self._feed = ObserverFeed(server, self.config)
        """Everything observers are sent, and its encoding (loop thread, but for the publish_* hand-over)."""
        self._tick_failed_logged = False
        self._frame_announced = -1
        """The seq of the newest frame the ticker has woken observers for."""
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
            logger=logging.getLogger("server.dashboard.http"),
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
        self._feed.publish_stats(stats)

    def publish_frame(self, header: Mapping[str, Any], frame: Mapping[str, Any]) -> None:
        """Offer the newest frame of the match on show (any thread; never blocks, never queues).

        ``header`` and ``frame`` are :func:`arena.games.tank.frames.header` / ``frame`` dicts; the
        caller must not mutate them afterwards. An unsent frame is simply replaced: observers
        get the newest one at most ``frame_fps`` times a second.
        """
        self._feed.publish_frame(header, frame)

    def frame_wanted(self) -> bool:
        """Whether a new frame would be shown now: an observer is connected and the last frame is a
        frame period old. Lets a game loop skip building frames nobody would see (any thread)."""
        return bool(self._observers) and time.monotonic() - self._feed.last_frame_at >= 1.0 / self.config.frame_fps

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
                latest = self._feed.latest_frame
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
        """One chart point, bot table and new update rows (:meth:`ObserverFeed.take_sample`), and the observer gauge."""
        self._feed.take_sample(observers=len(self._observers))
        self.server.metrics.set("dashboard_observers", len(self._observers))

    # ── HTTP side (the page, /healthz, the checks before an upgrade) ─────────

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        return self._http.answer(connection, request, observers=len(self._observers), closing=self._closing)

    # ── observers (loop thread) ──────────────────────────────────────────────

    async def _handler(self, connection: ServerConnection) -> None:
        if len(self._observers) >= self.config.max_observers:  # handshakes that raced past the HTTP check
            self.server.metrics.inc("observers_rejected", reason="capacity")
            await connection.close(CloseCode.TRY_AGAIN_LATER, "too many observers")
            return
        observer = _Observer(connection, self._feed.start_cursors())
        try:
            await connection.send(self._feed.hello_message())
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
        feed = self._feed
        while connection.state is State.OPEN:
            await observer.wake.wait()
            observer.wake.clear()
            if observer.stats_due:
                observer.stats_due = False
                text, observer.cursors = feed.stats_message(observer.cursors)
                if not await self._send(connection, text):
                    return
                if feed.behind(observer.cursors):
                    observer.stats_due = True  # more of a replay to come: the next chunk after a loop turn
                    observer.wake.set()
                    await asyncio.sleep(0)
            latest = feed.latest_frame
            if latest is not None and latest[0] != observer.frame_seq:
                seq, header, _ = latest
                frame_text = feed.frame_message(latest, with_header=header != observer.header)
                observer.frame_seq = seq
                if frame_text is not None:
                    if not await self._send(connection, frame_text):
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

    def _describe_metrics(self) -> None:
        d = self.server.metrics.describe
        d("dashboard_observers", "Open dashboard observer connections.")
        d("observers_rejected", "Dashboard requests or observers refused, by reason.")
        d("observers_aborted", "Observers aborted because their socket drained nothing, by reason.")
