"""agents/ppo/config.py: every invalid hyperparameter is refused when the config is made, by name."""

from __future__ import annotations

import math

import pytest

from tests.agents.ppo.test_agent import config


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("obs_dim", 0),
        ("act_dim", 0),
        ("epochs", 0),
        ("minibatch_size", 0),
        ("rollout_steps", 0),
        ("hidden", ()),
        ("hidden", (16, 0)),
        ("activation", "gelu"),
        ("gamma", 0.0),
        ("gamma", 1.01),
        ("gamma", math.nan),
        ("gae_lambda", -0.1),
        ("gae_lambda", 1.5),
        ("clip_epsilon", 0.0),
        ("clip_epsilon", 1.0),
        ("clip_epsilon", math.nan),
        ("learning_rate", 0.0),
        ("learning_rate", -1e-3),
        ("max_grad_norm", 0.0),
        ("max_log_ratio", -20.0),
        ("value_coef", -0.5),
        ("entropy_coef", -0.01),
        ("log_std_min", 0.0),
        ("log_std_min", math.nan),
        ("max_policy_lag", -1),
        ("advantage_norm", "none"),
        ("final_lr_fraction", -0.1),
        ("final_lr_fraction", 1.5),
        ("final_lr_fraction", math.nan),
        ("mean_bound", 0.0),
        ("mean_bound_coef", -1.0),
    ],
)
def test_config_refuses_bad_values(field, value):
    """Each invalid hyperparameter raises ValueError whose message names the field."""
    with pytest.raises(ValueError, match=field):
        config(**{field: value})


@pytest.mark.parametrize("field", ["learning_rate", "max_grad_norm", "max_log_ratio", "value_coef", "entropy_coef"])
def test_config_refuses_nan_in_checked_fields(field):
    """NaN must not slip through the `<= 0` / `< 0` checks (NaN compares False), e.g. max_grad_norm=NaN writes NaN weights."""
    with pytest.raises(ValueError, match=field):
        config(**{field: math.nan})


@pytest.mark.parametrize(
    ("field", "value"), [("skip_grad_norm", math.nan), ("skip_grad_norm", 0.0), ("log_std_init", math.nan)]
)
def test_config_refuses_guard_disabling_values(field, value):
    """A NaN/non-positive skip threshold silently disables the guard or all training; a NaN log_std_init poisons the actor."""
    with pytest.raises(ValueError, match=field):
        config(**{field: value})


def test_config_warns_when_minibatch_exceeds_rollout():
    """minibatch_size > rollout_steps is allowed but warned about (one minibatch per epoch)."""
    with pytest.warns(UserWarning, match="minibatch_size"):
        config(minibatch_size=128, rollout_steps=96)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"act_dim": 0}, "act_dim must be >= 1 unless branches"),
        ({"act_dim": -1, "branches": (3,)}, "act_dim must be >= 1 unless branches"),
        ({"branches": (0,)}, "branches must each be 1..1024"),
        ({"branches": (2, 1025)}, "branches must each be 1..1024"),
        ({"branches": (2.5,)}, "branches must each be 1..1024"),
        ({"branches": (1024,) * 5}, "4096 actions in all"),
        ({"branches": (1,) * 65}, "at most 64 branches"),
    ],
)
def test_config_refuses_a_bad_action_space(overrides, message):
    with pytest.raises(ValueError, match=message):
        config(**overrides)


def test_branches_allow_no_continuous_dims_and_widen_the_packed_actions():
    """The rollout's act column: continuous dims, one index per branch, every branch's mask."""
    assert config().action_width == config().act_dim  # continuous only: the layout of old
    discrete = config(act_dim=0, branches=[3, 2])  # a checkpoint's list becomes the config's tuple
    assert discrete.branches == (3, 2) and discrete.action_width == 0 + 2 + 5
    assert config(act_dim=2, branches=(4,)).action_width == 2 + 1 + 4
    assert config(branches=(1,) * 64).branches == (1,) * 64  # a branch of one action is allowed
