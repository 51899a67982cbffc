"""The statistics every PPO step reports, named once: the loss's terms, a step's vector, an update's sums.

Why one module: the loss kernel writes a step's statistics into a vector, the guard kernel adds
them to the update's sums, and the torch steps add theirs as tensors. Every one of those vectors is
built here from :data:`TERMS`, so they agree by construction; everything outside the two numba
kernels reads them by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

__all__ = ["STEP_STATS", "TERMS", "TOTALS", "Totals"]

TERMS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "mean_excess")
"""The loss's terms a step reports (reported per update as ``train/<term>``, averaged over the steps taken)."""

STEP_STATS = (*TERMS, "loss")
"""One step's statistics as a vector (the loss kernel's output): the terms, then the total loss."""

TOTALS = (*TERMS, "grad_norm", "applied", "skipped")
"""An update's sums as a vector: the terms and the gradient norm of the steps taken, then the counts
of steps taken (``applied``) and skipped by the guards."""


class Totals:
    """An update's sums (:data:`TOTALS`), kept on the learner's device and read once per update.

    Why on the device: a step adds to them without reading anything back, so the CUDA graph's replay
    can add them too. float64: summed in the order the minibatches ran, they are exactly the Python-float
    sums of the per-step statistics.
    """

    def __init__(self, device: torch.device) -> None:
        self.vector = torch.zeros(len(TOTALS), dtype=torch.float64, device=device)

    def zero_(self) -> None:
        self.vector.zero_()

    @torch.no_grad()
    def add_step(self, ok: Tensor, terms: Mapping[str, Tensor], grad_norm: Tensor) -> None:
        """Add a step's terms and gradient norm where ``ok`` (a 0-dim bool tensor), and count it as applied or skipped."""
        taken = torch.where(ok, torch.stack([*(terms[key] for key in TERMS), grad_norm]), 0.0)
        self.vector.add_(torch.cat([taken, torch.stack([ok, ~ok]).float()]))

    def read(self) -> dict[str, float]:
        """Every sum by its name (the update's one read of the statistics)."""
        return dict(zip(TOTALS, self.vector.tolist(), strict=True))
