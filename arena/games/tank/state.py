"""The state of ``M`` tank battles as one record: every array the numpy step and the compiled kernels update.

Why one record: the numpy step (``engine.py``), its phase modules (``bullets.py``, ``observation.py``) and
the compiled engine (``compiled.py``) all work on the same 27 arrays. Handed over as one :class:`TankState`
they need neither the battle object nor each other, and a kernel call passes one tuple instead of the
arrays one by one. The arrays are allocated once per battle and every step writes into them, so whoever
holds the record (or one of its arrays) always sees the current state.

:class:`~arena.games.tank.engine.TankBattle` shows each array as an attribute of its own
(``battle.x`` is ``battle.state.x``) through :class:`StateArray`.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

__all__ = ["StateArray", "TankState"]

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]
I64 = NDArray[np.int64]


class TankState(NamedTuple):
    """``M`` matches of ``T`` tanks with ``B`` bullet slots each (float64 unless noted).

    The fields come in four groups, in this order (the compiled kernels read the first ten alone):
    tanks ``(M, T)``, damage ledgers ``(M, T, T)`` [attacker, victim], matches ``(M,)`` and bullet slots ``(M, B)``.
    """

    # tanks (M, T)
    x: F64
    y: F64
    heading: F64
    velocity: F64
    energy: F64
    gun_heading: F64
    radar_heading: F64
    gun_heat: F64
    alive: B8
    scores: F64
    """Robocode round scores so far."""
    # damage ledgers (M, T, T)
    bullet_damage_dealt: F64
    """(M, T, T) this round's bullet damage, [attacker, victim]."""
    ram_damage_dealt: F64
    """(M, T, T) this round's ram damage, [attacker, victim]."""
    # matches (M,)
    tick: I64
    """(M,) ticks played this round."""
    round: I64
    """(M,) rounds started (1 after the first reset)."""
    inactive_ticks: I64
    """(M,) ticks since the last bullet hit or ram."""
    round_over: B8
    truncated: B8
    winner: I64
    """(M,) the winner's tank index, -1 if none (yet)."""
    # bullet slots (M, B)
    bullet_active: B8
    """(M, B) the slot holds a bullet in flight."""
    bullet_x: F64
    bullet_y: F64
    bullet_heading: F64
    bullet_power: F64
    bullet_speed: F64
    bullet_owner: I64
    """(M, B) the tank index of the shooter."""
    bullet_dx: F64
    """(M, B) cos of ``bullet_heading``, computed once when the bullet is fired."""
    bullet_dy: F64
    """(M, B) sin of ``bullet_heading``."""

    @classmethod
    def zeros(cls, n_matches: int, n_tanks: int, n_bullets: int) -> TankState:
        """A zeroed state (``winner`` -1): no round started yet, for the battle's first reset to start."""
        M, T, B = n_matches, n_tanks, n_bullets
        f64, i64 = np.float64, np.int64
        shapes: list[tuple[tuple[int, ...], Any]] = [((M, T), f64)] * 8 + [((M, T), bool), ((M, T), f64)]
        shapes += [((M, T, T), f64), ((M, T, T), f64)]
        shapes += [((M,), i64)] * 3 + [((M,), bool)] * 2 + [((M,), i64)]
        shapes += [((M, B), bool)] + [((M, B), f64)] * 5 + [((M, B), i64)] + [((M, B), f64)] * 2
        state = cls(*_staggered_zeros(shapes))
        state.winner[:] = -1
        return state


def _staggered_zeros(specs: list[tuple[tuple[int, ...], Any]]) -> list[NDArray[Any]]:
    """Zeroed C-contiguous arrays of these (shape, dtype)s, each starting a few cache lines further into its
    4 KiB page than the one before.

    Why: the compiled step reads and writes a match's row of ~25 arrays together. Allocated one by one, the
    (M, 2) arrays of 128-256 matches all began at the same offset in their pages, so a match's rows shared one
    set of the L1 cache (8 ways here) and evicted each other; staggered, they spread over the sets.
    """
    line, page = 64, 4096
    starts, end = [], 0
    for k, (shape, dtype) in enumerate(specs):
        start = -(-end // page) * page + (3 * k % (page // line)) * line
        starts.append(start)
        end = start + int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = np.zeros(end + page, np.uint8)
    base = -buffer.ctypes.data % page
    return [
        buffer[base + start : base + start + int(np.prod(shape)) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
        for start, (shape, dtype) in zip(starts, specs, strict=True)
    ]


_Scalar = TypeVar("_Scalar", bound=np.generic)


class StateArray(Generic[_Scalar]):
    """An attribute of an object with a ``state`` (:class:`TankState`) that is one array of that record.

    Read it, and write into it (``battle.x[...] = values``, ``battle.x += d``); rebinding it to another
    array is refused, since the record, which the kernels are handed, would no longer hold what the
    attribute shows. A leading underscore in the attribute's name is not part of the field's
    (``_bullet_dx`` shows ``bullet_dx``).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        self._index = TankState._fields.index(name.removeprefix("_"))

    @overload
    def __get__(self, holder: None, owner: type) -> StateArray[_Scalar]: ...
    @overload
    def __get__(self, holder: object, owner: type | None = None) -> NDArray[_Scalar]: ...
    def __get__(self, holder: Any, owner: type | None = None) -> Any:
        return self if holder is None else holder.state[self._index]

    def __set__(self, holder: Any, value: object) -> None:
        if value is not holder.state[self._index]:  # ``battle.x += d`` works in place and hands back the same array
            raise AttributeError(f"{self._name} is an array of the battle's state: write into it ({self._name}[...] = ...)")
