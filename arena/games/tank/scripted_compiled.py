"""The scripted bots' compiled acts (``engine="numba"``): each bot's calls of its kernels.

Why apart from the bots: :mod:`arena.games.tank.scripted` is the numpy reference and never imports numba;
a bot built with ``engine="numba"`` holds a :class:`CompiledActs` and hands it its parameters and state.
The kernels (:mod:`arena.games.tank.scripted_kernels`) take their angles from numpy's ``arctan2`` (see
that module's docstring), so every act here is: check the input, let a kernel write the angles' (y, x)
pairs, run ``np.arctan2`` over them, then the bot's kernel.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from . import scripted_kernels as kernels
from .actions import ACT_DIM
from .observation import OBS_DIM
from .rules import TankRules

__all__ = ["CompiledActs"]


class CompiledActs:
    """The compiled ``act`` of the ladder bots for ``n`` tanks: the rules as the kernels' vector and a little scratch.

    The bots' state (directions, cooldowns) stays the bot's numpy arrays, passed in and updated in place.
    """

    def __init__(self, n: int, rules: TankRules) -> None:
        self.n = int(n)
        self.params = kernels.rule_params(rules)
        self._all_rows = np.arange(self.n, dtype=np.intp)
        self._ys, self._xs, self._angles = np.empty((3, self.n, len(kernels.ANGLES)))

    def _inputs(
        self, obs: NDArray[np.float32], rows: NDArray[np.intp] | None
    ) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.intp], NDArray[np.float32]]:
        """For a kernel: obs (C-contiguous float32), its rows' angles (numpy's arctan2), its rows, the actions to fill."""
        o = np.ascontiguousarray(obs, np.float32)
        if o.ndim != 2 or o.shape[1] != OBS_DIM or len(o) > self.n:
            raise ValueError(f"obs must have shape (N <= {self.n}, {OBS_DIM}), got {o.shape}")
        k = len(o)
        ys, xs, angles = self._ys[:k], self._xs[:k], self._angles[:k]
        kernels.angle_inputs(self.params, o, ys, xs)
        np.arctan2(ys, xs, out=angles)
        index = self._all_rows[:k] if rows is None else np.ascontiguousarray(rows, np.intp)
        # A kernel does not check bounds. Viewed unsigned, a negative row is huge: one reduction checks both ends.
        if len(index) != k or (k and index.view(np.uintp).max() >= self.n):
            raise ValueError(f"rows must name {k} of the bot's {self.n} tanks, got {index.tolist()}")
        return o, angles, index, np.empty((k, ACT_DIM), np.float32)

    def spinner(
        self, obs: NDArray[np.float32], rows: NDArray[np.intp] | None, speed: float, power: float
    ) -> NDArray[np.float32]:
        """:class:`~arena.games.tank.scripted.Spinner`'s actions for ``obs`` (the tanks ``rows``)."""
        o, angles, _, out = self._inputs(obs, rows)
        kernels.spinner_act(self.params, o, angles, speed, power, out)
        return out

    def walker(
        self,
        obs: NDArray[np.float32],
        rows: NDArray[np.intp] | None,
        direction: NDArray[np.float64],
        cooldown: NDArray[np.float64],
        margin: float,
        near: float,
        power: float,
    ) -> NDArray[np.float32]:
        """:class:`~arena.games.tank.scripted.Walker`'s actions; its ``direction`` and ``cooldown`` (n,) updated."""
        o, angles, index, out = self._inputs(obs, rows)
        kernels.walker_act(self.params, o, angles, index, direction, cooldown, margin, near, power, out)
        return out

    def tracker(
        self,
        obs: NDArray[np.float32],
        rows: NDArray[np.intp] | None,
        direction: NDArray[np.float64],
        rng: np.random.Generator,
        flip: float,
        preferred: float,
    ) -> NDArray[np.float32]:
        """:class:`~arena.games.tank.scripted.Tracker`'s actions; its ``direction`` (n,) updated.

        The aim needs the lead first, so it takes three steps: :func:`~arena.games.tank.scripted_kernels.tracker_lead`,
        numpy's ``arctan2`` of the aim, :func:`~arena.games.tank.scripted_kernels.tracker_fire`.
        """
        o, angles, index, out = self._inputs(obs, rows)
        k = len(o)
        draws = rng.random(k)  # the numpy code's one draw a row, in the same order
        lead, aim = np.empty((k, len(kernels.LEAD))), np.empty((2, k))
        kernels.tracker_lead(self.params, o, angles, index, direction, draws, flip, preferred, lead, aim[0], aim[1])
        np.arctan2(aim[0], aim[1], out=aim[0])
        kernels.tracker_fire(self.params, o, angles, aim[0], lead, out)
        return out
