"""A round's end as Tank Royale's server plays it: the messages, their order, and the turn between two rounds.

Tank Royale (``GameServer.onNextTurn``/``onNextTick``, ``ModelUpdater.update``) ends a round in
the turn that ends it: each bot's last tick (with the winner's ``WonRoundEvent`` and the dead
bots' death events), then ``round-ended`` to every bot, then ``game-ended`` after the last
round. The next round starts a turn later: once every bot still alive has answered its last
tick, or at the turn timeout; that turn sends ``round-started`` and the new round's first
tick. Not answering the last tick is no skipped turn. The cases: the game's bookkeeping
(no processes), hand-made bots that answer or not (the order and the pacing, exactly), and
two official-API bots recording which of ``on_won_round``, ``on_death`` and
``on_round_ended`` they got in each round.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.royale.game import RoyaleGame
from arena.royale.match import MatchListeners, RoyaleMatch, play_royale_match, royale_rules, run_royale_match
from arena.royale.schema import BotIntent
from arena.royale.seats import ROUND_END_TIMEOUT, RoyaleBotSpec, game_setup
from arena.royale.server import RoyaleServerConfig
from tests.arena.royale.test_server import handshake
from tests.conftest import timeout

# --- the game's bookkeeping -----------------------------------------------------------------------


def test_a_rounds_last_tick_is_owed_but_never_a_skipped_turn() -> None:
    """After a round's last tick the bots still alive owe an answer (unless the game is over); no skipped turn for it."""
    rules = royale_rules(3)
    battle = TankBattle(1, 2, rules, seed=0)
    game = RoyaleGame(battle, [(0, 0, "A"), (0, 1, "B")], ["A", "B"], game_setup(rules, 2, 2, RoyaleServerConfig()), 2)
    actions = np.zeros((1, 2, ACT_DIM), np.float32)

    def turn() -> list[str]:
        game.fill(actions)
        info = battle.step(actions)
        return [json.loads(text)["type"] for _, text in game.after_step(info.events)]

    game.round_started()
    assert turn() == ["TickEventForBot"] * 2 and game.pending == 2
    assert game.skipped() and not game.owes_last_turn()  # an ordinary turn: skipped
    assert [s.skipped for s in game.seats] == [1, 1]
    turn()
    game.intent(0, BotIntent())
    game.intent(1, BotIntent())
    assert turn() == ["TickEventForBot"] * 2 + ["RoundEndedEventForBot"] * 2  # tick 3: the round's last
    assert game.ended[0] and not game.finished[0]
    assert game.pending == 2 and game.owes_last_turn() and all(s.last_turn and s.owes == 3 for s in game.seats)
    assert game.intent(0, BotIntent()) is False  # A answered its last tick; B not yet
    assert game.skipped() == [] and game.pending == 0  # B is let off without a skipped-turn-event
    assert [s.skipped for s in game.seats] == [1, 1]
    battle.reset(game.ended.copy())
    assert [json.loads(text)["type"] for _, text in game.round_started()] == ["RoundStartedEvent"] * 2
    for _ in range(2):
        turn()
        game.skipped()
    assert turn() == ["TickEventForBot"] * 2 + ["RoundEndedEventForBot", "GameEndedEventForBot"] * 2
    assert game.finished[0] and game.pending == 0 and not game.owes_last_turn()  # the game is over: nothing owed


def test_drop_last_turn_lets_off_only_last_ticks() -> None:
    """``drop_last_turn`` (the bounded wait of unbounded turns) forgets answers owed for rounds' last ticks only."""
    rules = royale_rules(2)
    battle = TankBattle(2, 2, rules, seed=0)
    game = RoyaleGame(battle, [(0, 0, "A"), (1, 0, "B")], ["A", "x"], game_setup(rules, 3, 2, RoyaleServerConfig()), 3)
    actions = np.zeros((2, 2, ACT_DIM), np.float32)

    def turn() -> None:
        game.fill(actions)
        battle.step(actions)
        game.after_step(battle.last_events)

    game.round_started()
    turn()
    game.skipped()
    late = np.array([False, True])  # match 1 starts over: it is a turn behind match 0
    battle.reset(late)
    game.round_started(late)
    turn()  # match 0's round ends at its cap (A owes its last tick); match 1 plays its first turn (B owes it)
    assert game.pending == 2 and game.owes_last_turn()
    game.drop_last_turn()
    assert game.pending == 1 and not game.owes_last_turn()
    assert [s.owes for s in game.seats] == [0, 1] and [s.skipped for s in game.seats] == [1, 1]


