"""agents/ppo/guards.py: the reference guards gate the floor, decide, clip and clamp as the seed requires.

Through whole updates on every path: ``test_agent.py``; the compiled guards against these:
``test_guard_kernel.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents import PPOAgent
from agents.ppo.guards import GuardLimits, clamp_log_std_where, gate_log_std_floor, guard_gradients
from tests.agents.ppo.test_agent import FLOOR, config, minibatch_inputs, step_gradients

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("fused", [True, False])
def test_floor_gate_drops_downward_gradient_and_keeps_upward(fused):
    """At the floor, the positive (downward) log-std gradient is zeroed; negative (upward) and off-floor ones pass."""
    agent = PPOAgent(config(act_dim=3, fused=fused))
    with torch.no_grad():
        agent.actor.log_std.copy_(torch.tensor([FLOOR, FLOOR, -1.0]))
    obs, actions, logp = minibatch_inputs(agent)
    with torch.no_grad():
        mean = agent.actor(obs)
        std = agent.actor.clamped_log_std().exp()
        actions[:, 0] = mean[:, 0]  # z=0: with A>0, the policy wants a narrower std (gradient +1)
        actions[:, 1] = mean[:, 1] + 3.0 * std[1]  # z=3: wants a wider std (gradient -(9-1))
        actions[:, 2] = mean[:, 2]
        logp = agent.actor.log_prob(obs, actions)[0]  # ratio exactly 1
    adv = torch.ones(len(obs))
    step_gradients(agent, obs, actions, logp, adv, torch.zeros(len(obs)))
    coef = agent.config.entropy_coef
    raw = agent.actor.log_std.grad.clone()
    np.testing.assert_allclose(raw.numpy(), [1.0 - coef, -8.0 - coef, 1.0 - coef], rtol=1e-4)
    gate_log_std_floor(agent.actor.log_std, FLOOR)
    gated = agent.actor.log_std.grad
    assert gated[0] == 0.0  # at the floor, pushing down: dropped
    assert gated[1] == raw[1]  # at the floor, pushing up: kept (the floor is not absorbing)
    assert gated[2] == raw[2]  # not at the floor: untouched even though it points down


def _log_std_with_grad(grad: list[float], value: float = 0.0) -> torch.nn.Parameter:
    log_std = torch.nn.Parameter(torch.full((len(grad),), value))
    log_std.grad = torch.tensor(grad)
    return log_std


@pytest.mark.parametrize(("loss_ok", "poison"), [(False, None), (True, math.nan), (True, math.inf), (True, 1e16)])
def test_a_non_finite_loss_or_a_non_finite_or_huge_norm_is_not_ok(loss_ok, poison):
    critic = torch.full((6,), 0.1)
    if poison is not None:
        critic[2] = poison
    log_std = _log_std_with_grad([0.1, 0.1])
    ok, _ = guard_gradients(torch.tensor(loss_ok), [[log_std.grad], [critic]], log_std, GuardLimits(FLOOR, 1.0, 1e15, True))
    assert ok.dim() == 0 and not bool(ok)


@pytest.mark.parametrize("per_network", [False, True])
def test_the_clip_scales_each_group_to_max_norm_and_reports_the_joint_norm(per_network):
    """Two groups of norm 3 and 4: clipped to 1 each, or as one group of norm 5; the joint norm is 5 either way."""
    actor, critic = torch.tensor([3.0, 0.0]), torch.tensor([0.0, 4.0])
    log_std = _log_std_with_grad([0.0])
    groups = [[actor], [critic]] if per_network else [[actor, critic]]
    ok, norm = guard_gradients(torch.tensor(True), groups, log_std, GuardLimits(FLOOR, 1.0, 1e15, per_network))
    assert bool(ok) and float(norm) == pytest.approx(5.0)
    if per_network:
        assert float(actor.norm()) == pytest.approx(1.0, rel=1e-5) and float(critic.norm()) == pytest.approx(1.0, rel=1e-5)
    else:
        assert math.hypot(float(actor.norm()), float(critic.norm())) == pytest.approx(1.0, rel=1e-5)


def test_the_log_std_is_clamped_only_where_the_step_was_taken():
    log_std = torch.nn.Parameter(torch.tensor([FLOOR - 1.0, 0.5]))
    clamp_log_std_where(torch.tensor(False), log_std, FLOOR, 0.0)
    assert log_std.tolist() == [FLOOR - 1.0, 0.5]
    clamp_log_std_where(torch.tensor(True), log_std, FLOOR, 0.0)
    assert log_std.tolist() == [FLOOR, 0.0]
