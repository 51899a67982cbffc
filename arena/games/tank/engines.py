"""The names of the code that computes a tick: the numpy reference or the same code compiled with numba.

A battle (:class:`~arena.games.tank.engine.TankBattle`) and a scripted bot (:mod:`arena.games.tank.scripted`)
both take one; the names stand apart so that neither has to import the other, nor numba, to check them.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ENGINES", "EngineName"]

EngineName = Literal["numpy", "numba"]
"""How a battle (and a scripted bot) computes a tick: numpy, the reference, or numba, the same code compiled."""
ENGINES: tuple[str, ...] = ("numpy", "numba")
"""The values of ``engine=``: the numpy reference (the default) and the compiled form."""