# --- the order and the pacing, exactly: hand-made bots ----------------------------------------------


async def recording_bot(url: str, name: str, silent: Callable[[int, int], bool]) -> list[tuple[float, dict[str, Any]]]:
    """A raw Tank Royale bot that answers every tick except where ``silent(round, turn)``; returns (time, message)s."""
    seen: list[tuple[float, dict[str, Any]]] = []
    async with connect(url, compression=None) as ws:
        await handshake(ws, name)
        with contextlib.suppress(ConnectionClosed):
            async for text in ws:
                message = json.loads(text)
                seen.append((time.monotonic(), message))
                kind = message["type"]
                if kind == "GameStartedEventForBot":
                    await ws.send('{"type": "BotReady"}')
                elif kind == "TickEventForBot" and not silent(message["roundNumber"], message["turnNumber"]):
                    with contextlib.suppress(ConnectionClosed):  # the game may have ended meanwhile: read on
                        await ws.send(json.dumps({"type": "BotIntent", "targetSpeed": 2, "radarTurnRate": 45}))
                elif kind == "GameEndedEventForBot":
                    break
    return seen


async def two_rounds(
    quiet: Callable[[int, int], bool], turn_timeout: float | None
) -> tuple[dict[str, Any], dict[str, list[tuple[float, dict[str, Any]]]]]:
    """Two rounds of 20 turns (nobody fires: both tanks live to the cap) between ``Prompt`` and ``Quiet``."""
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    match = asyncio.ensure_future(
        run_royale_match(
            [RoyaleBotSpec("Prompt", None), RoyaleBotSpec("Quiet", None)],
            RoyaleMatch(2, rules=royale_rules(20), config=RoyaleServerConfig(turn_timeout=turn_timeout), boot_bots=False),
            MatchListeners(announce=lambda message: url.set_result(message.rsplit(" ", 1)[1])),
        )
    )
    address = await asyncio.wait_for(url, timeout(10))
    prompt = asyncio.ensure_future(recording_bot(address, "Prompt", lambda r, t: False))
    quiet_bot = asyncio.ensure_future(recording_bot(address, "Quiet", quiet))
    result = await asyncio.wait_for(match, timeout(60))
    return result, {"Prompt": await prompt, "Quiet": await quiet_bot}


def boundary(seen: list[tuple[float, dict[str, Any]]]) -> tuple[list[str], float]:
    """The messages from round 1's last tick to round 2's first, and the time from round-ended to round-started."""
    kinds = [m["type"] for _, m in seen]
    ended = kinds.index("RoundEndedEventForBot")
    started = kinds.index("RoundStartedEvent", ended)
    return kinds[ended - 1 : started + 2], seen[started][0] - seen[ended][0]


async def test_the_next_round_waits_for_the_last_ticks_answer_or_the_turn_timeout() -> None:
    """Quiet never answers round 1's last tick: round 2 starts after the turn timeout, with no skipped turn."""
    result, seen = await two_rounds(lambda r, t: (r, t) == (1, 20), turn_timeout=0.4)
    for name in ("Prompt", "Quiet"):
        order, gap = boundary(seen[name])
        assert order == ["TickEventForBot", "RoundEndedEventForBot", "RoundStartedEvent", "TickEventForBot"], name
        assert gap >= 0.25, (name, gap)  # the round's end is a turn: its 0.4 s bound passed (before: the same instant)
        kinds = [m["type"] for _, m in seen[name]]
        assert "SkippedTurnEvent" not in kinds and kinds[-3:] == [
            "TickEventForBot",
            "RoundEndedEventForBot",
            "GameEndedEventForBot",
        ]
        ticks = [(m["roundNumber"], m["turnNumber"]) for _, m in seen[name] if m["type"] == "TickEventForBot"]
        assert ticks == [(r, t) for r in (1, 2) for t in range(1, 21)]
    assert result["rounds"] == 2 and result["royale"]["skipped_turns"] == {"Prompt": 0, "Quiet": 0}


async def test_the_next_round_starts_once_the_last_tick_is_answered_and_the_game_end_waits_for_nothing() -> None:
    """Both answer round 1's last tick: round 2 starts at once (a 5 s bound unused); the game's last tick is owed nothing."""
    started = time.monotonic()
    result, seen = await two_rounds(lambda r, t: (r, t) == (2, 20), turn_timeout=5.0)
    assert time.monotonic() - started < 5.0  # Quiet's silence at the game's end cost no turn timeout
    _, gap = boundary(seen["Quiet"])
    assert gap < 2.5
    assert result["royale"]["skipped_turns"] == {"Prompt": 0, "Quiet": 0}


