"""The bot port's lifecycle and wiring: one asyncio websocket server, the trainer thread behind it.

The event loop owns every socket; the trainer thread owns the networks. They meet in
two places only: the :class:`~server.transition_queue.TransitionQueue` (loop → trainer)
and ``loop.call_soon_threadsafe`` (trainer → loop, for new weights and returned credit).

What each bot may send, and what it is answered, is decided without I/O by its
:class:`~server.bot_connection.BotConnection` (credit amounts: :mod:`server.credit`); this
module only reads the frames, carries out the decisions, and delivers weights through
:class:`~server.delivery.WeightsDelivery`. HTTP pieces shared with the dashboard are in
:mod:`server.http_common`.

Lifecycle: :meth:`TrainingServer.start` → serve → :meth:`TrainingServer.close`, which
stops accepting, closes bots with 1001, stops and joins the trainer, and writes the
final checkpoint. :class:`~server.thread.ServerThread` runs all of it in a background
thread so any program (tests, the CLI, a notebook) can embed a server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http
import itertools
import logging
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.http11 import Request, Response
from websockets.protocol import State

from agents import Agent
from bot_protocol import SUBPROTOCOL, Architecture, CloseCode, Error, ErrorCode, encode

from .admission import Admission
from .assembler import SegmentBuilder
from .bot_connection import BotConnection, BotRules, Decision
from .config import ServerConfig, TrainerConfig, url_host
from .credit import queue_bounds, withheld_credit
from .dashboard import Dashboard, DashboardConfig
from .delivery import LARGE_FRAME_BYTES as LARGE_FRAME_BYTES  # re-exported: importable from server.app too
from .delivery import WEIGHTS_WRITES_PER_TURN as WEIGHTS_WRITES_PER_TURN
from .delivery import WeightsDelivery
from .distributed import LearnerGroup, share_bots
from .exported_metrics import describe_server_metrics
from .http_common import bearer_matches, json_body, peer_address, respond, tls_context
from .interpreter import InterpreterTuning
from .looplag import LoopLagMonitor
from .metrics import Metrics
from .rewards import RewardFunction
from .session import BotSession
from .stats import DEFAULT_RATE_WINDOW, BotStats, LoopLag, PolicyLag, RateWindow, ServerStats
from .thread import ServerThread
from .trainer import Trainer, TrainerHooks
from .transition_queue import Arrival, TransitionQueue
from .weights import PublishedWeights

__all__ = ["ListenError", "ServerThread", "TrainingServer"]

logger = logging.getLogger(__name__)

MAX_BOTS_SHARED = 256
"""Bot rows a learner rank posts for rank 0's dashboard (:func:`server.distributed.share_bots`)."""

MAX_GROUP = 64
"""Most frames of one bot handled as one group (a bound on one handler's turn on the loop)."""

