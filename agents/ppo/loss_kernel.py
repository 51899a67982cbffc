"""PPO's clipped surrogate, value loss, entropy bonus and their gradients as one compiled loop.

Why: between the networks' forward and backward a PPO minibatch step computes, per row, a
Gaussian log-density, a clamped ratio, the clipped objective and its derivative, the value
error, and a few sums. In torch that is dozens of calls on small tensors, each costing far more
in dispatch than in arithmetic. Here it is one numba loop over the rows, no compiler needed on
the user's machine (numba ships wheels), compiled on first use and cached on disk.

The maths is the reference loss, :func:`agents.ppo.loss.minibatch_loss` (the entropy bonus, the
mean-bound penalty and the log-std clamp with the surrogate; with discrete branches, the masked
categoricals' log-probabilities and entropy after the Gaussian's), and autograd's rule at every kink:
the log-ratio clamp passes gradient only strictly inside its bounds (a NaN or infinite old
log-prob gets none, and makes the loss NaN, so the skip guard drops the step), the ratio clip
only inside [1 - eps, 1 + eps], ``minimum`` gives each side half where they tie, the log-std
clamp passes gradient inside its bounds inclusive, and the entropy bonus is gated off for a
log-std at its ceiling. Sums run in float64. ``tests/agents/ppo/test_fused.py`` checks values and
gradients against the reference in float64 at every kink.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .stats import STEP_STATS

__all__ = ["NO_BRANCHES", "LossWeights", "compile_kernel", "loss_and_head_gradients"]


class LossWeights(NamedTuple):
    """The loss's coefficients and bounds (a :class:`agents.ppo.PPOConfig`'s fields of the same names)."""

    clip_epsilon: float
    max_log_ratio: float
    value_coef: float
    entropy_coef: float
    mean_bound: float
    mean_bound_coef: float
    log_std_min: float
    log_std_max: float


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


_MASKED_LOGIT = -3.4028234663852886e38
"""What the reference puts in place of an illegal action's logit: float32's most negative finite number."""


def _kernel(
    mean: NDArray[Any],
    log_std_raw: NDArray[Any],
    value: NDArray[Any],
    actions: NDArray[Any],
    old_logp: NDArray[Any],
    adv: NDArray[Any],
    ret: NDArray[Any],
    weights: NDArray[np.float64],
    branches: NDArray[np.int64],
    grad_mean: NDArray[Any],
    grad_value: NDArray[Any],
    grad_log_std: NDArray[Any],
    stats: NDArray[np.float64],
) -> None:
    # ``mean`` is the actor's whole head: the Gaussian's ``dims`` means, then each branch's logits. ``actions``
    # is the packed block: the continuous action, one index per branch, then every branch's 0/1 mask.
    rows, dims, nb = mean.shape[0], log_std_raw.shape[0], branches.shape[0]
    branch_entropy = np.empty(nb)  # per branch of the row at hand
    probs = np.empty(mean.shape[1] - dims)  # the row's legal actions' probabilities and log-probabilities
    log_probs = np.empty(mean.shape[1] - dims)
    discrete_entropy_sum = 0.0
    eps, max_log_ratio, value_coef, entropy_coef = weights[0], weights[1], weights[2], weights[3]
    entropy_scale = entropy_coef / rows  # d(-entropy_coef * mean over rows of entropy) per row
    bound, bound_coef, lo, hi = weights[4], weights[5], weights[6], weights[7]
    log_std = np.empty(dims)
    inv_std = np.empty(dims)
    log_norm = _HALF_LOG_2PI * dims
    entropy = 0.0
    for j in range(dims):
        s = log_std_raw[j]
        if s < lo:
            s = lo
        elif s > hi:
            s = hi  # a NaN fails both tests and stays NaN, as clamp leaves it
        log_std[j] = s
        inv_std[j] = math.exp(-s)
        log_norm += s
        entropy += s + 0.5 + _HALF_LOG_2PI
    z_sq_weighted = np.zeros(dims)  # sum over rows of z^2 * d(loss)/d(logp)
    grad_logp_sum = 0.0
    objective_sum = error_sq_sum = kl_sum = excess_sum = 0.0
    clipped_rows = 0
    inv_rows = 1.0 / rows
    value_scale = value_coef * 2.0 * inv_rows
    bound_scale = bound_coef * 2.0 * inv_rows
    for i in range(rows):
        sq = 0.0
        for j in range(dims):
            z = (actions[i, j] - mean[i, j]) * inv_std[j]
            sq += z * z
        raw = -0.5 * sq - log_norm - old_logp[i]
        if nb > 0:
            head, mask_col = dims, dims + nb
            for b in range(nb):
                n = branches[b]
                top = -math.inf
                for k in range(n):
                    if actions[i, mask_col + k] > 0.5 and mean[i, head + k] > top:
                        top = mean[i, head + k]
                total = 0.0
                for k in range(n):
                    if actions[i, mask_col + k] > 0.5:
                        total += math.exp(mean[i, head + k] - top)
                lse = top + math.log(total)  # a NaN logit makes it NaN, and the loss with it
                h = 0.0
                for k in range(n):
                    if actions[i, mask_col + k] > 0.5:
                        log_p = mean[i, head + k] - lse
                        p = math.exp(log_p)
                        log_probs[head - dims + k], probs[head - dims + k] = log_p, p
                        h -= p * log_p
                branch_entropy[b] = h
                discrete_entropy_sum += h
                a = int(actions[i, dims + b])
                raw += (mean[i, head + a] if actions[i, mask_col + a] > 0.5 else _MASKED_LOGIT) - lse
                head += n
                mask_col += n
        log_ratio = raw
        if log_ratio < -max_log_ratio:
            log_ratio = -max_log_ratio
        elif log_ratio > max_log_ratio:
            log_ratio = max_log_ratio
        ratio = math.exp(log_ratio)
        clipped = ratio
        if clipped < 1.0 - eps:
            clipped = 1.0 - eps
        elif clipped > 1.0 + eps:
            clipped = 1.0 + eps
        a = adv[i]
        surr1, surr2 = ratio * a, clipped * a
        objective = math.nan if surr1 != surr1 or surr2 != surr2 else min(surr1, surr2)  # minimum propagates NaN
        objective_sum += objective
        error = value[i] - ret[i]
        error_sq_sum += error * error
        kl_sum += (ratio - 1.0) - log_ratio  # http://joschu.net/blog/kl-approx.html
        if abs(ratio - 1.0) > eps:
            clipped_rows += 1
        # d(objective)/d(ratio): minimum's side (half each on a tie), the clip's inside, the log-ratio clamp's inside.
        in_range = 1.0 if ratio == clipped else 0.0
        if surr1 < surr2:
            weight = 1.0
        elif surr1 > surr2:
            weight = in_range
        else:
            weight = 0.5 * (1.0 + in_range)
        d_ratio = weight * a * ratio if log_ratio == raw else 0.0
        grad_logp = -d_ratio * inv_rows  # policy_loss = -mean(objective)
        grad_logp_sum += grad_logp
        for j in range(dims):
            m = mean[i, j]
            z = (actions[i, j] - m) * inv_std[j]
            z_sq_weighted[j] += z * z * grad_logp
            g = z * grad_logp * inv_std[j]  # d logp / d mean = z / std
            if bound_coef > 0.0:
                excess = abs(m) - bound
                if excess > 0.0:
                    excess_sum += excess * excess
                    g += bound_scale * excess * (1.0 if m > 0.0 else -1.0)
            grad_mean[i, j] = g
        if nb > 0:
            # d logp / d logit_k = [k taken] - p_k; d entropy / d logit_k = -p_k (log p_k + entropy); illegal: 0.
            head, mask_col = 0, dims + nb
            for b in range(nb):
                a = int(actions[i, dims + b])
                for k in range(branches[b]):
                    if actions[i, mask_col + k] > 0.5:
                        p = probs[head + k]
                        g = grad_logp * ((1.0 if k == a else 0.0) - p)
                        grad_mean[i, dims + head + k] = g + entropy_scale * p * (log_probs[head + k] + branch_entropy[b])
                    else:
                        grad_mean[i, dims + head + k] = 0.0
                head += branches[b]
                mask_col += branches[b]
        grad_value[i] = error * value_scale
    for j in range(dims):
        raw_s = log_std_raw[j]
        g = z_sq_weighted[j] - grad_logp_sum  # d logp / d log_std = z^2 - 1
        if raw_s < hi:
            g -= entropy_coef  # the bonus, gated off at the ceiling
        grad_log_std[j] = g if lo <= raw_s <= hi else 0.0
    policy_loss = -objective_sum * inv_rows
    value_loss = error_sq_sum * inv_rows
    mean_excess = excess_sum * inv_rows
    if nb > 0:
        entropy += discrete_entropy_sum * inv_rows  # not gated: a categorical's entropy is bounded
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    if bound_coef > 0.0:
        loss += bound_coef * mean_excess
    # STEP_STATS' order: policy_loss, value_loss, entropy, approx_kl, clip_fraction, mean_excess, loss
    stats[0], stats[1], stats[2], stats[3] = policy_loss, value_loss, entropy, kl_sum * inv_rows
    stats[4], stats[5], stats[6] = clipped_rows * inv_rows, mean_excess, loss


_compiled: Callable[..., None] | None = None
NO_BRANCHES = np.zeros(0, dtype=np.int64)
"""A Gaussian actor's ``branches``: no discrete part."""


