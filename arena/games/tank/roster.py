"""The scripted bots by name: the ladder every evaluation plays, the others, and :func:`make_scripted`.

Why a module of its own: the names cover the ladder bots (:mod:`arena.games.tank.scripted`) and the ``drawn``
population (:mod:`arena.games.tank.drawn`), which builds on them, so the one place that knows them all sits above both.
"""

from __future__ import annotations

from .engines import EngineName
from .rules import DEFAULT_RULES, TankRules
from .scripted import ScriptedBot, Sitting, Spinner, Tracker, Walker

__all__ = ["EXTRA_SCRIPTED", "SCRIPTED", "make_scripted"]

SCRIPTED: dict[str, type[ScriptedBot]] = {cls.name: cls for cls in (Sitting, Spinner, Walker, Tracker)}
"""The ladder (weakest first), which the league, the evaluations and the selection play by default."""
EXTRA_SCRIPTED: tuple[str, ...] = ("drawn",)
"""Scripted bots :func:`make_scripted` also builds that are not in the ladder ``SCRIPTED``: ``drawn``
(:mod:`arena.games.tank.drawn`), new parts every round."""


def make_scripted(
    name: str, n: int, seed: int = 0, rules: TankRules = DEFAULT_RULES, engine: EngineName = "numpy"
) -> ScriptedBot:
    """A scripted bot by name, driving ``n`` tanks (``engine="numba"``: compiled). ValueError lists the valid names.

    ``drawn:movements=A+B,...`` is the population narrowed to those families (:func:`~.drawn.population_name`)."""
    if name in EXTRA_SCRIPTED or name.startswith("drawn:"):
        from .drawn import Drawn, population_ranges  # its kernel module imports numba, which a numpy-only run never needs

        return Drawn(n, seed, rules, engine, population_ranges(name))
    try:
        cls = SCRIPTED[name]
    except KeyError:
        names = ", ".join([*sorted(SCRIPTED), *EXTRA_SCRIPTED])
        raise ValueError(f"unknown scripted bot {name!r}; valid names: {names}") from None
    return cls(n, seed, rules, engine)
