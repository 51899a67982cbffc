"""The conv torso (``arch.conv``) in the numpy Policy: docs/protocol.md §4.6's test vector, the trainer's torch
networks to float32 tolerance, and every malformed description or blob refused by name.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig
from bot_protocol import Architecture, ConvSpec, ErrorCode, Policy, ProtocolError, Weights, encode_tensors

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VECTOR_TENSORS = {
    "c0.weight": np.array(
        [[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]], [[[0.0, 0.0], [0.0, 0.0]], [[0.5, -0.5], [0.5, -0.5]]]],
        np.float32,
    ),
    "c0.bias": np.array([0.1, -0.1], np.float32),
    "l0.weight": np.array([[1.0, 0.0, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, -1.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.25]], np.float32),
    "l0.bias": np.array([0.0, 0.1, -0.2], np.float32),
}
VECTOR_ARCH = Architecture(
    "mixed_mlp", (5, 3), "tanh", -3.0, 0.0, continuous=0, branches=(3,), conv=ConvSpec((2, 3, 2), ((2, 2, 2),))
)
VECTOR_OBS = np.array([[0.5, -1.0, 0.0, 1.0, 1.0, 0.5, -0.5, 0.0, 0.25, 1.0, 0.0, -0.5, 2.0]], np.float32)
VECTOR_MASK = np.array([[1, 1, 0]])


def test_the_documented_test_vector():
    """docs/protocol.md §4.6, number for number (the doc's values are printed to 7 digits)."""
    policy = Policy(VECTOR_ARCH, VECTOR_TENSORS)
    assert policy.obs_dim == 13 and VECTOR_ARCH.conv is not None and VECTOR_ARCH.conv.features == 4
    features = VECTOR_ARCH.conv.forward(VECTOR_OBS, [(VECTOR_TENSORS["c0.weight"], VECTOR_TENSORS["c0.bias"])], np.tanh)
    np.testing.assert_allclose(features, [[0.6910695, 0.0996680, -0.9216685, 0.7162978, 2.0]], atol=1e-6)
    np.testing.assert_allclose(policy.logits(VECTOR_OBS), [[0.2302352, -0.5166298, 0.6953688]], atol=1e-6)
    no_act = np.zeros((1, 0), np.float32)
    for dact, logp in ((0, -0.3878779), (1, -1.134743)):
        got = policy.log_prob(VECTOR_OBS, no_act, dact=np.array([[dact]]), mask=VECTOR_MASK)
        np.testing.assert_allclose(got, [logp], atol=1e-6)
    assert policy.log_prob(VECTOR_OBS, no_act, dact=np.array([[2]]), mask=VECTOR_MASK)[0] == -np.inf
    np.testing.assert_allclose(policy.entropy(VECTOR_OBS, mask=VECTOR_MASK), [0.6279986], atol=1e-6)
    assert policy.act(VECTOR_OBS, np.random.default_rng(0), deterministic=True, mask=VECTOR_MASK).dact.tolist() == [[0]]
    blob = encode_tensors(VECTOR_TENSORS)
    assert len(blob) == 408 and int.from_bytes(blob[:8], "little") == 256
    assert hashlib.sha256(blob).hexdigest() == "b140c30fcf4e7a685523ee6d795ee87fbc6e392abda30475c4219af0e25de60a"


def _trained_shape_agent(**options: object) -> PPOAgent:
    return PPOAgent(PPOConfig(hidden=(16,), **options))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"obs_dim": 84, "act_dim": 0, "branches": (7,), "image": (6, 7, 2), "conv": (16, 4, 4)},  # connect four's
        {"obs_dim": 86, "act_dim": 1, "branches": (3, 2), "image": (6, 7, 2), "conv": (8, 3, 3, 4, 2, 2)},  # + extras
        {"obs_dim": 30, "act_dim": 2, "image": (5, 6, 1), "conv": (6, 2, 3), "activation": "relu"},  # gaussian
        {"obs_dim": 84, "act_dim": 0, "branches": (7,), "image": (6, 7, 2), "conv": (8, 4, 4), "obs_norm": True},
    ],
    ids=["mixed", "extra-entries", "gaussian-relu", "obs-norm"],
)
def test_the_numpy_torso_matches_the_trainers_actor(options: dict[str, object]):
    agent = _trained_shape_agent(**options)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(9, agent.config.obs_dim)).astype(np.float32)
    if agent.obs_norm is not None:
        agent.obs_norm.update(rng.normal(1.0, 2.0, size=(50, agent.config.obs_dim)))
    arch, tensors = agent.export_actor()
    policy = Policy.from_weights(Weights.pack(0, 1, Architecture.from_mapping(arch), tensors))
    assert policy.obs_dim == agent.config.obs_dim
    with torch.no_grad():
        x = torch.from_numpy(obs)
        expected = agent.actor(agent.obs_norm(x) if agent.obs_norm is not None else x).numpy()
    got = policy.mean(obs) if not agent.config.branches else policy._forward(obs)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    again = Policy.from_weights(policy.to_weights())  # what a league keeps of a learner
    np.testing.assert_array_equal(again._forward(obs), policy._forward(obs))


