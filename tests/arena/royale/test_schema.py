"""The Tank Royale protocol layer, sans I/O: parsing and validating what bots send, what we send back.

What we send is checked with the official Python bot API's own parser and event mapper
(``robocode-tank-royale``), so a field name or type it would not accept fails here.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.royale import schema
from arena.royale.game import RoyaleGame
from arena.royale.match import royale_rules
from arena.royale.schema import BotHandshake, BotIntent, BotReady, GameSetup, IntentState, RoyaleProtocolError

rtr = pytest.importorskip("robocode_tank_royale", reason="the official Tank Royale bot API (pip install -e '.[royale]')")
from robocode_tank_royale.bot_api.internal.bot_handshake_factory import BotHandshakeFactory  # noqa: E402
from robocode_tank_royale.bot_api.internal.json_util import from_json, to_json  # noqa: E402
from robocode_tank_royale.bot_api.mapper.event_mapper import EventMapper  # noqa: E402
from robocode_tank_royale.bot_api.mapper.game_setup_mapper import GameSetupMapper  # noqa: E402
from robocode_tank_royale.bot_api.mapper.results_mapper import ResultsMapper  # noqa: E402
from robocode_tank_royale.schema import BotIntent as OfficialIntent  # noqa: E402
from robocode_tank_royale.schema import Message  # noqa: E402

# --- what bots send --------------------------------------------------------------------------------


def test_official_handshake_parses() -> None:
    """The official API's bot-handshake (with its extra session_id key) parses with every field we use."""
    from robocode_tank_royale.bot_api.bot_info import BotInfo

    info = BotInfo(name="SpinBot", version="1.2", authors=["Ann", "Bo"], game_types={"1v1"}, platform="Python 3")
    text = to_json(BotHandshakeFactory.create("abc123", info, False, "s3cret"))
    payload = json.loads(text)
    payload["session_id"] = payload["sessionId"]  # what the API really sends (backward compatibility)
    message = schema.decode(json.dumps(payload))
    assert isinstance(message, BotHandshake)
    assert (message.session_id, message.name, message.version, message.authors) == ("abc123", "SpinBot", "1.2", ("Ann", "Bo"))
    assert message.secret == "s3cret" and message.game_types == ("1v1",) and not message.is_droid


def test_official_intent_is_a_delta() -> None:
    """The official API sends unset intent fields as null: they leave the merged intent unchanged."""
    first = schema.decode(to_json(OfficialIntent(type=Message.Type.BOT_INTENT, turn_rate=5.0, target_speed=8, firepower=3)))
    second = schema.decode(to_json(OfficialIntent(type=Message.Type.BOT_INTENT, gun_turn_rate=-20.0, rescan=True)))
    assert isinstance(first, BotIntent) and isinstance(second, BotIntent)
    state = IntentState()
    state.merge(first)
    state.merge(second)
    assert (state.turn_rate, state.target_speed, state.firepower, state.gun_turn_rate) == (5.0, 8.0, 3.0, -20.0)
    assert state.take_rescan() and not state.take_rescan()  # one-shot
    state.clear()
    assert state == IntentState(updates=2)


def test_bot_ready_parses() -> None:
    assert isinstance(schema.decode('{"type": "BotReady"}'), BotReady)


@pytest.mark.parametrize(
    ("frame", "code", "words"),
    [
        (b'{"type": "BotReady"}', "undecodable", "binary frame"),
        ("{not json", "undecodable", "not valid JSON at line 1 column 2 ("),
        ("[1, 2]", "undecodable", "JSON object"),
        ('{"turnRate": 1}', "unknown_type", "'type'"),
        ('{"type": "Dance"}', "unknown_type", "unknown message type 'Dance'"),
        ('{"type": "ObserverHandshake"}', "not_for_bots", "not a message a bot sends"),
        ('{"type": "BotIntent", "turnRate": "left"}', "bad_field", "'turnRate' must be a number"),
        ('{"type": "BotIntent", "targetSpeed": true}', "bad_field", "'targetSpeed' must be a number"),
        ('{"type": "BotIntent", "firepower": NaN}', "undecodable", "not valid JSON at line 1 column 36 ("),
        ('{"type": "BotIntent", "rescan": 1}', "bad_field", "'rescan' must be true or false"),
        ('{"type": "BotIntent", "teamMessages": {}}', "bad_field", "'teamMessages' must be a list"),
        ('{"type": "BotHandshake", "sessionId": "x", "name": "A", "version": "1"}', "bad_field", "'authors'"),
        ('{"type": "BotHandshake", "sessionId": "x", "name": " ", "version": "1", "authors": ["a"]}', "bad_field", "blank"),
        ('{"type": "BotHandshake", "sessionId": "x", "name": "A", "version": "1", "authors": [1]}', "bad_field", "list"),
    ],
)
def test_invalid_messages_raise_a_clear_error(frame: Any, code: str, words: str) -> None:
    """Every malformed frame is one RoyaleProtocolError with a stable code and words a bot author understands."""
    with pytest.raises(RoyaleProtocolError) as caught:
        schema.decode(frame)
    assert caught.value.code == code and words in caught.value.message


