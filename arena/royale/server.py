"""The Tank Royale bot endpoint: a websocket server and the lockstep turn loop.

:class:`RoyaleServer` serves the bot side of Tank Royale's protocol on its own port (JSON text
frames, compression off): it sends ``server-handshake``, checks the ``bot-handshake`` (session
id, secret) and then hands each bot's messages to the game as they arrive. It never crashes
on what a bot sends: during the handshake a bad message closes the connection with 1008 and
the reason in words; afterwards a bad message is dropped and logged, and the tenth closes the
connection (1008 ``too many invalid messages: <reason>``), as on our own protocol
(docs/protocol.md §7). A binary frame is refused like a bad message (JSON text only); one
larger than ``max_message_bytes`` closes with 1009.

:class:`RoyaleGameRunner` plays a :class:`~arena.royale.game.RoyaleGame` in **lockstep**: the
next turn starts the moment every bot that was sent a tick has answered; ``turn_timeout`` is
only the upper bound, after which the missing bots get a ``skipped-turn-event`` and keep their
last intent (Tank Royale's rule). :func:`play_royale_match` is ``arena match`` with Tank Royale
bots: start the server, boot the bots (or wait for bots started by hand), play, stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from ..bots.play import Controller, MatchObserver
from ..games.tank.engine import ACT_DIM, TankBattle, TankRules
from . import schema
from .booter import BootedBot, boot, find_bot
from .connection import LockstepConnection
from .game import ENDLESS_ROUNDS, RoyaleGame
from .schema import BotHandshake, BotIntent, BotReady, GameSetup, RoyaleProtocolError

__all__ = [
    "BotConnection",
    "RoyaleBotSpec",
    "RoyaleGameRunner",
    "RoyaleMatchError",
    "RoyaleServer",
    "RoyaleServerConfig",
    "play_royale_match",
    "royale_rules",
    "run_royale_match",
]

log = logging.getLogger(__name__)

CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_UNSUPPORTED, CLOSE_POLICY, CLOSE_INTERNAL = 1000, 1001, 1003, 1008, 1011


def royale_rules(max_ticks: int = 2000) -> TankRules:
    """Our rules with what Tank Royale adds on: bullets that meet destroy each other."""
    return TankRules(max_ticks=max_ticks, bullet_collisions=True)


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


class RoyaleMatchError(ValueError):
    """A match could not be played: a bot did not connect or did not get ready in time.

    A ValueError, so ``arena`` reports it as one error (with the bot's output) and exit code 2.
    ``bots`` names the bots at fault (their directory names), so training can go on without them.
    """

    def __init__(self, message: str, bots: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.bots = tuple(bots)


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


# --- the turn loop ------------------------------------------------------------------------------


@dataclass
class MatchTally:
    """What :class:`RoyaleGameRunner` counts while it plays."""

    rounds: int = 0
    turns: int = 0
    """Steps of the battle (each advances every running match one turn)."""
    game_turns: int = 0
    """Turns summed over the matches (a match whose game is over no longer counts)."""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of this process (the server and the engine) while the turns ran."""
    wins: NDArray[np.int64] | None = None
    score_sum: NDArray[np.float64] | None = None
    energy_sum: NDArray[np.float64] | None = None


class RoyaleGameRunner:
    """Plays a :class:`RoyaleGame` over connected bots in lockstep (see the module docstring).

    Args:
        game: the game (its battle, seats and round budget).
        connections: the bot of each seat, in seat order.
        local: our controllers by tank index (they drive that tank in every match).
        turn_timeout: seconds, or None to wait for every bot.
        observer: sees every round start and tick (``arena match --record``).
    """

    def __init__(
        self,
        game: RoyaleGame,
        connections: Sequence[BotConnection],
        local: dict[int, Controller] | None = None,
        turn_timeout: float | None = 0.03,
        ready_timeout: float = 10.0,
        observer: MatchObserver | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        if len(connections) != len(game.seats):
            raise ValueError(f"{len(game.seats)} seats but {len(connections)} connections")
        self.game = game
        self.connections = list(connections)
        self.local = dict(local or {})
        self.turn_timeout = turn_timeout
        self.ready_timeout = ready_timeout
        self.observer = observer
        self.progress = progress
        self.tally = MatchTally()
        self._gate = TurnGate()

    def _intent(self, seat: int, message: BotIntent) -> None:
        if self.game.intent(seat, message):
            self._gate.wake()

    def _left(self, seat: int) -> None:
        log.warning("Tank Royale bot %s left during the game; its tank plays on without intent", self.connections[seat].name)
        self.game.left(seat)
        if self.game.pending == 0:
            self._gate.wake()

    def _send(self, messages: list[tuple[int, str]]) -> None:
        for seat, text in messages:
            self.connections[seat].send(text)

    async def run(self) -> MatchTally:
        """Play every match of the game to its last round. Returns the tally.

        Raises:
            RoyaleMatchError: a bot sent no ``bot-ready`` in time.
        """
        game, battle = self.game, self.game.battle
        M, T = battle.n_matches, battle.n_tanks
        tally = self.tally
        tally.wins, tally.score_sum, tally.energy_sum = np.zeros(T, np.int64), np.zeros(T), np.zeros(T)
        for seat, conn in enumerate(self.connections):
            conn.on_intent = lambda message, seat=seat: self._intent(seat, message)
            conn.on_left = lambda seat=seat: self._left(seat)
        try:
            self._send(game.game_started())
            waits = [asyncio.wait_for(conn.ready.wait(), self.ready_timeout) for conn in self.connections]
            try:
                await asyncio.gather(*waits)
            except TimeoutError:
                late = [i for i, c in enumerate(self.connections) if not c.ready.is_set()]
                raise RoyaleMatchError(
                    f"no bot-ready within {self.ready_timeout:g} s from: {', '.join(self.connections[i].name for i in late)}",
                    [game.seats[i].name for i in late],
                ) from None
            if self.observer is not None:
                self.observer.round_started(battle, np.ones(M, bool))
            self._send(game.round_started())
            actions = np.zeros((M, T, ACT_DIM), np.float32)
            started, cpu = time.perf_counter(), time.process_time()
            while not game.finished.all():
                if self.local:
                    obs = battle.observe()
                    for t, player in self.local.items():
                        actions[:, t] = player.act(obs[:, t])
                game.fill(actions)
                tally.game_turns += int(np.count_nonzero(~battle.round_over))
                info = battle.step(actions)
                tally.turns += 1
                if self.observer is not None:
                    self.observer.ticked(battle, actions)
                self._send(game.after_step(info.events))
                ended = game.ended
                if ended.any():
                    self._count(ended)
                    restart = ended & ~game.finished
                    if restart.any():
                        battle.reset(restart)
                        for player in self.local.values():
                            player.reset(restart)
                        if self.observer is not None:
                            self.observer.round_started(battle, restart)
                        self._send(game.round_started(restart))
                    if self.progress is not None:
                        self.progress(tally.rounds)
                await self._gate.wait(game.pending, self.turn_timeout)
                if game.pending:
                    self._send(game.skipped())
            tally.seconds = time.perf_counter() - started
            tally.cpu_seconds = time.process_time() - cpu
        except BaseException:
            with contextlib.suppress(Exception):
                self._send([(i, schema.game_aborted()) for i in range(len(self.connections))])
            raise
        finally:
            for conn in self.connections:
                conn.on_intent = conn.on_left = None
        return tally

    def _count(self, ended: NDArray[np.bool_]) -> None:
        battle, tally = self.game.battle, self.tally
        assert tally.wins is not None and tally.score_sum is not None and tally.energy_sum is not None
        for m in np.flatnonzero(ended).tolist():
            if battle.winner[m] >= 0:
                tally.wins[battle.winner[m]] += 1
            tally.score_sum += battle.scores[m]
            tally.energy_sum += np.where(battle.alive[m], battle.energy[m], 0.0)
            tally.rounds += 1


# --- arena match with Tank Royale bots ----------------------------------------------------------


@dataclass
class RoyaleBotSpec:
    """A tank driven by a Tank Royale bot: ``royale:PATH`` (a bot directory, booted) or ``royale:NAME`` (waited for)."""

    name: str
    path: Path | None

    PREFIX: ClassVar[str] = "royale:"

    @classmethod
    def parse(cls, spec: str) -> RoyaleBotSpec:
        """``royale:PATH``: the bot directory PATH (booted unless a port is given), named after it."""
        if not spec.startswith(cls.PREFIX) or not spec[len(cls.PREFIX) :].strip():
            raise ValueError(f"expected royale:PATH (a Tank Royale bot directory), got {spec!r}")
        path = Path(spec[len(cls.PREFIX) :])
        return cls(path.name or str(path), path)

    @staticmethod
    def matches(spec: str) -> bool:
        return spec.startswith(RoyaleBotSpec.PREFIX)


def play_royale_match(
    players: Sequence[RoyaleBotSpec | Controller],
    rounds: int,
    seed: int = 0,
    rules: TankRules | None = None,
    config: RoyaleServerConfig = RoyaleServerConfig(),
    boot_bots: bool = True,
    observer: MatchObserver | None = None,
    progress: Callable[[int], None] | None = None,
    announce: Callable[[str], None] | None = None,
    n_matches: int = 1,
    log_dir: Path | None = None,
    bot_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Play ``rounds`` rounds in which every player has one tank; Tank Royale bots over the protocol.

    With ``boot_bots`` each bot directory is started like Tank Royale's booter does (its own
    secret, so the server knows which tank is whose) and stopped afterwards; otherwise the
    server waits on ``config.port`` for bots started by hand and gives them the Tank Royale
    seats in the order they connect (a bot whose handshake name equals a seat's name gets
    that seat). ``n_matches`` > 1 plays that many games side by side (a bot process each),
    ``rounds`` rounds each. ``announce`` hears where the server waits (hand-started bots);
    ``bot_env`` is added to the booted bots' environment; ``log_dir`` keeps their output.

    Returns play_match's result (``rounds``, ``bots``: name, wins, mean score, mean energy
    left) plus ``royale``: turns, seconds, turns/s of the game loop, and skipped turns per bot.

    Raises:
        RoyaleMatchError: bots did not connect or get ready in time (with their log's tail).
        FileNotFoundError, ValueError: a bot directory is not a Tank Royale bot.
    """
    if len(players) < 2:
        raise ValueError("a match needs at least two bots")
    if rounds < 1 or n_matches < 1:
        raise ValueError("rounds and n_matches must be >= 1")
    rules = rules or royale_rules()
    if boot_bots:
        for p in players:
            if isinstance(p, RoyaleBotSpec):
                if p.path is None:
                    raise ValueError(f"{p.name}: booting needs a bot directory")
                find_bot(p.path)  # a bad directory fails now, before the server starts
    return asyncio.run(
        run_royale_match(
            list(players), rounds, seed, rules, config, boot_bots, observer, progress, announce, n_matches, log_dir, bot_env
        )
    )


async def run_royale_match(
    players: list[RoyaleBotSpec | Controller],
    rounds: int,
    seed: int,
    rules: TankRules,
    config: RoyaleServerConfig,
    boot_bots: bool,
    observer: MatchObserver | None,
    progress: Callable[[int], None] | None,
    announce: Callable[[str], None] | None,
    n_matches: int,
    log_dir: Path | None,
    bot_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """:func:`play_royale_match` inside a running event loop (tests drive hand-made bots beside it)."""
    T = len(players)
    battle = TankBattle(n_matches, T, rules, seed=seed)
    battle.reward_terms = False  # nobody learns here: skip StepInfo's reward geometry
    names = [p.name for p in players]
    seats = [(m, t, players[t].name) for m in range(n_matches) for t in range(T) if isinstance(players[t], RoyaleBotSpec)]
    local = {t: p for t, p in enumerate(players) if not isinstance(p, RoyaleBotSpec)}
    setup = game_setup(rules, rounds, T, config)
    booted: list[BootedBot] = []
    with tempfile.TemporaryDirectory(prefix="arena-royale-") as tmp:
        async with RoyaleServer(config) as server:
            server.setup = setup
            by_secret: dict[str, int] = {}
            if boot_bots:
                for i, (_, t, _) in enumerate(seats):
                    spec = players[t]
                    assert isinstance(spec, RoyaleBotSpec) and spec.path is not None
                    secret = secrets.token_urlsafe(16)
                    server.allow(secret)
                    by_secret[secret] = i
                    booted.append(boot(find_bot(spec.path), server.url, secret, log_dir or Path(tmp), bot_env))
            elif announce is not None:
                wanted = ", ".join(name for _, _, name in seats)
                announce(f"waiting for {len(seats)} Tank Royale bot(s) ({wanted}) on {server.url}")
            try:
                connections = await join_bots(server, seats, by_secret, booted, config.join_timeout)
                game = RoyaleGame(battle, seats, names, setup, rounds)
                runner = RoyaleGameRunner(
                    game, connections, local, config.turn_timeout, config.ready_timeout, observer, progress
                )
                tally = await runner.run()
                bot_cpu: dict[str, float] = {}
                for b in booted:  # summed per bot (several games boot a bot several times)
                    bot_cpu[b.bot.base_name] = bot_cpu.get(b.bot.base_name, 0.0) + (b.cpu_seconds() or 0.0)
                for conn in connections:
                    await conn.close(CLOSE_NORMAL, "game ended")
            finally:
                await server.close()
                await asyncio.to_thread(stop_bots, booted)
    assert tally.wins is not None and tally.score_sum is not None and tally.energy_sum is not None
    played = max(tally.rounds, 1)
    skipped: dict[str, int] = {}
    for seat in game.seats:
        skipped[seat.name] = skipped.get(seat.name, 0) + seat.skipped
    return {
        "rounds": tally.rounds,
        "bots": [
            {
                "name": names[t],
                "wins": int(tally.wins[t]),
                "mean_score": round(float(tally.score_sum[t] / played), 2),
                "mean_energy": round(float(tally.energy_sum[t] / played), 2),
            }
            for t in range(T)
        ],
        "royale": {
            "turns": tally.game_turns,
            "seconds": round(tally.seconds, 3),
            "turns_per_s": round(tally.game_turns / max(tally.seconds, 1e-9), 1),
            "matches": n_matches,
            "skipped_turns": skipped,
            "server_cpu_ms_per_turn": round(1000 * tally.cpu_seconds / max(tally.game_turns, 1), 3),
            "bot_cpu_s": {name: round(cpu, 2) for name, cpu in bot_cpu.items()},
        },
    }


def game_setup(rules: TankRules, rounds: int | None, participants: int, config: RoyaleServerConfig) -> GameSetup:
    """The ``game-setup`` bots are told for our rules."""
    return GameSetup(
        arena_width=round(rules.width),
        arena_height=round(rules.height),
        number_of_rounds=rounds or ENDLESS_ROUNDS,
        gun_cooling_rate=rules.gun_cooling_rate,
        max_inactivity_turns=rules.inactivity_ticks,
        turn_timeout_us=round((config.turn_timeout or 0.0) * 1e6),
        ready_timeout_us=round(config.ready_timeout * 1e6),
        participants=participants,
        game_type="1v1" if participants == 2 else "melee",
    )


async def join_bots(
    server: RoyaleServer,
    seats: Sequence[tuple[int, int, str]],
    by_secret: dict[str, int],
    booted: Sequence[BootedBot],
    timeout: float,
) -> list[BotConnection]:
    """Wait until every seat has its bot: booted ones by their secret, others by name, then in arrival order."""
    connections: list[BotConnection | None] = [None] * len(seats)
    deadline = time.monotonic() + timeout
    while any(c is None for c in connections):
        left = deadline - time.monotonic()
        if left <= 0:
            missing = [seats[i][2] for i, c in enumerate(connections) if c is None]
            tails = "".join(f"\n--- {b.bot.base_name} log:\n{b.log_tail()}" for b in booted)
            raise RoyaleMatchError(
                f"Tank Royale bot(s) not connected within {timeout:g} s: {', '.join(missing)}{tails}", missing
            )
        for b in booted:
            if not b.running:
                raise RoyaleMatchError(
                    f"Tank Royale bot {b.bot.base_name} exited with code {b.process.returncode} before joining; "
                    f"its output:\n{b.log_tail()}",
                    [b.bot.base_name],
                )
        try:
            conn = await asyncio.wait_for(server.joined.get(), min(left, 0.25))
        except TimeoutError:
            continue
        if by_secret:
            seat = by_secret.get(conn.handshake.secret or "")
        else:
            free = [i for i, c in enumerate(connections) if c is None]
            named = [i for i in free if seats[i][2] in (conn.handshake.name, conn.handshake.name.replace(" ", ""))]
            seat = (named or free)[0] if free else None
        if seat is None or connections[seat] is not None:
            await conn.close(CLOSE_POLICY, "no free seat for this bot in the match")
            continue
        connections[seat] = conn
    return [c for c in connections if c is not None]


class TurnGate:
    """The lockstep wait of one turn: until every seat that was sent a tick has answered, or the
    turn timeout (an upper bound only). Intents arrive on the connections' reader tasks and
    :meth:`wake` the waiting turn loop; one gate per game, shared by matches and training."""

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, pending: int, timeout: float | None) -> None:
        """Return at once when nothing is ``pending``; else at the next :meth:`wake` or after ``timeout`` s."""
        if pending == 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        timer = asyncio.get_running_loop().call_later(timeout, self.wake) if timeout is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiter = None


def stop_bots(booted: Sequence[BootedBot]) -> None:
    """Stop the booted bots: like Tank Royale's booter, the game's end does not end a bot's process.

    (The official APIs keep their connection's process alive after a normal close, waiting for
    the next game, so each gets a moment to exit by itself and is then terminated.)
    """
    for b in booted:
        code = b.stop(grace=0.5)
        if code not in (0, None):
            log.info("Tank Royale bot %s exited with code %s", b.bot.base_name, code)
