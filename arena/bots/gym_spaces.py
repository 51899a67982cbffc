"""gymnasium's spaces as the protocol sees them: flat float32 observations, an :class:`ActionSpace` and masks.

Why a module of its own: every gymnasium game speaks in its own spaces, and a bot must turn each
into what the wire carries without the user wrapping anything. Observations of any space are
flattened by gymnasium's own ``flatten`` (a ``Discrete`` becomes one-hot, a ``Dict`` or ``Tuple`` is
concatenated in its key order). Actions map leaf by leaf, in the same order: every ``Box`` leaf
adds continuous dims (the policy's [-1, 1] mapped onto its bounds), every ``Discrete`` one branch,
a ``MultiDiscrete`` one branch per entry and a ``MultiBinary`` one branch of two per bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bot_protocol.actions import ActionSpace

__all__ = ["ActionMap", "ObservationMap", "action_masks"]


def _gym() -> Any:
    from .gym_bot import require_gymnasium

    return require_gymnasium()


# ── observations ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ObservationMap:
    """Any observation space → rows of ``obs_dim`` float32 (one row per sub-environment)."""

    space: Any
    obs_dim: int
    flat_box: bool
    """A ``Box``: rows are a reshape, with no per-row call."""

    @classmethod
    def from_space(cls, space: Any) -> ObservationMap:
        """Check that gymnasium can flatten ``space`` and build its map.

        Raises:
            ValueError: a space gymnasium cannot flatten (``Text``, ``Graph``, ``Sequence``, …).
        """
        gym = _gym()
        try:
            dim = int(gym.spaces.flatdim(space))
        except (NotImplementedError, ValueError) as exc:
            raise ValueError(f"cannot flatten the observation space {space} into a vector: {exc}") from None
        return cls(space, dim, isinstance(space, gym.spaces.Box))

    @property
    def image(self) -> tuple[int, int, int] | None:
        """(height, width, channels) when the space is a ``Box`` image (2 dims: one channel), as a conv torso reads it."""
        shape = tuple(int(v) for v in getattr(self.space, "shape", None) or ())
        if not self.flat_box or len(shape) not in (2, 3):
            return None
        return (shape[0], shape[1], shape[2] if len(shape) == 3 else 1)

    def rows(self, observations: Any, n: int, batched: bool) -> NDArray[np.float32]:
        """``n`` observations (one env's, or a vector env's batch when ``batched``) as an (n, obs_dim) array."""
        if self.flat_box:
            return np.asarray(observations, dtype=np.float32).reshape(n, self.obs_dim)
        gym = _gym()
        if not batched:
            return np.asarray(gym.spaces.flatten(self.space, observations), dtype=np.float32).reshape(1, self.obs_dim)
        items = gym.vector.utils.iterate(gym.vector.utils.batch_space(self.space, n), observations)
        return np.stack([np.asarray(gym.spaces.flatten(self.space, item), dtype=np.float32) for item in items])


# ── actions ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Leaf:
    """One leaf of an action space: where its values sit in the policy's output and how to build its action."""

    continuous: slice
    branches: slice
    build: Callable[[NDArray[np.float32], NDArray[np.int64]], Any]
    """(continuous values of this row, discrete indices of this row) → this leaf's action."""


@dataclass(frozen=True)
class ActionMap:
    """An action space → the :class:`ActionSpace` the policy acts in, and back to the env's actions."""

    space: Any
    actions: ActionSpace
    tree: Any
    """The leaves in the shape of the space: a :class:`_Leaf`, or a dict / tuple of trees."""

    @classmethod
    def from_space(cls, space: Any) -> ActionMap:
        """Walk ``space``'s leaves in gymnasium's order and build the map.

        Raises:
            ValueError: a leaf that is neither ``Box``, ``Discrete``, ``MultiDiscrete`` nor ``MultiBinary``;
                a ``Box`` with an infinite bound (the policy's [-1, 1] needs a box to map onto).
        """
        counts = [0, 0]  # continuous dims and branches so far
        branches: list[int] = []
        tree = _walk(_gym(), space, counts, branches)
        return cls(space, ActionSpace(continuous=counts[0], branches=tuple(branches)), tree)

    def to_env(self, continuous: NDArray[np.float32], discrete: NDArray[np.int64]) -> list[Any]:
        """One env action per row of the policy's (n, continuous) and (n, n_branches) outputs."""
        n = len(discrete) if self.actions.branches else len(continuous)
        return [_build(self.tree, continuous[i], discrete[i]) for i in range(n)]

    def batch(self, actions: Sequence[Any]) -> Any:
        """A vector env's batched action from one action per sub-environment."""
        gym = _gym()
        out = gym.vector.utils.create_empty_array(self.space, len(actions))
        return gym.vector.utils.concatenate(self.space, actions, out)


