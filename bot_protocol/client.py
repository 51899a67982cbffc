"""Bot client library: an asyncio :class:`BotClient` and a blocking :class:`BlockingBotClient`.

The client does the handshake, respects flow-control credits, stamps sequence
numbers, receives weights and swaps them in atomically (a new immutable
:class:`~bot_protocol.policy.Policy` object replaces the old one in one assignment),
and reconnects with jittered exponential backoff when the connection drops.

This is the only module of ``bot_protocol`` that does I/O; everything it sends and
receives goes through :mod:`bot_protocol.codec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl as ssl_module
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from .actions import ActionSpace
from .batching import Step, StepRecorder, split_batch
from .codec import decode_from_server, encode
from .errors import CloseCode, ErrorCode, ProtocolError
from .messages import SUBPROTOCOL, Bye, Credit, Error, Hello, Limits, RewardMode, Weights, Welcome
from .policy import Policy
from .transitions import TransitionBatch

__all__ = ["BlockingBotClient", "BotClient", "ClientConfig", "HandshakeRejected"]

logger = logging.getLogger(__name__)

CLIENT_NAME = "arena-trainer-python/1"


class HandshakeRejected(Exception):
    """The server refused this bot for good (bad token, bad hello): retrying would not help."""


@dataclass(frozen=True)
class ClientConfig:
    """How a bot connects. Shapes must match what the server's run expects."""

    url: str
    """``ws://host:port`` or ``wss://host:port``."""
    name: str
    obs_dim: int
    act_dim: int
    n_agents: int = 1
    reward: RewardMode = RewardMode.SCALAR
    branches: tuple[int, ...] = ()
    """Sizes of the discrete branches the run acts in (none: continuous only; ``act_dim`` may then be 0)."""
    token: str | None = None
    """Bearer token sent in the handshake's ``Authorization`` header."""
    batch_steps: int = 64
    """Rows per ``tr`` message; 64+ keeps per-message overhead negligible."""
    ssl: ssl_module.SSLContext | None = None
    """TLS context for ``wss://`` (certificates are verified unless the context says otherwise)."""
    # Timeouts (seconds)
    open_timeout: float = 5.0
    """Connect + hello/welcome deadline."""
    credit_timeout: float | None = 60.0
    """Longest wait for flow-control credit before :class:`TimeoutError`; ``None`` waits forever."""
    # Reconnects
    reconnect: bool = True
    backoff_initial: float = 0.2
    backoff_factor: float = 1.618
    backoff_max: float = 10.0
    max_reconnects: int | None = None
    """Consecutive failed reconnects before giving up; ``None`` retries forever."""
    max_weights_bytes: int = 64 << 20
    """Largest server frame accepted (weights blobs are the big ones)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("ws://", "wss://")):
            raise ValueError(f"url must start with ws:// or wss://, got {self.url!r}")
        for name in ("obs_dim", "n_agents", "batch_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        ActionSpace(self.act_dim, self.branches)  # raises ValueError for a space no run can have
        if self.backoff_initial <= 0 or self.backoff_factor < 1 or self.backoff_max < self.backoff_initial:
            raise ValueError("backoff needs initial > 0, factor >= 1 and max >= initial")

    def hello(self) -> Hello:
        return Hello(self.name, self.obs_dim, self.act_dim, self.n_agents, self.reward, CLIENT_NAME, tuple(self.branches))

    @property
    def actions(self) -> ActionSpace:
        """The action space this bot declares in ``hello``."""
        return ActionSpace(self.act_dim, self.branches)


@dataclass
class ClientStats:
    """Counters a bot can read to check its own accounting."""

    messages_sent: int = 0
    steps_sent: int = 0
    weights_swapped: int = 0
    weights_rejected: int = 0
    reconnects: int = 0
    errors: deque[Error] = field(default_factory=lambda: deque(maxlen=64))
    swap_times: deque[tuple[int, int, float]] = field(default_factory=lambda: deque(maxlen=4096))
    """(generation, version, time.monotonic()) of each swap, for latency measurements."""


class BotClient:
    """An asyncio bot connection. Use ``async with BotClient(config) as bot:``.

    After :meth:`connect` returns, :attr:`policy` holds the server's current weights and
    :meth:`send` may be called. Weights arriving later replace :attr:`policy` between
    two awaits of your code, never during one.
    """

    def __init__(self, config: ClientConfig, on_weights: Callable[[Policy], None] | None = None) -> None:
        self.config = config
        self.stats = ClientStats()
        self.policy: Policy | None = None
        self.welcome: Welcome | None = None
        self._on_weights = on_weights
        self._connection: ClientConnection | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._credit = 0
        self._credit_changed = asyncio.Event()
        self._seq = 0
        self._closing = False
        self._lost = asyncio.Event()
        self._connected_at = 0.0
        self._short_sessions = 0

    @property
    def limits(self) -> Limits:
        assert self.welcome is not None, "connect() first"
        return self.welcome.limits

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (False while the client waits to reconnect)."""
        return self._connection is not None and not self._lost.is_set()

    @property
    def credit(self) -> int:
        return self._credit

    async def __aenter__(self) -> BotClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the connection and complete ``hello`` → ``welcome``.

        Raises:
            HandshakeRejected: bad token (401), refused origin/subprotocol, or a bad hello.
            OSError, TimeoutError: the server is unreachable (retried by :meth:`send` when reconnecting).
        """
        cfg = self.config
        headers = {"Authorization": f"Bearer {cfg.token}"} if cfg.token else None
        # websockets refuses ssl=None with a wss:// URL; left out, it verifies with the system's
        # trust store (SSL_CERT_FILE adds a private CA).
        tls: dict[str, Any] = {"ssl": cfg.ssl} if cfg.ssl is not None else {}
        try:
            connection = await connect(
                cfg.url,
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                additional_headers=headers,
                compression=None,  # dense float32 barely compresses, and deflate is slow on it (docs/protocol.md §1)
                max_size=cfg.max_weights_bytes,
                open_timeout=cfg.open_timeout,
                ping_interval=10,
                ping_timeout=10,
                close_timeout=5,
                **tls,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status == 429 or status >= 500:  # busy or shutting down: worth retrying with backoff
                raise ConnectionRefusedError(f"server busy: HTTP {status}") from None
            raise HandshakeRejected(f"server refused the connection: HTTP {status}") from None
        try:
            await connection.send(encode(cfg.hello()))
            async with asyncio.timeout(cfg.open_timeout):
                reply = decode_from_server(await connection.recv(decode=False), cfg.max_weights_bytes)
        except ConnectionClosed as exc:
            if exc.rcvd is not None and exc.rcvd.code == CloseCode.POLICY_VIOLATION:
                raise HandshakeRejected(f"server closed during hello: {exc.rcvd}") from None
            raise  # going away, abnormal closure: retryable
        except BaseException:
            await connection.close()
            raise
        if isinstance(reply, Error):
            await connection.close()
            raise HandshakeRejected(f"server refused hello: {reply.code}: {reply.msg}")
        if not isinstance(reply, Welcome):
            await connection.close()
            raise HandshakeRejected(f"expected welcome, got {type(reply).__name__}")
        self.welcome = reply
        self._connection = connection
        self._credit = reply.credit
        self._lost.clear()
        self._connected_at = time.monotonic()
        self._install(reply.weights, initial=True)
        self._receiver = asyncio.create_task(self._receive(connection), name=f"bot-recv-{cfg.name}")

    async def close(self) -> None:
        """Say ``bye`` and close (idempotent). Open episodes are cut as truncated by the server."""
        self._closing = True
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(ConnectionClosed):
                await connection.send(encode(Bye("client closed")))
            await connection.close()
        if self._receiver is not None:
            self._receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._receiver

    async def send(self, batch: TransitionBatch) -> int:
        """Send a batch, waiting for credit first; returns the last sequence number used.

        A batch larger than the server's ``max_batch`` rows or ``max_message_bytes`` is split
        into several ``tr`` messages (each spends one credit). Reconnects (when configured)
        if the connection is lost before a send.

        Raises:
            TimeoutError: no credit arrived within ``credit_timeout``.
            ConnectionClosed: the connection is gone and reconnecting is off or exhausted.
        """
        seq = -1
        for part in split_batch(batch, self._max_rows(batch)):
            seq = await self._send_one(part)
        return seq

    def _max_rows(self, batch: TransitionBatch) -> int:
        if self.welcome is None:
            return batch.n
        limits = self.welcome.limits
        row_bytes = max(1, -(-batch.nbytes // max(batch.n, 1)))  # ceil
        by_size = max(1, (limits.max_message_bytes - 4096) // row_bytes)  # 4 KiB for msgpack framing
        return min(limits.max_batch, by_size)

    async def _send_one(self, batch: TransitionBatch) -> int:
        while True:
            if self._connection is None or self._lost.is_set():
                await self._reconnect()
            try:
                async with asyncio.timeout(self.config.credit_timeout):
                    while self._credit <= 0:
                        if self._lost.is_set():
                            break
                        self._credit_changed.clear()
                        await self._credit_changed.wait()
            except TimeoutError:
                raise TimeoutError(f"no flow-control credit within {self.config.credit_timeout} s") from None
            if self._lost.is_set() or self._connection is None:
                continue
            seq = self._seq
            frame = encode(replace(batch, seq=seq))
            try:
                await self._connection.send(frame)
            except ConnectionClosed:
                self._lost.set()
                continue
            self._seq += 1
            self._credit -= 1
            self.stats.messages_sent += 1
            self.stats.steps_sent += batch.n
            return seq

    async def _reconnect(self) -> None:
        if self._closing:
            raise ConnectionError("client is closed")
        if not self.config.reconnect and self.welcome is not None:
            raise ConnectionError("connection lost and reconnect is off")
        cfg = self.config
        # A session that ended soon after it began (e.g. closed 1008 for errors) counts like a
        # failed attempt, so a bot that keeps getting thrown out backs off instead of hammering.
        self._short_sessions = self._short_sessions + 1 if time.monotonic() - self._connected_at < 10.0 else 0
        delay = min(cfg.backoff_max, cfg.backoff_initial * cfg.backoff_factor**self._short_sessions)
        await asyncio.sleep(random.uniform(0.5, 1.0) * delay)
        failures = 0
        while True:
            try:
                await self.connect()
                self.stats.reconnects += 1
                return
            except HandshakeRejected:
                raise
            except (OSError, TimeoutError, ConnectionClosed) as exc:
                failures += 1
                if cfg.max_reconnects is not None and failures > cfg.max_reconnects:
                    raise ConnectionError(f"gave up after {failures - 1} reconnect attempts: {exc}") from exc
                # Full jitter: spreads a herd of bots over the whole window after a server restart.
                await asyncio.sleep(random.uniform(0.5, 1.0) * delay)
                delay = min(cfg.backoff_max, delay * cfg.backoff_factor)

    async def _receive(self, connection: ClientConnection) -> None:
        try:
            async for frame in connection:
                if isinstance(frame, str):
                    logger.warning("server sent a text frame; ignored")
                    continue
                try:
                    message = decode_from_server(frame, self.config.max_weights_bytes)
                except ProtocolError as exc:
                    logger.warning("undecodable frame from server: %s", exc)
                    continue
                if isinstance(message, Credit):
                    self._credit += message.grant
                    self._credit_changed.set()
                elif isinstance(message, Weights):
                    self._install(message)
                elif isinstance(message, Error):
                    self.stats.errors.append(message)
                    logger.warning("server error %s: %s (ref %s)", message.code, message.msg, message.ref)
        except ConnectionClosed:
            pass
        finally:
            if self._connection is connection:
                self._lost.set()
                self._credit_changed.set()

    def _install(self, weights: Weights, initial: bool = False) -> None:
        """Verify and swap in new weights; keep the current policy if anything is wrong.

        A ``weights`` message must be strictly newer than the current policy. The weights in
        ``welcome`` are adopted unless they are the very policy in use: they are what the
        server trains now, even after a restart from scratch that reset the version.
        """
        current = self.policy
        identity = weights.policy_id
        if initial and current is not None and identity == current.policy_id:
            return  # a reconnect to the same policy: keep it (versions a bot adopts never repeat)
        if not initial and current is not None and identity <= current.policy_id:
            self.stats.weights_rejected += 1
            logger.warning("ignored weights %s: not newer than %s", identity, current.policy_id)
            return
        try:
            # The message's own settings win; else welcome's (first install) or the current ones.
            explore = self.welcome.explore if (initial or current is None) and self.welcome else None
            if explore is None and current is not None:
                explore = current.explore
            policy = Policy.from_weights(weights, explore)
            if policy.obs_dim != self.config.obs_dim or policy.actions != self.config.actions:
                raise ProtocolError(
                    ErrorCode.BAD_WEIGHTS,
                    f"sizes {policy.obs_dim}→{policy.actions.describe()} do not match this bot "
                    f"({self.config.obs_dim}→{self.config.actions.describe()})",
                )
            if current is not None and policy.state_size != current.state_size:
                raise ProtocolError(
                    ErrorCode.BAD_WEIGHTS,
                    f"the new policy keeps a recurrent state of {policy.state_size} entries, the run's {current.state_size}",
                )
        except ProtocolError as exc:
            self.stats.weights_rejected += 1
            logger.warning("rejected weights: %s", exc.message)
            if current is None:  # nothing to act with: this server is unusable for this bot
                raise HandshakeRejected(f"welcome carried unusable weights: {exc.message}") from None
            return
        self.policy = policy  # one reference assignment: the swap is atomic for any reader
        self.stats.weights_swapped += 0 if current is None else 1
        self.stats.swap_times.append((policy.generation, policy.version, time.monotonic()))
        if self._on_weights is not None:
            self._on_weights(policy)


class BlockingBotClient:
    """A blocking facade for bots that run their own game loop in a thread.

    The websocket lives on a private event loop in a daemon thread. Typical use::

        with BlockingBotClient(ClientConfig(url, "mybot", obs_dim=4, act_dim=2, n_agents=8)) as bot:
            obs = env.reset()
            while playing:
                actions, logp = bot.act(obs)           # the latest weights, swapped in between ticks
                next_obs, reward, terminal, truncated = env.step(actions)
                bot.record(obs, actions, logp, reward=reward, terminal=terminal,
                           truncated=truncated, next_obs=next_obs)
                obs = ...                              # reset ended agents

    :meth:`record` sends a batch every ``batch_steps`` rows; it blocks only when the
    server has granted no credit (the trainer is behind), which is the backpressure.

    A bot acting in discrete branches (``branches`` in its config) gets the discrete actions
    too, and records them with the mask it acted under::

        actions, logp, dact = bot.act(obs, mask=legal)
        bot.record(obs, actions, logp, dact=dact, mask=legal, reward=reward, ...)
    """

    def __init__(self, config: ClientConfig, seed: int | None = None) -> None:
        self.config = config
        self.rng = np.random.default_rng(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"bot-{config.name}", daemon=True)
        self._client = BotClient(config)
        self._recorder = StepRecorder(
            config.obs_dim, config.act_dim, config.n_agents, config.reward, config.batch_steps, tuple(config.branches)
        )
        self._acting: Policy | None = None
        self.states = np.zeros((config.n_agents, 0), np.float32)
        """Each agent's recurrent state, the next :meth:`act` starts from (zeros at an episode's start); sized by
        the run's policy when :meth:`connect` returns, (n_agents, 0) for a memoryless one."""
        self._acted_from = self.states
        self._pending: Any = None  # concurrent.futures.Future of the send in flight

    @property
    def client(self) -> BotClient:
        return self._client

    @property
    def stats(self) -> ClientStats:
        return self._client.stats

    @property
    def policy(self) -> Policy:
        policy = self._client.policy
        assert policy is not None, "connect() first"
        return policy

    def __enter__(self) -> BlockingBotClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def connect(self) -> None:
        """Start the I/O thread and connect (raises what :meth:`BotClient.connect` raises)."""
        if not self._thread.is_alive():
            self._thread.start()
        self._run(self._client.connect())
        size = self.policy.state_size  # the run's actor says whether rows carry a state, and how wide
        if size != self._recorder.state_size:
            self._recorder.state_size = size
            self.states = self.policy.initial_state(self.config.n_agents)

    def act(self, obs: ArrayLike, deterministic: bool = False, mask: ArrayLike | None = None) -> tuple[NDArray[Any], ...]:
        """Actions and log-probs for every agent's observation, with the newest weights.

        ``(actions, logp)``, or with discrete branches ``(actions, logp, dact)`` drawn among the
        actions ``mask`` allows (see :meth:`Policy.act`). The policy used is remembered so the
        next :meth:`record` stamps its version. A recurrent policy acts for every agent at once
        (``obs`` has ``n_agents`` rows) from :attr:`states`, which then move on a step; the next
        :meth:`record` sends the states acted from, and resets those of agents whose episode ended.
        A new policy (a hot-swap) continues from the states as they are (docs/protocol.md §4.7).
        """
        policy = self.policy
        self._acting = policy
        obs_a = np.asarray(obs, dtype=np.float32).reshape(-1, self.config.obs_dim)
        if not policy.state_size:
            return policy.act(obs_a, self.rng, deterministic, mask)
        if len(obs_a) != self.config.n_agents:
            raise ValueError(f"a recurrent policy acts for all {self.config.n_agents} agents at once, got {len(obs_a)} rows")
        self._acted_from = self.states
        chosen, self.states = policy.step(obs_a, self.states, self.rng, deterministic, mask)
        return chosen

    def reset_states(self, agents: ArrayLike | None = None) -> None:
        """Start ``agents``' recurrent states again from zeros (all of them when None): a new round or episode."""
        if agents is None:
            self.states = np.zeros_like(self.states)
        else:
            self.states = self.states.copy()
            self.states[np.asarray(agents, dtype=np.intp)] = 0.0

    def record(self, obs: ArrayLike, actions: ArrayLike, logp: ArrayLike, **step: Any) -> None:
        """Record one step per agent: the keywords are :class:`~bot_protocol.batching.Step`'s other fields.

        A recurrent bot's rows get ``state`` (the states :meth:`act` acted from) unless given, and the
        agents whose episode ended here (``terminal`` or ``truncated``) start their next one from zeros.
        """
        policy = self._acting or self.policy
        if self._recorder.state_size:
            agents = step.get("agents")
            rows = slice(None) if agents is None else np.asarray(agents, dtype=np.intp)
            step.setdefault("state", self._acted_from[rows])
            ended = np.zeros(len(self._acted_from[rows]), bool)
            for flag in ("terminal", "truncated"):
                if step.get(flag) is not None:
                    ended |= np.asarray(step[flag], dtype=bool).reshape(-1)
            if ended.any():
                ids = np.arange(self.config.n_agents)[rows]
                self.reset_states(ids[ended])
        batch = self._recorder.record(Step(obs, actions, logp, **step), policy.policy_id)
        if batch is not None:
            self._send(batch)

    def flush(self) -> None:
        """Send every held row now, and wait until it is on the wire."""
        batch = self._recorder.flush()
        if batch is not None:
            self._send(batch)
        self._wait_pending()

    def _send(self, batch: TransitionBatch) -> None:
        # One send in flight: the game loop overlaps with I/O, and waits only when the
        # previous batch is still waiting for credit.
        self._wait_pending()
        self._pending = asyncio.run_coroutine_threadsafe(self._client.send(batch), self._loop)

    def _wait_pending(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        """Flush, say ``bye``, close the connection and stop the I/O thread (idempotent)."""
        if not self._thread.is_alive():
            if not self._loop.is_closed() and not self._loop.is_running():
                self._loop.close()  # never connected: its loop still holds a self-pipe socket pair
            return
        try:
            with contextlib.suppress(ConnectionError, ConnectionClosed, TimeoutError):
                self.flush()
        finally:
            with contextlib.suppress(Exception):
                self._run(self._client.close(), timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()
