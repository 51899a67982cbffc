"""agents/ppo/loss.py: the reference loss's clamps, entropy gate and gradient, on both of its surrogates.

The fused autograd nodes (:func:`agents.ppo.fused.fused_surrogate`) run every check the plain modules do;
``test_fused.py`` holds them, and the CPU's written-out step, against the reference at every kink.
"""

from __future__ import annotations

import math

import pytest
import torch

from agents import PPOAgent
from agents.ppo.batch import Minibatch
from agents.ppo.fused import fused_surrogate
from agents.ppo.loss import minibatch_loss, reference_surrogate, renormalize
from tests.agents.ppo.test_agent import CEILING, all_params, config, minibatch_inputs, step_gradients

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SURROGATES = pytest.mark.parametrize("surrogate", [reference_surrogate, fused_surrogate], ids=["reference", "fused"])


def loss_of(agent: PPOAgent, surrogate, *batch: torch.Tensor) -> dict[str, torch.Tensor]:
    return minibatch_loss(agent.actor, agent.critic, Minibatch(*batch), agent.config, surrogate)


@SURROGATES
@pytest.mark.parametrize("old_offset", [-1e6, -math.inf])
def test_log_ratio_clamped_to_plus_20(surrogate, old_offset):
    """A hugely smaller (even -inf) old log-prob gives ratio exp(20) exactly, never inf, and a finite gradient."""
    agent = PPOAgent(config())
    obs, actions, logp = minibatch_inputs(agent)
    old = logp + old_offset
    adv = -torch.ones(len(obs))  # negative advantages choose the unclipped r*A branch, exposing r itself
    mb = loss_of(agent, surrogate, obs, actions, old, adv, torch.zeros(len(obs)))
    ratio_max = math.exp(20.0)
    assert float(mb["policy_loss"]) == pytest.approx(ratio_max, rel=1e-5)
    assert float(mb["approx_kl"]) == pytest.approx(ratio_max - 1.0 - 20.0, rel=1e-5)
    assert float(mb["clip_fraction"]) == 1.0
    mb["loss"].backward()
    for p in all_params(agent):
        assert torch.isfinite(p.grad).all()


@SURROGATES
def test_log_ratio_clamped_to_minus_20(surrogate):
    """A hugely larger old log-prob gives ratio exp(-20), with approx_kl = exp(-20) - 1 + 20."""
    agent = PPOAgent(config())
    obs, actions, logp = minibatch_inputs(agent)
    mb = loss_of(agent, surrogate, obs, actions, logp + 1e6, torch.ones(len(obs)), torch.zeros(len(obs)))
    assert float(mb["policy_loss"]) == pytest.approx(-math.exp(-20.0), rel=1e-4)
    assert float(mb["approx_kl"]) == pytest.approx(math.exp(-20.0) - 1.0 + 20.0, rel=1e-6)


@pytest.mark.parametrize("fused", [True, False])
def test_entropy_gives_no_gradient_at_the_ceiling(fused):
    """With zero advantages and value_coef=0 the loss is -c*entropy: dlog_std is 0 at the ceiling, -c below it."""
    agent = PPOAgent(config(value_coef=0.0, entropy_coef=0.05, fused=fused))
    with torch.no_grad():
        agent.actor.log_std.copy_(torch.tensor([CEILING, -1.0]))
    obs, actions, logp = minibatch_inputs(agent)
    step_gradients(agent, obs, actions, logp, torch.zeros(len(obs)), torch.randn(len(obs)))
    grad = agent.actor.log_std.grad
    assert grad[0] == 0.0
    assert float(grad[1]) == pytest.approx(-0.05, abs=1e-7)
    for p in agent.critic.parameters():
        assert not p.grad.any()


@SURROGATES
def test_loss_gradient_matches_central_finite_differences(surrogate):
    """In float64, autograd's gradient of the total loss equals central differences (eps 1e-6, rtol 1e-4).

    Old log-probs are offset from the current ones by -0.5, -0.05, +0.05 or +0.5, so ratios are 1.65, 1.05,
    0.95 or 0.61: both clipped and unclipped samples, but all >= 0.04 away from the kinks at 1±0.2 and far from
    the ±20 log-ratio clamp; log_std = -0.5 is inside (-3, 0), so no clamp kink either. tanh is smooth.
    """
    agent = PPOAgent(config(hidden=(8, 8), act_dim=2, entropy_coef=0.03))
    agent.actor.double()
    agent.critic.double()
    obs, actions, logp = minibatch_inputs(agent, n=24, seed=3)
    g = torch.Generator().manual_seed(4)
    offsets = torch.tensor([-0.5, -0.05, 0.05, 0.5], dtype=torch.float64)[torch.randint(0, 4, (len(obs),), generator=g)]
    old = logp - offsets  # log_ratio = offsets
    adv = torch.randn(len(obs), generator=g, dtype=torch.float64)
    ret = torch.randn(len(obs), generator=g, dtype=torch.float64)

    def loss() -> torch.Tensor:
        return loss_of(agent, surrogate, obs, actions, old, adv, ret)["loss"]

    with torch.no_grad():
        ratio = (agent.actor.log_prob(obs, actions)[0] - old).exp()
    assert ((ratio - 0.8).abs() > 0.04).all() and ((ratio - 1.2).abs() > 0.04).all()
    assert (ratio > 1.2).any() and (ratio < 0.8).any()  # both clipped regimes are present

    loss().backward()
    actor, critic = agent.actor.net, agent.critic.net
    probes = [
        (actor[0].weight, (0, 1)),
        (actor[2].bias, (3,)),
        (actor[4].weight, (1, 5)),
        (actor[4].bias, (0,)),
        (agent.actor.log_std, (0,)),
        (agent.actor.log_std, (1,)),
        (critic[0].weight, (2, 0)),
        (critic[4].bias, (0,)),
    ]
    eps = 1e-6
    for param, index in probes:
        analytic = float(param.grad[index])
        with torch.no_grad():
            orig = float(param[index])
            param[index] = orig + eps
            up = float(loss())
            param[index] = orig - eps
            down = float(loss())
            param[index] = orig
        numeric = (up - down) / (2 * eps)
        assert abs(analytic) > 1e-6, f"probe {index} has a vanishing gradient; pick another"
        assert numeric == pytest.approx(analytic, rel=1e-4, abs=1e-9), (param.shape, index)


def test_minibatch_advantage_normalization_centers_each_minibatch():
    adv = torch.tensor([1.0, 2.0, 3.0, 10.0])
    out = renormalize(adv)
    assert float(out.mean()) == pytest.approx(0.0, abs=1e-6) and float(out.pow(2).mean()) == pytest.approx(1.0, rel=1e-4)
    constant = renormalize(torch.full((8,), 5.0))  # near-zero variance: centered only (the seed's guard)
    assert torch.equal(constant, torch.zeros(8))
