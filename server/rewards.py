"""The run's reward function for the wire format's ``terms`` mode: an interface, never a game's shaping.

Terms-mode bots send raw reward terms and round scores; what they are worth is game knowledge,
so the game defines it (the tank's is ``arena.games.tank.rewards.TANK_REWARD``) and the server is
started with it: ``TrainingServer(agent, ..., reward=TANK_REWARD)``. This package never imports
a game. A server started without one serves scalar-reward bots only: a ``hello`` with
``reward: "terms"`` is refused with ``bad_hello`` (docs/protocol.md §3.7.4).
"""

from __future__ import annotations

from typing import Protocol

from agents import TermsReward
from bot_protocol import N_REWARD_TERMS

__all__ = ["RewardFunction", "check_reward_function"]


class RewardFunction(TermsReward, Protocol):
    """A game's reward function, as the trainer takes it: the learner's :class:`~agents.TermsReward` plus

    ``n_terms``, the width of the terms it shapes (the assembler's packed rows are laid out with
    it), and ``round_reward_scalar``, the round reward of one score as a Python float for the
    running episode returns (one per episode end, where a numpy call is pure overhead). It must
    agree with ``round_reward`` up to float32 rounding.
    """

    @property
    def n_terms(self) -> int:
        """Columns of one row's terms; the wire format fixes it at ``N_REWARD_TERMS`` (5)."""
        ...

    def round_reward_scalar(self, score: float) -> float:
        """``float(round_reward(score))``, computed in Python floats."""
        ...


def check_reward_function(reward: RewardFunction | None) -> RewardFunction | None:
    """``reward`` itself, once its ``n_terms`` is the wire format's ``terms`` width; None passes.

    The protocol fixes the ``terms`` column at ``N_REWARD_TERMS`` (5) floats a row and the decoder
    refuses any other width, so a reward function of another width could never see a row: it is
    refused when the server (or an assembler) is built, not on the first terms-mode batch.

    Raises:
        ValueError: ``reward.n_terms`` differs from ``N_REWARD_TERMS``.
    """
    if reward is not None and reward.n_terms != N_REWARD_TERMS:
        raise ValueError(
            f"the reward function shapes {reward.n_terms} terms a row, but the wire format's terms column "
            f"is {N_REWARD_TERMS} wide (docs/protocol.md §3.7.4)"
        )
    return reward
