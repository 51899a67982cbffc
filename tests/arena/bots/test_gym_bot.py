"""arena.bots.gym_bot: gymnasium environments played as bots against a real server on port 0.

The mapping tests use ``Countdown``, an environment whose observations say where they
come from (sub-environment, episode, step), and an agent that keeps every segment the
trainer hands it, so each row the server received can be matched with the step the
environment took.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from agents import Segment, SegmentEnd, make_agent  # noqa: E402
from agents.ppo import PPOAgent, PPOConfig  # noqa: E402
from arena.bots.gym_bot import ActionScaling, GymBot, evaluate, make_env, play_gym, require_gymnasium  # noqa: E402
from bot_protocol.messages import Weights  # noqa: E402
from bot_protocol.policy import Policy  # noqa: E402
from server import TrainingServer  # noqa: E402
from tests.conftest import running_server, timeout  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LOW = np.array([-2.0, 0.0], np.float32)
HIGH = np.array([2.0, 10.0], np.float32)


class Countdown(gym.Env):
    """Observation ``[index, episode, t]``; episode ``k`` lasts ``3 + k % 3`` steps, reward ``t`` after step ``t``.

    Even episodes end ``terminated``, odd ones ``truncated``. Every action received is logged.
    """

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.action_space = gym.spaces.Box(LOW, HIGH, dtype=np.float32)
        self.episode = -1
        self.t = 0
        self.log: dict[tuple[int, int], np.ndarray] = {}

    def _obs(self) -> np.ndarray:
        return np.array([self.index, self.episode, self.t], np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        assert action.dtype == np.float32 and self.action_space.contains(action), action
        self.log[(self.episode, self.t)] = np.array(action)
        self.t += 1
        ended = self.t >= 3 + self.episode % 3
        terminated = ended and self.episode % 2 == 0
        return self._obs(), float(self.t), terminated, ended and not terminated, {}


class RecordingPPO(PPOAgent):
    """PPO that keeps a copy of every segment it is given (and never updates: huge rollout)."""

    def __init__(self, config: PPOConfig) -> None:
        super().__init__(config)
        self.seen: list[Segment] = []

    def observe(self, segments: list[Segment]) -> None:
        self.seen.extend(segments)
        super().observe(segments)


def recording_agent(obs_dim: int = 3, act_dim: int = 2) -> RecordingPPO:
    # log_std 0: std 1, so about a third of the raw samples fall outside [-1, 1] and get clipped.
    return RecordingPPO(PPOConfig(obs_dim=obs_dim, act_dim=act_dim, hidden=(16, 16), rollout_steps=100_000, log_std_init=0.0))


def wait_received(server: TrainingServer, sent: int, drained: bool = True) -> None:
    """Until the server accepted every step sent (and, if ``drained``, the agent holds them all,
    the bot's open episodes closed as cuts)."""
    deadline = time.monotonic() + timeout(10)
    while time.monotonic() < deadline:
        acc = server.accounting()
        if acc["received"] == sent and (not drained or (acc["queued"] == 0 and acc["open"] == 0)):
            return
        time.sleep(0.02)
    raise AssertionError(f"the server did not take all {sent} steps: {server.accounting()}")


def countdown_env(mode: str) -> tuple[Any, list[Countdown]]:
    """The environment for ``mode`` and its Countdown instances (in agent order)."""
    if mode == "single":
        env = Countdown()
        return env, [env]
    if mode == "same_step":
        indices = itertools.count()
        vec = make_env(lambda: Countdown(next(indices)), n_envs=3)  # SyncVectorEnv builds them in order
    else:
        autoreset = {"next_step": "NEXT_STEP", "disabled": "DISABLED"}[mode]
        factories = [lambda i=i: Countdown(i) for i in range(3)]
        vec = gym.vector.SyncVectorEnv(factories, autoreset_mode=gym.vector.AutoresetMode[autoreset])
    return vec, list(vec.envs)


# ── the mapping, without a server ────────────────────────────────────────────


def test_action_scaling_maps_the_unit_box_onto_the_bounds():
    """[-1, 1] maps linearly onto [low, high] in the space's dtype and shape; beyond ±1 is clipped."""
    scaling = ActionScaling.from_space(gym.spaces.Box(LOW, HIGH, dtype=np.float32))
    out = scaling.to_env([[-1, -1], [1, 1], [0, 0], [0.5, -0.5], [3, -7]])
    assert out.dtype == np.float32 and out.shape == (5, 2)
    np.testing.assert_array_equal(out, [[-2, 0], [2, 10], [0, 5], [1, 2.5], [2, 0]])
    np.testing.assert_allclose(scaling.to_policy(out[:4]), [[-1, -1], [1, 1], [0, 0], [0.5, -0.5]], atol=1e-6)
    shaped = ActionScaling.from_space(gym.spaces.Box(-3.0, 3.0, (2, 2), np.float64))
    assert shaped.act_dim == 4 and shaped.to_env(np.ones((1, 4))).shape == (1, 2, 2)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "unbounded"),
        (gym.spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, np.inf]), dtype=np.float64), "unbounded"),
    ],
)
def test_unbounded_action_spaces_are_refused(space, message):
    """An action space with no finite box to map onto is refused before any connection is made."""
    env = Countdown()
    env.action_space = space
    with pytest.raises(ValueError, match=message):
        GymBot("ws://127.0.0.1:9", env)
    with pytest.raises(ValueError, match=message):
        ActionScaling.from_space(space)


