"""The bot side of Robocode Tank Royale's protocol, sans I/O: JSON text ↔ messages.

Tank Royale bots talk JSON text frames whose ``type`` names the message and whose fields are
camelCase, as in Tank Royale's published schema. This module parses what a bot sends
(``bot-handshake``, ``bot-ready``, ``bot-intent``) into frozen dataclasses, raising
:class:`RoyaleProtocolError` with a message safe to show the bot; merges each ``bot-intent``
(a *delta*) into the bot's current intent (:class:`IntentState`); and writes what the server
sends as compact JSON. Unknown fields of a known message are ignored (the schema allows
additions). ``arena.royale.game`` builds the tick events, ``arena.royale.server`` moves the text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "PROTOCOL_VERSION",
    "BotHandshake",
    "BotIntent",
    "BotReady",
    "GameSetup",
    "IntentState",
    "RoyaleProtocolError",
    "decode",
    "dumps",
    "game_aborted",
    "game_ended",
    "game_started",
    "round_ended",
    "round_started",
    "server_handshake",
    "skipped_turn",
]

PROTOCOL_VERSION = "1.4.0"
"""The Tank Royale schema version we speak (that of ``robocode-tank-royale`` 1.4, the API we test with).

The official APIs refuse a server whose major version differs from theirs, so this is what
the ``server-handshake`` announces."""
VARIANT = "Tank Royale"
"""``server-handshake.variant``: which game the server runs."""
GAME_TYPES = ("classic", "1v1", "melee")
"""Game types the ``server-handshake`` lists."""

BOT_MESSAGES = frozenset({"BotHandshake", "BotReady", "BotIntent"})
"""Message types a bot may send."""
OTHER_MESSAGES = frozenset(
    {
        "ControllerHandshake",
        "ObserverHandshake",
        "ServerHandshake",
        "BotInfo",
        "BotListUpdate",
        "BotPolicyUpdate",
        "StartGame",
        "StopGame",
        "PauseGame",
        "ResumeGame",
        "NextTurn",
        "ChangeTps",
        "EnableDebugMode",
        "DisableDebugMode",
        "GameStartedEventForBot",
        "GameStartedEventForObserver",
        "GameEndedEventForBot",
        "GameEndedEventForObserver",
        "GameAbortedEvent",
        "GamePausedEventForObserver",
        "GameResumedEventForObserver",
        "RoundStartedEvent",
        "RoundEndedEventForBot",
        "RoundEndedEventForObserver",
        "TickEventForBot",
        "TickEventForObserver",
        "TpsChangedEvent",
        "SkippedTurnEvent",
        "TeamMessage",
    }
)
"""Tank Royale message types that exist but that a bot does not send to this endpoint."""


class RoyaleProtocolError(ValueError):
    """A text frame that breaks the Tank Royale bot contract.

    Attributes:
        code: a short stable kind: ``undecodable`` (not a JSON object), ``unknown_type``,
            ``not_for_bots`` (a Tank Royale message a bot never sends), ``bad_field``.
        message: what is wrong, in words a bot author can act on; it names no internals and
            is sent as the websocket close reason.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- helpers ------------------------------------------------------------------------------------


def dumps(message: dict[str, Any]) -> str:
    """Compact JSON text of one message.

    orjson, not ``json``: a tick event is an order of magnitude cheaper, and there is one per bot
    every turn (docs/royale.md, "Speed"). The schema has no NaN (orjson would write one as ``null``).
    """
    return orjson.dumps(message).decode()