async def test_unbounded_turns_still_bound_the_wait_for_a_last_tick() -> None:
    """With no turn timeout, an unanswered last tick (an official API stops its bot there) holds the game for 30 ms."""
    result, seen = await two_rounds(lambda r, t: (r, t) == (1, 20), turn_timeout=None)
    _, gap = boundary(seen["Prompt"])
    assert ROUND_END_TIMEOUT / 2 <= gap < 2.5  # (before: the same instant)
    assert result["rounds"] == 2 and result["royale"]["skipped_turns"] == {"Prompt": 0, "Quiet": 0}


# --- official API bots: which round-end callbacks fire ----------------------------------------------

RECORDING_BOT = '''
"""Records which of on_won_round, on_death and on_round_ended it gets in each round (callbacks.jsonl)."""

import json
import threading

from robocode_tank_royale.bot_api import Bot

SHOOTS = {shoots}
lock = threading.Lock()  # handlers run on the bot thread and on the websocket thread


class {name}(Bot):
    round = 0

    def record(self, kind: str, **fields: object) -> None:
        with lock, open("callbacks.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps({{"kind": kind, "round": self.round, **fields}}) + "\\n")

    def run(self) -> None:
        self.adjust_gun_for_body_turn = self.adjust_radar_for_gun_turn = self.adjust_radar_for_body_turn = True
        if SHOOTS:
            self.radar_turn_rate = 45
        while self.running:
            self.go()

    def on_scanned_bot(self, e) -> None:  # the shooter keeps gun and radar on its target and fires when aimed
        if SHOOTS:
            aim = self.gun_bearing_to(e.x, e.y)
            self.gun_turn_rate = max(-20.0, min(20.0, aim))
            self.radar_turn_rate = max(-45.0, min(45.0, 2 * self.radar_bearing_to(e.x, e.y)))
            if abs(aim) < 2 and self.gun_heat == 0:
                self.set_fire(3)

    def on_round_started(self, e) -> None:
        self.round = e.round_number
        self.record("round_started")

    def on_won_round(self, e) -> None:
        self.record("won_round", turn=e.turn_number)

    def on_death(self, e) -> None:
        self.record("death", turn=e.turn_number)

    def on_round_ended(self, e) -> None:
        self.record("round_ended", ended=e.round_number, turn=e.turn_number)

    def on_game_ended(self, e) -> None:
        self.record("game_ended")


if __name__ == "__main__":
    {name}().start()
'''


@pytest.mark.skipif(
    importlib.util.find_spec("robocode_tank_royale") is None,
    reason="the official Tank Royale bot API (pip install -e '.[royale]')",
)
@pytest.mark.expensive
def test_official_api_bots_get_won_round_death_and_round_ended_every_round(tmp_path: Path) -> None:
    """Shooter (aims and fires) kills Sitter (never moves) in each of 2 rounds: every round-end callback fires once."""
    bots = []
    for name, shoots in (("Shooter", True), ("Sitter", False)):
        directory = tmp_path / name
        directory.mkdir()
        (directory / f"{name}.json").write_text(json.dumps({"name": name, "version": "1.0", "authors": ["tests"]}))
        (directory / f"{name}.py").write_text(textwrap.dedent(RECORDING_BOT.format(name=name, shoots=shoots)))
        bots.append(RoyaleBotSpec.parse(f"royale:{directory}"))
    result = play_royale_match(bots, RoyaleMatch(2, rules=royale_rules(1000), config=RoyaleServerConfig(turn_timeout=0.5)))
    assert [b["wins"] for b in result["bots"]] == [2, 0] and result["royale"]["failures"] == []

    def callbacks(name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (tmp_path / name / "callbacks.jsonl").read_text().splitlines()]

    for name, fate in (("Shooter", "won_round"), ("Sitter", "death")):
        events = callbacks(name)
        per_round = Counter((e["round"], e["kind"]) for e in events)
        for r in (1, 2):
            got = {kind: per_round[(r, kind)] for kind in ("round_started", fate, "round_ended")}
            assert got == {"round_started": 1, fate: 1, "round_ended": 1}, (name, r, events)
        assert not [e for e in events if e["kind"] in ({"won_round", "death"} - {fate})], (name, events)
        assert [e["ended"] for e in events if e["kind"] == "round_ended"] == [1, 2]
        assert [e["kind"] for e in events].count("game_ended") == 1
