"""The seed's reward shaping, vectorized: ``computeTickReward`` and ``computeRoundReward``.

Bots in ``terms`` mode send the raw reward terms of every tick and the round score at
each episode end; the trainer turns them into rewards here so the shaping is defined
once, on the server, and can change without touching any bot.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["ROUND_SCORE_CAP", "ROUND_SCORE_SCALE", "compute_round_reward", "compute_tick_reward"]

DIST_SHAPING = 0.01
"""Per-tick closeness bonus at distance 0; 10x smaller than the first version so shaping stays a nudge."""
AIM_SHAPING = 0.02
"""Per-tick aim bonus at gun bearing 0 degrees."""
ROUND_SCORE_CAP = 400.0
"""Cumulative scores are capped before scaling: a bounded terminal bonus keeps the critic's scale stable."""
ROUND_SCORE_SCALE = 50.0


def compute_tick_reward(terms: NDArray[np.float32]) -> NDArray[np.float32]:
    """Per-tick reward from the raw terms, shape (n, 5) → (n,).

    Columns: my energy delta, enemy energy delta (the damage I dealt, negated: an enemy's
    own firing costs must not pay me), distance to enemy, max distance,
    |gun bearing| in degrees. Positive when we deal more damage than we take, plus dense
    shaping: closeness (0–0.01 per tick) and aim quality (0–0.02 per tick).
    A non-positive ``max distance`` is treated as 1 (the seed's default) rather than dividing by zero.
    """
    terms = np.asarray(terms, dtype=np.float32)
    my_delta, enemy_delta, dist, max_dist, gun_bearing = terms.T
    max_dist = np.where(max_dist > 0, max_dist, np.float32(1.0))
    sparse = my_delta - enemy_delta
    dist_reward = DIST_SHAPING * (1.0 - dist / max_dist)
    aim_reward = AIM_SHAPING * (1.0 - gun_bearing / 180.0)
    reward: NDArray[np.float32] = (sparse + dist_reward + aim_reward).astype(np.float32)
    return reward


def compute_round_reward(score: NDArray[np.float32] | float) -> NDArray[np.float32]:
    """Round-end bonus: ``min(score, 400) / 50``, at most +8 (no lower cap; scores are rarely negative).

    The seed called this "a rough ±6 range (doubled win signal)"; the cap keeps the critic's
    value scale stable across battle boundaries and long battles.
    """
    capped = np.minimum(np.asarray(score, dtype=np.float32), np.float32(ROUND_SCORE_CAP))
    return (capped / np.float32(ROUND_SCORE_SCALE)).astype(np.float32)
