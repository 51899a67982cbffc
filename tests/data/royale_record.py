"""What an official-API bot observes, written down: ``recording(BotClass)`` is BotClass plus a log.

Imported by the wrapper bots that tests/arena/royale/test_game_agreement.py writes around the sample bots of
tests/data/royale_bots (the sample bots themselves stay plain). The subclass writes one JSON line per
tick the API hands the bot (its round, turn, state and every event of that turn, as the API's event
classes after its own mapping: a BulletHitBotEvent of which the bot is the victim arrives as a
HitByBulletEvent, its own BotDeathEvent as a DeathEvent) and one per round and game end (results),
to ``$ROYALE_RECORD_DIR/<my id>.jsonl``. Only the API's public handlers are used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any


def _plain(value: Any) -> Any:
    """An API object (event, bullet state, results) as JSON-ready data; its class name as ``type``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__, **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def recording(bot_class: type) -> type:
    """``bot_class`` with its ticks, round ends and game end written to $ROYALE_RECORD_DIR/<my id>.jsonl."""

    class Recording(bot_class):  # type: ignore[misc,valid-type]
        _lock = threading.Lock()  # ticks arrive on the bot thread, round/game ends on the websocket thread
        _out: Any = None

        def _write(self, record: dict[str, Any]) -> None:
            with self._lock:
                self._out.write(json.dumps(record) + "\n")
                self._out.flush()

        def on_game_started(self, e: Any) -> None:
            path = Path(os.environ["ROYALE_RECORD_DIR"]) / f"{e.my_id}.jsonl"
            self._out = open(path, "w", encoding="utf-8")  # noqa: SIM115 (open for the bot's life)
            self._write({"kind": "game_started", "my_id": e.my_id, "rounds": e.game_setup.number_of_rounds})
            super().on_game_started(e)

        def on_tick(self, e: Any) -> None:
            s = e.bot_state
            self._write(
                {
                    "kind": "tick",
                    "round": e.round_number,
                    "turn": e.turn_number,
                    "energy": s.energy,
                    "x": s.x,
                    "y": s.y,
                    "events": [_plain(event) for event in e.events],
                }
            )
            super().on_tick(e)

        def on_round_ended(self, e: Any) -> None:
            self._write({"kind": "round_ended", "round": e.round_number, "turn": e.turn_number, "results": _plain(e.results)})
            super().on_round_ended(e)

        def on_game_ended(self, e: Any) -> None:
            self._write({"kind": "game_ended", "rounds": e.number_of_rounds, "results": _plain(e.results)})
            super().on_game_ended(e)

    Recording.__name__ = Recording.__qualname__ = bot_class.__name__
    return Recording
