"""Torch networks and their bot-ready export (agents/networks.py).

That the exported layout runs identically in the bots' numpy ``Policy`` is tested in
tests/bot_protocol/test_policy.py; here: the pieces themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from agents.networks import (
    Critic,
    FastTanh,
    GaussianActor,
    LogStdRange,
    MixedActor,
    check_same_shapes,
    linear_arrays,
    masked_categorical,
    mlp,
    split_actions,
)

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
    actor = GaussianActor(3, 2, (5, 4), "tanh", LogStdRange(-0.5, -3.0, 0.0))
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
    actor = GaussianActor(3, 2, (8,), "tanh", LogStdRange(1.0, -3.0, 0.0))
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
    expected = GaussianActor(3, 2, (8,), "tanh", LogStdRange(-0.5, -3.0, 0.0)).state_dict()
    check_same_shapes("actor", expected, dict(expected))
    bigger = GaussianActor(3, 2, (16,), "tanh", LogStdRange(-0.5, -3.0, 0.0)).state_dict()
    with pytest.raises(ValueError, match=r"net.0.weight is \(16, 3\), this run needs \(8, 3\)"):
        check_same_shapes("actor", expected, bigger)
    deeper = GaussianActor(3, 2, (8, 8), "tanh", LogStdRange(-0.5, -3.0, 0.0)).state_dict()
    with pytest.raises(ValueError, match="different layers"):
        check_same_shapes("actor", expected, deeper)
    with pytest.raises(ValueError, match="is list"):
        check_same_shapes("actor", expected, {**expected, "log_std": [0.0, 0.0]})
    with pytest.raises(ValueError, match="different layers"):
        check_same_shapes("actor", expected, None)


# ── the mixed actor: a Gaussian beside masked categoricals ───────────────────

BRANCHES = (3, 1, 4)


def random_mask(rows: int, seed: int) -> torch.Tensor:
    """A mask over ``BRANCHES`` with about half the actions illegal and at least one legal action per branch."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(rows, sum(BRANCHES), generator=generator) > 0.5
    for part in mask.split(BRANCHES, dim=-1):  # views: a branch with nothing legal gets its first action back
        part[:, 0] |= ~part.any(-1)
    return mask


def torch_categoricals(logits: torch.Tensor, mask: torch.Tensor) -> list[torch.distributions.Categorical]:
    """Each branch's distribution as torch builds it, the illegal logits at -inf."""
    masked = logits.masked_fill(~mask, -math.inf)
    return [torch.distributions.Categorical(logits=part) for part in masked.split(BRANCHES, dim=-1)]


def legal_entropy(dist: torch.distributions.Categorical) -> torch.Tensor:
    """-sum p log p over the legal actions (torch's own entropy reads 0 * -inf at an illegal one)."""
    p = dist.probs
    return -torch.where(p > 0, p * torch.log(p), 0.0).sum(-1)


def test_masked_categoricals_give_torchs_log_prob_and_entropy_and_illegal_actions_probability_zero():
    logits = 3.0 * torch.randn(64, sum(BRANCHES), generator=torch.Generator().manual_seed(1))
    mask = random_mask(64, seed=2)
    dists = torch_categoricals(logits, mask)
    dact = torch.stack([d.sample() for d in dists], dim=-1)
    logp, entropy = masked_categorical(logits, dact, mask, BRANCHES)
    expected_logp = sum(d.log_prob(dact[:, b]) for b, d in enumerate(dists))
    expected_entropy = sum(legal_entropy(d) for d in dists)
    torch.testing.assert_close(logp, expected_logp, rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, expected_entropy, rtol=0, atol=1e-6)
    illegal = logits.new_zeros(64, dtype=torch.long)  # action 0 of branch 0 where it is illegal
    rows = ~mask[:, 0]
    assert rows.any()
    one_branch = masked_categorical(logits[:, :3], illegal[:, None], mask[:, :3], (3,))
    assert torch.exp(one_branch.logp[rows]).eq(0.0).all()


