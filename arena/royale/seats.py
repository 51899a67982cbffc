"""The bots of a Tank Royale game, seat by seat: who they are, booting and joining them, the turns, stopping them.

Why a module of its own: a game over Tank Royale bots is played two ways, as a match
(:mod:`arena.royale.match`, ``arena match``) and as the opponents of a learning bot
(:mod:`arena.royale.train`), and both seat their bots the same way; only who drives the turns
differs. So this holds everything about the bots that is not the turn loop itself:

* :class:`RoyaleBotSpec` (``royale:PATH``), :func:`game_setup` (what the bots are told);
* :func:`boot_seats` starts a bot process per seat, each with a secret of its own;
  :func:`join_bots` waits until every seat has its bot; :func:`stop_bots` ends them;
* :class:`SeatedBots`: a game's bots during the game (intents in, messages out, the wait for
  ``bot-ready`` and the lockstep wait of each turn, :class:`TurnGate`).

The websocket side (connections, handshakes) is :mod:`arena.royale.server`'s.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..games.tank.rules import TankRules
from . import schema
from .booter import BootedBot, boot, exit_status, find_bot
from .game import ENDLESS_ROUNDS, RoyaleGame
from .schema import BotIntent, GameSetup
from .server import CLOSE_POLICY, BotConnection, RoyaleServer, RoyaleServerConfig

__all__ = [
    "RoyaleBotSpec",
    "RoyaleMatchError",
    "SeatedBots",
    "TurnGate",
    "boot_seats",
    "game_setup",
    "join_bots",
    "stop_bots",
]

log = logging.getLogger(__name__)

ROUND_END_TIMEOUT = 0.03
"""Seconds the answers to a round's last tick are waited for when turns are unbounded (``turn_timeout``
None): Tank Royale's standard turn timeout, the bound of that wait in Tank Royale."""


