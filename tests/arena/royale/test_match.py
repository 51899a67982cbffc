"""Games over the Tank Royale endpoint (arena/royale/match.py): lockstep, skipped turns, leaving, whole matches.

Hand-made bots (plain websocket clients speaking the JSON protocol) test the turn loop's rules
exactly; bots written with the official Python bot API, booted from tests/data/royale_bots,
test that real Tank Royale bots play full matches with the right events.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from arena.bots.play import ScriptedController
from arena.royale.match import MatchListeners, RoyaleMatch, play_royale_match, royale_rules, run_royale_match
from arena.royale.seats import RoyaleBotSpec, RoyaleMatchError
from arena.royale.server import RoyaleServerConfig
from tests.arena.royale.test_server import handshake
from tests.conftest import DATA, timeout

BOTS = DATA / "royale_bots"
official_api = pytest.mark.skipif(
    importlib.util.find_spec("robocode_tank_royale") is None,
    reason="the official Tank Royale bot API (pip install -e '.[royale]')",
)


async def raw_bot(url: str, name: str, think: Callable[[int], float] | None = None, leave_at: int | None = None) -> list[Any]:
    """A minimal Tank Royale bot: ready when asked, one intent per tick (after ``think(turn)`` seconds)."""
    seen: list[Any] = []
    async with connect(url, compression=None) as ws:
        await handshake(ws, name)
        try:
            async for text in ws:
                message = json.loads(text)
                seen.append(message)
                kind = message["type"]
                if kind == "GameStartedEventForBot":
                    await ws.send('{"type": "BotReady"}')
                elif kind == "TickEventForBot":
                    turn = message["turnNumber"]
                    if leave_at is not None and turn >= leave_at:
                        return seen
                    delay = think(turn) if think else 0.0
                    if delay:
                        await asyncio.sleep(delay)
                    with contextlib.suppress(ConnectionClosed):  # the game may have ended meanwhile: read on
                        await ws.send(json.dumps({"type": "BotIntent", "targetSpeed": 5, "turnRate": 3, "radarTurnRate": 45}))
                elif kind == "GameEndedEventForBot":
                    return seen
        except ConnectionClosed:
            pass
    return seen


async def match_with_raw_bots(
    bots: dict[str, dict[str, Any]], rounds: int = 1, ticks: int = 120, **config: Any
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """A match whose Tank Royale seats are filled by raw bots connecting by hand (``--royale-port`` style)."""
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    players = [RoyaleBotSpec(name, None) for name in bots]
    match = asyncio.ensure_future(
        run_royale_match(
            players,
            RoyaleMatch(rounds, rules=royale_rules(ticks), config=RoyaleServerConfig(**config), boot_bots=False),
            MatchListeners(announce=lambda message: url.set_result(message.rsplit(" ", 1)[1])),
        )
    )
    address = await asyncio.wait_for(url, timeout(10))
    clients = [asyncio.ensure_future(raw_bot(address, name, **options)) for name, options in bots.items()]
    result = await asyncio.wait_for(match, timeout(60))
    seen = await asyncio.gather(*clients)
    return result, dict(zip(bots, seen, strict=True))


# --- lockstep, skipped turns, leaving -------------------------------------------------------------


async def test_lockstep_next_turn_starts_when_all_intents_are_in() -> None:
    """With a 5 s turn timeout, 120 turns of two prompt bots take far less than one timeout."""
    result, seen = await match_with_raw_bots({"A": {}, "B": {}}, ticks=120, turn_timeout=5.0)
    royale = result["royale"]
    assert royale["turns"] == 120 and royale["seconds"] < 5.0
    assert royale["skipped_turns"] == {"A": 0, "B": 0}
    ticks = [m for m in seen["A"] if m["type"] == "TickEventForBot"]
    assert [t["turnNumber"] for t in ticks] == list(range(1, 121))
    order = [m["type"] for m in seen["A"]]
    assert order[:3] == ["GameStartedEventForBot", "RoundStartedEvent", "TickEventForBot"]
    assert order[-2:] == ["RoundEndedEventForBot", "GameEndedEventForBot"]


async def test_a_late_intent_is_a_skipped_turn() -> None:
    """A bot that answers after the turn timeout skips that turn and is told so; the game goes on."""
    slow = {"think": lambda turn: 0.25 if turn % 20 == 0 else 0.0}
    result, seen = await match_with_raw_bots({"Fast": {}, "Slow": slow}, ticks=100, turn_timeout=0.05)
    skipped = [m["turnNumber"] for m in seen["Slow"] if m["type"] == "SkippedTurnEvent"]
    assert 20 in skipped and result["royale"]["skipped_turns"]["Slow"] >= 4
    assert not [m for m in seen["Fast"] if m["type"] == "SkippedTurnEvent"]
    assert result["royale"]["turns"] == 100


async def test_a_bot_that_leaves_does_not_stop_the_game() -> None:
    """A bot that disconnects mid-round leaves its tank behind; nobody waits for it."""
    result, seen = await match_with_raw_bots({"Stays": {}, "Leaves": {"leave_at": 10}}, ticks=80, turn_timeout=5.0)
    assert result["royale"]["turns"] == 80 and result["royale"]["seconds"] < 5.0
    assert seen["Stays"][-1]["type"] == "GameEndedEventForBot"


class _Crashes:
    """One of our tanks whose controller fails on turn 5 (a bug of ours, mid-game)."""

    name = "crashes"

    def __init__(self) -> None:
        self.turns = 0

    def act(self, obs: Any) -> Any:
        self.turns += 1
        if self.turns == 5:
            raise RuntimeError("controller bug")
        return obs[:, :5] * 0.0

    def reset(self, mask: Any) -> None:
        pass


async def test_a_game_that_fails_is_aborted_for_the_bots() -> None:
    """If the game cannot go on, the bots get game-aborted-event (no results), and the error surfaces."""
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    match = asyncio.ensure_future(
        run_royale_match(
            [RoyaleBotSpec("Raw", None), _Crashes()],
            RoyaleMatch(1, rules=royale_rules(100), config=RoyaleServerConfig(turn_timeout=5.0), boot_bots=False),
            MatchListeners(announce=lambda message: url.set_result(message.rsplit(" ", 1)[1])),
        )
    )
    bot = asyncio.ensure_future(raw_bot(await asyncio.wait_for(url, timeout(10)), "Raw"))
    with pytest.raises(RuntimeError, match="controller bug"):
        await asyncio.wait_for(match, timeout(30))
    seen = await asyncio.wait_for(bot, timeout(10))
    assert seen[-1]["type"] == "GameAbortedEvent"
    assert not [m for m in seen if m["type"] in ("RoundEndedEventForBot", "GameEndedEventForBot")]


# --- official API bots ----------------------------------------------------------------------------


@official_api
@pytest.mark.expensive
def test_official_api_bots_play_a_full_match(tmp_path: Path) -> None:
    """SpinBot (booted by its start script) and Walls (by python Walls.py) play two rounds to the end."""
    spin, walls = RoyaleBotSpec.parse(f"royale:{BOTS / 'SpinBot'}"), RoyaleBotSpec.parse(f"royale:{BOTS / 'Walls'}")
    result = play_royale_match(
        [spin, walls], RoyaleMatch(2, rules=royale_rules(500), config=RoyaleServerConfig(turn_timeout=1.0), log_dir=tmp_path)
    )
    assert result["rounds"] == 2 and [b["name"] for b in result["bots"]] == ["SpinBot", "Walls"]
    assert result["royale"]["turns"] > 100 and result["royale"]["skipped_turns"] == {"SpinBot": 0, "Walls": 0}
    assert sum(b["mean_score"] for b in result["bots"]) > 0  # they found and shot each other


@official_api
@pytest.mark.expensive
def test_official_api_bot_hears_every_event(tmp_path: Path) -> None:
    """A recording official-API bot against our tracker: scans, shots, hits, deaths and round/game ends arrive."""
    record = tmp_path / "events.jsonl"
    recorder = RoyaleBotSpec.parse(f"royale:{BOTS / 'Recorder'}")
    result = play_royale_match(
        [recorder, ScriptedController("tracker", 1)],
        RoyaleMatch(
            2,
            rules=royale_rules(1500),
            config=RoyaleServerConfig(turn_timeout=1.0),
            bot_env={"ROYALE_RECORD": str(record)},
            log_dir=tmp_path,
        ),
    )
    events = [json.loads(line) for line in record.read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"game_started", "round_started", "tick", "scanned", "fired", "round_ended", "game_ended"} <= kinds
    assert {"bullet_hit", "hit_by_bullet"} & kinds and {"death", "won_round", "bot_death"} & kinds
    game = next(e for e in events if e["kind"] == "game_started")
    assert game["my_id"] == 1 and game["rounds"] == 2 and game["width"] == 800
    ended = [e for e in events if e["kind"] == "round_ended"]
    assert [e["round"] for e in ended] == [1, 2] and result["rounds"] == 2
    assert next(e for e in events if e["kind"] == "game_ended")["rounds"] == 2
    scans = [e for e in events if e["kind"] == "scanned"]
    assert all(e["by"] == 1 and e["bot"] == 2 for e in scans)
    assert os.environ.get("ROYALE_RECORD") is None  # only the bot's environment had it


@official_api
@pytest.mark.expensive
def test_official_api_bot_that_thinks_too_long_skips_turns(tmp_path: Path) -> None:
    """SlowBot sleeps past the turn timeout every 10th turn: those turns are skipped and the game goes on."""
    slow = RoyaleBotSpec.parse(f"royale:{BOTS / 'SlowBot'}")
    result = play_royale_match(
        [slow, ScriptedController("sitting", 1)],
        RoyaleMatch(1, rules=royale_rules(60), config=RoyaleServerConfig(turn_timeout=0.1), log_dir=tmp_path),
    )
    assert result["royale"]["turns"] == 60 and result["royale"]["skipped_turns"]["SlowBot"] >= 3


def test_a_bot_directory_that_is_not_a_bot_is_refused(tmp_path: Path) -> None:
    """A directory without its JSON config, or a bot that dies before joining, is one clear error."""
    (tmp_path / "Nothing").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no Nothing\.json \(the bot's JSON config"):
        play_royale_match(
            [RoyaleBotSpec.parse(f"royale:{tmp_path}/Nothing"), ScriptedController("sitting", 1)], RoyaleMatch(1)
        )
    broken = tmp_path / "Broken"
    broken.mkdir()
    (broken / "Broken.json").write_text('{"name": "Broken", "version": "1", "authors": ["t"]}')
    (broken / "Broken.py").write_text("raise SystemExit('no API here')\n")
    with pytest.raises(RoyaleMatchError, match="exited with code 1 before joining"):
        play_royale_match([RoyaleBotSpec.parse(f"royale:{broken}"), ScriptedController("sitting", 1)], RoyaleMatch(1))