def test_unknown_fields_are_ignored() -> None:
    """The schema may grow: extra fields of a known message are not an error."""
    message = schema.decode('{"type": "BotIntent", "targetSpeed": 4, "hoverMode": "on"}')
    assert isinstance(message, BotIntent) and message.target_speed == 4.0


# --- what we send ----------------------------------------------------------------------------------


class _Bot:
    """What the official event mapper asks of a bot: its id."""

    def __init__(self, my_id: int) -> None:
        self.my_id = my_id


def official(text: str) -> Any:
    """Parse our JSON as the official API does (it raises on anything it cannot build)."""
    return from_json(json.loads(text))


def test_handshake_and_game_start_are_what_the_official_api_reads() -> None:
    """server-handshake announces a compatible major version; game-started carries a setup the API maps."""
    setup = GameSetup(number_of_rounds=3, turn_timeout_us=30_000)
    hello = official(schema.server_handshake("s1", "Arena Trainer", setup))
    assert hello.session_id == "s1" and hello.variant == "Tank Royale"
    assert int(hello.version.split(".")[0]) == 1  # the API refuses another major version
    started = official(schema.game_started(2, setup, (100.0, 200.0, 90.0), {1: "a", 2: "b"}))
    mapped = GameSetupMapper.map(started.game_setup)
    assert started.my_id == 2 and (started.start_x, started.start_y, started.start_direction) == (100.0, 200.0, 90.0)
    assert (mapped.number_of_rounds, mapped.arena_width, mapped.turn_timeout) == (3, 800, 30_000)
    assert [(n.bot_id, n.name) for n in started.bot_names] == [(1, "a"), (2, "b")]
    assert official(schema.round_started(1)).round_number == 1
    assert official(schema.skipped_turn(7)).turn_number == 7
    assert type(official(schema.game_aborted())).__name__ == "GameAbortedEvent"
    with pytest.raises(ValueError, match="number_of_rounds"):
        GameSetup(number_of_rounds=0)


def placed(x: list[float], y: list[float], heading: list[float]) -> tuple[TankBattle, RoyaleGame]:
    """A 1v1 with both tanks on Tank Royale seats, placed by hand, guns cold."""
    b = TankBattle(1, 2, royale_rules(), seed=0)
    b.x[0], b.y[0] = x, y
    b.heading[0] = b.gun_heading[0] = b.radar_heading[0] = heading
    b.gun_heat[0] = 0.0
    game = RoyaleGame(b, [(0, 0, "a"), (0, 1, "b")], ["a", "b"], GameSetup(), rounds=1)
    game.round_started()
    return b, game


def turn(b: TankBattle, game: RoyaleGame, *intents: BotIntent | None) -> dict[int, Any]:
    """One lockstep turn: merge intents, fill, step; returns each seat's tick as the official API maps it."""
    for seat, intent in enumerate(intents):
        if intent is not None:
            game.intent(seat, intent)
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    game.fill(actions)
    info = b.step(actions)
    ticks = {}
    for seat, text in game.after_step(info.events):
        message = official(text)
        if type(message).__name__ == "TickEventForBot":
            ticks[seat] = EventMapper.map_tick_event(message, _Bot(seat + 1))
        else:
            ticks.setdefault(-seat - 1, []).append(message)  # round/game ended, per seat
    return ticks


def kinds(tick: Any) -> list[str]:
    return [type(e).__name__ for e in tick.events]


def test_tick_state_and_scan() -> None:
    """The tick carries the bot's state in Tank Royale units and the enemy it scanned."""
    b, game = placed([200.0, 600.0], [300.0, 300.0], [0.0, 180.0])
    ticks = turn(b, game, BotIntent(target_speed=8.0, turn_rate=5.0, radar_turn_rate=10.0), None)
    state = ticks[0].bot_state
    assert (state.speed, state.enemy_count) == (1.0, 1)  # accelerates by 1 per turn
    assert state.turn_rate == pytest.approx(5.0)  # (float32 actions: exact to ~1e-7, what a recording replays)
    assert state.direction == pytest.approx(5.0) and state.radar_direction == pytest.approx(15.0)
    assert state.radar_sweep == pytest.approx(15.0) and state.gun_heat == 0.0
    scanned = [e for e in ticks[0].events if type(e).__name__ == "ScannedBotEvent"]
    assert len(scanned) == 1 and scanned[0].scanned_bot_id == 2 and scanned[0].x == 600.0
    assert ticks[0].turn_number == 1 and ticks[0].round_number == 1
    assert "ScannedBotEvent" not in kinds(ticks[1])  # tank 2 stood still: it does not scan