@pytest.mark.parametrize(
    ("conv", "message"),
    [
        ([6, 7, 2], "must be a map with 'image' and 'layers'"),
        ({"image": [6, 7, 2]}, "'conv.layers' must be an array"),
        ({"image": [6, 7], "layers": [[4, 2, 2]]}, "height, width, channels"),
        ({"image": [6, 7, 2], "layers": []}, "1..8 layers"),
        ({"image": [6, 7, 2], "layers": [[4, 2]]}, "out_channels"),
        ({"image": [6, 7, 2], "layers": [[4, 7, 2]]}, "does not fit"),
        ({"image": [6, 7, 2.0], "layers": [[4, 2, 2]]}, "height, width, channels"),
        ({"image": [64, 64, 2], "layers": [[4, 2, 2]]}, "at most 4096 entries"),
        ({"image": [6, 7, 2], "layers": [[4, 2, 2]]}, "gives 120 features, more than the MLP's 84"),
    ],
)
def test_a_malformed_conv_field_is_bad_field(conv: object, message: str):
    wire = {"kind": "mixed_mlp", "layers": [84, 7], "activation": "tanh", "continuous": 0, "branches": [7]}
    wire |= {"log_std_min": -3.0, "log_std_max": 0.0, "conv": conv}
    with pytest.raises(ProtocolError, match=message) as caught:
        Architecture.from_wire(wire)
    assert caught.value.code is ErrorCode.BAD_FIELD


def test_the_conv_field_goes_over_the_wire_and_back():
    assert Architecture.from_wire(VECTOR_ARCH.to_wire()) == VECTOR_ARCH
    assert "conv" not in Architecture("gaussian_mlp", (4, 2), "tanh", -3.0, 0.0).to_wire()  # absent means none


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.pop("c0.bias"), "missing tensor 'c0.bias'"),
        (lambda t: t.update({"c0.weight": np.zeros((2, 2, 2, 1), np.float32)}), "'c0.weight' has shape"),
        (lambda t: t.update({"c0.weight": np.full((2, 2, 2, 2), np.nan, np.float32)}), "NaN or Inf"),
        (lambda t: t.update({"c1.bias": np.zeros(2, np.float32)}), "unexpected tensors"),
    ],
)
def test_a_blob_that_does_not_fit_its_torso_is_bad_weights(change, message: str):
    tensors = {k: v.copy() for k, v in VECTOR_TENSORS.items()}
    change(tensors)
    with pytest.raises(ProtocolError, match=message) as caught:
        Policy(VECTOR_ARCH, tensors)
    assert caught.value.code is ErrorCode.BAD_WEIGHTS
