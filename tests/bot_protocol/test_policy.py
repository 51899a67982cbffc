"""The numpy bot Policy must act exactly like the torch GaussianActor it was exported from; tensors cross the wire intact."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import safetensors.numpy
import torch

from agents import PPOAgent, PPOConfig
from bot_protocol import Architecture, Weights, decode_tensors, encode_tensors
from bot_protocol.errors import ErrorCode, ProtocolError
from bot_protocol.policy import Policy
from tests.bot_protocol.helpers import make_weights as _weights

OBS, ACT = 5, 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_agent(activation: str = "tanh", hidden=(16, 8), seed: int = 0) -> PPOAgent:
    """An agent whose actor weights are perturbed so means are O(1), not the near-zero of the 0.01-gain head."""
    agent = PPOAgent(
        PPOConfig(
            obs_dim=OBS, act_dim=ACT, hidden=hidden, activation=activation, rollout_steps=64, minibatch_size=64, seed=seed
        )
    )
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in agent.actor.net.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
        agent.actor.log_std.copy_(torch.tensor([-0.3, -1.2, -2.5]))
    return agent


def to_policy(agent: PPOAgent) -> Policy:
    arch, tensors = agent.export_actor()
    architecture = Architecture(
        arch["kind"], tuple(arch["layers"]), arch["activation"], arch["log_std_min"], arch["log_std_max"]
    )
    return Policy(architecture, tensors)


def random_obs(n: int = 64, seed: int = 1) -> np.ndarray:
    return (2.0 * np.random.default_rng(seed).normal(size=(n, OBS))).astype(np.float32)


def nearby_actions(agent: PPOAgent, obs: np.ndarray, seed: int) -> np.ndarray:
    """Actions as a bot would draw them: the mean plus up to a few stds (log-probs of order 1, as in training)."""
    with torch.no_grad():
        mean = agent.actor(torch.from_numpy(obs)).numpy()
        std = agent.actor.clamped_log_std().exp().numpy()
    z = 1.5 * np.random.default_rng(seed).normal(size=mean.shape)
    return (mean + std * z).astype(np.float32)


def torch_logp(agent: PPOAgent, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return agent.actor.log_prob(torch.from_numpy(obs), torch.from_numpy(actions))[0].numpy()


def assert_bitwise_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert x.dtype == y.dtype == np.float32, name
        assert x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name


# ── forward parity ───────────────────────────────────────────────────────────


@pytest.mark.parametrize(("activation", "hidden"), [("tanh", (16, 8)), ("relu", (16, 8)), ("tanh", (7,))])
def test_policy_mean_matches_torch_actor(activation, hidden):
    """Policy.mean equals GaussianActor.forward within 1e-5 on random observations."""
    agent = make_agent(activation, hidden)
    policy = to_policy(agent)
    obs = random_obs()
    with torch.no_grad():
        expected = agent.actor(torch.from_numpy(obs)).numpy()
    mean = policy.mean(obs)
    assert mean.dtype == np.float32 and mean.shape == (64, ACT)
    assert np.abs(expected).max() > 0.1  # not a trivially near-zero output
    np.testing.assert_allclose(mean, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_policy_log_prob_matches_torch_actor(activation):
    """Policy.log_prob equals GaussianActor.log_prob within 1e-4 for the same actions."""
    agent = make_agent(activation)
    policy = to_policy(agent)
    obs = random_obs()
    actions = nearby_actions(agent, obs, seed=2)
    np.testing.assert_allclose(policy.log_prob(obs, actions), torch_logp(agent, obs, actions), rtol=0, atol=1e-4)


@pytest.mark.parametrize("raw_log_std", [[-5.0, 0.7, -1.0], [-3.0, 0.0, 2.0], [-40.0, -40.0, 40.0]])
def test_out_of_range_log_std_is_clipped_identically(raw_log_std):
    """A raw log_std outside [log_std_min, log_std_max] is clipped the same way in numpy and torch."""
    agent = make_agent()
    with torch.no_grad():
        agent.actor.log_std.copy_(torch.tensor(raw_log_std))
    policy = to_policy(agent)
    expected_log_std = np.clip(np.float32(raw_log_std), -3.0, 0.0)
    np.testing.assert_array_equal(policy.log_std, expected_log_std)
    np.testing.assert_allclose(agent.actor.clamped_log_std().detach().numpy(), expected_log_std)
    obs = random_obs(seed=5)
    actions = nearby_actions(agent, obs, seed=6)
    np.testing.assert_allclose(policy.log_prob(obs, actions), torch_logp(agent, obs, actions), rtol=0, atol=1e-4)


def test_sampled_actions_carry_torch_log_probs():
    """act() returns samples whose log-probs are the torch actor's; deterministic act is the mean."""
    agent = make_agent()
    policy = to_policy(agent)
    obs = random_obs()
    actions, logp = policy.act(obs, np.random.default_rng(7))
    assert actions.dtype == logp.dtype == np.float32
    np.testing.assert_allclose(logp, torch_logp(agent, obs, actions), rtol=0, atol=1e-4)
    det, _ = policy.act(obs, np.random.default_rng(7), deterministic=True)
    np.testing.assert_array_equal(det, policy.mean(obs))