def test_spaces_no_policy_can_act_or_observe_in_are_refused_in_one_line():
    env = Countdown()
    env.action_space = gym.spaces.Text(4)
    with pytest.raises(ValueError, match="cannot act in Text"):
        GymBot("ws://127.0.0.1:9", env)
    env = Countdown()
    env.observation_space = gym.spaces.Sequence(gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="cannot flatten the observation space"):
        GymBot("ws://127.0.0.1:9", env)


def test_missing_gymnasium_fails_with_one_clear_message(monkeypatch):
    """Without the optional extra, the first use says what to install."""
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(ImportError, match="pip install 'gymnasium"):
        require_gymnasium()


# ── the mapping, through a real server ───────────────────────────────────────


@pytest.mark.parametrize("mode", ["single", "same_step", "next_step", "disabled"])
def test_rows_on_the_server_are_the_steps_the_env_took(mode):
    """Every env step arrives once: the policy's raw action, the reward, terminal vs truncated, true final obs."""
    env, instances = countdown_env(mode)
    agent = recording_agent()
    with running_server(3, 2, agent=agent) as server:
        policy = Policy.from_weights(server.current.message)
        with GymBot(server.url, env, seed=7, batch_steps=16) as bot:
            result = bot.run(90)
        wait_received(server, result.steps)
        assert result.stats.steps_sent == result.steps
    scaling = ActionScaling.from_space(instances[0].action_space)

    taken = {(c.index, *key): action for c in instances for key, action in c.log.items()}
    assert result.steps == len(taken) >= 90
    rows: dict[tuple[int, int, int], tuple[np.ndarray, float]] = {}
    ends = {SegmentEnd.TERMINAL: 0, SegmentEnd.TRUNCATED: 0, SegmentEnd.CUT: 0}
    clipped = 0
    for segment in agent.seen:
        index, episode = (int(v) for v in segment.obs[0, :2])
        assert index == segment.agent
        length = 3 + episode % 3
        np.testing.assert_array_equal(segment.obs[:, 2], np.arange(segment.steps))  # consecutive steps of one episode
        assert (segment.obs[:, :2] == [index, episode]).all()
        np.testing.assert_array_equal(segment.reward, np.arange(1, segment.steps + 1))
        # The raw samples the policy drew, with their own log-probs (not the clipped or rescaled actions).
        np.testing.assert_allclose(segment.logp, policy.log_prob(segment.obs, segment.act), rtol=1e-5, atol=1e-5)
        clipped += int((np.abs(segment.act) > 1).sum())
        ends[segment.end] += 1
        if segment.end is SegmentEnd.TERMINAL:
            assert episode % 2 == 0 and segment.steps == length
        elif segment.end is SegmentEnd.TRUNCATED:
            assert episode % 2 == 1 and segment.steps == length
            # The true final observation, never the next episode's first one.
            np.testing.assert_array_equal(segment.next_obs, [index, episode, length])
        for t in range(segment.steps):
            rows[(index, episode, t)] = (segment.act[t], float(segment.reward[t]))
    assert rows.keys() == taken.keys()
    for key, action in taken.items():
        np.testing.assert_allclose(action, scaling.to_env(rows[key][0])[0], rtol=1e-6)
    assert ends[SegmentEnd.TERMINAL] >= 5 and ends[SegmentEnd.TRUNCATED] >= 5
    assert clipped > 0, "no raw sample outside [-1, 1]: the clipping was not exercised"
    # Episodes are reported in the order they finished, with their returns and lengths.
    assert result.episode_lengths and all(3 <= n <= 5 for n in result.episode_lengths)
    assert result.episode_returns == [n * (n + 1) / 2 for n in result.episode_lengths]


