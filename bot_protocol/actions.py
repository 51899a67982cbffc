"""Action spaces: continuous dims and discrete branches, and the one float block the server carries.

A run acts in an :class:`ActionSpace`: ``continuous`` Gaussian dims (a tank's throttle, turn and
gun) and zero or more discrete ``branches`` (multi-discrete, each an independent choice among
``branches[b]`` actions). A bot sends its continuous actions in ``act``, the discrete ones in
``dact`` and optionally which discrete actions were legal in ``mask``; once checked, the server
folds the three into one float32 block (:meth:`ActionSpace.pack`), so its queue, assembler and
segments stay ignorant of what an action means and a continuous-only run is unchanged.

The value checks here (:meth:`ActionSpace.check_actions`, :meth:`ActionSpace.check_mask`,
:meth:`ActionSpace.check_legal`) raise the wire's error codes, so a bot that checks before
sending learns exactly what the server would answer.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ErrorCode, ProtocolError

__all__ = ["MAX_BRANCHES", "MAX_BRANCH_SIZE", "MAX_CONTINUOUS", "MAX_LOGITS", "ActionSpace", "space_problem"]

MAX_CONTINUOUS = 256
"""Most continuous dims (``hello.act_dim``)."""
MAX_BRANCHES = 64
"""Most discrete branches (also the longest msgpack array a frame may hold)."""
MAX_BRANCH_SIZE = 1024
"""Most actions in one branch: every index is exact as a float32 in the packed block."""
MAX_LOGITS = 4096
"""Most discrete actions over all branches: the width of a ``mask`` row."""


def space_problem(continuous: object, branches: Sequence[object]) -> str | None:
    """Why ``(continuous, branches)`` is no action space, in words, or ``None`` when it is one.

    Shared by :class:`ActionSpace` (a ``ValueError``) and the wire readers (``bad_field``), so a
    space is refused with the same sentence wherever it comes from.
    """
    if not _is_uint(continuous) or not 0 <= continuous <= MAX_CONTINUOUS:  # type: ignore[operator]
        return f"act_dim (continuous dims) must be an integer in [0, {MAX_CONTINUOUS}]"
    if len(branches) > MAX_BRANCHES:
        return f"'branches' lists {len(branches)} branches, at most {MAX_BRANCHES}"
    if not all(_is_uint(b) and 1 <= b <= MAX_BRANCH_SIZE for b in branches):  # type: ignore[operator]
        return f"'branches' must list integers in [1, {MAX_BRANCH_SIZE}]"
    if sum(branches) > MAX_LOGITS:  # type: ignore[arg-type]
        return f"'branches' hold {sum(branches)} discrete actions, at most {MAX_LOGITS}"  # type: ignore[arg-type]
    if continuous == 0 and not branches:
        return "act_dim must be >= 1 unless 'branches' lists discrete actions"
    return None


def _is_uint(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


@dataclass(frozen=True)
class ActionSpace:
    """``continuous`` Gaussian dims plus discrete ``branches`` (their sizes); at least one of them.

    Kinds: continuous only (``branches`` empty: what every run was before branches), discrete
    (one branch), multi-discrete (several) and mixed (both). Raises ``ValueError`` when invalid.
    """

    continuous: int = 0
    branches: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        problem = space_problem(self.continuous, tuple(self.branches))
        if problem is not None:
            raise ValueError(problem)
        object.__setattr__(self, "continuous", int(self.continuous))
        object.__setattr__(self, "branches", tuple(int(b) for b in self.branches))

    @property
    def n_branches(self) -> int:
        return len(self.branches)

    @property
    def n_logits(self) -> int:
        """Discrete actions over all branches: the last layer's logits, a ``mask`` row's width."""
        return sum(self.branches)

    @property
    def is_discrete(self) -> bool:
        """Whether any discrete branch exists (then ``tr`` carries ``dact``)."""
        return bool(self.branches)

    @property
    def packed_width(self) -> int:
        """Columns of the packed block: continuous values, one index per branch, one mask flag per logit."""
        return self.continuous + self.n_branches + self.n_logits

    @property
    def offsets(self) -> tuple[int, ...]:
        """Where each branch's logits (and mask entries) start within a row of ``n_logits``."""
        return _offsets(self.branches)

    def describe(self) -> str:
        """The space as ``hello`` declares it, for messages: ``act_dim=2, branches=[3, 4]``."""
        return f"act_dim={self.continuous}, branches={list(self.branches)}"

    def pack(self, act: ArrayLike | None, dact: ArrayLike | None, mask: ArrayLike | None = None) -> NDArray[np.float32]:
        """One float32 row per step: ``[act | dact as floats | mask as 0.0/1.0 (ones when absent)]``.

        ``act`` may be ``None`` when ``continuous`` is 0, ``dact`` when there are no branches.
        Without branches the block is ``act`` itself, so a continuous run carries what it always did.
        """
        if not self.branches:
            return _block(act, self.continuous, np.float32, "act")
        c, nb = self.continuous, self.n_branches
        index = _block(dact, nb, np.int64, "dact")
        n = len(index)
        out = np.empty((n, self.packed_width), np.float32)
        out[:, :c] = _block(act, c, np.float32, "act", n)
        out[:, c : c + nb] = index
        out[:, c + nb :] = 1.0 if mask is None else _block(mask, self.n_logits, np.float32, "mask", n)
        return out

    def unpack(self, block: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.bool_]]:
        """The packed block split back: continuous actions, discrete indices, legal-action mask."""
        block = np.asarray(block, np.float32)
        if block.ndim != 2 or block.shape[1] != self.packed_width:
            raise ValueError(f"a packed block has {self.packed_width} columns, got shape {list(block.shape)}")
        c, nb = self.continuous, self.n_branches
        return block[:, :c], block[:, c : c + nb].astype(np.int64), block[:, c + nb :] != 0

    def check_actions(self, dact: NDArray[Any]) -> None:
        """Refuse a discrete action beyond its branch, or below 0 (``bad_action``); ``dact`` is (n, n_branches)."""
        over = dact >= _sizes(self.branches)
        if dact.dtype.kind == "i":  # a bot's own integers (the wire's are unsigned)
            over |= dact < 0
        if over.any():
            row, branch = np.argwhere(over)[0]
            raise ProtocolError(
                ErrorCode.BAD_ACTION,
                f"field 'dact' row {row} picks action {int(dact[row, branch])} in branch {branch} of size "
                f"{self.branches[branch]}",
            )

    def check_mask(self, mask: NDArray[np.uint8]) -> None:
        """Refuse a ``mask`` (n, n_logits) with a value other than 0/1 or a branch left no legal action (``bad_mask``)."""
        if mask.size and int(mask.max()) > 1:
            raise ProtocolError(ErrorCode.BAD_MASK, "field 'mask' holds a value other than 0 or 1")
        if not len(mask):
            return
        legal = np.logical_or.reduceat(mask, self.offsets, axis=1)  # per row and branch: any legal action
        if not legal.all():
            row, branch = np.argwhere(~legal)[0]
            raise ProtocolError(ErrorCode.BAD_MASK, f"field 'mask' row {row} forbids every action of branch {branch}")

    def check_legal(self, dact: NDArray[Any], mask: NDArray[np.uint8]) -> None:
        """Refuse a taken action that its own row's mask forbids (``illegal_action``); ``dact`` is in range."""
        if not len(mask):
            return
        taken = np.take_along_axis(mask, dact.astype(np.int64) + _starts(self.branches), axis=1)
        if not taken.all():
            row, branch = np.argwhere(taken == 0)[0]
            raise ProtocolError(
                ErrorCode.ILLEGAL_ACTION,
                f"field 'dact' row {row} picks action {int(dact[row, branch])} of branch {branch}, which its mask forbids",
            )

    def check(self, dact: NDArray[Any], mask: NDArray[np.uint8] | None) -> None:
        """Every value check, in the wire's order: ``bad_action``, then ``bad_mask``, then ``illegal_action``."""
        self.check_actions(dact)
        if mask is not None:
            self.check_mask(mask)
            self.check_legal(dact, mask)

    def mask_of(self, mask: ArrayLike, n: int) -> NDArray[np.uint8]:
        """A bot's ``mask`` (n, n_logits) of bools or 0/1 as the wire's uint8, checked as the server checks it.

        Raises:
            ValueError: the wrong shape (a bug in the bot).
            ProtocolError: ``bad_mask``, what the server would answer.
        """
        given = np.asarray(mask)
        if given.shape != (n, self.n_logits):
            raise ValueError(f"mask must have shape ({n}, {self.n_logits}), got {list(given.shape)}")
        with np.errstate(invalid="ignore"):  # NaN or a negative value: refused just below, not warned about
            flags = given.astype(np.uint8)
        if given.dtype != np.bool_ and not np.array_equal(flags, given):
            raise ProtocolError(ErrorCode.BAD_MASK, "a mask holds a value other than 0 or 1")
        self.check_mask(flags)
        return flags

    def split(self, logits: NDArray[np.float32]) -> list[NDArray[np.float32]]:
        """(n, n_logits) columns, or a mask's, cut into one (n, branches[b]) view per branch."""
        return np.split(logits, self.offsets[1:], axis=1) if self.branches else []


@functools.lru_cache(maxsize=64)
def _offsets(branches: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(itertools.accumulate(branches[:-1], initial=0)) if branches else ()


@functools.lru_cache(maxsize=64)
def _sizes(branches: tuple[int, ...]) -> NDArray[np.uint32]:
    sizes = np.array(branches, np.uint32)
    sizes.flags.writeable = False
    return sizes


@functools.lru_cache(maxsize=64)
def _starts(branches: tuple[int, ...]) -> NDArray[np.int64]:
    starts = np.array(_offsets(branches), np.int64)
    starts.flags.writeable = False
    return starts


def _block(value: ArrayLike | None, width: int, dtype: type[np.generic], name: str, rows: int | None = None) -> NDArray[Any]:
    """``value`` as ``rows`` rows of ``width`` (``None``: zeros, for a width of 0), or a ``ValueError`` naming ``name``."""
    if value is None:
        value = np.zeros((rows or 0, width), dtype)
    array = np.asarray(value, dtype)
    if array.ndim == 1 and width == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[1] != width or (rows is not None and len(array) != rows):
        expected = f"({'n' if rows is None else rows}, {width})"
        raise ValueError(f"{name} must have shape {expected}, got {list(array.shape)}")
    return array