def test_policy_over_the_wire_matches_direct_policy():
    """Weights encoded to safetensors and verified by from_weights give the same policy as the raw export."""
    agent = make_agent()
    arch, tensors = agent.export_actor()
    blob = encode_tensors(tensors)
    message = Weights(
        generation=2,
        version=9,
        arch=Architecture(arch["kind"], tuple(arch["layers"]), arch["activation"], arch["log_std_min"], arch["log_std_max"]),
        tensors=blob,
        sha256=hashlib.sha256(blob).digest(),
    )
    wired = Policy.from_weights(message)
    assert (wired.generation, wired.version) == (2, 9)
    obs = random_obs()
    np.testing.assert_array_equal(wired.mean(obs), to_policy(agent).mean(obs))


# ── safetensors codec ────────────────────────────────────────────────────────


def sample_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {
        "l0.weight": rng.normal(size=(8, 5)).astype(np.float32),
        "l0.bias": rng.normal(size=8).astype(np.float32),
        "specials": np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.4028235e38], np.float32),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "cube": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    }


def test_encode_decode_round_trip_is_bitwise():
    """decode(encode(x)) reproduces every array bit for bit (NaN payload, -0.0, denormals, empty, scalar)."""
    x = sample_tensors()
    assert_bitwise_equal(decode_tensors(encode_tensors(x)), x)
    _, exported = make_agent().export_actor()
    assert_bitwise_equal(decode_tensors(encode_tensors(exported)), exported)


def test_our_encoding_loads_in_official_safetensors():
    """safetensors.numpy.load(encode_tensors(x)) equals x: bots in other languages can read our blobs."""
    x = sample_tensors()
    assert_bitwise_equal(safetensors.numpy.load(encode_tensors(x)), x)


def test_official_safetensors_decodes_with_ours():
    """decode_tensors(safetensors.numpy.save(x)) equals x, with and without __metadata__."""
    x = sample_tensors()
    assert_bitwise_equal(decode_tensors(safetensors.numpy.save(x)), x)
    assert_bitwise_equal(decode_tensors(safetensors.numpy.save(x, metadata={"format": "np"})), x)


def test_from_weights_rejects_sha256_mismatch():
    """A weights message whose digest disagrees with its blob (either side altered) is refused as bad_weights."""
    agent = make_agent()
    arch, tensors = agent.export_actor()
    blob = encode_tensors(tensors)
    architecture = Architecture(
        arch["kind"], tuple(arch["layers"]), arch["activation"], arch["log_std_min"], arch["log_std_max"]
    )
    digest = hashlib.sha256(blob).digest()
    flipped = bytearray(blob)
    flipped[-3] ^= 0x01
    for tensors_blob, sha in ((blob, bytes(32)), (bytes(flipped), digest)):
        message = Weights(generation=0, version=1, arch=architecture, tensors=tensors_blob, sha256=sha)
        with pytest.raises(ProtocolError) as info:
            Policy.from_weights(message)
        assert info.value.code is ErrorCode.BAD_WEIGHTS
        assert "sha256" in info.value.message


# ── weights checks ───────────────────────────────────────────────────────────


def test_policy_rejects_wrong_shapes_and_bad_digest():
    """A bot keeps its policy unless the blob's digest and every tensor shape check out."""
    weights = _weights()
    Policy.from_weights(weights)  # the good one builds
    with pytest.raises(ProtocolError):
        Policy.from_weights(Weights(1, 8, weights.arch, weights.tensors, b"\x00" * 32))
    wrong = Architecture("gaussian_mlp", (5, 2), "tanh", -3.0, 0.0)
    with pytest.raises(ProtocolError):
        Policy.from_weights(Weights(1, 8, wrong, weights.tensors, weights.sha256))
