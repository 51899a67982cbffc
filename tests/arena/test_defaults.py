"""arena.defaults: the tank arena's measured defaults validate, scale with the agents, and pick a layout."""

from __future__ import annotations

import pytest

from agents import PPOConfig
from arena.defaults import (
    MINIBATCHES,
    STEPS_PER_AGENT,
    TANK_MATCHES,
    TURN_ENTROPY_COEF,
    TURN_GAE_LAMBDA,
    Layout,
    choose_layout,
    gym_ppo_options,
    tank_ppo_options,
    turn_ppo_options,
)
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM


@pytest.mark.parametrize("agents", [1, 4, 16, TANK_MATCHES, 2 * TANK_MATCHES])
def test_tank_ppo_options_make_a_valid_config_scaled_with_the_agents(agents):
    options = tank_ppo_options(agents)
    config = PPOConfig(OBS_DIM, ACT_DIM, **options)
    assert config.rollout_steps == agents * STEPS_PER_AGENT
    assert config.minibatch_size == max(64, config.rollout_steps // MINIBATCHES)
    assert config.minibatch_size <= config.rollout_steps


def test_default_batch_shape_is_the_measured_one():
    """128 matches x 64 steps in minibatches of 1,024, 2 epochs, anchored: what docs/arena.md's sweep chose."""
    options = tank_ppo_options(TANK_MATCHES)
    assert (options["rollout_steps"], options["minibatch_size"], options["epochs"]) == (8192, 1024, 2)
    assert options["proximal_anchor"] is True


def test_the_tank_clips_the_actor_and_the_critic_each_in_every_run():
    """The five-seed evaluation chose the per-network clip (docs/agents.md); the league adds only its entropy."""
    for league in (False, True):
        assert tank_ppo_options(TANK_MATCHES, league=league)["clip_per_network"] is True


def test_turn_based_games_take_the_gym_preset_with_a_larger_entropy_bonus_a_short_gae_and_raw_boards():
    """Connect four's measured bonus and lambda (docs/agents.md, "Turn-based games"); a board's 0/1 planes are
    not normalized."""
    options = turn_ppo_options(32)
    gym = gym_ppo_options(32, obs_norm=False)
    assert options == {**gym, "entropy_coef": TURN_ENTROPY_COEF, "gae_lambda": TURN_GAE_LAMBDA}
    assert gym["entropy_coef"] < TURN_ENTROPY_COEF and gym["gae_lambda"] > TURN_GAE_LAMBDA
    assert options["obs_norm"] is False and options["gamma"] == gym["gamma"]
    PPOConfig(84, 0, branches=(7,), **options)  # a valid config
    with pytest.raises(ValueError, match="n_agents must be >= 1"):
        turn_ppo_options(0)


def test_tank_ppo_options_refuse_no_agents():
    with pytest.raises(ValueError, match="n_agents"):
        tank_ppo_options(0)


@pytest.mark.parametrize(
    ("workers", "bots", "threads_only", "cores", "expected"),
    [
        (None, None, False, 2, (1, 0)),  # 2+ cores: the learning bot in its own process
        (None, None, False, 16, (1, 0)),
        (None, None, False, 1, (0, 1)),  # one core: threads
        (None, None, True, 2, (0, 1)),  # royale opponents, the reach game
        (3, None, False, 2, (3, 0)),
        (0, None, False, 2, (0, 1)),  # --workers 0 forces threads
        (None, 2, False, 2, (0, 2)),
    ],
)
def test_choose_layout(workers, bots, threads_only, cores, expected):
    layout = choose_layout(workers, bots, threads_only, cores=cores)
    assert (layout.workers, layout.bots) == expected and layout.cores == cores and layout.reason
    assert layout.as_dict()["bots_in"] == ("processes" if expected[0] else "threads")


def test_choose_layout_refuses_contradictions():
    with pytest.raises(ValueError, match="--workers must be >= 0"):
        choose_layout(-1, None, False, cores=2)
    with pytest.raises(ValueError, match="do not go together"):
        choose_layout(2, 2, False, cores=2)
    with pytest.raises(ValueError, match="not both or neither"):
        Layout(workers=1, bots=1, cores=2, reason="x")
