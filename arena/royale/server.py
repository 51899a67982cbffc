"""The Tank Royale bot endpoint: the websocket server, the handshake, and each bot's connection.

:class:`RoyaleServer` serves the bot side of Tank Royale's protocol on its own port (JSON text
frames, compression off): it sends ``server-handshake``, checks the ``bot-handshake`` (session
id, secret) and then hands each bot's messages to the game as they arrive. It never crashes
on what a bot sends: during the handshake a bad message closes the connection with 1008 and
the reason in words; afterwards a bad message is dropped and logged, and the tenth closes the
connection (1008 ``too many invalid messages: <reason>``), as on our own protocol
(docs/protocol.md §7). A binary frame is refused like a bad message (JSON text only); one
larger than ``max_message_bytes`` closes with 1009.

What a turn is, and how a game is played over the bots that joined, is not the endpoint's
business: :mod:`arena.royale.match` (the lockstep turn loop, ``arena match``) and
:mod:`arena.royale.train` (bots as training opponents) take :attr:`RoyaleServer.joined` from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from . import schema
from .connection import LockstepConnection
from .schema import BotHandshake, BotIntent, BotReady, GameSetup, RoyaleProtocolError

__all__ = ["BotConnection", "RoyaleServer", "RoyaleServerConfig"]

log = logging.getLogger(__name__)

CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_UNSUPPORTED, CLOSE_POLICY, CLOSE_INTERNAL = 1000, 1001, 1003, 1008, 1011


@dataclass(frozen=True)
class RoyaleServerConfig:
    """Settings of the Tank Royale endpoint. Every limit has a unit; ``None`` disables it where allowed."""

    host: str = "127.0.0.1"
    """Bind address. Bots of a booted match connect on loopback."""
    port: int = 0
    """TCP port, 0 = any free one (Tank Royale's own default is 7654, what bots assume without ``SERVER_URL``)."""
    secret: str | None = None
    """A secret every hand-started bot must send (``SERVER_SECRET``); None accepts bots without one.
    Booted bots get a secret of their own each, which also tells the server which seat is theirs."""
    name: str = "Arena Trainer"
    """``server-handshake.name``."""
    # Timeouts (seconds)
    turn_timeout: float | None = 0.03
    """Upper bound of a turn: bots that sent no intent by then skip the turn. Tank Royale's standard is
    30 ms; the turn starts earlier the moment every bot has answered. None waits for every bot."""
    ready_timeout: float = 10.0
    """How long bots have to answer ``game-started-event-for-bot`` with ``bot-ready``."""
    join_timeout: float = 60.0
    """How long a match waits for its bots to connect and shake hands (booting includes Python's start-up)."""
    handshake_timeout: float = 10.0
    """How long a connection may take to send its ``bot-handshake``."""
    # Limits
    max_message_bytes: int = 1 << 20
    """Largest message a bot may send (1 MiB); larger closes the connection with 1009."""
    max_errors: int = 10
    """Invalid messages after the handshake (each dropped and logged) before the connection is closed."""

    def __post_init__(self) -> None:
        if not (isinstance(self.port, int) and 0 <= self.port <= 65535):
            raise ValueError(f"RoyaleServerConfig.port must be 0..65535, got {self.port!r}")
        if self.turn_timeout is not None and not self.turn_timeout > 0:
            raise ValueError(f"RoyaleServerConfig.turn_timeout must be > 0 seconds or None, got {self.turn_timeout!r}")
        for name in ("ready_timeout", "join_timeout", "handshake_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"RoyaleServerConfig.{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if self.max_message_bytes < 1024:
            raise ValueError(f"RoyaleServerConfig.max_message_bytes must be >= 1024, got {self.max_message_bytes!r}")
        if self.max_errors < 1:
            raise ValueError(f"RoyaleServerConfig.max_errors must be >= 1, got {self.max_errors!r}")
        if self.secret is not None and not self.secret:
            raise ValueError("RoyaleServerConfig.secret must be None or a non-empty string")


# --- connections -------------------------------------------------------------------------------


class BotConnection:
    """One connected bot after its handshake. Its messages go to ``on_intent``/``ready`` as they arrive."""

    def __init__(self, websocket: LockstepConnection, handshake: BotHandshake) -> None:
        self.websocket = websocket
        self.handshake = handshake
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.on_intent: Callable[[BotIntent], None] | None = None
        """Set by the game while this bot plays; intents before that are dropped (as Tank Royale does)."""
        self.on_left: Callable[[], None] | None = None
        self.errors = 0
        self.intents = 0

    @property
    def name(self) -> str:
        return f"{self.handshake.name} {self.handshake.version}"

    def send(self, text: str) -> None:
        """Send one text frame now, without awaiting; a bot that already left is not an error (its tank just plays on)."""
        self.websocket.send_now(text)

    async def close(self, code: int, reason: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.websocket.close(code, reason[:120])


class RoyaleServer:
    """The websocket endpoint. Use as ``async with RoyaleServer(config) as server:``.

    Bots that complete the handshake are put on :attr:`joined`; ``allow(secret)`` adds a
    per-bot secret (booted bots) to the accepted ones. Every frame a bot sends is handled
    the moment it is parsed (:class:`~arena.royale.connection.LockstepConnection`), the
    handshake included, so nothing a bot sends right after it can wait in a queue.
    """

    def __init__(self, config: RoyaleServerConfig = RoyaleServerConfig()) -> None:
        self.config = config
        self.joined: asyncio.Queue[BotConnection] = asyncio.Queue()
        self.connections: set[BotConnection] = set()
        self._secrets: set[str] = set() if config.secret is None else {config.secret}
        self._open = config.secret is None
        self._server: Server | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.setup: GameSetup | None = None
        """Shown in ``server-handshake`` once a game is set up."""

    def allow(self, secret: str) -> None:
        """Accept bots presenting ``secret`` (and, from now on, only bots with a known secret)."""
        self._secrets.add(secret)
        self._open = False

    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"ws://{host}:{self.port}"

    async def __aenter__(self) -> RoyaleServer:
        self._server = await serve(
            self._handle,
            self.config.host,
            self.config.port,
            compression=None,
            max_size=self.config.max_message_bytes,
            ping_interval=None,  # lockstep traffic is continuous; a stuck bot is caught by the turn timeout
            create_connection=LockstepConnection,
        )
        log.info("Tank Royale endpoint listening on %s", self.url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop accepting, close every connection (1001), wait for the handlers. Idempotent."""
        if self._server is not None:
            self._server.close(close_connections=True)
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, websocket: ServerConnection) -> None:
        assert isinstance(websocket, LockstepConnection)
        session = secrets.token_hex(8)
        joined: asyncio.Future[BotConnection | None] = asyncio.get_running_loop().create_future()
        conn: BotConnection | None = None

        def on_text(data: bytes | None) -> None:  # None: a binary frame
            if conn is not None:
                self._message(conn, data)
            elif not joined.done():
                joined.set_result(self._handshake(websocket, session, data))

        def on_binary() -> None:
            on_text(None)

        websocket.on_text, websocket.on_binary = on_text, on_binary
        try:
            websocket.send_now(schema.server_handshake(session, self.config.name, self.setup))
            try:
                conn = await asyncio.wait_for(asyncio.shield(joined), self.config.handshake_timeout)
            except TimeoutError:
                await websocket.close(CLOSE_POLICY, "bot-handshake timeout")
                return
            if conn is None:
                await websocket.wait_closed()
                return
            self.connections.add(conn)
            log.info("Tank Royale bot joined: %s", conn.name)
            self.joined.put_nowait(conn)
            try:
                await websocket.wait_closed()
            finally:
                self.connections.discard(conn)
                conn.closed.set()
                if conn.on_left is not None:
                    conn.on_left()
                log.info("Tank Royale bot left: %s", conn.name)
        except ConnectionClosed:
            pass
        except Exception:  # a bug of ours: logged once, the bot gets 1011, the server goes on
            log.exception("Tank Royale connection handler failed")
            with contextlib.suppress(ConnectionClosed):
                await websocket.close(CLOSE_INTERNAL, "internal error")
        finally:
            websocket.on_text = websocket.on_binary = None

    def _close_soon(self, websocket: LockstepConnection, code: int, reason: str) -> None:
        """Start websockets' closing handshake from a frame callback (which cannot await)."""
        websocket.on_text = websocket.on_binary = None  # nothing more is read from this bot
        task = asyncio.ensure_future(websocket.close(code, reason[:120]))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _handshake(self, websocket: LockstepConnection, session: str, data: bytes | None) -> BotConnection | None:
        """The first frame: a valid ``bot-handshake`` makes the bot's connection; anything else closes 1008."""
        try:
            message = schema.decode(_text(data))
            if not isinstance(message, BotHandshake):
                raise RoyaleProtocolError("unexpected", f"expected a bot-handshake first, got {type(message).__name__}")
            if message.session_id != session:
                raise RoyaleProtocolError("bad_field", "bot-handshake: 'sessionId' is not the one in server-handshake")
            if not self._open and message.secret not in self._secrets:
                raise RoyaleProtocolError("bad_secret", "bot-handshake: wrong or missing 'secret' (SERVER_SECRET)")
        except RoyaleProtocolError as exc:
            log.warning("Tank Royale handshake refused: %s", exc.message)
            self._close_soon(websocket, CLOSE_POLICY, exc.message)
            return None
        return BotConnection(websocket, message)

    def _message(self, conn: BotConnection, data: bytes | None) -> None:
        """A frame after the handshake: intents and ready go to the game; a bad one is dropped and counted."""
        try:
            message = schema.decode(_text(data))
            if isinstance(message, BotHandshake):
                raise RoyaleProtocolError("unexpected", "bot-handshake sent twice")
        except RoyaleProtocolError as exc:
            conn.errors += 1
            log.warning(
                "Tank Royale bot %s: %s (message dropped, %d/%d)", conn.name, exc.message, conn.errors, self.config.max_errors
            )
            if conn.errors >= self.config.max_errors:
                self._close_soon(conn.websocket, CLOSE_POLICY, f"too many invalid messages: {exc.message}")
            return
        if isinstance(message, BotIntent):
            conn.intents += 1
            if conn.on_intent is not None:
                conn.on_intent(message)
        elif isinstance(message, BotReady):
            conn.ready.set()


def _text(data: bytes | None) -> str | bytes:
    """A frame's payload for ``schema.decode``: a text frame's as text, a binary frame (None) as bytes, which it refuses."""
    if data is None:
        return b""
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise RoyaleProtocolError("undecodable", "a text frame that is not UTF-8") from None
