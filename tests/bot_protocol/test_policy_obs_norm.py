"""A normalizing actor on the bots' side: the numpy Policy scales observations as the trainer's networks saw them.

The reference is the trainer's own actor run on the trainer's own normalization of the same
observations (``PPOAgent.obs_norm``); the exported tensors travel through the wire, and every
way of half-describing the scaling is ``bad_weights`` (or ``bad_field`` for the arch field itself).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig
from bot_protocol import Architecture, Weights, decode_tensors
from bot_protocol.errors import ErrorCode, ProtocolError
from bot_protocol.policy import Policy

OBS = 5
SCALE = np.array([0.01, 1.0, 30.0, 500.0, 2.0], np.float32)
OFFSET = np.array([0.0, -1.0, 200.0, -3000.0, 7.0], np.float32)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def raw_obs(n: int, seed: int) -> np.ndarray:
    return (OFFSET + SCALE * np.random.default_rng(seed).normal(size=(n, OBS))).astype(np.float32)


def normed_agent(branches: tuple[int, ...] = (), clip: float = 3.0) -> PPOAgent:
    """An agent with statistics from 500 observations and actor weights perturbed to outputs of O(1)."""
    act_dim = 2 if not branches else 1
    cfg = PPOConfig(obs_dim=OBS, act_dim=act_dim, branches=branches, hidden=(16, 8), obs_norm=True, obs_norm_clip=clip)
    agent = PPOAgent(cfg)
    agent.obs_norm.update(raw_obs(500, seed=0))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in agent.actor.net.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
    return agent


def exported_policy(agent: PPOAgent) -> Policy:
    arch, tensors = agent.export_actor()
    return Policy(Architecture.from_mapping(arch), tensors)


def trainer_output(agent: PPOAgent, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return agent.actor(agent.obs_norm(torch.from_numpy(obs))).numpy()


@pytest.mark.parametrize("branches", [(), (3, 2)])
def test_the_policy_acts_on_the_observations_the_trainer_normalized(branches):
    agent = normed_agent(branches)
    policy = exported_policy(agent)
    obs = raw_obs(64, seed=2)
    obs[:3] *= 50.0  # some rows past the clip
    want = trainer_output(agent, obs)
    if branches:
        np.testing.assert_allclose(policy.mean(obs), want[:, :1], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(policy.logits(obs), want[:, 1:], rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(policy.mean(obs), want, rtol=1e-6, atol=1e-6)
    unnormalized = Policy(replace(policy.arch, obs_clip=None), _without_norm(agent))
    assert not np.allclose(unnormalized.mean(obs), policy.mean(obs), atol=1e-3)


def _without_norm(agent: PPOAgent) -> dict[str, np.ndarray]:
    return {k: v for k, v in agent.export_actor()[1].items() if not k.startswith("obs_norm.")}


def test_the_policys_scaling_is_the_trainers_to_the_bit():
    """A clip that float32 cannot hold exactly, and huge rows: both sides round it, and every row, the same."""
    agent = normed_agent(clip=0.3)
    policy = exported_policy(agent)
    obs = raw_obs(200, seed=3) * np.float32(3.0)
    np.testing.assert_array_equal(policy._obs_norm.apply(obs), agent.obs_norm(torch.from_numpy(obs)).numpy())


@pytest.mark.parametrize("branches", [(), (3, 2)])
def test_the_weights_round_trip_through_the_wire_and_to_weights(branches):
    agent = normed_agent(branches)
    arch, tensors = agent.export_actor()
    weights = Weights.from_wire(Weights.pack(1, 7, arch, tensors).to_wire())
    assert weights.arch.obs_clip == 3.0 and weights.arch.to_wire()["obs_clip"] == 3.0
    policy = Policy.from_weights(weights)
    again = Policy.from_weights(policy.to_weights())
    obs = raw_obs(32, seed=4)
    np.testing.assert_array_equal(again.mean(obs), policy.mean(obs))
    np.testing.assert_array_equal(policy.mean(obs), exported_policy(agent).mean(obs))
    blob = decode_tensors(policy.to_weights().tensors)
    for name in ("obs_norm.mean", "obs_norm.std"):
        assert blob[name].tobytes() == tensors[name].tobytes()


def test_a_deterministic_actor_may_normalize_too():
    tensors = {"l0.weight": np.eye(2, OBS, dtype=np.float32), "l0.bias": np.zeros(2, np.float32)}
    tensors |= {"obs_norm.mean": OFFSET, "obs_norm.std": SCALE}
    arch = Architecture("tanh_mlp", (OBS, 2), "tanh", act_limit=1.0, obs_clip=5.0)
    assert Architecture.from_wire(arch.to_wire()) == arch
    obs = raw_obs(8, seed=5)
    want = np.tanh(np.clip((obs - OFFSET) / SCALE, -5.0, 5.0)[:, :2])
    np.testing.assert_allclose(Policy(arch, tensors).mean(obs), want, rtol=1e-6, atol=1e-6)


def bad_weights(arch: Architecture, tensors: dict[str, np.ndarray]) -> str:
    with pytest.raises(ProtocolError) as info:
        Policy(arch, tensors)
    assert info.value.code is ErrorCode.BAD_WEIGHTS
    return info.value.message


@pytest.mark.parametrize(
    ("drop", "clip", "says"),
    [
        ("obs_norm.std", 3.0, "without obs_norm.std"),
        ("obs_norm.mean", 3.0, "without obs_norm.mean"),
        (None, None, "without arch field 'obs_clip'"),
        ("both", 3.0, "without obs_norm.mean, obs_norm.std"),
    ],
)
def test_a_half_described_normalization_is_bad_weights(drop, clip, says):
    arch, tensors = normed_agent().export_actor()
    for name in ("obs_norm.mean", "obs_norm.std") if drop == "both" else (drop,) if drop else ():
        del tensors[name]
    arch = Architecture.from_mapping({**arch, "obs_clip": clip})
    assert says in bad_weights(arch, tensors)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("obs_norm.mean", np.zeros(OBS + 1, np.float32), "has shape"),
        ("obs_norm.std", np.ones((1, OBS), np.float32), "has shape"),
        ("obs_norm.std", np.array([1, 1, 0, 1, 1], np.float32), "must be > 0"),
        ("obs_norm.std", np.array([1, -1, 1, 1, 1], np.float32), "must be > 0"),
        ("obs_norm.mean", np.array([0, np.nan, 0, 0, 0], np.float32), "NaN or Inf"),
        ("obs_norm.std", np.array([1, np.inf, 1, 1, 1], np.float32), "NaN or Inf"),
    ],
)
def test_statistics_of_the_wrong_shape_or_value_are_bad_weights(name, value, says):
    arch, tensors = normed_agent().export_actor()
    tensors[name] = value
    assert says in bad_weights(Architecture.from_mapping(arch), tensors)


@pytest.mark.parametrize("value", [0, -1.0, "3", True, float("nan"), float("inf")])
def test_an_obs_clip_that_is_not_a_positive_number_is_bad_field(value):
    wire = Architecture.from_mapping(normed_agent().export_actor()[0]).to_wire()
    wire["obs_clip"] = value
    with pytest.raises(ProtocolError) as info:
        Architecture.from_wire(wire)
    assert info.value.code is ErrorCode.BAD_FIELD


def test_without_obs_clip_the_arch_is_what_it_was():
    arch = Architecture("gaussian_mlp", (4, 3), "tanh", -3.0, 0.0)
    assert "obs_clip" not in arch.to_wire() and Architecture.from_wire(arch.to_wire()).obs_clip is None
