"""PPO's ``obs_norm``: what the networks see in every path, when the statistics move, and what a checkpoint keeps.

The bots' side of the same scaling (the exported tensors in the numpy ``Policy``):
``tests/bot_protocol/test_policy_obs_norm.py``.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch

from agents import PPOAgent, Segment, SegmentEnd, agent_from_checkpoint
from agents.normalization import OBS_NORM_EPS
from agents.ppo.steps import BranchlessStep, EagerStep, WrittenOutStep
from tests.agents.ppo.test_agent import OBS, config, snapshot
from tests.agents.ppo.test_discrete import mixed_config, mixed_segments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SCALE = np.array([0.01, 1.0, 30.0, 500.0], np.float32)
OFFSET = np.array([0.0, -1.0, 200.0, -3000.0], np.float32)
"""A game's features: units apart by orders of magnitude, far from 0."""


def raw_obs(rng: np.random.Generator, n: int) -> np.ndarray:
    return (OFFSET + SCALE * rng.normal(size=(n, OBS))).astype(np.float32)


def bots_segments(agent: PPOAgent, seed: int = 0, lengths=(40, 30, 26)) -> list[Segment]:
    """Segments as bots send them: raw observations, log-probs of the policy they hold (weights and statistics)."""
    rng = np.random.default_rng(seed)
    ends = [SegmentEnd.TERMINAL, SegmentEnd.TRUNCATED, SegmentEnd.CUT]
    segments = []
    for i, n in enumerate(lengths):
        obs = raw_obs(rng, n)
        with torch.no_grad():
            seen = agent._normalized(torch.from_numpy(obs))
            mean = agent.actor(seen)
            act = (mean + agent.actor.clamped_log_std().exp() * torch.randn(mean.shape)).float()
            logp = agent.actor.log_prob(seen, act)[0]
        end = ends[i % 3]
        next_obs = None if end is SegmentEnd.TERMINAL else raw_obs(rng, 1)[0]
        reward = rng.normal(size=n).astype(np.float32)
        columns = {"obs": obs, "act": act.numpy(), "logp": logp.numpy(), "reward": reward, "next_obs": next_obs}
        segments.append(Segment(bot=f"bot{i}", agent=0, end=end, generation=0, version=0, **columns))
    return segments


def normed_agent(**overrides) -> PPOAgent:
    return PPOAgent(config(obs_norm=True, **overrides))


@pytest.mark.parametrize("clip", [0.0, -1.0, float("nan"), float("inf")])
def test_the_config_refuses_a_clip_that_is_not_a_finite_positive_number(clip):
    with pytest.raises(ValueError, match="obs_norm_clip must be a finite number > 0"):
        config(obs_norm=True, obs_norm_clip=clip)


def test_off_by_default_and_nothing_added():
    agent = PPOAgent(config())
    assert not agent.config.obs_norm and agent.obs_norm is None
    arch, tensors = agent.export_actor()
    assert "obs_clip" not in arch and not any(k.startswith("obs_norm") for k in tensors)
    assert "obs_norm" not in agent.state_dict()