def test_fire_hit_death_win_and_round_end() -> None:
    """A killing hit: the shooter gets fired / bullet-hit / won-round, the victim hit-by-bullet and its death."""
    b, game = placed([200.0, 300.0], [300.0, 300.0], [0.0, 180.0])
    b.energy[0] = [100.0, 5.0]
    ticks = turn(b, game, BotIntent(firepower=3.0), None)
    assert "BulletFiredEvent" in kinds(ticks[0]) and ticks[0].bullet_states[0].bullet_id == 1
    assert ticks[0].bullet_states[0].owner_id == 1 and not ticks[1].bullet_states  # own bullets only
    for _ in range(10):
        ticks = turn(b, game, BotIntent(firepower=0.0), None)
        if 1 in ticks and "BulletHitBotEvent" in kinds(ticks[0]):
            break
    assert {"BulletHitBotEvent", "BotDeathEvent", "WonRoundEvent"} <= set(kinds(ticks[0]))
    assert {"HitByBulletEvent", "DeathEvent"} <= set(kinds(ticks[1]))  # the API maps victim == me
    hit = next(e for e in ticks[0].events if type(e).__name__ == "BulletHitBotEvent")
    assert (hit.victim_id, hit.damage, hit.energy) == (2, pytest.approx(16.0), 0.0)
    ended = [type(m).__name__ for m in ticks[-1]]
    assert ended == ["RoundEndedEventForBot", "GameEndedEventForBot"]  # rounds=1: the game ends too
    results = ResultsMapper.map(ticks[-1][1].results)
    assert results.rank == 1 and results.first_places == 1 and results.bullet_damage == 5
    assert results.total_score == round(float(b.scores[0, 0])) and results.last_survivor_bonus == 10
    assert game.finished.all() and game.pending == 0


def test_wall_collision_and_skipped_turn() -> None:
    """Hitting a wall and another bot are reported; a seat that does not answer gets a skipped-turn."""
    b, game = placed([800.0 - 18.5, 300.0], [300.0, 300.0], [0.0, 0.0])
    ticks = turn(b, game, BotIntent(target_speed=8.0), None)
    assert "BotHitWallEvent" not in kinds(ticks[0]) and "HitWallEvent" in kinds(ticks[0])
    assert game.pending == 2
    skipped = game.skipped()
    assert [(seat, official(text).turn_number) for seat, text in skipped] == [(0, 1), (1, 1)]
    assert game.seats[0].skipped == 1 and game.pending == 0
    b, game = placed([300.0, 336.5], [300.0, 300.0], [0.0, 0.0])
    ticks = turn(b, game, BotIntent(target_speed=8.0), None)
    hits = {seat: next(e for e in t.events if type(e).__name__ == "HitBotEvent") for seat, t in ticks.items() if seat >= 0}
    assert hits[0].victim_id == 2 and hits[0].rammed and hits[1].victim_id == 1 and not hits[1].rammed


def test_intent_scaling_matches_tank_royale_limits() -> None:
    """fill() turns rates into actions the engine scales back to exactly the limited rates."""
    b, game = placed([200.0, 600.0], [300.0, 300.0], [0.0, 180.0])
    b.velocity[0] = [6.0, 0.0]
    game.intent(0, BotIntent(target_speed=8.0, turn_rate=99.0, gun_turn_rate=-7.5, radar_turn_rate=30.0, firepower=0.05))
    game.intent(1, BotIntent(target_speed=-3.0, turn_rate=-2.0, firepower=5.0, adjust_gun_for_body_turn=True))
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    game.fill(actions)
    np.testing.assert_allclose(actions[0, 0], [1.0, 1.0, -0.375, -1.0, 30 / 45], rtol=1e-6)  # 0.05 < 0.1: hold
    assert actions[0, 1, 3] == 1.0 and actions[0, 1, 0] == pytest.approx(-3 / 8)  # firepower 5 fires 3
    heading = b.heading[0].copy()
    info = b.step(actions)
    assert info.events is not None
    assert b.heading[0, 0] - heading[0] == pytest.approx(10 - 0.75 * 7)  # limited at the new speed 7
    assert b.gun_heading[0, 1] == pytest.approx(180.0)  # adjustGunForBodyTurn: the gun stays put
    assert b.heading[0, 1] == pytest.approx(178.0)


def test_tick_json_is_compact_and_finite() -> None:
    """Tick events are compact JSON; nothing a bot's JSON parser refuses (a NaN would go out as null, never NaN)."""
    b, game = placed([200.0, 600.0], [300.0, 300.0], [0.0, 180.0])
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    game.fill(actions)
    messages = game.after_step(b.step(actions).events)
    assert all(" " not in text for _, text in messages)
    assert all(isinstance(json.loads(text), dict) for _, text in messages)
    assert schema.dumps({"x": float("nan")}) == '{"x":null}'
