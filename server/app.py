"""The asyncio websocket server: handshake, one handler per bot, health and metrics endpoints.

The event loop owns every socket; the trainer thread owns the networks. They meet in
two places only: the :class:`~server.transition_queue.TransitionQueue` (loop → trainer)
and ``loop.call_soon_threadsafe`` (trainer → loop, for new weights and returned credit).

Lifecycle: :meth:`TrainingServer.start` → serve → :meth:`TrainingServer.close`, which
stops accepting, closes bots with 1001, stops and joins the trainer, and writes the
final checkpoint. :class:`ServerThread` runs all of it in a background thread so any
program (tests, the CLI, a notebook) can embed a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import http
import itertools
import json
import logging
import ssl
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from agents import Agent
from bot_protocol import (
    SUBPROTOCOL,
    Bye,
    CloseCode,
    Error,
    ErrorCode,
    Hello,
    Limits,
    ProtocolError,
    SessionSpec,
    TransitionBatch,
    TransitionHeader,
    Welcome,
    assemble_batches,
    decode_from_bot,
    encode,
)
from bot_protocol.codec import message_from_bot, unpack

from .admission import Admission
from .config import ServerConfig, TrainerConfig, url_host
from .dashboard import Dashboard, DashboardConfig
from .looplag import LoopLagMonitor
from .metrics import Metrics
from .session import BotSession
from .trainer import Trainer
from .transition_queue import OFF_POLICY_QUEUED_PUBLISHES, ON_POLICY_QUEUED_UPDATES, Arrival, TransitionQueue
from .weights import WeightsSnapshot

__all__ = ["ListenError", "ServerThread", "TrainingServer"]

logger = logging.getLogger(__name__)


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
}
"""Counters without labels, exported from the start at 0 (a scrape never has to tell "0" from "absent")."""

_ERROR_CODES_SENT = tuple(
    str(code) for code in ErrorCode if code not in (ErrorCode.BAD_WEIGHTS, ErrorCode.BAD_HELLO, ErrorCode.INTERNAL)
)
"""Codes of the errors a bot can get after its handshake: ``frames_rejected``'s label values."""


class ListenError(OSError):
    """A port the server needs cannot be bound (in use, no permission); the message names which one."""

    def __str__(self) -> str:
        return str(self.strerror)


