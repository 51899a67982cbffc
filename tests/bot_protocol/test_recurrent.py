"""The numpy recurrent cells (bot_protocol/recurrent.py) against torch's ``nn.GRU`` and ``nn.LSTM``, and their wire field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bot_protocol import ErrorCode, ProtocolError
from bot_protocol.recurrent import RecurrentSpec

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_numpy_cell_follows_torchs_over_100_steps_with_resets(cell: str):
    """Three agents, episodes ending at random steps: the state goes back to zeros there, in numpy and in torch."""
    torch.manual_seed(0)
    module = (torch.nn.GRU if cell == "gru" else torch.nn.LSTM)(5, 8, batch_first=True)
    spec = RecurrentSpec(cell, 8, 5)
    tensors = {f"rnn.{name.removesuffix('_l0')}": value.detach().numpy() for name, value in module.state_dict().items()}
    assert {k: v.shape for k, v in tensors.items()} == spec.tensor_shapes()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 100, 5)).astype(np.float32)
    resets = rng.random((3, 100)) < 0.05
    state = spec.initial_state(3)
    h = torch.zeros(1, 3, 8)
    c = torch.zeros(1, 3, 8)
    worst = 0.0
    for k in range(100):
        state[resets[:, k]] = 0.0
        keep = torch.from_numpy(~resets[:, k]).float()[None, :, None]
        h, c = h * keep, c * keep
        out, state = spec.step(x[:, k], state, tensors)
        with torch.no_grad():
            step_in = torch.from_numpy(x[:, k : k + 1])
            if cell == "gru":
                expected, h = module(step_in, h)
            else:
                expected, (h, c) = module(step_in, (h, c))
        worst = max(worst, float(np.abs(out - expected[:, 0].numpy()).max()))
        np.testing.assert_allclose(state[:, :8], h[0].numpy(), atol=1e-6)
        if cell == "lstm":
            np.testing.assert_allclose(state[:, 8:], c[0].numpy(), atol=1e-6)
    assert worst < 1e-6
    assert spec.state_size == (8 if cell == "gru" else 16)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (["gru", 8], "must be a map with 'cell', 'size' and 'inputs'"),
        ({"cell": "rnn", "size": 8}, "one of gru, lstm"),
        ({"cell": "gru", "size": 0}, "size is 1..4096"),
        ({"cell": "gru", "size": 8.0}, "size is 1..4096"),
        ({"cell": "lstm"}, "size is 1..4096"),
    ],
)
def test_a_malformed_recurrent_field_is_bad_field(field: object, message: str):
    with pytest.raises(ProtocolError, match=message) as caught:
        RecurrentSpec.from_wire(field, inputs=5)
    assert caught.value.code is ErrorCode.BAD_FIELD


@pytest.mark.parametrize(
    "options",
    [
        {"recurrent": "gru", "branches": (3, 2), "act_dim": 1},
        {"recurrent": "lstm", "act_dim": 2},
        {"recurrent": "gru", "act_dim": 0, "branches": (4,), "image": (2, 3, 1), "conv": (3, 2, 2), "obs_norm": True},
    ],
    ids=["gru-mixed", "lstm-gaussian", "gru-conv-obs-norm"],
)
def test_the_policy_steps_as_the_trainers_actor_does(options: dict[str, object]):
    """The exported actor, stepped 20 times in numpy from zeros, matches the torch actor stepped from the same states."""
    from agents import PPOAgent, PPOConfig
    from bot_protocol import Architecture, Policy, Weights

    torch.manual_seed(2)
    agent = PPOAgent(PPOConfig(obs_dim=7, hidden=(16,), recurrent_size=8, **options))  # type: ignore[arg-type]
    rng = np.random.default_rng(3)
    if agent.obs_norm is not None:
        agent.obs_norm.update(rng.normal(0.5, 2.0, size=(40, 7)))
    arch, tensors = agent.export_actor()
    policy = Policy.from_weights(Weights.pack(0, 1, Architecture.from_mapping(arch), tensors))
    assert policy.recurrent is not None and policy.obs_dim == 7
    assert Architecture.from_wire(policy.arch.to_wire()) == policy.arch
    state = policy.initial_state(4)
    body = agent.actor.body
    for _ in range(20):
        obs = rng.normal(size=(4, 7)).astype(np.float32)
        expected_out = policy._forward(obs, state)
        _, next_state = policy.step(obs, state, rng)
        with torch.no_grad():
            x = torch.from_numpy(obs)
            x = agent.obs_norm(x) if agent.obs_norm is not None else x
            h, torch_state = body.core.step(body.features(x), torch.from_numpy(state))
            torch_out = agent.actor.net(h).numpy()
        np.testing.assert_allclose(next_state, torch_state.numpy(), atol=1e-5)
        np.testing.assert_allclose(expected_out, torch_out, atol=1e-5)
        state = next_state
    again = Policy.from_weights(policy.to_weights())  # what a league keeps of a learner
    np.testing.assert_array_equal(again._forward(obs, state), policy._forward(obs, state))
    with pytest.raises(ValueError, match="acts with step"):
        policy.act(obs, rng)
    with pytest.raises(ValueError, match="recurrent state has shape"):
        policy.step(obs, state[:, :3], rng)


def test_the_documented_test_vector():
    """docs/protocol.md §4.7, test vector 4: two steps of a GRU from zeros, number for number, and its blob."""
    import hashlib

    from bot_protocol import Architecture, Policy, encode_tensors

    tensors = {
        "rnn.weight_ih": np.array([[1, 0], [0, 1], [0.5, 0.5], [-0.5, 0.5], [1, -1], [0, 1]], np.float32),
        "rnn.weight_hh": np.array([[0.5, 0], [0, 0.5], [0, 0], [0, 0], [1, 0], [0, -1]], np.float32),
        "rnn.bias_ih": np.array([0, 0, 0, 0, 0.1, 0], np.float32),
        "rnn.bias_hh": np.array([0, 0, 0.5, -0.5, 0, 0.2], np.float32),
        "l0.weight": np.array([[1, 0], [0, 1], [-1, 1]], np.float32),
        "l0.bias": np.array([0, 0, 0.5], np.float32),
    }
    arch = Architecture(
        "mixed_mlp", (2, 3), "tanh", -3.0, 0.0, continuous=0, branches=(3,), recurrent=RecurrentSpec("gru", 2, 2)
    )
    policy = Policy(arch, tensors)
    mask, none = np.array([[1, 0, 1]]), np.zeros((1, 0), np.float32)
    expected = [
        ([1.0, -0.5], [0.2956909, -0.3114702], [-0.5118717, -0.9147236], 0.6732652, 0),
        ([0.0, 2.0], [0.0702017, 0.1779884], [-0.9976376, -0.4600527], 0.6582868, 2),
    ]
    state = policy.initial_state(1)
    for obs, h, logps, entropy, mode in expected:
        o = np.array([obs], np.float32)
        for dact, logp in zip((0, 2), logps, strict=True):
            got = policy.log_prob(o, none, dact=np.array([[dact]]), mask=mask, state=state)
            np.testing.assert_allclose(got, [logp], atol=1e-6)
        np.testing.assert_allclose(policy.entropy(o, mask, state), [entropy], atol=1e-6)
        chosen, state = policy.step(o, state, np.random.default_rng(0), deterministic=True, mask=mask)
        np.testing.assert_allclose(state, [h], atol=1e-6)
        assert chosen.dact.tolist() == [[mode]]
    blob = encode_tensors(tensors)
    assert len(blob) == 588 and int.from_bytes(blob[:8], "little") == 400
    assert hashlib.sha256(blob).hexdigest() == "4a8f0b996ace868e6472cd3a6d6fc703ff75e0b3afb8ecdc5ec248bf20ee3f11"