def loss_and_head_gradients(
    mean: NDArray[Any],
    log_std_raw: NDArray[Any],
    value: NDArray[Any],
    batch: tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]],
    weights: LossWeights,
    grads: tuple[NDArray[Any], NDArray[Any], NDArray[Any]],
    stats: NDArray[np.float64],
    branches: NDArray[np.int64] = NO_BRANCHES,
) -> None:
    """Fill ``grads`` = (d loss/d mean, d loss/d value, d loss/d raw log-std) and ``stats`` (a
    :data:`agents.ppo.stats.STEP_STATS` vector).

    ``batch`` is (actions, old log-probs, advantages, returns); arrays may be strided (columns
    of the packed rollout). With discrete ``branches`` (their sizes), ``mean`` is the mixed actor's
    whole head (the Gaussian's means, then every branch's logits), the actions are the packed block
    (continuous, one index per branch, the masks) and d loss/d mean covers the logits too. The first
    call compiles the kernel, or loads it from numba's cache.
    """
    global _compiled
    if _compiled is None:
        from numba import njit  # here, not at import: a process that never trains never loads numba

        _compiled = njit(cache=True, nogil=True)(_kernel)
    _compiled(mean, log_std_raw, value, *batch, np.array(weights, dtype=np.float64), branches, *grads, stats)


