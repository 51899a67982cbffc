"""The tank's reward shaping, vectorized: the seed's ``computeTickReward`` and ``computeRoundReward``.

Bots in ``terms`` mode send the raw reward terms of every tick (``StepInfo.reward_terms()``)
and the round score at each episode end; the trainer turns them into rewards with the run's
reward function, and for the tank that is :data:`TANK_REWARD`, defined here. The shaping is
game knowledge, so it lives with the game: the learners (``agents``) and the server only
call the reward function they are given and never import a game. It is still defined once,
on the server's side of the wire, and can change without touching any bot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "AIM_SHAPING",
    "DIST_SHAPING",
    "N_TERMS",
    "ROUND_SCORE_CAP",
    "ROUND_SCORE_SCALE",
    "TANK_REWARD",
    "TERMS",
    "TankReward",
    "compute_round_reward",
    "compute_tick_reward",
]

TERMS = ("my_delta", "enemy_delta", "dist", "max_dist", "gun_bearing")
"""The columns of one tick's reward terms, in wire order (docs/protocol.md §3.7.4, ``StepInfo.reward_terms``)."""
N_TERMS = len(TERMS)
"""5: the width of the wire format's ``terms`` column, which the protocol fixes at the tank's terms."""

DIST_SHAPING = 0.01
"""Per-tick closeness bonus at distance 0; 10x smaller than the first version so shaping stays a nudge."""
AIM_SHAPING = 0.02
"""Per-tick aim bonus at gun bearing 0 degrees."""
ROUND_SCORE_CAP = 400.0
"""Cumulative scores are capped before scaling: a bounded terminal bonus keeps the critic's scale stable."""
ROUND_SCORE_SCALE = 50.0
"""The seed's divisor: a capped score becomes at most +8, its "rough ±6 range (doubled win signal)"."""


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


@dataclass(frozen=True)
class TankReward:
    """The tank's reward function, in the shape the server takes one (``server.RewardFunction``).

    Pass :data:`TANK_REWARD` as ``TrainingServer(..., reward=TANK_REWARD)``: a server started
    without a reward function refuses ``terms``-mode bots. Stateless, so one instance serves
    every run; the methods only forward to the functions above, so the maths is theirs.
    """

    @property
    def n_terms(self) -> int:
        """5 (:data:`N_TERMS`): the server checks it against the wire's fixed ``terms`` width."""
        return N_TERMS

    def tick_reward(self, terms: NDArray[np.float32]) -> NDArray[np.float32]:
        """:func:`compute_tick_reward`."""
        return compute_tick_reward(terms)

    def round_reward(self, score: NDArray[np.float32] | float) -> NDArray[np.float32]:
        """:func:`compute_round_reward`."""
        return compute_round_reward(score)

    def round_reward_scalar(self, score: float) -> float:
        """The round reward of one score in Python floats (float64), ``min(score, 400) / 50``.

        For the server's running episode returns, which add one per episode end: a plain float
        costs no numpy call there, and it is the figure those sums have always added.
        """
        return min(score, ROUND_SCORE_CAP) / ROUND_SCORE_SCALE


TANK_REWARD = TankReward()
"""The tank's reward function: what ``arena train`` and ``arena serve`` start the server with."""
