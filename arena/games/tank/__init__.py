"""Robocode-style tank battles: the vectorized engine and scripted opponents (numpy only).

See docs/arena.md for the rules, the observation and action tables and the cross table
of the scripted bots (``python -m arena.games.tank.tournament`` regenerates it).
"""

from __future__ import annotations

from .actions import ACT_DIM
from .engine import TankBattle
from .events import StepInfo
from .observation import OBS_DIM, OBS_FIELDS
from .roster import SCRIPTED, make_scripted
from .rules import TankRules
from .scripted import ScriptedBot

__all__ = [
    "ACT_DIM",
    "OBS_DIM",
    "OBS_FIELDS",
    "SCRIPTED",
    "ScriptedBot",
    "StepInfo",
    "TankBattle",
    "TankRules",
    "make_scripted",
]