def _walk(gym: Any, space: Any, counts: list[int], branches: list[int]) -> Any:
    spaces = gym.spaces
    if isinstance(space, spaces.Dict):
        return {key: _walk(gym, sub, counts, branches) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_walk(gym, sub, counts, branches) for sub in space.spaces)
    c0, b0 = counts
    if isinstance(space, spaces.Box):
        leaf = _box(space, c0)
        counts[0] += leaf.continuous.stop - c0
        return leaf
    if isinstance(space, spaces.Discrete):
        start, n = int(space.start), int(space.n)
        branches.append(n)
        counts[1] += 1
        return _Leaf(slice(c0, c0), slice(b0, b0 + 1), lambda c, d: space.dtype.type(start + int(d[b0])))
    if isinstance(space, spaces.MultiDiscrete):
        nvec, offsets = np.asarray(space.nvec), np.asarray(space.start)
        branches.extend(int(v) for v in nvec.ravel())
        counts[1] += nvec.size
        end = b0 + nvec.size
        return _Leaf(slice(c0, c0), slice(b0, end), lambda c, d: (offsets + d[b0:end].reshape(nvec.shape)).astype(space.dtype))
    if isinstance(space, spaces.MultiBinary):
        size = math.prod(space.shape)
        branches.extend([2] * size)
        counts[1] += size
        end = b0 + size
        return _Leaf(slice(c0, c0), slice(b0, end), lambda c, d: d[b0:end].reshape(space.shape).astype(space.dtype))
    raise ValueError(
        f"cannot act in {space}: an action space is made of Box, Discrete, MultiDiscrete and MultiBinary "
        "spaces, alone or in a Dict or Tuple"
    )


def _box(space: Any, c0: int) -> _Leaf:
    low = np.asarray(space.low, dtype=np.float64).reshape(-1)
    high = np.asarray(space.high, dtype=np.float64).reshape(-1)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError(
            f"unbounded action space {space}: the policy's [-1, 1] is mapped onto [low, high], so every bound "
            "must be finite (wrap the env with gymnasium.wrappers.ClipAction over a bounded Box)"
        )
    if not (low <= high).all():
        raise ValueError(f"action space {space} has low > high")
    end = c0 + low.size

    def build(c: NDArray[np.float32], d: NDArray[np.int64]) -> Any:
        a = np.clip(np.asarray(c[c0:end], dtype=np.float64), -1.0, 1.0)
        scaled = np.clip(low + (a + 1.0) * 0.5 * (high - low), low, high)
        return scaled.astype(space.dtype).reshape(space.shape)

    return _Leaf(slice(c0, end), slice(0, 0), build)


def _build(tree: Any, continuous: NDArray[np.float32], discrete: NDArray[np.int64]) -> Any:
    if isinstance(tree, dict):
        return {key: _build(sub, continuous, discrete) for key, sub in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_build(sub, continuous, discrete) for sub in tree)
    return tree.build(continuous, discrete)


# ── masks ────────────────────────────────────────────────────────────────────


def action_masks(env: Any, info: Any, n: int, width: int, batched: bool) -> NDArray[np.bool_] | None:
    """The legal actions of each of ``n`` rows, (n, width) booleans, or None when the game says nothing.

    Read, in this order, from ``info["action_mask"]`` (a vector env batches it) and from an
    ``action_masks()`` method of the env (sb3-contrib's ``MaskablePPO`` convention; a vector env
    asks each sub-environment).

    Raises:
        ValueError: a mask of the wrong size.
    """
    mask: Any = None
    if isinstance(info, dict) and "action_mask" in info:
        mask = info["action_mask"]
    elif batched and hasattr(env, "call") and _has_masks(env):
        mask = np.stack([np.asarray(m).reshape(-1) for m in env.call("action_masks")])
    elif not batched and callable(getattr(env.unwrapped, "action_masks", None)):
        mask = env.unwrapped.action_masks()
    if mask is None:
        return None
    rows = np.asarray(mask).astype(bool, copy=False).reshape(n, -1)
    if rows.shape[1] != width:
        raise ValueError(f"the game's action mask has {rows.shape[1]} entries a row, its action space {width}")
    return rows


def _has_masks(env: Any) -> bool:
    try:
        return all(callable(method) for method in env.get_attr("action_masks"))
    except AttributeError:
        return False
