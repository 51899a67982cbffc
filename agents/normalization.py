"""Observation normalization: running per-feature statistics, and the scaling both PPO networks see.

Why: a game's observation features come in their own units (a position in metres beside an angle
in radians beside a 0/1 flag), and a tanh MLP's first layer sees the large ones saturate it and the
small ones vanish. Scaling each feature by the observations seen so far, as Stable-Baselines3's
``VecNormalize`` does, gives every feature the same footing without a game-specific table.

The statistics are float64; what the networks see is computed in float32 from the float32
``mean`` and ``std`` the learner also exports, in the same operations the bots' numpy ``Policy``
runs, so the learner and its bots normalize an observation to the same float.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

__all__ = ["OBS_NORM_EPS", "ObsNormalizer", "RunningMeanStd"]

OBS_NORM_EPS = 1e-8
"""Added to the variance before its square root: a feature that never changed is divided by 1e-4, not 0."""


class RunningMeanStd:
    """Per-feature mean and (population) variance of every row seen so far, with their count, in float64.

    Each chunk's own moments merge with the totals by the parallel algorithm (Chan, Golub and LeVeque),
    as ``VecNormalize``'s ``RunningMeanStd`` does, so the result is numpy's ``mean`` and ``var`` over
    all rows at once, to float64 rounding, however they were chunked. It starts at mean 0, variance 1
    and count 0: the first chunk's moments replace that prior outright (``VecNormalize`` starts its
    count at 1e-4, a prior weighing a ten-thousandth of a row; 0 keeps the stats the data's alone).
    """

    def __init__(self, dim: int) -> None:
        self.mean = np.zeros(dim, np.float64)
        self.var = np.ones(dim, np.float64)
        self.count = 0.0

    def update(self, rows: NDArray[np.floating[Any]]) -> bool:
        """Merge ``rows`` (n, dim); False, and nothing changed, when there are none or any is NaN or Inf.

        A non-finite row would make the statistics non-finite for the rest of the run, and every
        observation normalized with them after that.
        """
        batch = np.asarray(rows, np.float64).reshape(-1, len(self.mean))
        if len(batch) == 0 or not np.isfinite(batch).all():
            return False
        self.merge(batch.mean(axis=0), batch.var(axis=0), float(len(batch)))
        return True

    def merge(self, mean: NDArray[np.float64], var: NDArray[np.float64], count: float) -> None:
        """Add a chunk of ``count`` rows given by its own ``mean`` and population ``var`` (none: no change)."""
        if not count > 0:
            return
        total = self.count + count
        delta = mean - self.mean
        m2 = self.var * self.count + var * count + delta**2 * (self.count * count / total)
        self.mean = self.mean + delta * (count / total)
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, Any]:
        """Tensors and a float (a checkpoint's safe loader takes them), copied: a resume continues bit for bit."""
        return {"mean": torch.from_numpy(self.mean.copy()), "var": torch.from_numpy(self.var.copy()), "count": self.count}

    @classmethod
    def from_state(cls, state: Any, dim: int) -> RunningMeanStd:
        """The statistics a :meth:`state_dict` holds, checked against ``dim`` features.

        Raises:
            ValueError: not such a state, or of another width.
        """
        stats = cls(dim)
        if not isinstance(state, dict) or not all(isinstance(state.get(k), Tensor) for k in ("mean", "var")):
            raise ValueError("checkpoint obs_norm holds no running mean and variance")
        for key in ("mean", "var"):
            if tuple(state[key].shape) != (dim,):
                raise ValueError(f"checkpoint obs_norm {key} is {tuple(state[key].shape)}, this run needs ({dim},)")
        stats.mean = state["mean"].detach().cpu().to(torch.float64).numpy().copy()
        stats.var = state["var"].detach().cpu().to(torch.float64).numpy().copy()
        stats.count = float(state.get("count", 0.0))
        return stats


class ObsNormalizer:
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` with running statistics, as the learner and its bots apply it.

    ``mean`` and ``std`` are rounded to float32 once per statistics update; :meth:`__call__` and the
    exported tensors use those very values.
    """

    def __init__(self, dim: int, clip: float, device: torch.device) -> None:
        self.clip = float(clip)
        self.device = device
        self.stats = RunningMeanStd(dim)
        self._refresh()

    def _refresh(self) -> None:
        self.mean32 = self.stats.mean.astype(np.float32)
        self.std32 = np.sqrt(self.stats.var + OBS_NORM_EPS).astype(np.float32)
        self._mean_t = torch.from_numpy(self.mean32).to(self.device)
        self._std_t = torch.from_numpy(self.std32).to(self.device)

    def __call__(self, obs: Tensor) -> Tensor:
        """``obs`` (n, dim) normalized and clipped, a new tensor."""
        return obs.sub(self._mean_t).div_(self._std_t).clamp_(-self.clip, self.clip)

    def update(self, rows: NDArray[np.floating[Any]]) -> bool:
        """Merge raw observations into the statistics (see :meth:`RunningMeanStd.update`)."""
        changed = self.stats.update(rows)
        if changed:
            self._refresh()
        return changed

    def export(self) -> dict[str, NDArray[np.float32]]:
        """The bot-ready tensors ``obs_norm.mean`` and ``obs_norm.std`` (float32, (dim,))."""
        return {"obs_norm.mean": self.mean32.copy(), "obs_norm.std": self.std32.copy()}

    def state_dict(self) -> dict[str, Any]:
        return self.stats.state_dict()

    def load_stats(self, stats: RunningMeanStd) -> None:
        """Take ``stats`` (checked by :meth:`RunningMeanStd.from_state`) as the running statistics."""
        self.stats = stats
        self._refresh()
