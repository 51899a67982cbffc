"""Playing a Tank Royale game over connected bots in lockstep, and ``arena match`` with Tank Royale bots.

:class:`RoyaleGameRunner` plays a :class:`~arena.royale.game.RoyaleGame` in **lockstep**: the
next turn starts the moment every bot that was sent a tick has answered; ``turn_timeout`` is
only the upper bound, after which the missing bots get a ``skipped-turn-event`` and keep their
last intent (Tank Royale's rule). :func:`play_royale_match` is ``arena match`` with Tank Royale
bots: start the endpoint (:mod:`arena.royale.server`), boot the bots or wait for bots started by
hand, seat them (:mod:`arena.royale.seats`), play, stop them.

Why the turn loop is apart from the endpoint: the endpoint only gets bots connected and their
frames parsed; what a turn *is* lives here, so the two can change apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..bots.play import Controller, MatchObserver
from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.radar import Sight
from ..games.tank.rules import TankRules
from .booter import BootedBot, exit_status, find_bot
from .game import RoyaleGame
from .seats import RoyaleBotSpec, RoyaleMatchError, SeatedBots, boot_seats, game_setup, join_bots, stop_bots
from .server import CLOSE_NORMAL, BotConnection, RoyaleServer, RoyaleServerConfig

__all__ = [
    "MatchListeners",
    "MatchTally",
    "RoyaleGameRunner",
    "RoyaleMatch",
    "bot_failures",
    "failure_message",
    "log_file_names",
    "play_royale_match",
    "royale_rules",
    "run_royale_match",
]


def royale_rules(max_ticks: int = 2000) -> TankRules:
    """Our rules with what Tank Royale adds on: bullets that meet destroy each other."""
    return TankRules(max_ticks=max_ticks, bullet_collisions=True)


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
        self.bots = SeatedBots(connections, [seat.name for seat in game.seats], game)
        self.local = dict(local or {})
        self.turn_timeout = turn_timeout
        self.ready_timeout = ready_timeout
        self.observer = observer
        self.progress = progress
        self.tally = MatchTally()

    async def run(self) -> MatchTally:
        """Play every match of the game to its last round. Returns the tally.

        Raises:
            RoyaleMatchError: a bot sent no ``bot-ready`` in time.
        """
        game, battle, bots = self.game, self.game.battle, self.bots
        M, T = battle.n_matches, battle.n_tanks
        tally = self.tally
        tally.wins, tally.score_sum, tally.energy_sum = np.zeros(T, np.int64), np.zeros(T), np.zeros(T)
        bots.attach()
        try:
            bots.send(game.game_started())
            await bots.wait_ready(self.ready_timeout)
            if self.observer is not None:
                self.observer.round_started(battle, np.ones(M, bool))
            bots.send(game.round_started())
            actions = np.zeros((M, T, ACT_DIM), np.float32)
            on_radar = {t: getattr(player, "observation", "full") == "radar" for t, player in self.local.items()}
            sight = Sight(battle, any(on_radar.values()))  # a local policy of the radar observation sees its radar's
            started, cpu = time.perf_counter(), time.process_time()
            while not game.finished.all():
                if self.local:
                    obs, seen = sight.observe()
                    for t, player in self.local.items():
                        actions[:, t] = player.act((seen if on_radar[t] else obs)[:, t])
                game.fill(actions)
                tally.game_turns += int(np.count_nonzero(~battle.round_over))
                info = sight.step(actions)
                tally.turns += 1
                if self.observer is not None:
                    self.observer.ticked(battle, actions)
                bots.send(game.after_step(info.events))  # ticks; round-ended (and game-ended) where a round ended
                ended = game.ended
                if ended.any():
                    self._count(ended)
                    if self.progress is not None:
                        self.progress(tally.rounds)
                # A round's last turn is waited for like any other: Tank Royale starts the next round
                # one turn later, once every bot still alive answered its last tick (or at the turn
                # timeout), which gives the bot APIs time to hand out that tick's won-round and death
                # events and round-ended before round-started resets them (game.py's docstring).
                await bots.wait_turn(self.turn_timeout)
                restart = ended & ~game.finished
                if restart.any():
                    sight.reset(restart)
                    for player in self.local.values():
                        player.reset(restart)
                    if self.observer is not None:
                        self.observer.round_started(battle, restart)
                    bots.send(game.round_started(restart))
            tally.seconds = time.perf_counter() - started
            tally.cpu_seconds = time.process_time() - cpu
        except BaseException:
            with contextlib.suppress(Exception):
                bots.abort()
            raise
        finally:
            bots.detach()
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


@dataclass(frozen=True)
class RoyaleMatch:
    """How a match with Tank Royale bots is played: everything but its players and who listens.

    ``boot_bots``: start each bot directory as Tank Royale's booter does, else wait on ``config.port``
    for bots started by hand; ``n_matches`` games side by side (a bot process each); ``log_dir`` keeps
    the booted bots' output; ``bot_env`` is added to their environment.
    """

    rounds: int
    seed: int = 0
    rules: TankRules = field(default_factory=lambda: royale_rules())
    config: RoyaleServerConfig = field(default_factory=RoyaleServerConfig)
    boot_bots: bool = True
    n_matches: int = 1
    log_dir: Path | None = None
    bot_env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not (self.rounds >= 1 and self.n_matches >= 1):
            raise ValueError("rounds and n_matches must be >= 1")


@dataclass(frozen=True)
class MatchListeners:
    """Who hears a match as it goes: an ``observer`` of every tick (a recorder), ``progress`` (rounds
    done) and ``announce`` (where the server waits for hand-started bots)."""

    observer: MatchObserver | None = None
    progress: Callable[[int], None] | None = None
    announce: Callable[[str], None] | None = None


def play_royale_match(
    players: Sequence[RoyaleBotSpec | Controller], match: RoyaleMatch, listeners: MatchListeners | None = None
) -> dict[str, Any]:
    """Play ``rounds`` rounds in which every player has one tank; Tank Royale bots over the protocol.

    With ``match.boot_bots`` each bot directory is started like Tank Royale's booter does (its own
    secret, so the server knows which tank is whose) and stopped afterwards; otherwise the
    server waits on ``match.config.port`` for bots started by hand and gives them the Tank Royale
    seats in the order they connect (a bot whose handshake name equals a seat's name gets
    that seat). ``match.n_matches`` > 1 plays that many games side by side (a bot process each),
    ``match.rounds`` rounds each. ``listeners.announce`` hears where the server waits (hand-started
    bots); ``match.bot_env`` is added to the booted bots' environment; ``match.log_dir`` keeps their
    output, one log per booted bot named after its seat (``NAME.log``; ``NAME.gameK.log`` with several
    games), replacing older ones of the same name (without it the logs go to a temporary directory).

    Returns play_match's result (``rounds``, ``bots``: name, wins, mean score, mean energy
    left) plus ``royale``: turns, seconds, turns/s of the game loop, skipped turns per bot, and
    ``failures``: the booted bots that failed during the game, each a dict (see
    :func:`bot_failures`). A booted bot whose process dies mid-game does not stop it: the game
    treats it as a bot that left (its tank stays, without intent, as in Tank Royale) and it is
    reported here, as is a bot whose code raised (its log holds a Python traceback; the official
    APIs print it and play on) and one that exited with an error after the game.

    Raises:
        RoyaleMatchError: bots did not connect or get ready in time (with their log's tail).
        FileNotFoundError, ValueError: a bot directory is not a Tank Royale bot.
    """
    if len(players) < 2:
        raise ValueError("a match needs at least two bots")
    if match.boot_bots:
        for p in players:
            if isinstance(p, RoyaleBotSpec):
                find_bot(p.directory())  # a bad directory fails now, before the server starts
    return asyncio.run(run_royale_match(list(players), match, listeners))


async def run_royale_match(
    players: list[RoyaleBotSpec | Controller], match: RoyaleMatch, listeners: MatchListeners | None = None
) -> dict[str, Any]:
    """:func:`play_royale_match` inside a running event loop (tests drive hand-made bots beside it)."""
    rounds, seed, rules, config, n_matches, log_dir = (
        match.rounds, match.seed, match.rules, match.config, match.n_matches, match.log_dir
    )  # fmt: skip
    heard = listeners or MatchListeners()
    bot_env = dict(match.bot_env) if match.bot_env is not None else None
    T = len(players)
    battle = TankBattle(n_matches, T, rules, seed=seed)
    battle.reward_terms = False  # nobody learns here: skip StepInfo's reward geometry
    names = [p.name for p in players]
    bots = {t: p for t, p in enumerate(players) if isinstance(p, RoyaleBotSpec)}
    seats = [(m, t, bots[t].name) for m in range(n_matches) for t in bots]
    local = {t: p for t, p in enumerate(players) if not isinstance(p, RoyaleBotSpec)}
    setup = game_setup(rules, rounds, T, config)
    booted: list[BootedBot] = []
    with tempfile.TemporaryDirectory(prefix="arena-royale-") as tmp:
        async with RoyaleServer(config) as server:
            server.setup = setup
            try:
                by_secret: dict[str, int] = {}
                if match.boot_bots:
                    paths = [bots[t].directory() for _, t, _ in seats]
                    log_names = None if log_dir is None else log_file_names(seats, n_matches)
                    by_secret = boot_seats(server, paths, log_dir or Path(tmp), booted, bot_env, log_names)
                elif heard.announce is not None:
                    wanted = ", ".join(name for _, _, name in seats)
                    heard.announce(f"waiting for {len(seats)} Tank Royale bot(s) ({wanted}) on {server.url}")
                connections = await join_bots(server, seats, by_secret, booted, config.join_timeout)
                game = RoyaleGame(battle, seats, names, setup, rounds)
                runner = RoyaleGameRunner(
                    game, connections, local, config.turn_timeout, config.ready_timeout, heard.observer, heard.progress
                )
                try:
                    tally = await runner.run()
                except RoyaleMatchError as exc:  # no bot-ready in time: what became of those bots, and their logs
                    late = [b for b, conn in zip(booted, connections, strict=False) if not conn.ready.is_set()]
                    raise RoyaleMatchError(str(exc) + "".join(b.log_report() for b in late), exc.bots) from None
                bot_cpu: dict[str, float] = {}
                for b in booted:  # summed per bot (several games boot a bot several times)
                    bot_cpu[b.bot.base_name] = bot_cpu.get(b.bot.base_name, 0.0) + (b.cpu_seconds() or 0.0)
                for conn in connections:
                    await conn.close(CLOSE_NORMAL, "game ended")
            finally:
                await server.close()
                await asyncio.to_thread(stop_bots, booted)
        failures = bot_failures(booted, game, n_matches)  # read before a temporary log directory goes
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
            "failures": failures,
        },
    }


# --- booted bots that failed --------------------------------------------------------------------


def log_file_names(seats: Sequence[tuple[int, int, str]], n_matches: int) -> list[str]:
    """A kept log's file name per seat: the seat's name (``NAME.log``; ``NAME.gameK.log`` with several games), unique."""
    out: list[str] = []
    for m, _, name in seats:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "bot"
        if n_matches > 1:
            stem += f".game{m + 1}"
        file, k = f"{stem}.log", 1
        while file in out:
            k += 1
            file = f"{stem}-{k}.log"
        out.append(file)
    return out


def bot_failures(booted: Sequence[BootedBot], game: RoyaleGame, n_matches: int = 1, lines: int = 15) -> list[dict[str, Any]]:
    """The booted bots that failed, after they were stopped: each seat's process by its exit and its log.

    A bot failed when it left the game before the end (its process died, exited, or closed its
    connection), when its process exited by itself with an error (a code other than 0, or a
    signal not ours), or when its log holds a Python traceback (its code raised; an official API
    prints that and plays on). Each failure is a dict: ``bot`` (the seat's name), ``game`` (with
    several games), ``error`` (one line: who, what, when, where the full log is), ``exit_code``
    (None while its process ran until we stopped it), ``round`` and ``turn`` when it left (else
    None), ``tracebacks`` (how many its log holds), ``log`` (the kept log's path, else None),
    ``log_lines`` and ``log_excerpt``, what those lines are: ``"tail"``, the last lines of its
    log, or, for a bot that raised and played on, ``"traceback"``, its last traceback.
    :func:`failure_message` words one for the user.
    """
    if not booted:  # bots started by hand: nothing of theirs to read
        return []
    failures = []
    for b, seat in zip(booted, game.seats, strict=True):
        code = b.exit_code if not b.signalled else None  # a code of the bot's own, not our signal's
        summary = b.log_summary(lines)
        if seat.left_at is None and not code and not summary.tracebacks:
            continue
        name = seat.name if n_matches == 1 else f"{seat.name} (game {seat.match + 1})"
        if seat.left_at is not None:
            when = "in round {} at turn {}".format(*seat.left_at)
            what = f"{exit_status(code)} mid-game, {when}" if code is not None else f"closed its connection {when}"
        elif code:
            what = exit_status(code)
        else:
            n = summary.tracebacks
            what = f"raised {'an exception' if n == 1 else f'{n} exceptions'} during the game and played on"
        excerpt = "traceback" if seat.left_at is None and not code else "tail"
        failures.append(
            {
                "bot": seat.name,
                **({"game": seat.match + 1} if n_matches > 1 else {}),
                "error": f"Tank Royale bot {name} {what}{b.log_note}",
                "exit_code": code,
                "round": None if seat.left_at is None else seat.left_at[0],
                "turn": None if seat.left_at is None else seat.left_at[1],
                "tracebacks": summary.tracebacks,
                "log": str(b.log_path) if b.log_kept else None,
                "log_lines": summary.last_traceback if excerpt == "traceback" else summary.tail,
                "log_excerpt": excerpt,
            }
        )
    return failures


def failure_message(failure: dict[str, Any]) -> str:
    """A failure of :func:`bot_failures` for the user: its one-line error, then the lines of its log, indented."""
    lines = failure["log_lines"]
    if not lines:
        return f"{failure['error']}; its log is empty"
    what = "its last traceback" if failure["log_excerpt"] == "traceback" else "the last lines of its log"
    return f"{failure['error']}; {what}:\n" + "\n".join(f"    {line}" for line in lines)
