"""Masked categorical distributions in numpy: one branch of a ``mixed_mlp`` actor, a batch of rows at a time.

A mask takes an action out of the distribution entirely: its logit becomes ``-inf`` before the
log-softmax, so it has probability exactly 0, the legal actions are normalised among
themselves, and no draw can pick it. The trainer's torch actor computes the same values
(tests hold the two to 1e-6), so the ``logp`` a bot sends is the one the learner's ratio
starts from.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["entropy", "log_softmax", "masked", "mode", "sample"]

_NEG_INF = np.float32(-np.inf)


def masked(logits: NDArray[np.float32], mask: NDArray[Any] | None) -> NDArray[np.float32]:
    """``logits`` (n, k) with ``-inf`` where ``mask`` is False or 0 (``None``: every action legal)."""
    return logits if mask is None else np.where(mask, logits, _NEG_INF)


def log_softmax(logits: NDArray[np.float32]) -> NDArray[np.float32]:
    """Row-wise log-probabilities of (masked) logits; ``-inf`` stays ``-inf``. Every row needs one finite logit."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):  # exp of a very negative logit is a legal 0
        total = np.exp(shifted).sum(axis=1, keepdims=True)
    out: NDArray[np.float32] = shifted - np.log(total)
    return out


def entropy(logp: NDArray[np.float32]) -> NDArray[np.float32]:
    """Row-wise ``-sum p log p`` over the actions with ``p > 0`` (a forbidden action adds nothing)."""
    terms = np.exp(logp) * np.where(np.isfinite(logp), logp, np.float32(0.0))  # 0 * -inf would be NaN
    out: NDArray[np.float32] = -terms.sum(axis=1, dtype=np.float32)
    return out


def mode(logits: NDArray[np.float32]) -> NDArray[np.int64]:
    """The most likely action per row: the first argmax of the masked logits (a forbidden one is ``-inf``)."""
    return np.argmax(logits, axis=1)


def sample(logits: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
    """One draw per row by Gumbel-max over the masked logits.

    numpy's Gumbel draws are always finite, so a forbidden action (``-inf``) is never the argmax
    while its row has a legal action; an inverse CDF could land on a zero-width slot by rounding.
    """
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