UPGRADE_REFUSALS = {http.HTTPStatus.FORBIDDEN: "origin", http.HTTPStatus.UPGRADE_REQUIRED: "not_websocket"}
"""``handshakes_rejected`` reasons of the upgrades websockets itself refuses; any other status is ``bad_request``."""


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
        reward: the game's reward function for ``terms``-mode bots (the tank's is
            ``arena.games.tank.rewards.TANK_REWARD``); None: such a ``hello`` is refused (``bad_hello``).
        group: the learner ranks this server is one of (:mod:`server.distributed`): its trainer
            averages gradients over them, and ``/healthz`` and ``/metrics`` carry its ``rank``.
    """

    def __init__(
        self,
        agent: Agent,
        config: ServerConfig | None = None,
        trainer_config: TrainerConfig | None = None,
        update_hook: Callable[[dict[str, float]], None] | None = None,
        dashboard: DashboardConfig | None = None,
        *,
        reward: RewardFunction | None = None,
        group: LearnerGroup | None = None,
    ) -> None:
        self.config = cfg = config or ServerConfig()
        self.group = group
        """The learner ranks this server's trainer is one of (``arena serve --distributed``), or None."""
        self.other_rank_bots: tuple[BotStats, ...] = ()
        """Rank 0: the other ranks' bots as they last posted them (:func:`server.distributed.share_bots`)."""
        self.metrics = Metrics(labels={"rank": str(group.rank)} if group is not None else None)
        architecture = Architecture.from_mapping(agent.export_actor()[0])
        self.actions = architecture.actions
        """The run's action space: what a ``hello`` must declare (continuous dims and discrete branches)."""
        self.obs_dim, self.act_dim = architecture.obs_dim, self.actions.continuous
        state_size = architecture.recurrent.state_size if architecture.recurrent is not None else 0
        self.rules = BotRules.from_config(
            cfg, self.obs_dim, self.actions, reward_terms=reward is not None, state_size=state_size
        )
        """What every bot connection is held to (its limits are announced in ``welcome``)."""
        self.limits = self.rules.limits
        bounds = queue_bounds(cfg, agent, self.obs_dim, self.actions.packed_width + state_size)
        self.queue = TransitionQueue(bounds.max_bytes, on_dropped=self._count_queue_drop, credit_steps=bounds.credit_steps)
        hooks = TrainerHooks(
            publish=self._publish_threadsafe,
            on_drained=self._drained_threadsafe,
            update_hook=update_hook,
            on_fatal=self._fatal_threadsafe,
        )
        segments = SegmentBuilder(cfg.segment_steps, reward)
        self.trainer = Trainer(
            agent, self.queue, self.metrics, trainer_config or TrainerConfig(), hooks, segments, group=group
        )
        self.failed: BaseException | None = None
        """Set when the trainer gave up (crashes beyond its restart quota): the owner should close."""
        self._failed_future: concurrent.futures.Future[BaseException] = concurrent.futures.Future()
        """Resolved by the trainer thread when it gives up: thread-safe, so any event loop may wait on it."""
        self.delivery = WeightsDelivery(self.metrics, cfg.ping_timeout)
        self.interpreter = InterpreterTuning(cfg.gil_switch_interval)
        """Process-wide settings for the loop's latency, applied while serving (restored by :meth:`close`)."""
        self.agent_name = agent.name
        self.current: PublishedWeights = self.trainer.published
        """Newest weights known to the event loop (the trainer's copy may be ahead by one hop)."""
        self.sessions: dict[str, BotSession] = {}
        self.lag = LoopLagMonitor(cfg.loop_lag_interval, cfg.loop_lag_warn)
        self.rates = RateWindow(
            dashboard.rate_window if dashboard is not None else DEFAULT_RATE_WINDOW, start=(time.monotonic(), (0.0, 0.0))
        )
        """The one window every view's steps/s come from (:meth:`stats`); its length is the dashboard's."""
        self.admission = Admission(
            max_per_address=cfg.max_connections_per_ip,
            handshakes_per_s=cfg.max_handshakes_per_ip_per_s,
            auth_failures=cfg.auth_failures_before_block,
            auth_window=cfg.auth_failure_window,
            block_seconds=cfg.auth_block_seconds,
            limit_loopback=cfg.limit_loopback,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._ids = itertools.count(1)
        self._open_connections = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._closed = asyncio.Event()
        describe_server_metrics(self.metrics)
        self.dashboard = Dashboard(self, dashboard) if dashboard is not None else None
        """The live dashboard, when configured (its own port; it only reads this server's state)."""

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Bind, start the lag monitor and the trainer thread."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        try:
            self._server = await serve(
                self._handler,
                cfg.host,
                cfg.port,
                process_request=self._process_request,
                process_response=self._process_response,
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                origins=[None],  # bots send no Origin; a browser page gets 403 (cross-site websocket hijacking)
                compression=None,  # dense float32 barely deflates, and deflate is slow on it (docs/protocol.md §1)
                server_header=None,
                open_timeout=cfg.open_timeout,
                ping_interval=cfg.ping_interval,
                ping_timeout=cfg.ping_timeout,
                close_timeout=cfg.close_timeout,
                max_size=cfg.max_message_bytes,
                max_queue=cfg.max_queue_frames,
                ssl=tls_context(cfg.tls_cert, cfg.tls_key),
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
        self.interpreter.apply()
        self.lag.start()
        self.trainer.start()
        if self.group is not None:
            self._spawn(share_bots(self.group, self._own_bot_views, self._take_other_rank_bots))
        logger.info("serving %s agent on %s (obs %d, %s)", self.agent_name, self.url, self.obs_dim, self.actions.describe())

    def _own_bot_views(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [bot.to_view(now) for bot in self.stats(bots=MAX_BOTS_SHARED).bots]

    def _take_other_rank_bots(self, views: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        self.other_rank_bots = tuple(BotStats.from_view(view, now) for view in views)

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
            self.interpreter.restore()
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

    def _publish_threadsafe(self, weights: PublishedWeights) -> None:
        self._call_in_loop(self._publish, weights)

    def _fatal_threadsafe(self, exc: BaseException) -> None:
        self.failed = exc
        if not self._failed_future.done():
            self._failed_future.set_result(exc)

    async def wait_failed(self) -> BaseException:
        """Wait until the trainer gives up; returns its last exception.

        Any event loop may wait, not only the server's own: a test or an embedding program that runs the
        server in a :class:`ServerThread` awaits this from its loop. (An ``asyncio.Event`` of the server's
        loop, set from that loop, never woke a waiter on another loop until something else did.)
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not waiter.done():
                waiter.set_result(None)

        def wake(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the waiting loop closed meanwhile: nobody to wake
                loop.call_soon_threadsafe(settle)

        self._failed_future.add_done_callback(wake)  # runs at once when the trainer already gave up
        await waiter
        return self._failed_future.result()

    def _drained_threadsafe(self) -> None:
        self._call_in_loop(self._return_withheld_credit)

    def _publish(self, weights: PublishedWeights) -> None:
        if weights.identity <= self.current.identity:
            return
        self.current = weights
        for session in self.sessions.values():
            self.delivery.offer(session, weights)

    def _return_withheld_credit(self) -> None:
        for session, credit in withheld_credit(self.sessions.values(), self.queue.full):
            self._spawn(self._send_quietly(session.connection, encode(credit)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ── HTTP side: auth, health, metrics ─────────────────────────────────────

    def _authorized(self, headers: Headers) -> bool:
        # In constant time (server.http_common.secret_matches), never with ==.
        token = self.config.token
        return token is None or bearer_matches(headers, token)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            healthy, body = self.health()
            status = http.HTTPStatus.OK if healthy else http.HTTPStatus.SERVICE_UNAVAILABLE
            return respond(connection, status, json_body(body), "application/json")
        authorized = self._authorized(request.headers)
        refusal = self.admission.check(peer_address(connection), authorized)
        if refusal is not None:
            self.metrics.inc("handshakes_rejected", reason="rate_limited")
            response = respond(connection, http.HTTPStatus(refusal.status), refusal.reason + "\n")
            if refusal.retry_after is not None:
                response.headers["Retry-After"] = str(refusal.retry_after)
            return response
        if not authorized:
            self.metrics.inc("handshakes_rejected", reason="unauthorized")
            response = respond(connection, http.HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token\n")
            response.headers["WWW-Authenticate"] = 'Bearer realm="arena"'
            return response
        if path == "/metrics":
            return respond(connection, http.HTTPStatus.OK, self.render_metrics(), "text/plain; version=0.0.4")
        if self._closing:
            return respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "server shutting down\n")
        if self._open_connections >= self.config.max_connections:
            self.metrics.inc("handshakes_rejected", reason="capacity")
            return respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "server at connection capacity\n")
        return None

    def _process_response(self, connection: ServerConnection, request: Request, response: Response) -> None:
        """Count the upgrades websockets refused itself (an ``Origin``, no ``arena.v1``, no upgrade at all).

        :meth:`_process_request` counts its own refusals; these come after it, from websockets'
        checks, and would otherwise show in no metric (docs/protocol.md §1).
        """
        if isinstance(connection.protocol.handshake_exc, InvalidHandshake):
            reason = UPGRADE_REFUSALS.get(http.HTTPStatus(response.status_code), "bad_request")
            self.metrics.inc("handshakes_rejected", reason=reason)

    def stats(self, bots: int = 0) -> ServerStats:
        """Every figure the views show, read once (any thread; ``bots`` > 0 adds per-bot rows: loop thread only).

        ``/healthz``, ``/metrics``, the dashboard, TensorBoard rows and ``summary.json`` all read
        this reading, never the parts below (see :mod:`server.stats`). The server reads its own
        parts; its trainer and its sessions hand theirs.
        """
        metrics, queue = self.metrics, self.queue
        taken_at, (received, trained), (received_per_s, trained_per_s) = self.rates.measure(
            lambda: (metrics.counter("transitions_received"), metrics.counter("transitions_trained"))
        )
        loop_lag = None
        with contextlib.suppress(RuntimeError):  # the window changed size under us (the loop appends meanwhile)
            loop_lag = LoopLag(**self.lag.percentiles())
        rank = self.group.rank if self.group is not None else None
        rows: tuple[BotStats, ...] = ()
        if bots > 0:
            rows = tuple(session.stats(rank) for session in itertools.islice(self.sessions.values(), bots))
            rows += tuple(self.other_rank_bots[: max(0, bots - len(self.sessions))])
        return ServerStats(
            taken_at=taken_at,
            agent=self.agent_name,
            policy=self.current.identity,
            connected_bots=len(self.sessions),
            transitions_received=int(received),
            transitions_trained=int(trained),
            dropped=MappingProxyType({k: int(v) for k, v in metrics.by_label("transitions_dropped", "reason").items()}),
            queue_arrivals=len(queue),
            queue_steps=queue.steps,
            queue_bytes=queue.nbytes,
            received_per_s=received_per_s,
            trained_per_s=trained_per_s,
            loop_lag=loop_lag,
            policy_lag=PolicyLag(*(metrics.gauge("policy_lag", stat=s) for s in ("min", "avg", "max"))),
            bots=rows,
            rank=rank,
            world_size=self.group.world_size if self.group is not None else None,
            **self.trainer.reading(taken_at),
        )

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, the ``/healthz`` body): healthy while the trainer runs and has not given up."""
        return self.stats().health()

    def _refresh_gauges(self, stats: ServerStats) -> None:
        """The gauges only a scrape needs, set from the reading just before rendering."""
        m = self.metrics
        m.set("connected_bots", stats.connected_bots)
        m.set("queue_bytes", stats.queue_bytes)
        m.set("queue_segments", stats.queue_arrivals)
        m.set("queue_steps", stats.queue_steps)
        m.set("policy_version", stats.policy.version)
        m.set("policy_generation", stats.policy.generation)
        m.set("trainer_heartbeat_age_seconds", stats.trainer_heartbeat_age)
        if stats.loop_lag is not None:  # always, on the loop thread (the lag window's only writer)
            for stat, value in stats.loop_lag.items():
                m.set("loop_lag_seconds", value, stat=stat)

    def render_metrics(self) -> str:
        """The ``/metrics`` text: every counter and gauge, the reading's gauges refreshed first."""
        self._refresh_gauges(self.stats())
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

    def _count_queue_drop(self, arrival: Arrival) -> None:
        self.metrics.inc("transitions_dropped", arrival.steps, reason="queue_full")

    # ── one bot ──────────────────────────────────────────────────────────────

    async def _handler(self, connection: ServerConnection) -> None:
        bot: BotConnection | None = None
        address = peer_address(connection)
        self.admission.opened(address)
        self._open_connections += 1  # counted from the upgrade, not from hello: the cap covers both
        try:
            bot = await self._handshake(connection)
            if bot is None:
                return
            while True:
                # Take every complete message websockets has already buffered (recv() returns
                # them without waiting) and handle them as one group: their values are checked
                # in one numpy pass, they reach the queue as one arrival and earn at most one
                # credit message. Under load groups grow by themselves; an idle bot's are 1.
                frames = [await connection.recv()]
                for _ in range(_buffered_messages(connection, MAX_GROUP - 1)):
                    frames.append(await connection.recv())
                if not await self._on_group(connection, bot, frames):
                    break
                # One group per turn keeps every bot (and keepalive pongs) served in turn.
                await asyncio.sleep(0)
        except ConnectionClosed as exc:
            if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:  # websockets' max_size refusal
                self.metrics.inc("frames_closed", reason="too_big")
        except Exception:
            logger.exception("handler crashed for %s", bot.session.bot_id if bot else "unidentified bot")
            with contextlib.suppress(ConnectionClosed):
                await connection.send(encode(Error(str(ErrorCode.INTERNAL), "internal server error")))
            await connection.close(CloseCode.INTERNAL_ERROR, "internal error")
        finally:
            self._open_connections -= 1
            self.admission.closed(address)
            if bot is not None:
                self.delivery.stop(bot.session)
                self._leave(bot.session)

    async def _handshake(self, connection: ServerConnection) -> BotConnection | None:
        """Wait for the hello; the open connection once welcomed, None once refused (and closed)."""
        try:
            async with asyncio.timeout(self.config.hello_timeout):
                frame = await connection.recv()
        except TimeoutError:
            self.metrics.inc("handshakes_rejected", reason="hello_timeout")
            await connection.close(CloseCode.POLICY_VIOLATION, "hello timeout")
            return None
        bot = BotConnection(self.rules, self.metrics, self.queue, logger, self._ids)
        current = self.current
        decision = bot.receive_hello(frame, current, self.agent_name)
        if decision.close is not None:
            with contextlib.suppress(ConnectionClosed):
                for reply in decision.replies:
                    await connection.send(reply)
            await connection.close(decision.close.code, decision.close.reason)
            return None
        session = bot.session
        session.connection = connection
        (welcome,) = decision.replies
        await connection.send(welcome)
        self.sessions[session.bot_id] = session
        if self.current.identity > current.identity:  # published while welcome was being sent
            self.delivery.offer(session, self.current)
        self.metrics.inc("bots_connected")
        hello = session.hello
        session.log.info("connected: %d agent(s), %s rewards, client %r", hello.n_agents, hello.reward, hello.client)
        return bot

    async def _on_group(self, connection: ServerConnection, bot: BotConnection, frames: list[bytes | str]) -> bool:
        """Handle frames that arrived together; False when the connection must end."""
        return await self._carry_out(connection, bot.receive(frames, self.current.identity))

    async def _carry_out(self, connection: ServerConnection, decision: Decision) -> bool:
        """Send the decision's replies, then close if it says so (what it accepted is queued already); False once closed."""
        for reply in decision.replies:
            await self._send_quietly(connection, reply)
        if decision.close is None:
            return True
        await connection.close(decision.close.code, decision.close.reason)
        return False

    async def _send_quietly(self, connection: ServerConnection, frame: bytes) -> None:
        if connection.state is not State.OPEN:
            return  # closing: nothing is useful now, and send() would wait close_timeout
        with contextlib.suppress(ConnectionClosed):
            await connection.send(frame)

    def _leave(self, session: BotSession) -> None:
        self.sessions.pop(session.bot_id, None)
        self.queue.put(session.arrival(None))  # the trainer closes its open segments as cuts
        self.metrics.inc("bots_disconnected")
        session.log.info("disconnected after %d steps", session.steps_accepted)


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
