"""gymnasium's spaces as the protocol sees them (arena/bots/gym_spaces.py), and a masked game through a real server."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from agents import make_agent  # noqa: E402
from arena.bots.gym_bot import GymBot, evaluate  # noqa: E402
from arena.bots.gym_spaces import ActionMap, ObservationMap, action_masks  # noqa: E402
from bot_protocol import ActionSpace  # noqa: E402
from server import ServerConfig, ServerThread, TrainingServer  # noqa: E402

# ── observations ─────────────────────────────────────────────────────────────


def test_discrete_and_dict_observations_are_flattened_as_gymnasium_does():
    one_hot = ObservationMap.from_space(gym.spaces.Discrete(4, start=1))
    assert one_hot.obs_dim == 4
    np.testing.assert_array_equal(one_hot.rows(3, 1, False), [[0, 0, 1, 0]])
    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,), np.float32), "card": gym.spaces.Discrete(3)})
    mapping = ObservationMap.from_space(space)
    assert mapping.obs_dim == 5
    obs = {"card": 2, "pos": np.array([0.5, -0.5], np.float32)}
    np.testing.assert_array_equal(mapping.rows(obs, 1, False), [[0, 0, 1, 0.5, -0.5]])  # keys in sorted order
    batch = {"card": np.array([0, 1]), "pos": np.array([[1, 1], [0, 0]], np.float32)}
    np.testing.assert_array_equal(mapping.rows(batch, 2, True), [[1, 0, 0, 1, 1], [0, 1, 0, 0, 0]])


# ── actions ──────────────────────────────────────────────────────────────────


def test_an_image_box_tells_a_conv_torso_its_shape_and_nothing_else_does():
    """(height, width, channels): a board of planes as it is, a plain grid as one channel; a vector or a dict is no image."""
    assert ObservationMap.from_space(gym.spaces.Box(0, 1, (6, 7, 2), np.int8)).image == (6, 7, 2)
    assert ObservationMap.from_space(gym.spaces.Box(0, 1, (3, 4), np.float32)).image == (3, 4, 1)
    assert ObservationMap.from_space(gym.spaces.Box(0, 1, (5,), np.float32)).image is None
    assert ObservationMap.from_space(gym.spaces.Box(0, 1, (2, 3, 4, 5), np.float32)).image is None
    assert ObservationMap.from_space(gym.spaces.Dict({"board": gym.spaces.Box(0, 1, (3, 3))})).image is None


def test_every_leaf_maps_to_continuous_dims_or_branches_in_gymnasiums_order():
    space = gym.spaces.Dict(
        {
            "aim": gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
            "fire": gym.spaces.Discrete(3, start=1),
            "keys": gym.spaces.MultiBinary(2),
            "wheel": gym.spaces.MultiDiscrete([4, 5]),
        }
    )
    mapping = ActionMap.from_space(space)
    assert mapping.actions == ActionSpace(1, (3, 2, 2, 4, 5))
    (action,) = mapping.to_env(np.array([[0.5]], np.float32), np.array([[2, 1, 0, 3, 4]]))
    assert space.contains(action)
    assert action["aim"][0] == 1.0 and action["fire"] == 3
    np.testing.assert_array_equal(action["keys"], [1, 0])
    np.testing.assert_array_equal(action["wheel"], [3, 4])
    batched = mapping.batch([action, action])
    assert batched["fire"].tolist() == [3, 3]


def test_a_tuple_of_discrete_spaces_is_multi_discrete():
    mapping = ActionMap.from_space(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))))
    assert mapping.actions == ActionSpace(0, (2, 3))
    assert mapping.to_env(np.zeros((1, 0), np.float32), np.array([[1, 2]])) == [(1, 2)]


# ── masks ────────────────────────────────────────────────────────────────────


class PickTheState(gym.Env):
    """Observation: a state in 0..2; action: one of 4, the last never legal; reward 1 for the action equal to the state.

    Masks travel in ``info["action_mask"]``, or through ``action_masks()`` with ``masks_by_method``.
    An illegal action fails the episode's assertion: the game holds the bot to its masks.
    """

    def __init__(self, masks_by_method: bool = False) -> None:
        self.observation_space = gym.spaces.Discrete(3)
        self.action_space = gym.spaces.Discrete(4)
        self.by_method = masks_by_method
        self.state = 0
        self.t = 0
        self.illegal = 0

    def action_mask(self) -> np.ndarray:
        return np.array([1, 1, 1, 0], np.int8)

    def action_masks(self) -> np.ndarray:
        assert self.by_method
        return self.action_mask().astype(bool)

    def _info(self) -> dict[str, Any]:
        return {} if self.by_method else {"action_mask": self.action_mask()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self.state, self.t = int(self.np_random.integers(3)), 0
        return self.state, self._info()

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        self.illegal += int(action) == 3
        reward = float(int(action) == self.state)
        self.state, self.t = int(self.np_random.integers(3)), self.t + 1
        return self.state, reward, False, self.t >= 8, self._info()


def test_masks_come_from_the_info_or_from_an_action_masks_method():
    env = PickTheState()
    _, info = env.reset(seed=0)
    np.testing.assert_array_equal(action_masks(env, info, 1, 4, False), [[True, True, True, False]])
    by_method = PickTheState(masks_by_method=True)
    _, info = by_method.reset(seed=0)
    np.testing.assert_array_equal(action_masks(by_method, info, 1, 4, False), [[True, True, True, False]])
    with pytest.raises(ValueError, match="3 entries a row, its action space 4"):
        action_masks(env, {"action_mask": np.ones(3)}, 1, 4, False)
    assert action_masks(gym.make("CartPole-v1"), {}, 1, 2, False) is None


@pytest.mark.parametrize("masks_by_method", [False, True])
def test_a_masked_game_trains_through_a_real_server_and_never_takes_an_illegal_action(masks_by_method):
    agent = make_agent("ppo", 3, 0, branches=(4,), rollout_steps=256, minibatch_size=64, epochs=4, learning_rate=3e-3, seed=0)
    env = PickTheState(masks_by_method)
    with ServerThread(TrainingServer(agent, ServerConfig(port=0))) as server, GymBot(server.url, env, seed=1) as bot:
        result = bot.run(3_000)
        policy = result.policy
    assert env.illegal == 0 and policy is not None and policy.version >= 5
    assert policy.actions == ActionSpace(0, (4,))
    returns = evaluate(policy, lambda: PickTheState(masks_by_method), episodes=5, seed=2)
    assert np.mean(returns) >= 6.0  # 8 steps an episode; chance is 8/3