class TrainingServer:
    """Bots in, weights out: the websocket front end plus the trainer thread behind it.

    Args:
        agent: the learner (its actor sizes fix the observation and action sizes bots must declare).
        config: transport and protocol limits.
        trainer_config: checkpoints and publishing.
        update_hook: called on the trainer thread with each update's metrics.
        dashboard: serve the live dashboard (a web page and observer websocket) on a port of its own.
    """

    def __init__(
        self,
        agent: Agent,
        config: ServerConfig | None = None,
        trainer_config: TrainerConfig | None = None,
        update_hook: Callable[[dict[str, float]], None] | None = None,
        dashboard: DashboardConfig | None = None,
    ) -> None:
        self.config = config or ServerConfig()
        self.metrics = Metrics()
        arch, _ = agent.export_actor()
        self.obs_dim, self.act_dim = int(arch["layers"][0]), int(arch["layers"][-1])
        queue_bytes, credit_steps = self.config.queue_max_bytes, self.config.queue_max_steps  # a bound given is the only one
        if queue_bytes is None:
            step_bytes = 4 * (2 * self.obs_dim + self.act_dim + 8)  # obs, act, logp, reward, ids, share of bootstrap rows
            if credit_steps is None and agent.max_policy_lag is not None:
                credit_steps = ON_POLICY_QUEUED_UPDATES * agent.update_steps
            elif credit_steps is None and getattr(agent, "publish_steps", None):
                credit_steps = OFF_POLICY_QUEUED_PUBLISHES * agent.publish_steps  # type: ignore[attr-defined]
            queue_bytes = max(64 << 10, 4 * max(agent.update_steps, credit_steps or 0) * step_bytes)
        self.queue = TransitionQueue(queue_bytes, on_dropped=self._count_queue_drop, credit_steps=credit_steps)
        self.trainer = Trainer(
            agent,
            self.queue,
            self.metrics,
            trainer_config or TrainerConfig(),
            publish=self._publish_threadsafe,
            on_drained=self._drained_threadsafe,
            update_hook=update_hook,
            segment_steps=self.config.segment_steps,
            on_fatal=self._fatal_threadsafe,
        )
        self.failed: BaseException | None = None
        """Set when the trainer gave up (crashes beyond its restart quota): the owner should close."""
        self._failed_event: asyncio.Event | None = None
        self._write_gate: asyncio.Semaphore | None = None
        """Created on the loop at the first large weights frame (see :meth:`_start_send`)."""
        self._restore_interpreter: tuple[float, bool] | None = None
        """(switch interval, whether this server froze the collector) to restore at close."""
        self.agent_name = agent.name
        self.limits = Limits(
            self.config.max_batch, self.config.max_message_bytes, self.config.credit_window, self.config.max_abs
        )
        self.current: WeightsSnapshot = self.trainer.snapshot
        """Newest snapshot known to the event loop (the trainer's copy may be ahead by one hop)."""
        self.sessions: dict[str, BotSession] = {}
        self.lag = LoopLagMonitor(self.config.loop_lag_interval, self.config.loop_lag_warn)
        cfg = self.config
        self.admission = Admission(
            cfg.max_connections_per_ip,
            cfg.max_handshakes_per_ip_per_s,
            cfg.auth_failures_before_block,
            cfg.auth_failure_window,
            cfg.auth_block_seconds,
            cfg.limit_loopback,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._ids = itertools.count(1)
        self._open_connections = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._closed = asyncio.Event()
        self._describe_metrics()
        self.dashboard = Dashboard(self, dashboard) if dashboard is not None else None
        """The live dashboard, when configured (its own port; it only reads this server's state)."""

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Bind, start the lag monitor and the trainer thread."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self._failed_event = asyncio.Event()
        try:
            self._server = await serve(
                self._handler,
                cfg.host,
                cfg.port,
                process_request=self._process_request,
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                origins=[None],  # bots send no Origin; a browser page gets 403 (cross-site websocket hijacking)
                compression=None,  # dense float32 barely deflates; deflate made float batches 28x slower here
                server_header=None,
                open_timeout=cfg.open_timeout,
                ping_interval=cfg.ping_interval,
                ping_timeout=cfg.ping_timeout,
                close_timeout=cfg.close_timeout,
                max_size=cfg.max_message_bytes,
                max_queue=cfg.max_queue_frames,
                ssl=self._tls_context(),
            )
        except OSError as exc:
            raise ListenError(exc.errno, f"cannot listen on {cfg.host}:{cfg.port} for bots: {exc.strerror or exc}") from exc
        if self.dashboard is not None:
            try:
                await self.dashboard.start()
            except BaseException as exc:
                self._server.close()
                await self._server.wait_closed()
                if isinstance(exc, OSError) and not isinstance(exc, ListenError):
                    where = f"{self.dashboard.config.host}:{self.dashboard.config.port}"
                    raise ListenError(exc.errno, f"cannot listen on {where} for the dashboard: {exc.strerror or exc}") from exc
                raise
        self._tune_interpreter()
        self.lag.start()
        self.trainer.start()
        logger.info("serving %s agent on %s (obs %d, act %d)", self.agent_name, self.url, self.obs_dim, self.act_dim)

    def _tune_interpreter(self) -> None:
        """Process-wide settings for the loop's latency while it serves; :meth:`close` restores them.

        Everything alive now (torch, numpy, the agent and its networks: ~170k objects) lives as long
        as the server: frozen, the collector never scans it again. Unfrozen, full collections took
        160-250 ms each here in the 256-bot soak (4.5 s of 90 s), every one a loop stall; frozen,
        1 s in all. Objects that die while frozen wait for :meth:`close` to be collected.
        """
        self._restore_interpreter = (sys.getswitchinterval(), gc.get_freeze_count() == 0)
        if self._restore_interpreter[1]:
            gc.freeze()
        if self.config.gil_switch_interval is not None:
            sys.setswitchinterval(self.config.gil_switch_interval)

    def _restore_interpreter_settings(self) -> None:
        if self._restore_interpreter is None:
            return
        switch_interval, froze = self._restore_interpreter
        self._restore_interpreter = None
        sys.setswitchinterval(switch_interval)
        if froze:
            gc.unfreeze()

    def _tls_context(self) -> ssl.SSLContext | None:
        cfg = self.config
        if cfg.tls_cert is None or cfg.tls_key is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cfg.tls_cert, cfg.tls_key)
        return context

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        scheme = "wss" if self.config.tls_cert else "ws"
        return f"{scheme}://{url_host(self.config.host)}:{self.port}"

    async def close(self) -> None:
        """Stop accepting, close bots with 1001, stop the trainer, write the final checkpoint (idempotent)."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            if self.dashboard is not None:
                await self.dashboard.close()  # observers get 1001 while the state is still readable
            if self._server is not None:
                self._server.close(close_connections=True)  # 1001 going away
                await self._server.wait_closed()
            for task in list(self._background):
                task.cancel()
            await asyncio.to_thread(self.trainer.stop)
            await self.lag.stop()
        finally:
            self._restore_interpreter_settings()
            self._closed.set()
            logger.info("server closed")

    async def __aenter__(self) -> TrainingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ── trainer → loop ───────────────────────────────────────────────────────

    def _call_in_loop(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed during shutdown: nothing left to notify
            loop.call_soon_threadsafe(callback, *args)

    def _publish_threadsafe(self, snapshot: WeightsSnapshot) -> None:
        self._call_in_loop(self._publish, snapshot)

    def _fatal_threadsafe(self, exc: BaseException) -> None:
        self.failed = exc
        if self._failed_event is not None:
            self._call_in_loop(self._failed_event.set)

    async def wait_failed(self) -> BaseException:
        """Wait until the trainer gives up; returns its last exception."""
        assert self._failed_event is not None, "start() first"
        await self._failed_event.wait()
        assert self.failed is not None
        return self.failed

    def _drained_threadsafe(self) -> None:
        self._call_in_loop(self._return_withheld_credit)

    def _publish(self, snapshot: WeightsSnapshot) -> None:
        if snapshot.identity <= self.current.identity:
            return
        self.current = snapshot
        for session in self.sessions.values():
            self._offer(session, snapshot)

    def _offer(self, session: BotSession, snapshot: WeightsSnapshot) -> None:
        """Queue ``snapshot`` for one bot (latest wins); start its sender task unless one runs."""
        if session.slot.offer(snapshot) and session.sender is None:
            session.sender = asyncio.get_running_loop().create_task(self._weights_sender(session))

    def _return_withheld_credit(self) -> None:
        if self.queue.full:
            return
        for session in self.sessions.values():
            if not session.withheld:
                continue
            session.withheld = False
            credit = session.take_owed(force=True)
            if credit is not None:
                self._spawn(self._send_quietly(session, encode(credit)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ── HTTP side: auth, health, metrics ─────────────────────────────────────

    def _authorized(self, headers: Headers) -> bool:
        token = self.config.token
        if token is None:
            return True
        supplied = headers.get("Authorization", "")
        scheme, _, value = supplied.partition(" ")
        # compare_digest: the comparison time does not depend on where the tokens differ.
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            healthy, body = self.health()
            status = http.HTTPStatus.OK if healthy else http.HTTPStatus.SERVICE_UNAVAILABLE
            return _respond(connection, status, json.dumps(body) + "\n", "application/json")
        authorized = self._authorized(request.headers)
        refusal = self.admission.check(_address(connection), authorized)
        if refusal is not None:
            self.metrics.inc("handshakes_rejected", reason="rate_limited")
            response = _respond(connection, http.HTTPStatus(refusal.status), refusal.reason + "\n")
            if refusal.retry_after is not None:
                response.headers["Retry-After"] = str(refusal.retry_after)
            return response
        if not authorized:
            self.metrics.inc("handshakes_rejected", reason="unauthorized")
            response = _respond(connection, http.HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token\n")
            response.headers["WWW-Authenticate"] = 'Bearer realm="arena"'
            return response
        if path == "/metrics":
            return _respond(connection, http.HTTPStatus.OK, self.render_metrics(), "text/plain; version=0.0.4")
        if self._closing:
            return _respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "server shutting down\n")
        if self._open_connections >= self.config.max_connections:
            self.metrics.inc("handshakes_rejected", reason="capacity")
            return _respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "server at connection capacity\n")
        return None

    def health(self) -> tuple[bool, dict[str, Any]]:
        heartbeat_age = time.monotonic() - self.trainer.heartbeat
        trainer_ok = self.trainer.alive and self.trainer.error is None
        body = {
            "status": "ok" if trainer_ok else "degraded",
            "trainer_alive": trainer_ok,
            "trainer_heartbeat_age_s": round(heartbeat_age, 3),
            "generation": self.current.generation,
            "policy_version": self.current.version,
            "connected_bots": len(self.sessions),
            "agent": self.agent_name,
        }
        return trainer_ok, body

    def _refresh_gauges(self) -> None:
        m = self.metrics
        m.set("connected_bots", len(self.sessions))
        m.set("queue_bytes", self.queue.nbytes)
        m.set("queue_segments", len(self.queue))
        m.set("queue_steps", self.queue.steps)
        m.set("policy_version", self.current.version)
        m.set("policy_generation", self.current.generation)
        m.set("trainer_heartbeat_age_seconds", time.monotonic() - self.trainer.heartbeat)
        for stat, value in self.lag.percentiles().items():
            m.set("loop_lag_seconds", value, stat=stat)

    def render_metrics(self) -> str:
        self._refresh_gauges()
        return self.metrics.render()

    def accounting(self) -> dict[str, int]:
        """Every accepted step is trained, dropped (by reason), or still held somewhere.

        ``received == trained + dropped + queued + open + pending_in_agent`` holds exactly
        when read on the loop thread (or once bots are idle): ``open`` counts steps in
        unfinished segments, ``pending_in_agent`` steps the agent holds or is training on.
        """
        trainer_side = self.trainer.accounting()
        dropped = sum(v for k, v in trainer_side.items() if k.startswith("dropped_"))
        return {"received": int(self.metrics.counter("transitions_received")), "dropped": dropped, **trainer_side}

    def _describe_metrics(self) -> None:
        """Describe every series docs/protocol.md lists; counters without labels start at 0, so they are always exported."""
        d = self.metrics.describe
        for name, text in _ZERO_COUNTERS.items():
            d(name, text)
            self.metrics.inc(name, 0.0)
        for code in _ERROR_CODES_SENT:  # an error code never sent is still a series at 0
            self.metrics.inc("frames_rejected", 0.0, code=code)
        d("transitions_dropped", "Accepted steps not trained on, by reason.")
        d("frames_rejected", "Frames answered with an error message, by its (documented) error code.")
        d("frames_closed", "Frames answered by closing the connection without an error, by reason "
                           "(text_frame, bad_version, too_many_undecodable, too_big: the 1009 size limit).")  # fmt: skip
        d("handshakes_rejected", "Connections refused before or at hello, by reason.")
        d("rollbacks", "Updates undone by the trainer's guards, by reason.")
        d("frames_accepted", "tr frames accepted.")
        d("frame_groups", "Groups of accepted tr frames (frames that arrived together are checked and queued as one).")
        d("connected_bots", "Open bot connections.")
        d("queue_bytes", "Payload bytes in the transition queue.")
        d("policy_version", "Newest published policy version.")
        d("policy_lag", "Versions between the acting and the current policy (last update).")
        d("seq_gaps", "Accepted tr frames whose seq skipped ahead of the session's previous one.")
        d("seq_gap_frames", "Sequence numbers skipped over by those gaps.")
        d("bots_aborted", "Connections aborted by the server, by reason (write_stalled: read nothing for ping_timeout).")
        d("loop_lag_seconds", "Event-loop wake-up lateness over the recent window.")
        d("update_seconds", "Wall time of the last update.")

    def _count_queue_drop(self, arrival: Arrival) -> None:
        self.metrics.inc("transitions_dropped", arrival.steps, reason="queue_full")

    # ── one bot ──────────────────────────────────────────────────────────────

    async def _handler(self, connection: ServerConnection) -> None:
        session: BotSession | None = None
        address = _address(connection)
        self.admission.opened(address)
        self._open_connections += 1  # counted from the upgrade, not from hello: the cap covers both
        try:
            session = await self._handshake(connection)
            if session is None:
                return
            while True:
                # Take every complete message websockets has already buffered (recv() returns
                # them without waiting) and handle them as one group: their values are checked
                # in one numpy pass, they reach the queue as one arrival and earn at most one
                # credit message. Under load groups grow by themselves; an idle bot's are 1.
                frames = [await connection.recv()]
                for _ in range(_buffered_messages(connection, MAX_GROUP - 1)):
                    frames.append(await connection.recv())
                if not await self._on_frames(connection, session, frames):
                    break
                # One group per turn keeps every bot (and keepalive pongs) served in turn.
                await asyncio.sleep(0)
        except ConnectionClosed as exc:
            if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:  # websockets' max_size refusal
                self.metrics.inc("frames_closed", reason="too_big")
        except Exception:
            logger.exception("handler crashed for %s", session.bot_id if session else "unidentified bot")
            with contextlib.suppress(ConnectionClosed):
                await connection.send(encode(Error(str(ErrorCode.INTERNAL), "internal server error")))
            await connection.close(CloseCode.INTERNAL_ERROR, "internal error")
        finally:
            self._open_connections -= 1
            self.admission.closed(address)
            if session is not None:
                if session.sender is not None:
                    session.sender.cancel()
                self._leave(session)

    async def _handshake(self, connection: ServerConnection) -> BotSession | None:
        cfg = self.config
        try:
            async with asyncio.timeout(cfg.hello_timeout):
                frame = await connection.recv()
        except TimeoutError:
            self.metrics.inc("handshakes_rejected", reason="hello_timeout")
            await connection.close(CloseCode.POLICY_VIOLATION, "hello timeout")
            return None
        if isinstance(frame, str):
            await connection.close(CloseCode.UNSUPPORTED_DATA, "binary frames only")
            return None
        try:
            hello = decode_from_bot(frame, None, cfg.max_message_bytes)
            if not isinstance(hello, Hello):
                raise ProtocolError(ErrorCode.UNEXPECTED, "the first message must be 'hello'")
            self._check_hello(hello)
        except ProtocolError as exc:
            self.metrics.inc("handshakes_rejected", reason=str(exc.code))
            with contextlib.suppress(ConnectionClosed):
                await connection.send(encode(Error(str(exc.code), exc.message)))
            await connection.close(CloseCode.POLICY_VIOLATION, _close_reason(exc.message))
            return None
        bot_id = f"{hello.name[:40]}-{next(self._ids)}"  # stays within the 64-character id limit
        spec = SessionSpec(self.obs_dim, self.act_dim, hello.n_agents, hello.reward, self.limits)
        current = self.current
        session = BotSession(
            bot_id,
            uuid.uuid4().hex[:16],
            hello,
            spec,
            cfg.error_budget,
            cfg.error_window,
            current.identity,
            logger,
            connection,
        )
        welcome = Welcome(
            bot_id=bot_id,
            session=session.session_id,
            agent=self.agent_name,
            limits=self.limits,
            credit=session.credit,
            weights=current.message,
            explore=current.message.explore,
        )
        await connection.send(encode(welcome))
        self.sessions[bot_id] = session
        if self.current.identity > current.identity:  # published while welcome was being sent
            self._offer(session, self.current)
        self.metrics.inc("bots_connected")
        session.log.info("connected: %d agent(s), %s rewards, client %r", hello.n_agents, hello.reward, hello.client)
        return session

    def _check_hello(self, hello: Hello) -> None:
        if hello.obs_dim != self.obs_dim or hello.act_dim != self.act_dim:
            raise ProtocolError(
                ErrorCode.BAD_HELLO,
                f"this run trains obs_dim={self.obs_dim}, act_dim={self.act_dim}; hello declared "
                f"obs_dim={hello.obs_dim}, act_dim={hello.act_dim}",
            )
        if hello.n_agents > self.config.max_agents_per_bot:
            raise ProtocolError(ErrorCode.BAD_HELLO, f"n_agents {hello.n_agents} exceeds {self.config.max_agents_per_bot}")

    async def _on_frames(self, connection: ServerConnection, session: BotSession, frames: list[bytes | str]) -> bool:
        """Handle frames that arrived together, in order; False when the connection must end.

        Consecutive well-formed ``tr`` frames are collected as headers (sizes checked, values
        not yet) and handled as one group by :meth:`_on_group`; any other frame first flushes
        the group, so everything is still answered in arrival order.
        """
        group: list[TransitionHeader] = []
        spec = session.spec
        for frame in frames:
            if isinstance(frame, str):
                if not await self._on_group(connection, session, group):
                    return False
                self.metrics.inc("frames_closed", reason="text_frame")
                await connection.close(CloseCode.UNSUPPORTED_DATA, "binary frames only")
                return False
            try:
                kind, fields = unpack(frame, self.config.max_message_bytes)
                if kind == TransitionBatch.TYPE and session.credit > 0:
                    header = TransitionHeader.from_wire(fields, spec)
                    session.spend_credit()  # each 'tr' spends one credit, accepted or not
                    group.append(header)
                    continue
            except ProtocolError:
                pass  # handled one at a time below, which names the error
            if not await self._on_group(connection, session, group):
                return False
            group = []
            if not await self._on_frame(connection, session, frame):
                return False
        # Credit goes back before the values are checked: the frames are in memory already,
        # and the bot's next frames travel while this group is checked and queued.
        incoming, steps = sum(header.nbytes for header in group), sum(header.n for header in group)
        return await self._grant(session, incoming, steps) and await self._on_group(connection, session, group)

    async def _on_frame(self, connection: ServerConnection, session: BotSession, frame: bytes) -> bool:
        """Handle one frame after the handshake; False when the connection must end."""
        try:
            kind, fields = unpack(frame, self.config.max_message_bytes)
        except ProtocolError as exc:
            if exc.code is ErrorCode.BAD_VERSION:  # close-only: no error message is sent
                self.metrics.inc("frames_closed", reason="bad_version")
                await connection.close(CloseCode.POLICY_VIOLATION, "unsupported protocol version")
                return False
            session.undecodable += exc.code is ErrorCode.UNDECODABLE
            if session.undecodable >= self.config.max_undecodable:
                self.metrics.inc("frames_closed", reason="too_many_undecodable")
                await connection.close(CloseCode.POLICY_VIOLATION, "too many undecodable frames")
                return False
            return await self._reject(connection, session, exc.code, exc.message)
        # Each 'tr' spends one credit, accepted or not; every other type is free.
        if kind == TransitionBatch.TYPE and not session.spend_credit():
            return await self._reject(connection, session, ErrorCode.NO_CREDIT, "'tr' sent without flow-control credit")
        try:
            message = message_from_bot(kind, fields, session.spec)
        except ProtocolError as exc:
            return await self._reject(connection, session, exc.code, exc.message, _seq_of(fields))
        if isinstance(message, TransitionBatch):
            return await self._on_group(connection, session, [message]) and await self._grant(session)
        if isinstance(message, Bye):
            session.log.info("said bye: %s", message.reason[:80])
            await connection.close(CloseCode.NORMAL, "bye")
            return False
        if isinstance(message, Error):
            session.log.warning("bot reported error %s: %s", message.code, message.msg[:120])
            return True
        return await self._reject(connection, session, ErrorCode.UNEXPECTED, f"'{message.TYPE}' is not expected now")

    async def _on_group(
        self, connection: ServerConnection, session: BotSession, group: Sequence[TransitionHeader | TransitionBatch]
    ) -> bool:
        """Accept or reject ``tr`` frames of one session in order; accepted runs go to the queue joined.

        Fast path: sequence and version checks on the headers, then one value check over
        all accepted frames. If any value is out of bounds, the frames are checked again
        one at a time so that each gets its own exact answer and counter.
        """
        if not group:
            return True
        current = self.current.identity
        last = session.last_seq
        verdicts: list[tuple[int, ErrorCode, str] | None] = []
        for frame in group:
            if frame.seq <= last:
                verdicts.append((frame.seq, ErrorCode.DUPLICATE, f"seq {frame.seq} already seen"))
            elif (frame.generation, frame.version) > current:
                verdicts.append((frame.seq, ErrorCode.BAD_FIELD, "policy (gen, ver) newer than any published"))
            else:
                verdicts.append(None)
                last = frame.seq
        kept = [frame for frame, verdict in zip(group, verdicts, strict=True) if verdict is None]
        batches = self._join(session, kept)
        if batches is None:  # a value out of bounds somewhere: answer each frame on its own
            for frame in group:
                if isinstance(frame, TransitionHeader):
                    try:
                        checked = assemble_batches([frame], session.spec, explain=True)
                    except ProtocolError as exc:
                        if not await self._reject(connection, session, exc.code, exc.message, frame.seq):
                            return False
                        continue
                    frame = checked  # type: ignore[assignment]  # explain=True never returns None
                if not await self._on_group(connection, session, [frame]):
                    return False
            return True
        for verdict in verdicts:
            if verdict is not None and not await self._reject(connection, session, verdict[1], verdict[2], verdict[0]):
                return False
        if not kept:
            return True
        for frame in kept:
            if frame.seq > session.last_seq + 1 and session.last_seq >= 0:
                # Accepted (the frames in between may have been refused by the bot's own limits,
                # or lost by a buggy bot): counted, so a bot that skips seqs shows up in /metrics.
                self.metrics.inc("seq_gaps")
                self.metrics.inc("seq_gap_frames", frame.seq - session.last_seq - 1)
            session.last_seq = frame.seq
        steps = sum(batch.n for batch in batches)
        session.steps_accepted += steps
        session.frames_accepted += len(kept)
        session.acting_version = (batches[-1].generation, batches[-1].version)
        session.last_frame_at = time.monotonic()
        self.metrics.inc("transitions_received", steps)
        self.metrics.inc("frames_accepted", len(kept))
        self.metrics.inc("frame_groups")
        for batch in batches:
            self.queue.put(session.arrival(batch))
        return True

    @staticmethod
    def _join(session: BotSession, frames: Sequence[TransitionHeader | TransitionBatch]) -> list[TransitionBatch] | None:
        """Accepted frames as batches, one per run of equal (generation, version); None if a value is bad."""
        headers = [frame for frame in frames if isinstance(frame, TransitionHeader)]
        if not headers:
            return [frame for frame in frames if isinstance(frame, TransitionBatch)]  # checked one by one already
        batches: list[TransitionBatch] = []
        start = 0
        for end in range(1, len(headers) + 1):
            if end < len(headers) and (headers[end].generation, headers[end].version) == (
                headers[start].generation,
                headers[start].version,
            ):
                continue
            batch = assemble_batches(headers[start:end], session.spec, explain=False)
            if batch is None:
                return None
            batches.append(batch)
            start = end
        return batches

    async def _grant(self, session: BotSession, incoming: int = 0, incoming_steps: int = 0) -> bool:
        """Return owed credit now, unless the queue is full: then the trainer's next drain does.

        ``incoming``: bytes of frames already received and about to be queued; credit is granted
        before they are checked, so they count as queued (a group that fills the queue earns none).
        """
        if self.queue.at_high_water(incoming, incoming_steps):
            session.withheld = session.owed > 0
            return True
        credit = session.take_owed()
        if credit is not None:
            await self._send_quietly(session, encode(credit))
        return True

    async def _reject(
        self,
        connection: ServerConnection,
        session: BotSession,
        code: ErrorCode,
        message: str,
        ref: int | None = None,
    ) -> bool:
        """Answer a recoverable error (counted by code); close 1008 once the bot exhausts its error budget."""
        self.metrics.inc("frames_rejected", code=str(code))
        await self._send_quietly(session, encode(Error(str(code), message, ref)))
        if session.strike():
            session.log.warning("closing: error budget exhausted (last: %s)", code)
            await connection.close(CloseCode.POLICY_VIOLATION, "too many errors")
            return False
        await self._grant(session)  # a rejected 'tr' still spent the bot's credit: return it
        return True

    async def _send_quietly(self, session: BotSession, frame: bytes) -> None:
        connection = session.connection
        if connection.state is not State.OPEN:
            return  # closing: nothing is useful now, and send() would wait close_timeout
        with contextlib.suppress(ConnectionClosed):
            await connection.send(frame)

    async def _weights_sender(self, session: BotSession) -> None:
        """Send pending snapshots until none is left (a newer one may arrive during a send), then end."""
        try:
            with contextlib.suppress(ConnectionClosed):
                while (snapshot := session.slot.take()) is not None:
                    if not await self._send_with_progress(session.connection, session, snapshot.frame):
                        return
                    self.metrics.inc("weights_sent")
        finally:
            session.sender = None

    async def _start_send(self, connection: ServerConnection, frame: bytes) -> asyncio.Future[None]:
        """Start sending ``frame``; a large one waits its turn so one loop turn writes a bounded amount.

        A publish wakes every bot's sender in the same loop turn, and ``send`` hands the whole
        frame to the transport before it first yields: 1 MiB of weights to 256 bots would be
        256 MiB of copies and socket writes in one turn, while no bot is read. A gate lets at most
        ``WEIGHTS_WRITES_PER_TURN`` large frames start per turn; it is released as soon as the
        write has started, never held while a slow reader drains its socket.
        """
        if len(frame) < LARGE_FRAME_BYTES:
            return asyncio.ensure_future(connection.send(frame))
        if self._write_gate is None:
            self._write_gate = asyncio.Semaphore(WEIGHTS_WRITES_PER_TURN)
        async with self._write_gate:
            sending = asyncio.ensure_future(connection.send(frame))
            try:
                await asyncio.sleep(0)  # the send runs up to its first write in this turn, then the next may start
            except BaseException:
                sending.cancel()
                raise
        return sending

    async def _send_with_progress(self, connection: ServerConnection, session: BotSession, frame: bytes) -> bool:
        """Send ``frame``; abort the connection if its socket drains nothing for ``ping_timeout`` s.

        While a large frame is backed up in the socket of a bot that stopped reading,
        websockets' keepalive cannot help: its ping waits behind the same full buffer before
        its timeout starts. So the sender watches delivery itself (:func:`_unsent_bytes`: the
        transport's buffer plus the kernel's unacknowledged bytes): a slow reader (the count
        shrinks, however slowly) is left alone; a stalled one is aborted (1006: a peer that
        reads nothing cannot read a close frame either). Returns False if aborted.
        """
        deadline = self.config.ping_timeout
        sending = await self._start_send(connection, frame)
        if deadline is None:
            await sending
            return True
        loop = asyncio.get_running_loop()
        transport = connection.transport
        sock = transport.get_extra_info("socket")
        last_size, last_progress = _unsent_bytes(transport, sock), loop.time()
        try:
            while True:
                done, _ = await asyncio.wait({sending}, timeout=min(1.0, deadline / 2))
                if done:
                    await sending  # re-raises ConnectionClosed
                    return True
                size = _unsent_bytes(transport, sock)
                if size < last_size:
                    last_size, last_progress = size, loop.time()
                elif loop.time() - last_progress >= deadline:
                    session.log.warning("aborting: the bot read nothing of its weights for %.0f s", deadline)
                    self.metrics.inc("bots_aborted", reason="write_stalled")
                    transport.abort()
                    return False
                else:
                    last_size = size
        finally:
            if not sending.done():
                sending.cancel()

    def _leave(self, session: BotSession) -> None:
        self.sessions.pop(session.bot_id, None)
        self.queue.put(session.arrival(None))  # the trainer closes its open segments as cuts
        self.metrics.inc("bots_disconnected")
        session.log.info("disconnected after %d steps", session.steps_accepted)


def _unsent_bytes(transport: Any, sock: Any) -> int:
    """Bytes written to a connection that its peer has not yet acknowledged.

    The transport's own buffer plus, on Linux, the kernel's send queue (``SIOCOUTQ``):
    with only the former, a slow reader (10 KiB/s) looks stalled for minutes, because the
    kernel wakes a writer only once a large share of its send buffer is free.
    """
    size = int(transport.get_write_buffer_size())
    if _SIOCOUTQ is not None and sock is not None:
        with contextlib.suppress(OSError, ValueError):  # closed, or not a TCP socket: the transport's buffer alone
            size += struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0"))[0]
    return size


if sys.platform.startswith("linux"):
    import fcntl
    import termios

    _SIOCOUTQ: int | None = termios.TIOCOUTQ
    """``SIOCOUTQ`` equals ``TIOCOUTQ`` on Linux: unacknowledged bytes in a TCP socket's send queue."""