def test_an_update_moves_the_statistics_to_the_rollouts_observations():
    agent = normed_agent()
    segments = bots_segments(agent)
    agent.observe(segments)
    metrics = agent.update()
    assert all(np.isfinite(v) for k, v in metrics.items() if k != "train/explained_variance")
    seen = np.concatenate([s.obs for s in segments]).astype(np.float64)
    stats = agent.obs_norm.stats
    assert stats.count == len(seen)
    np.testing.assert_allclose(stats.mean, seen.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(stats.var, seen.var(axis=0), rtol=1e-8)


def test_the_update_trains_on_the_statistics_the_bots_acted_with_and_moves_them_after():
    """Every minibatch row's obs is normalized by the statistics exported before the update, not after."""
    agent = normed_agent(proximal_anchor=True)
    agent.observe(bots_segments(agent, seed=0))
    agent.update()  # statistics now far from the prior
    before = agent.export_actor()[1]
    segments = bots_segments(agent, seed=1)
    agent.observe(segments)
    seen_rows = []
    step = agent.step
    agent.step = lambda rows, idx: (seen_rows.append(rows), step(rows, idx))[1]
    agent.update()
    obs = np.concatenate([s.obs for s in segments])
    expected = np.clip((obs - before["obs_norm.mean"]) / before["obs_norm.std"], -10.0, 10.0)
    np.testing.assert_array_equal(seen_rows[0][:, :OBS].numpy(), expected)
    assert agent.obs_norm.stats.count == 2 * len(obs)
    assert not np.array_equal(agent.export_actor()[1]["obs_norm.mean"], before["obs_norm.mean"])


def test_the_anchors_ratio_starts_at_one_on_the_bots_own_data():
    """With no lag the proximal log-probs equal the bots': the learner's policy is the published one, stats included."""
    agent = normed_agent(proximal_anchor=True)
    agent.observe(bots_segments(agent, seed=0))
    agent.update()
    segments = bots_segments(agent, seed=1)
    rollout = agent._prepare(segments)
    old_logp = rollout.rows[:, OBS + 2]
    np.testing.assert_allclose(old_logp.numpy(), np.concatenate([s.logp for s in segments]), rtol=1e-5, atol=1e-5)


def test_bootstrap_values_read_the_normalized_next_observation():
    agent = normed_agent()
    agent.obs_norm.update(raw_obs(np.random.default_rng(5), 300))
    segments = bots_segments(agent)
    obs = agent._normalized(torch.from_numpy(np.concatenate([s.obs for s in segments])))
    _, _, last = agent._values(segments, obs)
    with torch.no_grad():
        for i, s in enumerate(segments):
            want = 0.0 if s.next_obs is None else float(agent.critic(agent.obs_norm(torch.from_numpy(s.next_obs[None])))[0])
            assert last[i] == pytest.approx(want, rel=1e-6, abs=1e-7)
        raw = float(agent.critic(torch.from_numpy(segments[1].next_obs[None]))[0])
        assert last[1] != pytest.approx(raw, rel=1e-3)  # the raw observation would give another value


@pytest.mark.parametrize("other", [EagerStep, BranchlessStep])
def test_the_written_out_step_and_the_reference_agree_with_normalization(other):
    a = normed_agent(proximal_anchor=True)
    b = copy.deepcopy(a)
    assert a._step_kind is WrittenOutStep
    b.use_step(other)
    for seed in (0, 1):
        segments = bots_segments(a, seed=seed)
        for agent in (a, b):
            agent.observe(segments)
            agent.update()
    for x, y in zip(snapshot(a), snapshot(b), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)
    assert a.obs_norm.stats.mean.tobytes() == b.obs_norm.stats.mean.tobytes()


def test_a_mixed_actor_trains_with_normalization():
    agent = PPOAgent(mixed_config(obs_norm=True))
    agent.observe(mixed_segments(agent, seed=0))
    metrics = agent.update()
    assert np.isfinite(metrics["train/policy_loss"]) and agent.obs_norm.stats.count == 96
    arch, tensors = agent.export_actor()
    assert arch["kind"] == "mixed_mlp" and arch["obs_clip"] == 10.0 and tensors["obs_norm.std"].shape == (OBS,)


def test_export_adds_the_statistics_as_float32_and_the_clip_to_the_arch():
    agent = normed_agent(obs_norm_clip=4.0)
    agent.obs_norm.update(raw_obs(np.random.default_rng(0), 100))
    arch, tensors = agent.export_actor()
    assert arch["obs_clip"] == 4.0
    assert tensors["obs_norm.mean"].dtype == tensors["obs_norm.std"].dtype == np.float32
    np.testing.assert_array_equal(tensors["obs_norm.mean"], agent.obs_norm.stats.mean.astype(np.float32))
    np.testing.assert_array_equal(tensors["obs_norm.std"], np.sqrt(agent.obs_norm.stats.var + OBS_NORM_EPS).astype(np.float32))


def save_and_load(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)


def test_a_checkpoint_resumes_the_statistics_and_training_bitwise():
    a = normed_agent()
    a.observe(bots_segments(a, seed=0))
    a.update()
    saved = a.state_dict()
    b = normed_agent(seed=99)
    b.load_state_dict(save_and_load(saved))
    c = agent_from_checkpoint(save_and_load(saved))  # a load of its own: Adam may keep the loaded tensors
    segments = bots_segments(a, seed=1)
    for agent in (a, b, c):
        assert agent.obs_norm.stats.count == 96
        agent.observe(segments)
        agent.update()
    for other in (b, c):
        assert all(torch.equal(x, y) for x, y in zip(snapshot(a), snapshot(other), strict=True))
        assert a.obs_norm.stats.mean.tobytes() == other.obs_norm.stats.mean.tobytes()
        assert a.obs_norm.stats.var.tobytes() == other.obs_norm.stats.var.tobytes()
        assert a.obs_norm.stats.count == other.obs_norm.stats.count


@pytest.mark.parametrize(("saved", "loading"), [(True, False), (False, True)])
def test_a_checkpoint_that_normalized_differently_is_refused_before_anything_loads(saved, loading):
    source = PPOAgent(config(obs_norm=saved, seed=1))
    target = PPOAgent(config(obs_norm=loading))
    before = snapshot(target)
    with pytest.raises(ValueError, match=r"observations \(obs_norm\)"):
        target.load_state_dict(source.state_dict())
    assert all(torch.equal(x, y) for x, y in zip(before, snapshot(target), strict=True))


def test_checkpoint_statistics_of_another_width_are_refused():
    state = normed_agent().state_dict()
    state["obs_norm"]["mean"] = torch.zeros(OBS + 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="checkpoint obs_norm mean"):
        normed_agent().load_state_dict(state)


def test_several_learner_ranks_are_refused():
    with pytest.raises(ValueError, match="obs_norm is not available with several learner ranks"):
        normed_agent().distribute(lambda params, ok: ok)


def test_the_config_round_trips_through_a_checkpoint():
    agent = normed_agent(obs_norm_clip=3.0)
    rebuilt = agent_from_checkpoint(save_and_load(agent.state_dict()))
    assert isinstance(rebuilt, PPOAgent)
    assert rebuilt.config == agent.config
    assert rebuilt.obs_norm is not None and rebuilt.obs_norm.clip == 3.0
