"""agents/ppo/loss_kernel.py: the compiled loss on a minibatch whose every term is known by hand.

(Against the reference loss at every kink, in float64: ``test_fused.py``.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.ppo.loss_kernel import LossWeights, loss_and_head_gradients
from agents.ppo.stats import STEP_STATS

ROWS, DIMS = 8, 3
VALUE_COEF, ENTROPY_COEF = 0.5, 0.01


def run(log_std: list[float], bounds: tuple[float, float] = (-3.0, 0.0)):
    """Actions at the mean (z = 0), the old log-prob the current one (ratio 1), advantages 1, values 1 above the returns."""
    rng = np.random.default_rng(0)
    mean = rng.standard_normal((ROWS, DIMS))
    log_std_raw = np.array(log_std)
    clamped = np.clip(log_std_raw, *bounds)
    logp = np.full(ROWS, -clamped.sum() - 0.5 * math.log(2.0 * math.pi) * DIMS)
    ret = rng.standard_normal(ROWS)
    batch = (mean.copy(), logp, np.ones(ROWS), ret)
    weights = LossWeights(0.2, 20.0, VALUE_COEF, ENTROPY_COEF, 10.0, 1.0, *bounds)
    grads = (np.empty((ROWS, DIMS)), np.empty(ROWS), np.empty(DIMS))
    stats = np.empty(len(STEP_STATS))
    loss_and_head_gradients(mean, log_std_raw, ret + 1.0, batch, weights, grads, stats)
    return dict(zip(STEP_STATS, stats.tolist(), strict=True)), grads, clamped


def test_every_statistic_lands_under_its_name():
    stats, _, log_std = run([-1.0, -0.5, -2.0])
    entropy = float(np.sum(log_std + 0.5 * (1.0 + math.log(2.0 * math.pi))))
    assert stats["policy_loss"] == pytest.approx(-1.0)  # -mean(min(r A, clip(r) A)) at r = 1, A = 1
    assert stats["value_loss"] == pytest.approx(1.0)
    assert stats["entropy"] == pytest.approx(entropy)
    assert stats["approx_kl"] == pytest.approx(0.0, abs=1e-12)
    assert stats["clip_fraction"] == 0.0
    assert stats["mean_excess"] == 0.0  # every |mean| is below the bound of 10
    assert stats["loss"] == pytest.approx(-1.0 + VALUE_COEF * 1.0 - ENTROPY_COEF * entropy)


def test_head_gradients_and_the_log_std_gates():
    """At z = 0 and ratio 1: d/d mean = 0, d/d value = 2 c_v / n, d/d log-std = 1 - c_e inside the bounds; at the ceiling
    the entropy bonus is gated off (1), and outside the bounds the clamp passes nothing (0)."""
    _, (grad_mean, grad_value, grad_log_std), _ = run([-1.0, 0.0, 0.5])
    np.testing.assert_allclose(grad_mean, 0.0, atol=1e-12)
    np.testing.assert_allclose(grad_value, 2.0 * VALUE_COEF / ROWS)
    np.testing.assert_allclose(grad_log_std, [1.0 - ENTROPY_COEF, 1.0, 0.0], atol=1e-12)
