"""One tank slot of many matches, each match driven by its own controller, batched per controller.

A league changes a match's opponent at every round start, so the matches of one battle are
played by many controllers at once. :class:`MixedSeat` groups the matches by controller and
makes one call per controller per tick on its matches' rows only: a policy is one batched numpy
forward; a scripted bot keeps per-tank state for every match of the battle (sized at
construction, cleared at each round start) and is told which rows it plays (``rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from ..bots.play import Controller, PolicyController, ScriptedController

__all__ = ["MixedSeat"]


class MixedSeat:
    """Acts for tank ``slot`` of ``n`` matches; ``assignment[m]`` names match ``m``'s controller."""

    def __init__(self, slot: int, assignment: Sequence[str], make: Callable[[str], Controller]) -> None:
        self.slot = slot
        self.names = list(assignment)
        self._make = make
        self.controllers: dict[str, Controller] = {}
        self._groups: list[tuple[Controller, NDArray[np.intp], bool]] | None = None
        for name in set(self.names):
            self.controllers[name] = make(name)

    def add(self, name: str, controller: Controller) -> None:
        """Make ``controller`` available under ``name`` (e.g. a new snapshot)."""
        self.controllers[name] = controller

    def assign(self, matches: NDArray[np.intp], names: Sequence[str]) -> None:
        """Matches ``matches`` play their next round against ``names`` (controllers made on demand)."""
        for m, name in zip(matches.tolist(), names, strict=True):
            self.names[m] = name
            if name not in self.controllers:
                self.controllers[name] = self._make(name)
        self._groups = None

    def drop_unused(self, keep: Callable[[str], bool]) -> None:
        """Forget controllers that no match plays and ``keep`` does not want (evicted snapshots)."""
        playing = set(self.names)
        for name in [n for n in self.controllers if n not in playing and not keep(n)]:
            del self.controllers[name]

    def groups(self) -> list[tuple[Controller, NDArray[np.intp], bool]]:
        """(controller, its match rows, whether it is a scripted bot) for every controller in play."""
        if self._groups is None:
            names = np.array(self.names, dtype=object)
            self._groups = [
                (self.controllers[name], np.flatnonzero(names == name), isinstance(self.controllers[name], ScriptedController))
                for name in dict.fromkeys(self.names)
            ]
        return self._groups

    @property
    def on_radar(self) -> bool:
        """Whether a controller of this seat plays from the radar observation (``arena.games.tank.radar``)."""
        return any(getattr(c, "observation", "full") == "radar" for c in self.controllers.values())

    def act(self, obs: NDArray[np.float32], out: NDArray[np.float32], seen: NDArray[np.float32] | None = None) -> None:
        """Write the actions of tank ``slot`` of every match into ``out`` (matches, tanks, act_dim); ``seen``: the
        radar observation, for the controllers that play from it."""
        seat_obs, seat_seen = obs[:, self.slot], None if seen is None else seen[:, self.slot]
        for controller, rows, scripted in self.groups():
            source = seat_obs
            if getattr(controller, "observation", "full") == "radar":
                if seat_seen is None:
                    raise ValueError(f"{controller.name} plays from the radar observation, which this seat is not given")
                source = seat_seen
            if scripted or isinstance(controller, PolicyController):  # per-match state (a recurrent policy's too)
                assert isinstance(controller, ScriptedController | PolicyController)
                out[rows, self.slot] = controller.act(source[rows], rows=rows)
            else:
                out[rows, self.slot] = controller.act(source[rows])

    def reset(self, mask: NDArray[np.bool_]) -> None:
        """Rounds start in ``mask``: every controller with per-row state clears those rows."""
        for controller in self.controllers.values():
            controller.reset(mask)