def _flag(obj: dict[str, Any], key: str, what: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise RoyaleProtocolError("bad_field", f"{what}: '{key}' must be true or false, got {_kind(value)}")


def _text(obj: dict[str, Any], key: str, what: str, required: bool = False, limit: int = 1 << 16) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RoyaleProtocolError("bad_field", f"{what}: '{key}' is required")
        return None
    if not isinstance(value, str):
        raise RoyaleProtocolError("bad_field", f"{what}: '{key}' must be a string, got {_kind(value)}")
    if len(value) > limit:
        raise RoyaleProtocolError("bad_field", f"{what}: '{key}' is longer than {limit} characters")
    if required and not value.strip():
        raise RoyaleProtocolError("bad_field", f"{what}: '{key}' must not be blank")
    return value


def _texts(obj: dict[str, Any], key: str, what: str, required: bool = False) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None and not required:
        return ()
    if isinstance(value, str) and key == "gameTypes":  # the booter's JSON config allows "a, b"
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RoyaleProtocolError("bad_field", f"{what}: '{key}' must be a list of strings, got {_kind(value)}")
    if required and not any(v.strip() for v in value):
        raise RoyaleProtocolError("bad_field", f"{what}: '{key}' must name at least one")
    return tuple(value)


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


# --- what bots send -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BotHandshake:
    """``bot-handshake``: who the bot is, in reply to ``server-handshake`` (with its ``secret``)."""

    session_id: str
    name: str
    version: str
    authors: tuple[str, ...]
    secret: str | None = None
    game_types: tuple[str, ...] = ()
    platform: str | None = None
    programming_lang: str | None = None
    is_droid: bool = False

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BotHandshake:
        what = "bot-handshake"
        return cls(
            session_id=_text(obj, "sessionId", what, required=True) or "",
            name=_text(obj, "name", what, required=True, limit=256) or "",
            version=_text(obj, "version", what, required=True, limit=256) or "",
            authors=_texts(obj, "authors", what, required=True),
            secret=_text(obj, "secret", what, limit=1024),
            game_types=_texts(obj, "gameTypes", what),
            platform=_text(obj, "platform", what, limit=256),
            programming_lang=_text(obj, "programmingLang", what, limit=256),
            is_droid=bool(_flag(obj, "isDroid", what)),
        )


@dataclass(frozen=True)
class BotReady:
    """``bot-ready``: the bot has taken in ``game-started-event-for-bot`` and can play."""

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BotReady:
        return cls()


_INTENT_NUMBERS = (
    ("turnRate", "turn_rate"),
    ("gunTurnRate", "gun_turn_rate"),
    ("radarTurnRate", "radar_turn_rate"),
    ("targetSpeed", "target_speed"),
    ("firepower", "firepower"),
)
_INTENT_FLAGS = (
    ("adjustGunForBodyTurn", "adjust_gun_for_body_turn"),
    ("adjustRadarForBodyTurn", "adjust_radar_for_body_turn"),
    ("adjustRadarForGunTurn", "adjust_radar_for_gun_turn"),
    ("rescan", "rescan"),
    ("fireAssist", "fire_assist"),
)
_INTENT_TEXTS = (
    "bodyColor",
    "turretColor",
    "radarColor",
    "bulletColor",
    "scanColor",
    "tracksColor",
    "gunColor",
    "stdOut",
    "stdErr",
    "debugGraphics",
)
_INTENT_FIELDS: dict[str, tuple[str, type]] = {
    **{key: (name, float) for key, name in _INTENT_NUMBERS},
    **{key: (name, bool) for key, name in _INTENT_FLAGS},
    **{key: (key, str) for key in _INTENT_TEXTS},
    "teamMessages": ("team_messages", list),
}
"""bot-intent field → (attribute, JSON type); colors, output, graphics and team messages are checked, then ignored."""


@dataclass(frozen=True)
class BotIntent:
    """``bot-intent``: a *delta*: None means "unchanged since the last intent" (the schema's rule).

    Rates are degrees per turn (positive = counter-clockwise, left), speed units per turn,
    ``firepower`` 0 (hold) or 0.1..3. Out-of-range values are legal: the server limits them,
    as Tank Royale does. Colors, standard output and debug graphics are checked for type
    and otherwise ignored (there is no viewer); team messages are ignored (no teams).
    """

    turn_rate: float | None = None
    gun_turn_rate: float | None = None
    radar_turn_rate: float | None = None
    target_speed: float | None = None
    firepower: float | None = None
    adjust_gun_for_body_turn: bool | None = None
    adjust_radar_for_body_turn: bool | None = None
    adjust_radar_for_gun_turn: bool | None = None
    rescan: bool | None = None
    fire_assist: bool | None = None

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BotIntent:
        # One pass over the keys present (every turn of every bot comes through here; the official
        # API sends all ~20 fields, most of them null).
        values: dict[str, Any] = {}
        for key, value in obj.items():
            if value is None:
                continue
            field_ = _INTENT_FIELDS.get(key)
            if field_ is None:
                continue  # "type", or a field we do not know: ignored
            name, kind = field_
            if kind is float:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise RoyaleProtocolError("bad_field", f"bot-intent: '{key}' must be a number, got {_kind(value)}")
                if not math.isfinite(value):
                    raise RoyaleProtocolError("bad_field", f"bot-intent: '{key}' must be finite")
                values[name] = float(value)
            elif kind is bool:
                if not isinstance(value, bool):
                    raise RoyaleProtocolError("bad_field", f"bot-intent: '{key}' must be true or false, got {_kind(value)}")
                values[name] = value
            elif kind is str:
                _text(obj, key, "bot-intent", limit=1 << 20)
            elif not isinstance(value, list):
                raise RoyaleProtocolError("bad_field", f"bot-intent: '{key}' must be a list, got {_kind(value)}")
        return cls(**values)


_PARSERS: dict[str, Callable[[dict[str, Any]], BotHandshake | BotReady | BotIntent]] = {
    "BotHandshake": BotHandshake.parse,
    "BotReady": BotReady.parse,
    "BotIntent": BotIntent.parse,
}


def decode(text: str | bytes) -> BotHandshake | BotReady | BotIntent:
    """Parse one text frame from a bot.

    Raises:
        RoyaleProtocolError: a binary frame, not a JSON object, no or an unknown ``type``, a
            message a bot never sends, or a field of the wrong type.
    """
    if not isinstance(text, str):
        raise RoyaleProtocolError("undecodable", "Tank Royale messages are JSON text frames, got a binary frame")
    try:
        obj = orjson.loads(text)  # strict JSON: NaN and Infinity are not numbers; nesting past 1024 is refused
    except orjson.JSONDecodeError as exc:  # a json.JSONDecodeError: the position is ours to say, the reason orjson's
        raise RoyaleProtocolError(
            "undecodable",
            f"not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}; NaN and Infinity are not JSON numbers)",
        ) from None
    if not isinstance(obj, dict):
        raise RoyaleProtocolError("undecodable", f"a message must be a JSON object, got {_kind(obj)}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise RoyaleProtocolError("unknown_type", "a message needs a 'type' string")
    parse = _PARSERS.get(kind)
    if parse is None:
        if kind in OTHER_MESSAGES:
            raise RoyaleProtocolError("not_for_bots", f"'{kind}' is not a message a bot sends (this endpoint serves bots)")
        shown = kind if len(kind) <= 40 else kind[:40] + "…"
        raise RoyaleProtocolError("unknown_type", f"unknown message type '{shown}'")
    return parse(obj)


@dataclass
class IntentState:
    """A bot's current intent: every ``bot-intent`` delta merged into the last (Tank Royale ``BotIntent.update``).

    Cleared at each round start, as Tank Royale clears its intents per round. ``rescan`` is
    one-shot: it is read once (``take_rescan``) and reset.
    """

    turn_rate: float = 0.0
    gun_turn_rate: float = 0.0
    radar_turn_rate: float = 0.0
    target_speed: float = 0.0
    firepower: float = 0.0
    adjust_gun_for_body_turn: bool = False
    adjust_radar_for_body_turn: bool = False
    adjust_radar_for_gun_turn: bool = False
    rescan: bool = False
    fire_assist: bool = False
    updates: int = field(default=0, compare=False)
    """Intents merged so far (all rounds)."""

    def merge(self, delta: BotIntent) -> None:
        """Overwrite the fields the delta sets (not None); keep the others."""
        for name in _MERGED:
            value = getattr(delta, name)
            if value is not None:
                setattr(self, name, value)
        self.updates += 1

    def clear(self) -> None:
        """Back to "do nothing" (a new round; a bot that left keeps its tank but not its intent)."""
        for name in _MERGED:
            setattr(self, name, False if isinstance(getattr(self, name), bool) else 0.0)

    def take_rescan(self) -> bool:
        value, self.rescan = self.rescan, False
        return value


_MERGED = tuple(name for _, name in _INTENT_NUMBERS + _INTENT_FLAGS)


# --- what the server sends ----------------------------------------------------------------------


@dataclass(frozen=True)
class GameSetup:
    """``game-setup``: the rules a game runs with, as the bots see them (Tank Royale's field names).

    Every ``is...Locked`` flag is true: our server takes no game setup from a controller.
    """

    arena_width: int = 800
    arena_height: int = 600
    number_of_rounds: int = 10
    gun_cooling_rate: float = 0.1
    max_inactivity_turns: int = 450
    turn_timeout_us: int = 30_000
    """Turn timeout in microseconds (the schema's unit); the bots' ``time_left`` counts down from it."""
    ready_timeout_us: int = 10_000_000
    participants: int = 2
    game_type: str = "classic"
    turns_per_second: int = 30
    """Tank Royale's default pace (``DEFAULT_TURNS_PER_SECOND``); reported, not applied: we run as fast as the bots."""

    def __post_init__(self) -> None:
        for name in ("arena_width", "arena_height", "number_of_rounds", "participants", "turns_per_second"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GameSetup.{name} must be a positive int, got {value!r}")
        for name in ("max_inactivity_turns", "turn_timeout_us", "ready_timeout_us"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"GameSetup.{name} must be an int >= 0, got {value!r}")
        if not (isinstance(self.gun_cooling_rate, int | float) and self.gun_cooling_rate > 0):
            raise ValueError(f"GameSetup.gun_cooling_rate must be > 0, got {self.gun_cooling_rate!r}")

    def to_wire(self) -> dict[str, Any]:
        return {
            "gameType": self.game_type,
            "arenaWidth": self.arena_width,
            "isArenaWidthLocked": True,
            "arenaHeight": self.arena_height,
            "isArenaHeightLocked": True,
            "minNumberOfParticipants": self.participants,
            "isMinNumberOfParticipantsLocked": True,
            "maxNumberOfParticipants": self.participants,
            "isMaxNumberOfParticipantsLocked": True,
            "numberOfRounds": self.number_of_rounds,
            "isNumberOfRoundsLocked": True,
            "gunCoolingRate": self.gun_cooling_rate,
            "isGunCoolingRateLocked": True,
            "maxInactivityTurns": self.max_inactivity_turns,
            "isMaxInactivityTurnsLocked": True,
            "turnTimeout": self.turn_timeout_us,
            "isTurnTimeoutLocked": True,
            "readyTimeout": self.ready_timeout_us,
            "isReadyTimeoutLocked": True,
            "defaultTurnsPerSecond": self.turns_per_second,
        }


def server_handshake(session_id: str, name: str, setup: GameSetup | None = None) -> str:
    """``server-handshake``: the first message on every connection; the bot echoes ``sessionId``."""
    message: dict[str, Any] = {
        "type": "ServerHandshake",
        "sessionId": session_id,
        "name": name,
        "variant": VARIANT,
        "version": PROTOCOL_VERSION,
        "gameTypes": list(GAME_TYPES),
    }
    if setup is not None:
        message["gameSetup"] = setup.to_wire()
    return dumps(message)


def game_started(my_id: int, setup: GameSetup, start: tuple[float, float, float] | None, bot_names: dict[int, str]) -> str:
    """``game-started-event-for-bot``: the bot's id, the setup, its start pose and every bot's battle name."""
    message: dict[str, Any] = {
        "type": "GameStartedEventForBot",
        "myId": my_id,
        "gameSetup": setup.to_wire(),
        "teammateIds": [],
        "botNames": [{"botId": bot_id, "name": name} for bot_id, name in sorted(bot_names.items())],
    }
    if start is not None:
        message["startX"], message["startY"], message["startDirection"] = start
    return dumps(message)


def round_started(round_number: int) -> str:
    return dumps({"type": "RoundStartedEvent", "roundNumber": round_number})


def skipped_turn(turn_number: int) -> str:
    return dumps({"type": "SkippedTurnEvent", "turnNumber": turn_number})


def round_ended(round_number: int, turn_number: int, results: dict[str, int]) -> str:
    return dumps({"type": "RoundEndedEventForBot", "roundNumber": round_number, "turnNumber": turn_number, "results": results})


def game_ended(number_of_rounds: int, results: dict[str, int]) -> str:
    return dumps({"type": "GameEndedEventForBot", "numberOfRounds": number_of_rounds, "results": results})


def game_aborted() -> str:
    return dumps({"type": "GameAbortedEvent"})
