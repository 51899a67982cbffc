"""The scripted bots by name (arena/games/tank/roster.py): the ladder, the extra ``drawn``, and the names refused."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, SCRIPTED, TankBattle, make_scripted
from arena.games.tank.drawn import Drawn
from arena.games.tank.roster import EXTRA_SCRIPTED


def test_make_scripted_names() -> None:
    assert set(SCRIPTED) == {"sitting", "spinner", "walker", "tracker"}
    for name in SCRIPTED:
        bot = make_scripted(name, 3, seed=1)
        assert bot.name == name
        out = bot.act(TankBattle(3, 2, seed=0).observe()[:, 0])
        assert out.shape == (3, ACT_DIM) and out.dtype == np.float32 and (np.abs(out) <= 1).all()
    with pytest.raises(ValueError, match="sitting"):
        make_scripted("nope", 1)


def test_make_scripted_builds_drawn_outside_the_ladder() -> None:
    from arena.commands.options import SCRIPTED_NAMES

    bot = make_scripted("drawn", 3, seed=1)
    assert isinstance(bot, Drawn) and bot.name == "drawn" and "drawn" not in SCRIPTED and EXTRA_SCRIPTED == ("drawn",)
    assert (*SCRIPTED, *EXTRA_SCRIPTED) == SCRIPTED_NAMES  # the names the commands take
    out = bot.act(TankBattle(3, 2, seed=0).observe()[:, 0])
    assert out.shape == (3, ACT_DIM) and out.dtype == np.float32 and (np.abs(out) <= 1).all()
    with pytest.raises(ValueError, match="drawn"):
        make_scripted("nope", 1)
