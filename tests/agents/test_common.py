"""segment_rewards, GAE and advantage normalization against the Nim seed's definitions.

The tank's own reward terms (tick and round reward) are the game's: tests/arena/games/tank/test_rewards.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.common import Segment, SegmentEnd, compute_gae, normalize_advantages, segment_rewards
from arena.games.tank.rewards import TANK_REWARD


def _terms(*rows: tuple[float, float, float, float, float]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def _segment(n: int, *, reward=None, terms=None, score=None, end=SegmentEnd.TERMINAL) -> Segment:
    return Segment(
        bot="b",
        agent=0,
        obs=np.zeros((n, 3), np.float32),
        act=np.zeros((n, 2), np.float32),
        logp=np.zeros(n, np.float32),
        end=end,
        next_obs=None if end is SegmentEnd.TERMINAL else np.zeros(3, np.float32),
        generation=0,
        version=0,
        reward=reward,
        terms=terms,
        score=score,
        reward_fn=TANK_REWARD if terms is not None else None,
    )


def _reference_gae(rewards, values, last_value, gamma, lam):
    """The seed's computeGAE: a plain reverse loop over one segment, in float64."""
    n = len(rewards)
    adv = np.zeros(n)
    acc = 0.0
    for t in range(n - 1, -1, -1):
        next_v = last_value if t == n - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        acc = delta + gamma * lam * acc
        adv[t] = acc
    return adv, adv + np.asarray(values, dtype=np.float64)


# ── segment_rewards ──────────────────────────────────────────────────────────


def test_segment_rewards_scalar_mode_returns_a_float32_copy():
    """Scalar mode passes the bot's rewards through unchanged, as a copy (the segment is never mutated)."""
    reward = np.array([1.0, -2.0, 0.5], np.float32)
    seg = _segment(3, reward=reward, score=100.0)  # score is ignored in scalar mode
    out = segment_rewards(seg)
    np.testing.assert_array_equal(out, [1.0, -2.0, 0.5])
    assert out.dtype == np.float32
    out[0] = 99.0
    assert reward[0] == 1.0


def test_segment_rewards_terms_mode_adds_round_reward_on_last_step_only():
    """Terms mode: the segment's reward function's tick rewards per step, plus its round reward on the
    last step when a score is set (the tank's here: min(score,400)/50)."""
    terms = _terms((-3.0, -10.0, 200.0, 1000.0, 45.0), (0.0, 0.0, 0.0, 1.0, 0.0), (1.0, 0.0, 1.0, 1.0, 180.0))
    tick = [7.023, 0.03, 1.0]
    np.testing.assert_allclose(segment_rewards(_segment(3, terms=terms)), tick, atol=1e-6)
    with_score = segment_rewards(_segment(3, terms=terms, score=100.0))
    np.testing.assert_allclose(with_score, [7.023, 0.03, 1.0 + 2.0], atol=1e-6)
    capped = segment_rewards(_segment(3, terms=terms, score=500.0))
    np.testing.assert_allclose(capped, [7.023, 0.03, 1.0 + 8.0], atol=1e-6)
    assert with_score.dtype == np.float32


# ── GAE ──────────────────────────────────────────────────────────────────────

# One 3-step segment, gamma 0.9, lambda 0.8 (gamma*lambda = 0.72):
#   rewards [1, 0, 2], values [0.5, 1.0, 1.5]
# Terminal (last value 0):
#   d2 = 2 + 0.9*0   - 1.5 = 0.5   A2 = 0.5
#   d1 = 0 + 0.9*1.5 - 1.0 = 0.35  A1 = 0.35 + 0.72*0.5  = 0.71
#   d0 = 1 + 0.9*1.0 - 0.5 = 1.4   A0 = 1.4  + 0.72*0.71 = 1.9112
# Truncated, bootstrapped with V(next_obs) = 2.0:
#   d2 = 2 + 0.9*2.0 - 1.5 = 2.3   A2 = 2.3
#   A1 = 0.35 + 0.72*2.3   = 2.006
#   A0 = 1.4  + 0.72*2.006 = 2.84432
_R = np.array([1.0, 0.0, 2.0], np.float32)
_V = np.array([0.5, 1.0, 1.5], np.float32)


def test_gae_terminal_hand_computed():
    """A terminal segment (last value 0) matches the hand-computed advantages and returns."""
    adv, ret = compute_gae([_R], [_V], np.array([0.0], np.float32), gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [1.9112, 0.71, 0.5], atol=1e-6)
    np.testing.assert_allclose(ret, [2.4112, 1.71, 2.0], atol=1e-6)


def test_gae_truncated_bootstraps_last_value():
    """A truncated segment bootstraps from V(next_obs): every advantage changes from the terminal case."""
    adv, ret = compute_gae([_R], [_V], np.array([2.0], np.float32), gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [2.84432, 2.006, 2.3], atol=1e-6)
    np.testing.assert_allclose(ret, [3.34432, 3.006, 3.8], atol=1e-6)


def test_gae_lambda_zero_and_one_limits():
    """lambda=0 gives one-step TD errors; lambda=1 gives discounted return minus value."""
    adv0, _ = compute_gae([_R], [_V], np.array([0.0], np.float32), gamma=0.9, lam=0.0)
    np.testing.assert_allclose(adv0, [1.4, 0.35, 0.5], atol=1e-6)
    adv1, _ = compute_gae([_R], [_V], np.array([0.0], np.float32), gamma=0.9, lam=1.0)
    mc = [1.0 + 0.9 * 0.0 + 0.81 * 2.0, 0.0 + 0.9 * 2.0, 2.0]
    np.testing.assert_allclose(adv1, np.array(mc) - _V, atol=1e-6)


