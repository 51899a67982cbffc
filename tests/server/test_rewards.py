"""The run's reward function interface (server/rewards.py): only one of the wire format's ``terms`` width is taken."""

from __future__ import annotations

import pytest

from bot_protocol import N_REWARD_TERMS
from server.rewards import check_reward_function
from tests.server.test_assembler import WeightedTerms


def test_a_reward_function_of_the_wire_width_or_none_passes_through():
    reward = WeightedTerms()
    assert reward.n_terms == N_REWARD_TERMS == 5
    assert check_reward_function(reward) is reward
    assert check_reward_function(None) is None  # a scalar-reward-only run


@pytest.mark.parametrize("n_terms", [4, 6])
def test_a_reward_function_of_another_width_is_refused_at_construction(n_terms):
    with pytest.raises(ValueError, match=f"shapes {n_terms} terms a row, but the wire format's terms column is 5 wide"):
        check_reward_function(WeightedTerms(n_terms=n_terms))
