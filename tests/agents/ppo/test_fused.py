"""agents/ppo/fused.py: the fused PPO step against the reference loss (agents/ppo/loss.py) through autograd.

Both fused paths are checked: the written-out step (``write_ppo_gradients`` with the loss kernel, the
CPU's, no autograd) and the autograd nodes (``fused_surrogate``, CUDA's). In float64 each must agree
with the reference to rounding
(1e-10) in every value and every gradient, across depths, both activations and every kink of
the surrogate (both clipped regimes, ratios exactly inside the clip range where ``minimum``
splits its gradient, the ±20 log-ratio clamp, ±inf and NaN old log-probs, the log-std at its
bounds). In float32, whole updates of each land on the same parameters to 1e-5. The mixed actor's
masked categoricals (discrete branches, with or without Gaussian dims) are held the same way on the
written-out step, the one path besides the reference that knows them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig, Segment, SegmentEnd
from agents.ppo.batch import Minibatch
from agents.ppo.fused import actor_critic_forward, fused_surrogate
from agents.ppo.gradients import AutogradGradients, WrittenOutGradients
from agents.ppo.loss import minibatch_loss
from agents.ppo.stats import STEP_STATS

OBS, ACT = 7, 3


def pair(**overrides) -> tuple[PPOAgent, PPOAgent]:
    """(fused, reference) agents with the same weights, in float64."""
    config = PPOConfig(OBS, overrides.pop("act_dim", ACT), hidden=(8, 8), entropy_coef=0.03, **overrides)
    fused, reference = PPOAgent(config), PPOAgent(dataclasses.replace(config, fused=False))
    reference.actor.load_state_dict(fused.actor.state_dict())
    reference.critic.load_state_dict(fused.critic.state_dict())
    for agent in (fused, reference):
        agent.actor.double()
        agent.critic.double()
    return fused, reference


def inputs(agent: PPOAgent, n: int = 40, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """A minibatch whose old log-probs put ratios in both clipped regimes and exactly at 1 (a tie)."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, OBS, generator=g, dtype=torch.float64)
    return around(agent, obs, torch.randn(n, ACT, generator=g, dtype=torch.float64), g)


