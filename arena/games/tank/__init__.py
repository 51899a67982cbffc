"""Robocode-style tank battles: the vectorized engine and scripted opponents (numpy only).

See docs/arena.md for the rules, the observation and action tables and the cross table
of the scripted bots (``python -m arena.games.tank.scripted`` regenerates it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import ACT_DIM, TankBattle
from .events import StepInfo
from .observation import OBS_DIM, OBS_FIELDS
from .rules import TankRules

if TYPE_CHECKING:
    from .scripted import SCRIPTED, ScriptedBot, cross_table, make_scripted, play_scripted

__all__ = [
    "ACT_DIM",
    "OBS_DIM",
    "OBS_FIELDS",
    "SCRIPTED",
    "ScriptedBot",
    "StepInfo",
    "TankBattle",
    "TankRules",
    "cross_table",
    "make_scripted",
    "play_scripted",
]

_SCRIPTED_NAMES = frozenset({"SCRIPTED", "ScriptedBot", "cross_table", "make_scripted", "play_scripted"})


def __getattr__(name: str) -> Any:
    # Imported lazily so that ``python -m arena.games.tank.scripted`` runs the module once, cleanly.
    if name in _SCRIPTED_NAMES:
        from . import scripted

        return getattr(scripted, name)
    raise AttributeError(f"module 'arena.games.tank' has no attribute {name!r}")
