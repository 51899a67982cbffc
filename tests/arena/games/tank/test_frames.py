"""One match at one tick as a JSON-ready frame, and the match's header (arena/games/tank/frames.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arena.games.tank import TankBattle, TankRules
from arena.games.tank.frames import frame, header
from tests.arena.games.tank.helpers import act, duel


def test_frame_is_plain_json_of_the_match_state() -> None:
    b = duel(100.123, 300.0, 400.0, 300.0)
    b.step(act([0, 0, 0, 1.0], []))  # tank 0 fires east (power 3, speed 11)
    f = frame(b)
    assert json.loads(json.dumps(f)) == f  # plain Python numbers all the way down
    assert set(f) == {"round", "tick", "tanks", "bullets", "over", "winner"}
    assert (f["round"], f["tick"], f["over"], f["winner"]) == (1, 1, False, -1)
    assert f["tanks"][0] == [100.12, 300.0, 0.0, 0.0, 0.0, 97.0, 1]  # x, y, headings, energy, alive
    assert f["tanks"][1][:2] == [400.0, 300.0] and f["tanks"][1][6] == 1
    assert f["bullets"] == [[111.12, 300.0, 0.0, 3.0, 0]]  # x, y, heading, power, owner
    assert all(type(v) is int for v in (f["tanks"][0][6], f["bullets"][0][4]))


def test_frame_picks_its_match_and_shows_the_end() -> None:
    b = TankBattle(3, 2, TankRules(max_ticks=5), seed=1)
    for _ in range(5):
        b.step(np.zeros((3, 2, 5)))
    f = frame(b, 2)
    assert f["tick"] == 5 and f["over"] and f["winner"] == -1 and f["bullets"] == []
    assert f["tanks"][1][0] == round(float(b.x[2, 1]), 2)
    for bad in (-1, 3):
        with pytest.raises(ValueError, match="out of range"):
            frame(b, bad)


def test_header_names_every_tank() -> None:
    b = TankBattle(1, 3, TankRules(width=1000.0), seed=0)
    h = header(b, ["learner", "tracker", "walker"])
    assert h == {"width": 1000.0, "height": 600.0, "tank_radius": 18.0, "names": ["learner", "tracker", "walker"]}
    assert json.loads(json.dumps(h)) == h
    with pytest.raises(ValueError, match="need 3 names"):
        header(b, ["learner", "tracker"])