def test_gae_segments_never_mix_and_match_a_plain_loop():
    """Many segments of different lengths give exactly what a per-segment reverse loop gives."""
    rng = np.random.default_rng(1)
    lengths = [1, 7, 3, 12, 2, 5]
    rewards = [rng.normal(size=n).astype(np.float32) for n in lengths]
    values = [rng.normal(size=n).astype(np.float32) for n in lengths]
    last = np.array([0.0, 1.5, -0.7, 0.0, 3.0, 0.25], np.float32)
    adv, ret = compute_gae(rewards, values, last, gamma=0.97, lam=0.9)
    assert adv.shape == ret.shape == (sum(lengths),)
    assert adv.dtype == np.float32
    refs = [_reference_gae(r, v, lv, 0.97, 0.9) for r, v, lv in zip(rewards, values, last, strict=True)]
    np.testing.assert_allclose(adv, np.concatenate([a for a, _ in refs]), atol=1e-5)
    np.testing.assert_allclose(ret, np.concatenate([r for _, r in refs]), atol=1e-5)
    # each segment alone gives the same numbers as inside the batch
    splits = np.cumsum(lengths)[:-1]
    for i, (a_i, r_i) in enumerate(zip(np.split(adv, splits), np.split(ret, splits), strict=True)):
        alone_a, alone_r = compute_gae([rewards[i]], [values[i]], last[i : i + 1], gamma=0.97, lam=0.9)
        np.testing.assert_allclose(a_i, alone_a, atol=1e-6)
        np.testing.assert_allclose(r_i, alone_r, atol=1e-6)


def test_gae_does_not_leak_across_segment_boundaries():
    """A huge reward at the start of one segment leaves the preceding segment's advantages untouched."""
    r1, v1 = np.ones(4, np.float32), np.zeros(4, np.float32)
    quiet = [np.zeros(3, np.float32)]
    loud = [np.array([1e6, 0.0, 0.0], np.float32)]
    last = np.zeros(2, np.float32)
    a_quiet, _ = compute_gae([r1, *quiet], [v1, np.zeros(3, np.float32)], last)
    a_loud, _ = compute_gae([r1, *loud], [v1, np.zeros(3, np.float32)], last)
    np.testing.assert_array_equal(a_quiet[:4], a_loud[:4])
    assert a_loud[4] == pytest.approx(1e6)


def test_gae_returns_are_advantages_plus_values():
    """returns == advantages + values, element for element, for every segment."""
    rng = np.random.default_rng(2)
    lengths = [4, 9, 1]
    rewards = [rng.normal(size=n).astype(np.float32) for n in lengths]
    values = [rng.normal(size=n).astype(np.float32) for n in lengths]
    adv, ret = compute_gae(rewards, values, np.array([0.3, 0.0, -1.0], np.float32))
    np.testing.assert_allclose(ret, adv + np.concatenate(values), rtol=0, atol=1e-6)


# ── advantage normalization ──────────────────────────────────────────────────


def test_normalize_advantages_normalized_branch():
    """Ordinary advantages come back with mean≈0, std≈1, using (a-mean)/sqrt(var+1e-8)."""
    adv = np.random.default_rng(3).normal(5.0, 3.0, size=1000).astype(np.float32)
    out, branch = normalize_advantages(adv)
    assert branch == "normalized"
    assert out.dtype == np.float32
    assert abs(float(out.mean())) < 1e-5
    assert float(out.std()) == pytest.approx(1.0, abs=1e-4)
    expected = (adv.astype(np.float64) - adv.mean(dtype=np.float64)) / math.sqrt(adv.var(dtype=np.float64) + 1e-8)
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize(
    "adv",
    [np.full(6, 3.5, np.float32), np.array([1.0, 1.0 + 1e-5, 1.0 - 1e-5, 1.0], np.float32), np.zeros(10, np.float32)],
)
def test_normalize_advantages_centers_only_when_variance_tiny(adv):
    """Variance below 1e-8 is centered but not divided (dividing would amplify float noise 1e4x)."""
    assert adv.var(dtype=np.float64) < 1e-8
    out, branch = normalize_advantages(adv)
    assert branch == "centered"
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, adv - adv.mean(dtype=np.float64), atol=1e-7)
    assert np.abs(out).max() < 1e-4  # not blown up to unit scale


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e30, -2e30])
def test_normalize_advantages_zeroes_poisoned_batches(bad):
    """Any NaN/Inf (or |a| >= 1e30) turns the whole batch into zeros: a no-op update."""
    adv = np.array([0.5, -1.0, 2.0, 0.1], np.float32)
    adv[2] = bad
    out, branch = normalize_advantages(adv)
    assert branch == "zeroed"
    assert out.shape == adv.shape and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.zeros(4, np.float32))


def test_normalize_advantages_empty_is_zeroed():
    """An empty batch does not crash on mean/var of nothing."""
    out, branch = normalize_advantages(np.zeros(0, np.float32))
    assert branch == "zeroed" and out.shape == (0,)