def test_the_mixed_actors_log_prob_and_entropy_are_the_gaussians_plus_the_categoricals():
    actor = MixedActor(5, 2, BRANCHES, (16,), "tanh", LogStdRange(0.5, -3.0, 0.0))
    with torch.no_grad():
        actor.net[-1].weight.mul_(300.0)  # logits of a few units, not the fresh head's near-uniform ones
    obs, cont, mask = torch.randn(32, 5), torch.randn(32, 2), random_mask(32, seed=3)
    out = actor(obs)
    mean, logits = actor.split_output(out)
    dists = torch_categoricals(logits, mask)
    dact = torch.stack([d.sample() for d in dists], dim=-1)
    normal = torch.distributions.Normal(mean, torch.exp(actor.clamped_log_std()))  # the std clamped to 1
    expected_logp = normal.log_prob(cont).sum(-1) + sum(d.log_prob(dact[:, b]) for b, d in enumerate(dists))
    expected_entropy = normal.entropy().sum(-1) + sum(legal_entropy(d) for d in dists)
    got = actor.log_prob_and_entropy(out, cont, dact, mask)
    torch.testing.assert_close(got.logp, expected_logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(got.entropy, expected_entropy, rtol=0, atol=1e-5)
    block = torch.cat([cont, dact.float(), mask.float()], dim=-1)  # the packed layout the rollout carries
    split = split_actions(block, 2, BRANCHES)
    assert torch.equal(split[0], cont) and torch.equal(split[1], dact) and torch.equal(split[2], mask)
    assert split[1].dtype == torch.long and split[2].dtype == torch.bool
    assert torch.equal(actor.log_prob(obs, block)[0], got.logp)


def test_gradients_stay_finite_with_masks_huge_logits_and_a_single_legal_action():
    actor = MixedActor(4, 0, BRANCHES, (8,), "tanh", LogStdRange(-0.5, -3.0, 0.0))
    with torch.no_grad():
        actor.net[-1].bias.copy_(torch.tensor([80.0, -80.0, 0.0, 5.0, 80.0, -80.0, 30.0, -30.0]))
    mask = random_mask(16, seed=4)
    mask[:8, :3] = torch.tensor([False, False, True])  # one legal action: probability 1, entropy 0
    dact = torch.stack([part.float().argmax(-1) for part in mask.split(BRANCHES, dim=-1)], dim=-1)
    terms = actor.log_prob_and_entropy(actor(torch.randn(16, 4)), torch.zeros(16, 0), dact, mask)
    (terms.logp.sum() - terms.entropy.sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in actor.parameters())
    assert torch.isfinite(terms.logp).all() and torch.isfinite(terms.entropy).all()
    only = masked_categorical(actor(torch.randn(8, 4))[:, :3], dact[:8, :1], mask[:8, :3], (3,))
    assert only.logp.eq(0.0).all() and only.entropy.eq(0.0).all()


def test_the_mixed_actor_exports_the_mixed_mlp_layout_with_log_std_only_beside_continuous_dims():
    actor = MixedActor(3, 2, (4, 2), (5,), "relu", LogStdRange(-0.5, -3.0, 0.0))
    arch, tensors = actor.export()
    assert arch == {
        "kind": "mixed_mlp",
        "layers": [3, 5, 8],
        "activation": "relu",
        "continuous": 2,
        "branches": [4, 2],
        "log_std_min": -3.0,
        "log_std_max": 0.0,
    }
    assert {k: v.shape for k, v in tensors.items()} == {
        "l0.weight": (5, 3),
        "l0.bias": (5,),
        "l1.weight": (8, 5),
        "l1.bias": (8,),
        "log_std": (2,),
    }
    assert all(v.dtype == np.float32 for v in tensors.values())
    discrete_arch, discrete = MixedActor(3, 0, (4,), (5,), "tanh", LogStdRange(-0.5, -3.0, 0.0)).export()
    assert discrete_arch["layers"] == [3, 5, 4] and discrete_arch["continuous"] == 0
    assert set(discrete) == {"l0.weight", "l0.bias", "l1.weight", "l1.bias"}
