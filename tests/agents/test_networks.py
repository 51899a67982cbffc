"""Torch networks and their bot-ready export (agents/networks.py).

That the exported layout runs identically in the bots' numpy ``Policy`` is tested in
tests/bot_protocol/test_policy.py; here: the pieces themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from agents.networks import Critic, FastTanh, GaussianActor, check_same_shapes, linear_arrays, mlp

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_fast_tanh_is_tanh_to_float32_rounding_with_tanhs_gradient():
    x = torch.linspace(-12.0, 12.0, 2001, requires_grad=True)
    y = FastTanh()(x)
    assert (y - torch.tanh(x)).abs().max().item() < 2e-7
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, 1.0 - y.detach() ** 2, rtol=0, atol=2e-7)


def test_mlp_puts_the_activation_between_layers_only_with_orthogonal_weights_and_zero_biases():
    net = mlp((3, 16, 8, 2), "relu", head_gain=0.01)
    kinds = [type(m) for m in net]
    assert kinds == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Linear]
    assert isinstance(mlp((3, 4, 1), "tanh", 1.0)[1], FastTanh)
    hidden, head = net[2].weight.detach(), net[4].weight.detach()
    torch.testing.assert_close(hidden @ hidden.T, 2.0 * torch.eye(8), rtol=0, atol=1e-5)  # gain sqrt(2)
    torch.testing.assert_close(head @ head.T, 1e-4 * torch.eye(2), rtol=0, atol=1e-8)  # the small head
    assert all(torch.count_nonzero(m.bias) == 0 for m in net if isinstance(m, nn.Linear))


def test_the_actor_exports_the_gaussian_mlp_layout_as_float32_copies():
    actor = GaussianActor(3, 2, (5, 4), "tanh", log_std_init=-0.5, log_std_min=-3.0, log_std_max=0.0)
    arch, tensors = actor.export()
    assert arch == {
        "kind": "gaussian_mlp",
        "layers": [3, 5, 4, 2],
        "activation": "tanh",
        "log_std_min": -3.0,
        "log_std_max": 0.0,
    }
    assert {k: v.shape for k, v in tensors.items()} == {
        "l0.weight": (5, 3),
        "l0.bias": (5,),
        "l1.weight": (4, 5),
        "l1.bias": (4,),
        "l2.weight": (2, 4),
        "l2.bias": (2,),
        "log_std": (2,),
    }
    assert all(v.dtype == np.float32 for v in tensors.values())
    tensors["l0.weight"][:] = 99.0  # a copy: the exported arrays never alias the live weights
    assert not torch.any(actor.net[0].weight == 99.0)
    assert linear_arrays(actor.net)["l2.bias"].shape == (2,)


def test_log_prob_is_the_diagonal_gaussians_with_the_clamped_std():
    actor = GaussianActor(3, 2, (8,), "tanh", log_std_init=1.0, log_std_min=-3.0, log_std_max=0.0)
    obs, actions = torch.randn(6, 3), torch.randn(6, 2)
    logp, log_std = actor.log_prob(obs, actions)
    assert log_std.tolist() == [0.0, 0.0]  # 1.0 is above the ceiling: clamped where it is used
    expected = torch.distributions.Normal(actor(obs), torch.exp(log_std)).log_prob(actions).sum(-1)
    torch.testing.assert_close(logp, expected)
    assert actor.log_std.tolist() == [1.0, 1.0]
    actor.clamp_log_std_()
    assert actor.log_std.tolist() == [0.0, 0.0]


def test_the_critic_gives_one_value_per_observation():
    critic = Critic(3, (8,), "relu")
    assert critic(torch.zeros(5, 3)).shape == (5,)


def test_check_same_shapes_refuses_other_layers_or_sizes():
    expected = GaussianActor(3, 2, (8,), "tanh", -0.5, -3.0, 0.0).state_dict()
    check_same_shapes("actor", expected, dict(expected))
    bigger = GaussianActor(3, 2, (16,), "tanh", -0.5, -3.0, 0.0).state_dict()
    with pytest.raises(ValueError, match=r"net.0.weight is \(16, 3\), this run needs \(8, 3\)"):
        check_same_shapes("actor", expected, bigger)
    deeper = GaussianActor(3, 2, (8, 8), "tanh", -0.5, -3.0, 0.0).state_dict()
    with pytest.raises(ValueError, match="different layers"):
        check_same_shapes("actor", expected, deeper)
    with pytest.raises(ValueError, match="is list"):
        check_same_shapes("actor", expected, {**expected, "log_std": [0.0, 0.0]})
    with pytest.raises(ValueError, match="different layers"):
        check_same_shapes("actor", expected, None)