def compile_kernel() -> float:
    """Compile (or load from numba's cache) the float32 kernel on a tiny batch; the seconds it took.

    ``arena train`` calls it before its budget's clock starts, so the first update does not hold the
    trainer thread (and the GIL) for the compile.
    """
    started = time.perf_counter()
    rows, dims = 3, 2  # both above 1, or numba would see the transposed arrays as row-major too
    f32 = np.float32
    # The layouts of the step's own arrays (numba compiles one variant per layout): the mean and its
    # gradient column-major (the head is computed transposed), the batch columns of the packed rollout.
    mean, grad_mean = np.zeros((dims, rows), f32).T, np.zeros((dims, rows), f32).T
    packed = np.zeros((rows, dims + 3), f32)
    value, grad_value, log_std = np.zeros(rows, f32), np.zeros(rows, f32), np.zeros(dims, f32)
    batch = (packed[:, :dims], packed[:, dims], packed[:, dims + 1], packed[:, dims + 2])
    weights = LossWeights(0.2, 20.0, 0.5, 0.0, 1.0, 0.0, -3.0, 0.0)
    grads = (grad_mean, grad_value, log_std.copy())
    loss_and_head_gradients(mean, log_std, value, batch, weights, grads, np.empty(len(STEP_STATS)))
    return time.perf_counter() - started
