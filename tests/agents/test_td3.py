"""TD3 and DDPG: the fused math equals the direct math, the seed's rules hold, and it learns through the server."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import torch

from agents import CheckpointStore, Segment, SegmentEnd, TD3Agent, TD3Config, agent_from_checkpoint, ddpg_config, make_agent
from agents.replay import ReplayBatch
from agents.td3 import CriticEnsemble, DeterministicActor, polyak_foreach, polyak_loop
from arena.games.reach import ACT_DIM, OBS_DIM, play_reach
from bot_protocol import Policy, PolicyId, Weights, decode_from_server, encode
from tests.conftest import running_server, timeout

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _segment(steps: int, end: SegmentEnd, obs_dim: int = 3, act_dim: int = 1, seed: int = 0) -> Segment:
    rng = np.random.default_rng(seed)
    return Segment(
        bot="b",
        agent=0,
        obs=rng.standard_normal((steps, obs_dim)).astype(np.float32),
        act=rng.uniform(-1, 1, (steps, act_dim)).astype(np.float32),
        logp=np.zeros(steps, np.float32),
        end=end,
        next_obs=None if end is SegmentEnd.TERMINAL else rng.standard_normal(obs_dim).astype(np.float32),
        generation=0,
        version=0,
        reward=rng.standard_normal(steps).astype(np.float32),
    )


def _small(**overrides: object) -> TD3Agent:
    settings: dict[str, object] = {"hidden": (16, 16), "batch_size": 8, "buffer_size": 256, "warmup_steps": 0}
    settings.update(overrides)
    return TD3Agent(TD3Config(obs_dim=3, act_dim=1, **settings))  # type: ignore[arg-type]


# ── the fused networks equal the direct ones ─────────────────────────────────


def test_fused_critics_equal_two_separate_critics_in_values_and_gradients():
    torch.manual_seed(0)
    fused = CriticEnsemble(2, obs_dim=5, act_dim=2, hidden=(8, 6))
    separate = fused.split()
    obs, act = torch.randn(10, 5), torch.randn(10, 2)
    q = fused(obs, act)
    joint = torch.cat([obs, act], dim=1)
    expected = torch.stack([critic(joint).squeeze(-1) for critic in separate])
    torch.testing.assert_close(q, expected)
    torch.testing.assert_close(fused.q1(obs, act), expected[0])

    target = torch.randn(10)
    (q - target).pow(2).mean(dim=1).sum().backward()
    sum((critic(joint).squeeze(-1) - target).pow(2).mean() for critic in separate).backward()  # type: ignore[union-attr]
    for k, critic in enumerate(separate):
        linears = [m for m in critic if isinstance(m, torch.nn.Linear)]
        for i, linear in enumerate(linears):
            assert fused.weights[i].grad is not None and fused.biases[i].grad is not None
            torch.testing.assert_close(fused.weights[i].grad[k], linear.weight.grad.T)
            torch.testing.assert_close(fused.biases[i].grad[k, 0], linear.bias.grad)


def test_critics_are_initialized_independently():
    torch.manual_seed(0)
    fused = CriticEnsemble(2, obs_dim=4, act_dim=2, hidden=(16, 16))
    first = fused.weights[0]
    assert not torch.allclose(first[0], first[1])
    for k in range(2):  # each slice orthogonal on its own: (in=6, out=16) has orthonormal rows, times the gain
        w = first[k]
        gram = w @ w.T / 2.0  # gain sqrt(2)
        torch.testing.assert_close(gram, torch.eye(w.shape[0]), atol=1e-5, rtol=0)


def test_q1_moves_the_actor_only():
    agent = _small()
    obs = torch.randn(4, 3)
    loss = -agent.critic.q1(obs, agent.actor(obs)).mean()
    loss.backward()
    assert all(p.grad is None for p in agent.critic.parameters())
    assert all(p.grad is not None for p in agent.actor.parameters())


def test_foreach_polyak_equals_the_loop():
    torch.manual_seed(0)
    online = [torch.randn(3, 4), torch.randn(7)]
    target_a = [torch.randn(3, 4), torch.randn(7)]
    original = [t.clone() for t in target_a]
    target_b = [t.clone() for t in target_a]
    polyak_foreach(target_a, online, 0.005)
    polyak_loop(target_b, online, 0.005)
    for a, b, before, o in zip(target_a, target_b, original, online, strict=True):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, 0.995 * before + 0.005 * o)


# ── the target, by hand ──────────────────────────────────────────────────────


def test_td3_target_takes_the_min_masks_terminals_and_clips_the_smoothed_action():
    agent = _small(gamma=0.9, action_limit=2.0)
    obs_dim, act_dim = 3, 1

    class Fixed(torch.nn.Module):
        def __init__(self, value: float) -> None:
            super().__init__()
            self.value = value

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.full((obs.shape[0], act_dim), self.value)

    seen: list[torch.Tensor] = []

    class TwoCritics(torch.nn.Module):
        def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
            seen.append(act)
            return torch.stack([act[:, 0] * 10.0, torch.full((obs.shape[0],), 3.0)])

    agent.actor_target = Fixed(1.9)  # type: ignore[assignment]
    agent.critic_target = TwoCritics()  # type: ignore[assignment]
    batch = ReplayBatch(
        obs=torch.zeros(4, obs_dim),
        act=torch.zeros(4, act_dim),
        rew=torch.tensor([1.0, 1.0, -1.0, 0.5]),
        next_obs=torch.zeros(4, obs_dim),
        terminal=torch.tensor([0.0, 1.0, 0.0, 0.0]),
    )
    generator = torch.Generator().manual_seed(5)
    target = agent.target_value(batch, generator)
    noise = torch.randn((4, act_dim), generator=torch.Generator().manual_seed(5))
    smoothed = (1.9 + (noise * 0.2).clamp(-0.5, 0.5)).clamp(-2.0, 2.0)
    torch.testing.assert_close(seen[0], smoothed)
    assert seen[0].max() <= 2.0  # the limit clips the smoothed action
    q_min = torch.minimum(smoothed[:, 0] * 10.0, torch.tensor(3.0))  # = 3: the pessimistic critic wins
    expected = batch.rew + 0.9 * (1 - batch.terminal) * q_min
    torch.testing.assert_close(target, expected)
    assert target[1].item() == pytest.approx(1.0)  # terminal: reward only, no bootstrap


def test_smoothing_noise_is_clipped():
    agent = _small(target_noise=0.3, target_noise_clip=0.3, action_limit=10.0)
    agent.actor_target = lambda obs: torch.zeros(obs.shape[0], 1)  # type: ignore[assignment]
    seen: list[torch.Tensor] = []

    def critic(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        seen.append(act)
        return torch.zeros(2, obs.shape[0])

    agent.critic_target = critic  # type: ignore[assignment]
    batch = ReplayBatch(torch.zeros(4096, 3), torch.zeros(4096, 1), torch.zeros(4096), torch.zeros(4096, 3), torch.zeros(4096))
    agent.target_value(batch, torch.Generator().manual_seed(0))
    assert seen[0].abs().max().item() == pytest.approx(0.3)  # 1-sigma clip: many samples hit it


def test_truncation_bootstraps_and_only_terminal_ends():
    agent = _small()
    truncated = _segment(5, SegmentEnd.TRUNCATED, seed=1)
    cut = _segment(4, SegmentEnd.CUT, seed=2)
    terminal = _segment(3, SegmentEnd.TERMINAL, seed=3)
    agent.observe([truncated, cut, terminal])
    replay = agent.replay
    assert len(replay) == 12
    np.testing.assert_array_equal(replay.terminal[:12].numpy(), [0] * 9 + [0, 0, 1])
    np.testing.assert_array_equal(replay.next_obs[:4].numpy(), truncated.obs[1:])
    assert truncated.next_obs is not None and cut.next_obs is not None
    np.testing.assert_array_equal(replay.next_obs[4].numpy(), truncated.next_obs)  # bootstrapped from next_obs
    np.testing.assert_array_equal(replay.next_obs[8].numpy(), cut.next_obs)
    np.testing.assert_array_equal(replay.rew[:5].numpy(), truncated.reward)


def test_terms_mode_segments_get_the_seed_rewards():
    from arena.games.tank.rewards import TANK_REWARD  # the game's reward function, as the server's segments carry it

    agent = _small(hidden=(8,))
    terms = np.zeros((2, 5), np.float32)
    terms[:, 0] = [-10.0, 0.0]  # lost 10 energy on the first tick
    segment = Segment("b", 0, np.zeros((2, 3), np.float32), np.zeros((2, 1), np.float32), np.zeros(2, np.float32),
                      SegmentEnd.TERMINAL, None, 0, 0, terms=terms, score=400.0, reward_fn=TANK_REWARD)  # fmt: skip
    agent.observe([segment])
    from agents import segment_rewards

    np.testing.assert_allclose(agent.replay.rew[:2].numpy(), segment_rewards(segment))


# ── the seed's rules ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"action_limit": 0.0}, "action limit must be positive"),
        ({"action_limit": float("nan")}, "action limit must be positive"),
        ({"tau": 0.0}, "tau must be in (0, 1]"),
        ({"tau": 1.5}, "tau must be in (0, 1]"),
        ({"policy_delay": 0}, "policy delay must be at least one"),
        ({"target_noise": 0.6, "target_noise_clip": 0.5}, "clipping below the noise scale makes the smoothing one-sided"),
        ({"n_critics": 3}, "n_critics must be 1 (DDPG) or 2 (TD3)"),
        ({"batch_size": 512, "buffer_size": 100}, "batch_size 512 exceeds buffer_size 100"),
        ({"utd_ratio": 0.0}, "utd_ratio must be a finite number > 0"),
    ],
)
def test_config_refusals(overrides: dict[str, object], message: str):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        TD3Config(obs_dim=3, act_dim=1, **overrides)  # type: ignore[arg-type]


def test_ddpg_is_td3_with_one_critic_no_smoothing_no_delay():
    config = ddpg_config(3, 1)
    assert (config.n_critics, config.target_noise, config.policy_delay) == (1, 0.0, 1)
    agent = make_agent("ddpg", 3, 1, hidden=(8,), batch_size=4, warmup_steps=0, buffer_size=64)
    assert agent.name == "ddpg" and isinstance(agent, TD3Agent)
    assert agent.critic(torch.zeros(2, 3), torch.zeros(2, 1)).shape == (1, 2)
    agent.observe([_segment(8, SegmentEnd.TRUNCATED)])
    assert agent.ready()
    stats = agent.update()
    assert stats["train/updates_this_call"] == 8 and math.isfinite(stats["train/critic_loss"])


# ── pace, delay, exploration ─────────────────────────────────────────────────


def test_warmup_then_utd_budget_paces_the_updates():
    agent = _small(warmup_steps=20, utd_ratio=0.5, updates_per_publish=4)
    assert agent.explore_settings() == {"noise": 0.1, "random": 1.0}
    agent.observe([_segment(16, SegmentEnd.TRUNCATED)])
    assert not agent.ready() and agent.drain_steps is None  # warming up: drain everything
    agent.observe([_segment(8, SegmentEnd.TRUNCATED, seed=1)])  # 24 >= 20: these 8 earn 4 updates
    assert agent.ready() and agent.drain_steps == 8
    stats = agent.update()
    assert stats["train/updates_this_call"] == 4 and stats["train/steps_trained"] == 24
    assert not agent.ready() and agent.pending_steps == 0
    assert agent.explore_settings()["random"] == 0.0


def test_delayed_steps_do_no_actor_work():
    agent = _small(policy_delay=3)
    agent.observe([_segment(32, SegmentEnd.TRUNCATED)])
    actor_before = [p.detach().clone() for p in agent.actor.parameters()]
    agent.run_cycle()
    critic_steps = agent.critic_optimizer.state[next(iter(agent.critic.parameters()))]["step"]
    actor_steps = agent.actor_optimizer.state[next(iter(agent.actor.parameters()))]["step"]
    assert (int(critic_steps), int(actor_steps)) == (3, 1)
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, agent.actor.parameters(), strict=True))
    assert agent.updates == 3


def test_exported_actor_runs_identically_in_numpy():
    torch.manual_seed(3)
    actor = DeterministicActor(5, 2, (16, 8), action_limit=2.0)
    arch, tensors = actor.export()
    policy = Policy.from_weights(Weights.pack(0, 1, arch, tensors, {"noise": 0.3, "random": 0.0}))
    obs = np.random.default_rng(0).standard_normal((64, 5)).astype(np.float32)
    expected = actor(torch.from_numpy(obs)).detach().numpy()
    np.testing.assert_allclose(policy.mean(obs), expected, atol=1e-5)
    rng = np.random.default_rng(1)
    deterministic, logp = policy.act(obs, rng, deterministic=True)
    np.testing.assert_allclose(deterministic, expected, atol=1e-5)
    assert not logp.any()
    noisy, _ = policy.act(obs, rng)
    assert np.abs(noisy).max() <= 2.0 and 0.1 < np.std(noisy - expected) < 0.5


def test_explore_settings_travel_with_the_weights_and_random_means_uniform():
    actor = DeterministicActor(3, 2, (8,), action_limit=0.5)
    arch, tensors = actor.export()
    message = decode_from_server(encode(Weights.pack(0, 0, arch, tensors, {"noise": 0.05, "random": 1.0})))
    assert isinstance(message, Weights) and message.explore == {"noise": 0.05, "random": 1.0}
    assert message.arch.kind == "tanh_mlp" and message.arch.act_limit == 0.5
    policy = Policy.from_weights(message)
    actions, _ = policy.act(np.zeros((4000, 3), np.float32), np.random.default_rng(0))
    assert -0.5 <= actions.min() < -0.45 and 0.45 < actions.max() <= 0.5  # uniform over the bounds
    later = Weights.pack(0, 1, arch, tensors)  # no explore: the bot keeps what it had
    assert Policy.from_weights(later, policy.explore).random


# ── checkpoints ──────────────────────────────────────────────────────────────


def _params(agent: TD3Agent) -> list[torch.Tensor]:
    modules = (agent.actor, agent.critic, agent.actor_target, agent.critic_target)
    return [p.detach().clone() for m in modules for p in m.parameters()]


def test_resume_with_the_replay_buffer_continues_exactly(tmp_path):
    def fresh() -> TD3Agent:
        return _small(save_replay=True, seed=7)

    def feed(agent: TD3Agent, seed: int) -> None:
        agent.observe([_segment(16, SegmentEnd.TRUNCATED, seed=seed)])

    straight = fresh()
    feed(straight, 0)
    for _ in range(3):
        straight.run_cycle()
    store = CheckpointStore(tmp_path)
    store.save({"agent": straight.state_dict()}, PolicyId(0, 1))
    feed(straight, 1)
    for _ in range(4):
        straight.run_cycle()

    state, _ = store.load_latest()  # type: ignore[misc]
    resumed = agent_from_checkpoint(state["agent"])
    assert isinstance(resumed, TD3Agent) and len(resumed.replay) == 16 and resumed.updates == 6
    feed(resumed, 1)
    for _ in range(4):
        resumed.run_cycle()
    for a, b in zip(_params(straight), _params(resumed), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_resume_without_the_replay_buffer_runs_a_fresh_warmup():
    agent = _small(warmup_steps=10)
    agent.observe([_segment(16, SegmentEnd.TRUNCATED)])
    agent.update()
    state = agent.state_dict()
    assert "replay" not in state
    resumed = _small(warmup_steps=10)
    resumed.load_state_dict(state)
    assert len(resumed.replay) == 0 and resumed.updates == agent.updates
    assert resumed.explore_settings()["random"] == 0.0  # the trained actor explores with noise, not at random
    resumed.observe([_segment(8, SegmentEnd.TRUNCATED)])
    assert not resumed.ready()
    resumed.observe([_segment(8, SegmentEnd.TRUNCATED, seed=1)])
    assert resumed.ready()


def test_a_checkpoint_of_another_algorithm_or_size_is_refused():
    ppo_state = make_agent("ppo", 3, 1, hidden=(8,)).state_dict()
    with pytest.raises(ValueError, match="holds a 'ppo' agent, not 'td3'"):
        _small().load_state_dict(ppo_state)
    with pytest.raises(ValueError, match="network sizes"):
        _small(hidden=(8, 8)).load_state_dict(_small().state_dict())


# ── through the real server ──────────────────────────────────────────────────


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_trains_through_the_server_and_hot_swaps_its_actor(algo: str):
    """Bots act with published tanh actors plus their own noise: updates run once the warm-up is in, every
    step is accepted, and new actors reach the bot while it plays.

    How much it learns is a benchmark's question (``bench/offpolicy_reach.py``, over seeds beside the
    random policy): in a test on a busy machine it hangs on thread timing (how soon trained weights
    reach the bot), and a fixed bound failed DDPG one run in four here."""
    agent = make_agent(
        algo, OBS_DIM, ACT_DIM, hidden=(64, 64), warmup_steps=1000, batch_size=128, learning_rate=1e-3, updates_per_publish=32
    )
    stop, played = threading.Event(), []
    with running_server(agent=agent) as server:
        bot_thread = threading.Thread(
            target=lambda: played.append(play_reach(server.url, n_agents=8, steps=20_000, stop=stop))
        )
        bot_thread.start()
        deadline = time.monotonic() + timeout(60)
        while server.trainer.version < 3 and time.monotonic() < deadline and bot_thread.is_alive():
            time.sleep(0.05)
        time.sleep(0.5)  # the newest version's frame is on its way to the bot, which is still playing
        stop.set()
        bot_thread.join(timeout(30))
        accounting = server.accounting()
    assert played, "the bot failed"
    game, bot = played[0]
    assert server.trainer.version >= 3, "fewer than 3 publishes within a minute"
    assert bot.stats.steps_sent > 1000 and accounting["dropped"] == 0
    assert agent.updates >= 3 * 32 and bot.stats.weights_swapped >= 1
    assert len(game.finished) > 0 and np.isfinite(game.finished).all()


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_a_space_with_discrete_branches_is_refused_in_one_line(algo: str):
    """A deterministic actor and a Q over continuous actions have no discrete form: PPO learns those spaces."""
    refusal = "DDPG and TD3 learn continuous actions only; use PPO for a space with discrete branches"
    with pytest.raises(ValueError) as by_name:
        make_agent(algo, 3, 1, branches=(2,))
    with pytest.raises(ValueError) as by_config:
        TD3Config(obs_dim=3, act_dim=0, branches=(4, 2))
    assert str(by_name.value) == str(by_config.value) == refusal
    assert TD3Config(obs_dim=3, act_dim=1, branches=()).branches == ()
