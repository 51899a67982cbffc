"""The tank engine's own tests again, with the compiled engine as TankBattle's default (``engine="numba"``).

They construct their battles without naming an engine (``TankBattle(...)``, ``helpers.duel``), so an autouse
fixture that makes "numba" the default of ``TankBattle.__init__`` runs each of them on the kernels, unchanged:
the hand-placed duels, the rules in play, the reference observation. Free-for-all battles among them stay numpy.
"""

from __future__ import annotations

import pytest

from arena.games.tank import TankBattle
from tests.arena.games.tank import test_bullets, test_engine, test_events, test_observation

for _module in (test_engine, test_bullets, test_observation, test_events):
    globals().update({name: test for name, test in vars(_module).items() if name.startswith("test_")})


@pytest.fixture(autouse=True)
def numba_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    init = TankBattle.__init__
    defaults = init.__defaults__
    assert defaults is not None and defaults[-1] == "numpy"
    monkeypatch.setattr(init, "__defaults__", (*defaults[:-1], "numba"))
    assert TankBattle(1)._compiled is not None
