"""The tank's reward terms and round reward (the game's, in arena.games.tank.rewards) against the Nim seed's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from agents import Segment, SegmentEnd, segment_rewards
from arena.games.tank.rewards import (
    N_TERMS,
    ROUND_SCORE_CAP,
    ROUND_SCORE_SCALE,
    TANK_REWARD,
    compute_round_reward,
    compute_tick_reward,
)
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, N_REWARD_TERMS, TransitionBatch
from server.assembler import SegmentBuilder
from server.transition_queue import Arrival
from tests.conftest import ROOT

ROOT = ROOT


def _terms(*rows: tuple[float, float, float, float, float]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


# ── tick and round rewards ───────────────────────────────────────────────────


def test_tick_reward_hand_computed():
    """myDelta=-3, enemyDelta=-10, dist 200/1000, bearing 45° gives 7 + 0.01*0.8 + 0.02*0.75."""
    r = compute_tick_reward(_terms((-3.0, -10.0, 200.0, 1000.0, 45.0)))
    assert r.dtype == np.float32 and r.shape == (1,)
    assert r[0] == pytest.approx(7.0 + 0.01 * 0.8 + 0.02 * 0.75, abs=1e-6)


def test_tick_reward_shaping_extremes_and_vectorized_rows():
    """Each row is independent: contact+aim gives the full 0.03 bonus, far+backwards gives none."""
    r = compute_tick_reward(
        _terms(
            (0.0, 0.0, 0.0, 500.0, 0.0),  # touching, aimed: 0.01 + 0.02
            (0.0, 0.0, 500.0, 500.0, 180.0),  # max distance, facing away: 0
            (-5.0, 0.0, 250.0, 500.0, 90.0),  # took 5 damage: -5 + 0.005 + 0.01
            (0.0, 2.0, 0.0, 1.0, 180.0),  # the seed's default distance/maxDist/bearing: -2 + 0.01
        )
    )
    np.testing.assert_allclose(r, [0.03, 0.0, -5.0 + 0.005 + 0.01, -2.0 + 0.01], atol=1e-6)


def test_tick_reward_nonpositive_max_distance_is_treated_as_one():
    """A zero or negative max distance does not divide by zero: it acts as the seed's default 1."""
    r = compute_tick_reward(_terms((0.0, 0.0, 0.5, 0.0, 180.0), (0.0, 0.0, 0.5, -3.0, 180.0)))
    assert np.isfinite(r).all()
    np.testing.assert_allclose(r, [0.005, 0.005], atol=1e-7)


@pytest.mark.parametrize(
    ("score", "expected"),
    [(500.0, 8.0), (400.0, 8.0), (100.0, 2.0), (0.0, 0.0), (-100.0, -2.0), (-1000.0, -20.0)],
)
def test_round_reward_caps_at_400_over_50(score, expected):
    """min(score, 400) / 50: 500 is capped to 8, 100 gives 2, negative scores are not floored."""
    out = compute_round_reward(score)
    assert out.dtype == np.float32
    assert float(out) == pytest.approx(expected, abs=1e-6)


def test_round_reward_vectorized():
    """An array of scores is scaled element-wise with the same cap."""
    out = compute_round_reward(np.array([1000.0, 50.0, -25.0], np.float32))
    np.testing.assert_allclose(out, [8.0, 1.0, -0.5], atol=1e-6)


# ── TANK_REWARD, the reward function the server is started with ──────────────


def test_tank_reward_is_the_functions_bit_for_bit_at_the_wire_width():
    """The server's view of the tank's shaping forwards to the functions above: same bits, the wire's 5 terms."""
    assert TANK_REWARD.n_terms == N_TERMS == N_REWARD_TERMS
    rng = np.random.default_rng(0)
    terms = (rng.standard_normal((257, N_TERMS)) * [5, 5, 400, 600, 90]).astype(np.float32)
    terms[::7, 3] = 0.0  # the non-positive max distance branch
    assert TANK_REWARD.tick_reward(terms).tobytes() == compute_tick_reward(terms).tobytes()
    scores = (rng.standard_normal(64) * 300).astype(np.float32)
    assert TANK_REWARD.round_reward(scores).tobytes() == compute_round_reward(scores).tobytes()


@pytest.mark.parametrize("score", [-37.25, 0.0, 123.4, 400.0, 1e4])
def test_round_reward_scalar_is_the_capped_score_in_python_floats(score):
    """The assembler's running returns add min(score, 400) / 50 in float64, as they always have."""
    assert TANK_REWARD.round_reward_scalar(score) == min(score, ROUND_SCORE_CAP) / ROUND_SCORE_SCALE
    assert TANK_REWARD.round_reward_scalar(score) == pytest.approx(float(compute_round_reward(score)), rel=1e-6)


def test_a_terms_session_trains_on_the_tank_reward_bit_for_bit():
    """Through the server's assembler, a tank bot's segments get exactly the tick rewards of their terms
    plus the round reward on the ended row: the shaping moved to the game, the numbers did not."""
    rng = np.random.default_rng(1)
    n = 6
    terms = (rng.standard_normal((n, N_TERMS)) * [5, 5, 400, 600, 90]).astype(np.float32)
    batch = TransitionBatch(
        seq=1, generation=0, version=0, agent=np.zeros(n, np.uint32), episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, 3)).astype(np.float32), act=np.zeros((n, 1), np.float32),
        logp=np.zeros(n, np.float32), flags=np.array([0, 0, FLAG_TERMINAL, 0, 0, FLAG_TRUNCATED], np.uint8),
        rew=None, terms=terms, next_obs=np.zeros((1, 3), np.float32), score=np.array([512.0, 37.5], np.float32),
    )  # fmt: skip
    builder = SegmentBuilder(segment_steps=100, reward=TANK_REWARD)
    first, second = builder.add([Arrival("s", "bot", True, 1, batch)])
    assert first.reward_fn is TANK_REWARD and first.end is SegmentEnd.TERMINAL
    for segment, rows, score in ((first, slice(0, 3), 512.0), (second, slice(3, 6), 37.5)):
        expected = compute_tick_reward(terms[rows])
        expected[-1] += compute_round_reward(score)
        assert segment_rewards(segment).tobytes() == expected.tobytes()
        assert segment.reward_sum == pytest.approx(float(expected.astype(np.float64).sum()), rel=1e-6)


def test_a_terms_segment_without_its_reward_function_is_refused():
    """A terms-mode segment must carry the game's reward function: the learner has none of its own."""
    with pytest.raises(AssertionError, match="reward function"):
        Segment("b", 0, np.zeros((1, 3), np.float32), np.zeros((1, 1), np.float32), np.zeros(1, np.float32),
                SegmentEnd.TERMINAL, None, 0, 0, terms=np.zeros((1, N_TERMS), np.float32))  # fmt: skip
