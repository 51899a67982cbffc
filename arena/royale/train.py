"""Tank Royale bots as the opponents of a learning bot: ``arena train --opponent royale:PATH``.

``arena.bots.play.play_learning_bot`` drives tank 0 of ``n`` matches and asks an opponent
*controller* for tank 1's actions. For a Tank Royale opponent, tank 1 of each match is one booted
bot process: :class:`RoyaleOpponents` runs the endpoint on a thread of its own (an asyncio loop)
and plays a :class:`~arena.royale.game.RoyaleGame` of endless rounds over the learner's battle,
through ``play_learning_bot``'s two hooks: ``opponent_factory`` (a :class:`RoyaleController`
whose ``act`` waits, lockstep and bounded by the turn timeout, for the bots' intents) and
``watch`` (the battle after every step, turned into the bots' tick events).

The learner's thread blocks while the loop thread touches the game or the battle, so the two
never run at once. The first turn of the first round has no intents, as every Tank Royale
round's turn 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.engines import EngineName
from ..games.tank.rules import TankRules
from . import schema
from .booter import BootedBot, find_bot
from .game import RoyaleGame
from .seats import RoyaleBotSpec, RoyaleMatchError, SeatedBots, boot_seats, game_setup, join_bots, stop_bots
from .server import CLOSE_NORMAL, RoyaleServer, RoyaleServerConfig

__all__ = ["RoyaleController", "RoyaleOpponents", "learning_opponents"]

T = TypeVar("T")


class RoyaleController:
    """``arena.bots.play.Controller`` for the matches of one ``royale:PATH`` opponent kind (their tank 1)."""

    def __init__(self, hub: RoyaleOpponents, kind: str) -> None:
        self.name = kind
        self.hub = hub
        self.rows = np.asarray(hub.rows[kind], np.intp)

    def act(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        return self.hub.actions()[self.rows, 1]

    def reset(self, mask: NDArray[np.bool_]) -> None:
        self.hub.restart(self.rows[np.asarray(mask, bool)])


class RoyaleOpponents:
    """The Tank Royale opponents of one learning bot (see the module docstring). Close it when done.

    Args:
        opponents: the opponent mix of ``play_learning_bot`` (scripted names and ``royale:PATH``),
            spread over the matches round-robin as it does.
        n_matches: the learning bot's parallel matches; one bot process per match of a royale kind.
        rules: the learner's rules (the bots are told the arena size, cooling rate, inactivity).
        config: the endpoint (turn timeout, join timeout, …).
    """

    def __init__(
        self,
        opponents: Sequence[str],
        n_matches: int,
        rules: TankRules,
        config: RoyaleServerConfig | None = None,
        log_dir: Path | None = None,
    ) -> None:
        config = config or RoyaleServerConfig()
        names = [opponents[m % len(opponents)] for m in range(n_matches)]
        self.rows = {kind: [m for m, k in enumerate(names) if k == kind] for kind in set(names) if RoyaleBotSpec.matches(kind)}
        self.seats = [(m, 1, RoyaleBotSpec.parse(kind).name) for kind, rows in sorted(self.rows.items()) for m in rows]
        self.seat_kind = [kind for kind, rows in sorted(self.rows.items()) for _ in rows]
        self.config = config
        self.rules = rules
        self.setup = game_setup(rules, None, 2, config)
        self.n_matches = n_matches
        self.bots = SeatedBots([], [])
        """The opponents' seats; its game is bound to the learner's battle on the first step."""
        self.booted: list[BootedBot] = []
        self._actions = np.zeros((n_matches, 2, ACT_DIM), np.float32)
        self._turn = 0
        self._acted = -1
        self._tmp = tempfile.TemporaryDirectory(prefix="arena-royale-")
        self._log_dir = log_dir or Path(self._tmp.name)
        for kind in self.rows:
            find_bot(RoyaleBotSpec.parse(kind).directory())  # a bad directory fails before anything starts
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="royale-opponents", daemon=True)
        self._thread.start()
        self.server: RoyaleServer | None = None
        try:
            self._call(self._start(), timeout=config.join_timeout + config.ready_timeout + 30)
        except BaseException:
            self.close()
            raise

    # --- the loop thread ------------------------------------------------------------------------

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    async def _start(self) -> None:
        server = RoyaleServer(self.config)
        await server.__aenter__()
        self.server = server
        server.setup = self.setup
        paths = [RoyaleBotSpec.parse(kind).directory() for kind in self.seat_kind]
        by_secret = boot_seats(server, paths, self._log_dir, self.booted)
        connections = await join_bots(server, self.seats, by_secret, self.booted, self.config.join_timeout)
        self.bots = SeatedBots(connections, [name for _, _, name in self.seats])
        self.bots.attach()
        bot_names = {1: "learner", 2: "opponent"}
        self.bots.send((i, schema.game_started(2, self.setup, None, bot_names)) for i in range(len(connections)))
        await self.bots.wait_ready(self.config.ready_timeout)

    @property
    def game(self) -> RoyaleGame | None:
        """The bots' game over the learner's battle; None until the first step binds it."""
        return self.bots.game

    async def _bind(self, battle: TankBattle) -> None:
        names = ["learner", "opponent"]
        self.bots.game = game = RoyaleGame(battle, self.seats, names, self.setup, None)
        self.bots.send(game.round_started())

    async def _after_step(self) -> None:
        assert self.game is not None
        self.bots.send(self.game.after_step(self.game.battle.last_events))

    async def _collect_and_fill(self) -> None:
        game = self.game
        assert game is not None
        await self.bots.wait_turn(self.config.turn_timeout)
        self._actions[:] = 0.0
        game.fill(self._actions)

    async def _restart(self, rows: NDArray[np.intp]) -> None:
        assert self.game is not None
        mask = np.zeros(self.n_matches, bool)
        mask[rows] = True
        self.bots.send(self.game.round_started(mask))

    async def _stop(self) -> None:
        self.bots.detach()  # leaving now is our doing, not news
        self.bots.abort()
        for conn in self.bots.connections:
            await conn.close(CLOSE_NORMAL, "training stopped")
        if self.server is not None:
            await self.server.close()

    # --- the learner's thread -------------------------------------------------------------------

    def actions(self) -> NDArray[np.float32]:
        """This turn's actions of every seat (the first call of a turn waits for the intents)."""
        if self.game is not None and self._acted != self._turn:
            self._acted = self._turn
            self._call(self._collect_and_fill())
        return self._actions

    def watch(self, battle: TankBattle) -> None:
        """``play_learning_bot``'s ``watch``: after every step (before finished rounds are reset)."""
        self._turn += 1
        if self.game is None:
            self._call(self._bind(battle))
        else:
            self._call(self._after_step())

    def restart(self, rows: NDArray[np.intp]) -> None:
        """New rounds began in ``rows`` (the battle is already reset there)."""
        if self.game is not None and len(rows):
            self._call(self._restart(rows))

    def factory(self, kind: str, n: int, seed: int, engine: EngineName = "numpy") -> Any:
        """``play_learning_bot``'s ``opponent_factory``: royale kinds are ours, the rest scripted bots (on ``engine``)
        or policy files."""
        if kind in self.rows:
            assert n == len(self.rows[kind]), "the opponent spread differs from play_learning_bot's"
            return RoyaleController(self, kind)
        from ..bots.play import make_opponent

        return make_opponent(kind, n, seed, engine)

    def close(self) -> None:
        """Abort the bots' game, close the endpoint, stop the bots and the loop. Idempotent."""
        if self._loop.is_running():
            with contextlib.suppress(Exception):
                self._call(self._stop(), timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        stop_bots(self.booted)
        self.booted = []
        self._tmp.cleanup()


@contextlib.contextmanager
def learning_opponents(
    opponents: Sequence[str],
    n_matches: int,
    rules: TankRules,
    watch: Callable[[TankBattle], None] | None = None,
    config: RoyaleServerConfig | None = None,
) -> Iterator[dict[str, Any]]:
    """``play_learning_bot`` keyword arguments for this opponent mix: ``with ... as hooks: play_learning_bot(..., **hooks)``.

    Without ``royale:`` opponents this is just ``{"watch": watch}``; with them it starts the
    endpoint and the bots (one per match of each royale kind) and stops them on exit.
    """
    if not any(RoyaleBotSpec.matches(o) for o in opponents):
        yield {"watch": watch}
        return
    hub = RoyaleOpponents(opponents, n_matches, rules, config)
    try:

        def both(battle: TankBattle) -> None:
            hub.watch(battle)
            if watch is not None:
                watch(battle)

        yield {"opponent_factory": hub.factory, "watch": both}
    finally:
        hub.close()


def play_with_royale_opponents(
    opponents: Sequence[str],
    matches: Callable[[list[str]], int],
    rules: TankRules,
    play: Callable[[list[str], int, dict[str, Any]], None],
    say: Callable[[str], None],
    watch: Callable[[TankBattle], None] | None = None,
) -> None:
    """Boot the Tank Royale bots of ``opponents`` and run ``play(mix, n_matches, hooks)`` against them.

    A bot that fails to boot (exits, never connects, never gets ready) is dropped, said once
    through ``say``, and the others boot again without it, so one broken bot directory costs
    the run that bot, not the run. ``matches(mix)`` sizes the battle for the mix left.

    Raises:
        RoyaleMatchError: no opponent is left (the first line of the last failure, then why).
    """
    mix = list(opponents)
    while True:
        n_matches = matches(mix)
        with contextlib.ExitStack() as stack:
            try:
                hooks = stack.enter_context(learning_opponents(mix, n_matches, rules, watch))
            except RoyaleMatchError as exc:
                royale = [k for k in mix if RoyaleBotSpec.matches(k)]
                failed = [k for k in royale if RoyaleBotSpec.parse(k).name in exc.bots] or royale
                mix = [k for k in mix if k not in failed]
                reason = _reason(exc)
                names = ", ".join(RoyaleBotSpec.parse(k).name for k in failed)
                if not mix:
                    raise RoyaleMatchError(
                        f"Tank Royale bot {names} failed to boot ({reason}); no opponent left", exc.bots
                    ) from None
                say(f"Tank Royale bot {names} failed to boot ({reason}); training goes on without it")
                continue
            play(mix, n_matches, hooks)
            return


def _reason(exc: RoyaleMatchError) -> str:
    """One line of why bots failed: the error's first line and the last line the bot printed, if any."""
    first, *rest = str(exc).splitlines() or [""]
    printed = [line.strip() for line in rest if line.strip() and not line.startswith("--- ")]
    first = first.removesuffix("; its output:")
    return f"{first}; its last output: {printed[-1]}" if printed else first