else:
    _SIOCOUTQ = None


LARGE_FRAME_BYTES = 64 * 1024
"""Weights frames from this size on take turns to start writing (see ``TrainingServer._start_send``)."""
WEIGHTS_WRITES_PER_TURN = 16
"""Large weights frames that may start writing in one event-loop turn."""

MAX_GROUP = 64
"""Most frames of one bot handled as one group (a bound on one handler's turn on the loop)."""


def _buffered_messages(connection: ServerConnection, limit: int) -> int:
    """Complete messages websockets has already received for ``connection`` (at most ``limit``).

    Reads websockets' receive buffer (``recv_messages.frames``, an implementation detail of
    websockets 14-17); if that ever changes shape this returns 0 and frames are simply
    handled one per turn, as before.
    """
    try:
        buffered = connection.recv_messages.frames.queue
    except AttributeError:
        return 0
    complete = 0
    for frame in buffered:
        if complete >= limit:
            break
        complete += bool(frame.fin)
    return complete


def _close_reason(text: str, limit: int = 120) -> str:
    """A close reason must fit a control frame (125 bytes): cut by bytes, not characters."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def _seq_of(fields: Any) -> int | None:
    seq = fields.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None


def _respond(connection: ServerConnection, status: http.HTTPStatus, body: str, content_type: str = "text/plain") -> Response:
    response = connection.respond(status, body)
    # websockets' Headers keep every value set: replace respond()'s own Content-Type, do not add a second.
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = f"{content_type}; charset=utf-8" if "charset" not in content_type else content_type
    return response


class ServerThread:
    """Run a :class:`TrainingServer` on its own event loop in a background thread.

    ``with ServerThread(server) as s: ... s.url ...`` — on exit the server closes
    gracefully (1001 to bots, trainer joined, final checkpoint).
    """

    def __init__(self, server: TrainingServer, start_timeout: float = 30.0) -> None:
        self.server = server
        self._start_timeout = start_timeout
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="server-loop", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.server.close()

        asyncio.run(run())

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(self._start_timeout):
            raise TimeoutError("server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn`` on the server's loop thread and return its result (for consistent reads)."""
        assert self._loop is not None

        async def wrapper() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    def stop(self, timeout: float = 60.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _address(connection: ServerConnection) -> str:
    """The peer's IP address ('' when unknown, e.g. a unix socket)."""
    remote = connection.remote_address
    return str(remote[0]) if isinstance(remote, tuple) and remote else ""