def around(agent: PPOAgent, obs: torch.Tensor, actions: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(obs, actions, old log-probs, advantages, returns): the old log-probs the agent's own, each shifted by one of
    -0.5, -0.05, 0, 0.05, 0.5, so the ratios fall in both clipped regimes, inside, and exactly at 1."""
    n = len(obs)
    with torch.no_grad():
        logp = agent.actor.log_prob(obs, actions)[0]
    offsets = torch.tensor([-0.5, -0.05, 0.0, 0.05, 0.5], dtype=torch.float64)
    old = logp - offsets[torch.randint(0, len(offsets), (n,), generator=g)]
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    ret = torch.randn(n, generator=g, dtype=torch.float64)
    return obs, actions, old, adv, ret


def loss_and_grads(
    agent: PPOAgent, batch: tuple[torch.Tensor, ...], nodes: bool = False
) -> tuple[dict[str, float], list[torch.Tensor]]:
    """The minibatch's values and gradients as the agent's step computes them (``nodes``: the fused autograd nodes)."""
    if nodes:
        agent.optimizer.zero_grad(set_to_none=True)
        out = minibatch_loss(agent.actor, agent.critic, Minibatch(*batch), agent.config, fused_surrogate)
        out["loss"].backward()
    else:
        out = agent.step.gradients.compute(Minibatch(*batch))
    params = [*agent.actor.parameters(), *agent.critic.parameters()]
    return {k: float(v.detach()) for k, v in out.items()}, [p.grad.clone() for p in params]


def assert_same(
    fused: PPOAgent, reference: PPOAgent, batch: tuple[torch.Tensor, ...], paths: tuple[bool, ...] = (False, True)
) -> None:
    """The written-out step and the autograd nodes (``paths``: ``nodes`` or not) each give the reference's values
    and gradients."""
    assert isinstance(fused.step.gradients, WrittenOutGradients)
    assert isinstance(reference.step.gradients, AutogradGradients)
    values_r, grads_r = loss_and_grads(reference, batch)
    assert values_r.keys() == set(STEP_STATS)
    for nodes in paths:
        values_f, grads_f = loss_and_grads(fused, batch, nodes=nodes)
        assert values_f.keys() == values_r.keys()
        for key in values_f:
            rel = 1e-6 if key == "clip_fraction" else 1e-10  # the reference counts clipped rows in float32
            assert values_f[key] == pytest.approx(values_r[key], rel=rel, abs=1e-12, nan_ok=True), (key, nodes)
        for got, want in zip(grads_f, grads_r, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)


def assert_every_ratio_regime(agent: PPOAgent, batch: tuple[torch.Tensor, ...]) -> None:
    """Both clipped regimes and exact ties are in the batch, so the surrogate's every kink is compared."""
    with torch.no_grad():
        ratio = (agent.actor.log_prob(batch[0], batch[1])[0] - batch[2]).exp()
    assert (ratio > 1.2).any() and (ratio < 0.8).any() and (ratio == 1.0).any()


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("hidden", [(8,), (8, 8), (6, 8, 5)])
def test_networks_pass_equals_the_modules_in_value_and_gradient(activation, hidden):
    """Mean and value, and the gradient of any upstream weighting of them, equal nn.Sequential's."""
    config = PPOConfig(OBS, ACT, hidden=hidden, activation=activation)
    agent = PPOAgent(config)
    agent.actor.double()
    agent.critic.double()
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(33, OBS, generator=g, dtype=torch.float64)
    up_mean = torch.randn(33, ACT, generator=g, dtype=torch.float64)
    up_value = torch.randn(33, generator=g, dtype=torch.float64)
    params = [*agent.actor.net.parameters(), *agent.critic.net.parameters()]

    def grads(mean: torch.Tensor, value: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.autograd.grad((mean * up_mean).sum() + (value * up_value).sum(), params))

    mean, value = actor_critic_forward(agent.actor, agent.critic, obs)
    want_mean, want_value = agent.actor(obs), agent.critic(obs)
    torch.testing.assert_close(mean, want_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(value, want_value, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads(mean, value), grads(want_mean, want_value), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("advantage_norm", ["rollout", "minibatch"])
def test_minibatch_loss_and_every_gradient_equal_the_reference(advantage_norm):
    fused, reference = pair(advantage_norm=advantage_norm)
    batch = inputs(fused)
    assert_every_ratio_regime(fused, batch)
    assert_same(fused, reference, batch)


def test_the_mean_bound_penalty_flows_through_the_fused_mean_as_through_the_reference():
    """mean_bound_coef: its term's gradient reaches the mean written out, and through autograd on the nodes."""
    fused, reference = pair(mean_bound=0.005, mean_bound_coef=2.0)
    batch = inputs(fused)
    with torch.no_grad():
        assert (fused.actor(batch[0]).abs() > 0.005).any(), "some means are past the bound: the penalty is not zero"
    assert_same(fused, reference, batch)
    assert loss_and_grads(fused, batch)[0]["mean_excess"] > 0


@pytest.mark.parametrize("old_offset", [1e6, -1e6, math.inf, -math.inf])
def test_log_ratio_clamp_rows_agree(old_offset):
    """Rows past the ±20 log-ratio clamp (finite or infinite) get the reference's value and zero gradient."""
    fused, reference = pair()
    obs, actions, old, adv, ret = inputs(fused)
    old = old.clone()
    old[::3] += old_offset
    assert_same(fused, reference, (obs, actions, old, adv, ret))


def test_a_nan_old_log_prob_gives_the_reference_nan_loss_and_gradients():
    fused, reference = pair()
    obs, actions, old, adv, ret = inputs(fused)
    old = old.clone()
    old[4] = math.nan
    assert_same(fused, reference, (obs, actions, old, adv, ret))
    assert math.isnan(loss_and_grads(fused, (obs, actions, old, adv, ret))[0]["loss"])


def test_log_std_at_its_bounds_agrees():
    """At the floor and the ceiling the clamp and the entropy gate act on both paths alike."""
    fused, reference = pair()
    for agent in (fused, reference):
        with torch.no_grad():
            agent.actor.log_std.copy_(torch.tensor([agent.config.log_std_min, agent.config.log_std_max, -1.0]))
    assert_same(fused, reference, inputs(fused, seed=2))


def _segments(seed: int, steps: int = 96) -> list[Segment]:
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate((40, 30, 26)):
        out.append(
            Segment(
                bot="b",
                agent=k,
                obs=rng.standard_normal((n, OBS), dtype=np.float32),
                act=rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
                logp=rng.normal(-3.0, 0.5, n).astype(np.float32),
                end=SegmentEnd.TERMINAL,
                next_obs=None,
                generation=0,
                version=0,
                reward=rng.standard_normal(n).astype(np.float32),
            )
        )
    assert sum(s.steps for s in out) == steps
    return out


@pytest.mark.parametrize("clip_per_network", [False, True])
def test_whole_updates_land_on_the_same_parameters_in_float32(clip_per_network):
    """Two updates of the default step and the reference from the same seed: parameters equal to 1e-5.

    The clip acts on both networks' gradients as one range of the written-out step's buffer, or on each's.
    """
    config = PPOConfig(OBS, ACT, rollout_steps=96, minibatch_size=32, epochs=2, seed=5, clip_per_network=clip_per_network)
    fused, reference = PPOAgent(config), PPOAgent(dataclasses.replace(config, fused=False))
    for seed in range(2):
        for agent in (fused, reference):
            agent.observe(_segments(seed))
        metrics = fused.update(), reference.update()
        assert metrics[0]["train/minibatches"] == metrics[1]["train/minibatches"] == 6.0
    for got, want in zip(
        [*fused.actor.parameters(), *fused.critic.parameters()],
        [*reference.actor.parameters(), *reference.critic.parameters()],
        strict=True,
    ):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ── the mixed actor (masked categoricals, with or without Gaussian dims) on the written-out step ──

WRITTEN_OUT = (False,)
"""The one fused path that knows the masked categoricals: the autograd nodes hold the Gaussian's only."""


def mixed_inputs(agent: PPOAgent, n: int = 48, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """A minibatch of random masks (one legal action at least per branch), legal taken actions, and old
    log-probs that put ratios in both clipped regimes and exactly at 1."""
    cfg, g = agent.config, torch.Generator().manual_seed(seed)
    obs = torch.randn(n, OBS, generator=g, dtype=torch.float64)
    masks, dact = [], []
    for size in cfg.branches:
        mask = torch.rand(n, size, generator=g) > 0.4
        mask[torch.arange(n), torch.randint(0, size, (n,), generator=g)] = True
        legal_scores = torch.where(mask, torch.rand(n, size, generator=g), -1.0)
        masks.append(mask)
        dact.append(legal_scores.argmax(-1))
    cont = torch.randn(n, cfg.act_dim, generator=g, dtype=torch.float64)
    dact_t = torch.stack(dact, dim=1).double()
    actions = torch.cat([cont, dact_t, torch.cat(masks, dim=1).double()], dim=1)
    return around(agent, obs, actions, g)


@pytest.mark.parametrize(("continuous", "branches"), [(0, (7,)), (0, (2, 5, 3)), (2, (3, 4)), (1, (1, 6))])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_a_mixed_actors_written_out_loss_and_gradients_equal_the_reference(continuous, branches, activation):
    fused, reference = pair(act_dim=continuous, branches=branches, activation=activation)
    batch = mixed_inputs(fused)
    assert_every_ratio_regime(fused, batch)
    assert_same(fused, reference, batch, paths=WRITTEN_OUT)


def test_a_mixed_actors_penalty_clamp_and_bounds_agree():
    """The mean-bound penalty reads the continuous part only; the log-ratio clamp and the log-std bounds as the Gaussian's."""
    fused, reference = pair(act_dim=2, branches=(3, 4), mean_bound=0.005, mean_bound_coef=2.0)
    for agent in (fused, reference):
        with torch.no_grad():
            agent.actor.log_std.copy_(torch.tensor([agent.config.log_std_min, agent.config.log_std_max]))
    obs, actions, old, adv, ret = mixed_inputs(fused, seed=3)
    old = old.clone()
    old[::5] += 1e6
    old[1::7] = -math.inf
    assert_same(fused, reference, (obs, actions, old, adv, ret), paths=WRITTEN_OUT)
    assert loss_and_grads(fused, (obs, actions, old, adv, ret))[0]["mean_excess"] > 0


def test_a_mixed_actors_nan_old_log_prob_gives_the_reference_nan_loss():
    fused, reference = pair(act_dim=0, branches=(7,))
    obs, actions, old, adv, ret = mixed_inputs(fused)
    old = old.clone()
    old[4] = math.nan
    assert_same(fused, reference, (obs, actions, old, adv, ret), paths=WRITTEN_OUT)
    assert math.isnan(loss_and_grads(fused, (obs, actions, old, adv, ret))[0]["loss"])


def _discrete_segments(seed: int, branches: tuple[int, ...]) -> list[Segment]:
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate((40, 30, 26)):
        masks = [rng.uniform(size=(n, size)) > 0.4 for size in branches]
        for mask in masks:
            mask[np.arange(n), rng.integers(0, mask.shape[1], n)] = True
        dact = [np.array([rng.choice(np.flatnonzero(row)) for row in mask]) for mask in masks]
        act = np.concatenate([np.stack(dact, axis=1), *masks], axis=1).astype(np.float32)
        obs = rng.standard_normal((n, OBS), dtype=np.float32)
        logp = rng.normal(-1.5, 0.3, n).astype(np.float32)
        out.append(Segment("b", k, obs, act, logp, SegmentEnd.TERMINAL, None, 0, 0, rng.standard_normal(n).astype(np.float32)))
    return out


def test_whole_discrete_updates_land_on_the_same_parameters_in_float32():
    """Two updates of the written-out step and the reference on a masked two-branch space: parameters equal to 1e-5."""
    config = PPOConfig(OBS, 0, branches=(7, 3), rollout_steps=96, minibatch_size=32, epochs=2, seed=5, entropy_coef=0.1)
    fused, reference = PPOAgent(config), PPOAgent(dataclasses.replace(config, fused=False))
    assert isinstance(fused.step.gradients, WrittenOutGradients)
    for seed in range(2):
        for agent in (fused, reference):
            agent.observe(_discrete_segments(seed, config.branches))
        metrics = fused.update(), reference.update()
        assert metrics[0]["train/minibatches"] == metrics[1]["train/minibatches"] == 6.0
        assert metrics[0]["train/entropy"] == pytest.approx(metrics[1]["train/entropy"], rel=1e-5)
    for got, want in zip(
        [*fused.actor.parameters(), *fused.critic.parameters()],
        [*reference.actor.parameters(), *reference.critic.parameters()],
        strict=True,
    ):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