class RoyaleMatchError(ValueError):
    """A match could not be played: a bot did not connect or did not get ready in time.

    A ValueError, so ``arena`` reports it as one error (with the bot's output) and exit code 2.
    ``bots`` names the bots at fault (their directory names), so training can go on without them.
    """

    def __init__(self, message: str, bots: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.bots = tuple(bots)


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

    def directory(self) -> Path:
        """The bot directory to boot. A bot waited for by name (no directory) cannot be booted."""
        if self.path is None:
            raise ValueError(f"{self.name}: booting needs a bot directory")
        return self.path

    @staticmethod
    def matches(spec: str) -> bool:
        return spec.startswith(RoyaleBotSpec.PREFIX)


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


# --- seating the bots ---------------------------------------------------------------------------


def boot_seats(
    server: RoyaleServer,
    bots: Sequence[Path],
    log_dir: Path,
    booted: list[BootedBot],
    env: dict[str, str] | None = None,
    log_names: Sequence[str] | None = None,
) -> dict[str, int]:
    """Boot one process of bot directory ``bots[i]`` for seat ``i``; returns the seats by secret, for :func:`join_bots`.

    Each process gets a secret of its own, which the server is told to accept: a bot's handshake
    then says which seat is its (processes of one directory look alike otherwise), and no other
    bot gets in. Started bots go onto ``booted`` one by one, so that when one fails to start the
    caller still stops those started before it. ``log_names[i]`` names seat ``i``'s log in
    ``log_dir`` (a kept log, see :func:`~arena.royale.booter.boot`); without it each log gets a
    unique name of its own.
    """
    if log_names is not None and len(log_names) != len(bots):
        raise ValueError(f"{len(bots)} bots but {len(log_names)} log names")
    by_secret: dict[str, int] = {}
    for seat, path in enumerate(bots):
        secret = secrets.token_urlsafe(16)
        server.allow(secret)
        by_secret[secret] = seat
        name = None if log_names is None else log_names[seat]
        booted.append(boot(find_bot(path), server.url, secret, log_dir, env, name))
    return by_secret


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
            tails = "".join(b.log_report() for b in booted)
            raise RoyaleMatchError(
                f"Tank Royale bot(s) not connected within {timeout:g} s: {', '.join(missing)}{tails}", missing
            )
        for b in booted:
            if not b.running:
                raise RoyaleMatchError(
                    f"Tank Royale bot {b.bot.base_name} {exit_status(b.process.returncode)} before joining"
                    f"{b.log_note}; its output:\n{b.log_tail()}",
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


def stop_bots(booted: Sequence[BootedBot]) -> None:
    """Stop the booted bots: like Tank Royale's booter, the game's end does not end a bot's process.

    (The official APIs keep their connection's process alive after a normal close, waiting for
    the next game, so each gets a moment to exit by itself and is then terminated.)
    """
    for b in booted:
        code = b.stop(grace=0.5)
        if code not in (0, None):
            log.info("Tank Royale bot %s exited with code %s", b.bot.base_name, code)


# --- the bots of a game, turn by turn -----------------------------------------------------------


class TurnGate:
    """The lockstep wait of one turn: until every seat that was sent a tick has answered, or the
    turn timeout (an upper bound only). Intents arrive on the connections' reader callbacks and
    :meth:`wake` the waiting turn loop; one gate per game."""

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


class SeatedBots:
    """A game's bots seat by seat: their intents into the game, the game's messages out to them,
    the wait for ``bot-ready`` and the lockstep wait of each turn.

    Why a class: the match runner and the training opponents play a game over bots the same way
    and differ only in who drives the turns, so this part is written once. ``game`` may come after
    :meth:`attach` (training binds its game to the learner's battle on the first step); until then
    intents are dropped, as Tank Royale drops intents sent before a game.

    Args:
        connections: the bot of each seat, in seat order.
        names: each seat's name (a bot directory's name): what errors and ``RoyaleMatchError.bots`` say.
        game: the game, or None until it is set.
    """

    def __init__(self, connections: Sequence[BotConnection], names: Sequence[str], game: RoyaleGame | None = None) -> None:
        if len(names) != len(connections):
            raise ValueError(f"{len(names)} seat names but {len(connections)} connections")
        self.connections = list(connections)
        self.names = list(names)
        self.game = game
        self.gate = TurnGate()

    def attach(self) -> None:
        """Route each seat's intents, and its bot leaving, to the game (from the connections' frame callbacks)."""
        for seat, conn in enumerate(self.connections):
            conn.on_intent = lambda message, seat=seat: self._intent(seat, message)
            conn.on_left = lambda seat=seat: self._left(seat)

    def detach(self) -> None:
        """Stop routing: later intents are dropped, and a bot leaving is no news (the game is over)."""
        for conn in self.connections:
            conn.on_intent = conn.on_left = None

    def send(self, messages: Iterable[tuple[int, str]]) -> None:
        """Send each ``(seat, text)`` now, without awaiting (what the game's methods return)."""
        connections = self.connections
        for seat, text in messages:
            connections[seat].send(text)

    def abort(self) -> None:
        """Tell every bot that the game is aborted: ``game-aborted-event``, no results."""
        self.send((seat, schema.game_aborted()) for seat in range(len(self.connections)))

    async def wait_ready(self, timeout: float) -> None:
        """Wait for every bot's ``bot-ready`` (the answer to ``game-started-event-for-bot``).

        Raises:
            RoyaleMatchError: some bots sent none within ``timeout`` seconds; ``bots`` names them.
        """
        try:
            await asyncio.gather(*(asyncio.wait_for(conn.ready.wait(), timeout) for conn in self.connections))
        except TimeoutError:
            late = [self.names[i] for i, conn in enumerate(self.connections) if not conn.ready.is_set()]
            raise RoyaleMatchError(f"no bot-ready within {timeout:g} s from: {', '.join(late)}", late) from None

    async def wait_turn(self, timeout: float | None) -> None:
        """The end of a turn: wait until every seat sent a tick has answered, or ``timeout`` s; the rest skip it.

        A round's last tick is waited for too (the next round starts after it, as in Tank Royale);
        with unbounded turns (``timeout`` None) that wait still ends after ``ROUND_END_TIMEOUT``,
        since an official bot API stops its bot at ``round-ended`` and mostly never answers it.
        """
        game = self.game
        assert game is not None, "no game is bound"
        if timeout is None and game.owes_last_turn():
            await self.gate.wait(game.pending, ROUND_END_TIMEOUT)
            game.drop_last_turn()
        await self.gate.wait(game.pending, timeout)
        if game.pending:
            self.send(game.skipped())

    def _intent(self, seat: int, message: BotIntent) -> None:
        game = self.game
        if game is not None and game.intent(seat, message):
            self.gate.wake()

    def _left(self, seat: int) -> None:
        log.warning("Tank Royale bot %s left during the game; its tank plays on without intent", self.connections[seat].name)
        game = self.game
        if game is not None:
            game.left(seat)
            if game.pending == 0:
                self.gate.wake()
