"""One match of a :class:`TankBattle` at one tick, as a small JSON-ready dict (a *frame*).

The one frame format shared by everything that shows a match: the dashboard's live view
(sent to browsers over the observer websocket), ``arena match --record`` files and
``arena replay``. Keeping one format means one drawing routine in the browser and one
renderer for GIF/MP4.

Frame (all numbers rounded to what a viewer can show; angles follow the engine: degrees,
0 = east, 90 = north, y grows north, origin bottom-left)::

    {
      "round": int, "tick": int,
      "tanks":   [[x, y, heading, gun_heading, radar_heading, energy, alive], ...],  # index = tank
      "bullets": [[x, y, heading, power, owner], ...],                              # active ones
      "over": bool, "winner": int                                                   # -1 if none
    }

The match's constant part (field size, tank names) travels once, in a *header*::

    {"width": 800, "height": 600, "tank_radius": 18, "names": ["learner", "tracker"]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .engine import TankBattle

__all__ = ["frame", "header"]


def header(battle: TankBattle, names: Sequence[str]) -> dict[str, Any]:
    """The constant part of a match: field size, tank radius and one name per tank."""
    if len(names) != battle.n_tanks:
        raise ValueError(f"need {battle.n_tanks} names, got {len(names)}")
    rules = battle.rules
    return {
        "width": float(rules.width),
        "height": float(rules.height),
        "tank_radius": float(rules.tank_radius),
        "names": [str(n) for n in names],
    }


def frame(battle: TankBattle, match: int = 0) -> dict[str, Any]:
    """Match ``match`` of ``battle`` now, as plain Python numbers (``json.dumps``-able)."""
    m = int(match)
    if not 0 <= m < battle.n_matches:
        raise ValueError(f"match {match} out of range [0, {battle.n_matches})")
    tanks = np.stack(
        [
            battle.x[m],
            battle.y[m],
            battle.heading[m],
            battle.gun_heading[m],
            battle.radar_heading[m],
            battle.energy[m],
            battle.alive[m].astype(np.float64),
        ],
        axis=1,
    )
    active = battle.bullet_active[m]
    bullets = np.stack(
        [
            battle.bullet_x[m][active],
            battle.bullet_y[m][active],
            battle.bullet_heading[m][active],
            battle.bullet_power[m][active],
            battle.bullet_owner[m][active].astype(np.float64),
        ],
        axis=1,
    )
    return {
        "round": int(battle.round[m]),
        "tick": int(battle.tick[m]),
        "tanks": [[round(float(v), 2) for v in row[:6]] + [int(row[6])] for row in tanks],
        "bullets": [[round(float(v), 2) for v in row[:4]] + [int(row[4])] for row in bullets],
        "over": bool(battle.round_over[m]),
        "winner": int(battle.winner[m]),
    }