def test_same_seed_replays_exactly():
    """Against fixed weights, two bots with one seed see identical episodes; another seed differs."""
    with running_server(3, 1, agent=make_agent("ppo", 3, 1, hidden=(16, 16), rollout_steps=100_000)) as server:
        runs = [play_gym(server.url, "Pendulum-v1", steps=400, seed=seed, name=f"s{seed}") for seed in (5, 5, 6)]
    assert runs[0].episode_returns == runs[1].episode_returns
    assert runs[0].episode_returns != runs[2].episode_returns
    assert runs[0].episode_lengths == [200, 200]


# ── real learners, real Pendulum ─────────────────────────────────────────────


@pytest.mark.parametrize(
    ("algo", "n_envs"),
    [("td3", 1), ("td3", 4), ("ppo", 1), ("ppo", 4)],
    ids=["td3-single", "td3-vector", "ppo-single", "ppo-vector"],
)
def test_pendulum_streams_transitions_and_swaps_in_new_weights(algo, n_envs):
    """Pendulum-v1 (single or a vector of 4) streams to TD3 or PPO, and newer weights reach the bot mid-play."""
    if algo == "td3":
        agent = make_agent("td3", 3, 1, hidden=(32, 32), warmup_steps=400, batch_size=64, updates_per_publish=32)
    else:
        agent = make_agent("ppo", 3, 1, hidden=(32, 32), rollout_steps=800, epochs=2, minibatch_size=200)
    with running_server(3, 1, agent=agent) as server:
        env = make_env("Pendulum-v1", n_envs=n_envs)
        with GymBot(server.url, env, seed=1, name=f"{algo}-{n_envs}") as bot:
            deadline = time.monotonic() + timeout(15)
            while bot.bot.stats.weights_swapped < 2 and time.monotonic() < deadline:
                result = bot.run(400)
        assert bot.bot.stats.weights_swapped >= 2, "no new weights reached the bot"
        assert result.policy is not None and result.policy.version >= 1
        wait_received(server, bot.steps, drained=False)  # TD3 drains at its training pace
    assert bot.bot.stats.steps_sent == bot.steps
    assert bot.episode_lengths and set(bot.episode_lengths) == {200}


def test_evaluate_is_deterministic_and_seeded():
    """evaluate() plays the policy's mean: the same seed gives the same returns, and a function works too."""
    agent = make_agent("td3", 3, 1, hidden=(16, 16))
    arch, tensors = agent.export_actor()
    policy = Policy.from_weights(Weights.pack(0, 0, arch, tensors))
    first = evaluate(policy, "Pendulum-v1", episodes=2, seed=3)
    assert len(first) == 2 and first == evaluate(policy, "Pendulum-v1", episodes=2, seed=3)
    assert first != evaluate(policy, "Pendulum-v1", episodes=2, seed=4)
    assert evaluate(policy.mean, "Pendulum-v1", episodes=2, seed=3) == first
    with pytest.raises(ValueError, match="3→1"):
        evaluate(policy, lambda: Countdown(), episodes=1)


def test_td3_with_another_action_limit_is_refused():
    """A TD3 actor acting in ±2 does not fit the [-1, 1] mapping: connecting says so."""
    with running_server(3, 1, agent=make_agent("td3", 3, 1, hidden=(16, 16), action_limit=2.0)) as server:
        bot = GymBot(server.url, make_env("Pendulum-v1"))
        with pytest.raises(ValueError, match="action_limit=1"):
            bot.connect()
        bot.close()


def test_off_policy_pace_holds_the_update_to_data_ratio_against_a_fast_bot():
    """A bot far faster than TD3's trainer waits for it: little is queued, and the updates keep up with the data."""
    agent = make_agent("td3", 3, 1, hidden=(16, 16), warmup_steps=200, batch_size=32, updates_per_publish=16)
    bound = 16 * agent.publish_steps  # server.transition_queue.OFF_POLICY_QUEUED_PUBLISHES publishes' worth
    with running_server(3, 1, agent=agent) as server:
        assert server.queue.credit_steps == bound
        with GymBot(server.url, make_env("Pendulum-v1", n_envs=4), seed=2, name="fast") as bot:
            most_queued = 0
            for _ in range(8):
                result = bot.run(400)
                most_queued = max(most_queued, server.queue.steps)
        received = server.metrics.counter("transitions_received")
        frame = 8 * 64  # the credit window (8 frames of 64 rows) may already be granted when the bound is reached
        assert most_queued <= bound + frame, (most_queued, bound)
        # Every step received past the warm-up earns one update (utd_ratio 1); at most the queue's worth is owed.
        assert agent.updates >= received - agent.warmup_target - bound - frame - agent.config.updates_per_publish
        assert result.policy is not None and result.policy.version >= 5
