"""agents/ppo/guard_kernel.py: the compiled guards decide, gate, clip and count as the reference (guards.py) does."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents import PPOAgent
from agents.ppo.guard_kernel import guard_and_clip
from agents.ppo.guards import GuardLimits
from agents.ppo.stats import STEP_STATS, TERMS, TOTALS
from agents.ppo.steps import EagerStep, WrittenOutStep
from tests.agents.ppo.test_agent import FLOOR, all_params, change_loss, config, make_segments


def twins(**overrides) -> tuple[PPOAgent, PPOAgent]:
    """Two identical agents with written-out gradients: the first guards in the kernel, the second in torch."""
    compiled, reference = PPOAgent(config(**overrides)), PPOAgent(config(**overrides))
    reference.load_state_dict(compiled.state_dict())
    assert isinstance(compiled.step, WrittenOutStep)
    reference.use_step(EagerStep)
    return compiled, reference


@pytest.mark.parametrize("clip_per_network", [False, True])
@pytest.mark.parametrize("scale", [1.0, 1e3, 1e17])  # unclipped, clipped, skipped
def test_an_update_equals_the_torch_guards(monkeypatch, clip_per_network, scale):
    compiled, reference = twins(clip_per_network=clip_per_network, max_grad_norm=0.5)
    for agent in (compiled, reference):
        change_loss(monkeypatch, agent, scale=scale)
    data = make_segments(compiled)
    compiled.observe(data)
    reference.observe(data)
    got, want = compiled.update(), reference.update()
    assert got["train/skipped_minibatches"] == want["train/skipped_minibatches"] == (6.0 if scale == 1e17 else 0.0)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-7, nan_ok=True), key
    for a, b in zip(all_params(compiled), all_params(reference), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


STEP = {name: float(i + 1) for i, name in enumerate(STEP_STATS)}
"""A step's statistics, each a different number."""


def _call(grads: np.ndarray, split: int, log_std: np.ndarray, loss: float, limits: GuardLimits):
    stats, totals = np.array([STEP[name] for name in STEP_STATS]), np.zeros(len(TOTALS))
    ok = guard_and_clip(grads, split, log_std, loss, stats, np.array(limits, dtype=np.float64), totals)
    return ok, dict(zip(TOTALS, totals.tolist(), strict=True))


def test_the_floor_gate_drops_only_a_downward_gradient_at_the_floor():
    log_std = np.array([FLOOR, FLOOR, 0.0], np.float32)
    grads = np.array([0.3, -0.3, 0.3, 1.0, 1.0], np.float32)
    ok, _ = _call(grads, 4, log_std, 0.0, GuardLimits(FLOOR, 1e9, 1e15, True))
    assert ok
    # a positive gradient would push the log-std further down: dropped; an upward one stays, and off the floor all
    np.testing.assert_array_equal(grads, np.array([0.0, -0.3, 0.3, 1.0, 1.0], np.float32))


@pytest.mark.parametrize(
    ("poison", "loss"), [(None, math.nan), (None, math.inf), (math.nan, 0.0), (math.inf, 0.0), (1e16, 0.0)]
)
def test_a_non_finite_or_huge_step_is_counted_as_skipped_and_nothing_else(poison, loss):
    grads = np.full(10, 0.1, np.float32)
    if poison is not None:
        grads[7] = poison
    ok, totals = _call(grads, 4, np.zeros(2, np.float32), loss, GuardLimits(FLOOR, 1.0, 1e15, True))
    assert not ok
    assert totals == {**dict.fromkeys(TOTALS, 0.0), "skipped": 1.0}


def test_an_ok_step_adds_its_statistics_norm_and_count():
    grads = np.array([3.0, 0.0, 0.0, 4.0, 0.0, 0.0], np.float32)  # the log-std's 2, then the actor's to 4, the critic's
    ok, totals = _call(grads, 4, np.zeros(2, np.float32), 1.0, GuardLimits(FLOOR, 100.0, 1e15, True))
    assert ok
    assert totals == pytest.approx({**{name: STEP[name] for name in TERMS}, "grad_norm": 5.0, "applied": 1.0, "skipped": 0.0})


@pytest.mark.parametrize("per_network", [False, True])
def test_the_clip_coefficient_is_torchs(per_network):
    rng = np.random.default_rng(0)
    grads = rng.standard_normal(50).astype(np.float32)
    grads[20:] *= 30.0  # the critic's gradients dominate
    expected = torch.from_numpy(grads.copy())
    groups = [expected[:20], expected[20:]] if per_network else [expected]
    for group in groups:
        group.mul_(torch.clamp(0.5 / (torch.linalg.vector_norm(group) + 1e-6), max=1.0))
    ok, _ = _call(grads, 20, np.zeros(3, np.float32), 0.0, GuardLimits(FLOOR, 0.5, 1e15, per_network))
    assert ok
    np.testing.assert_allclose(grads, expected.numpy(), rtol=1e-6)
