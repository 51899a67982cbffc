"""agents/ppo/agent.py: update metrics, and every guard the Nim seed requires, triggered on purpose through updates.

The loss on its own: ``test_loss.py``; the guards on their own: ``test_guards.py``; the paths against each
other: ``test_steps.py``.
"""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig, Segment, SegmentEnd
from agents.ppo.batch import Minibatch

OBS, ACT = 4, 2
FLOOR, CEILING = -3.0, 0.0
METRIC_KEYS = {
    "train/policy_loss",
    "train/value_loss",
    "train/entropy",
    "train/approx_kl",
    "train/clip_fraction",
    "train/explained_variance",
    "train/grad_norm",
    "train/skipped_minibatches",
    "train/steps_trained",
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def config(**overrides) -> PPOConfig:
    base = {
        "obs_dim": OBS,
        "act_dim": ACT,
        "hidden": (16, 16),
        "rollout_steps": 96,
        "minibatch_size": 32,
        "epochs": 2,
        "log_std_min": FLOOR,
        "log_std_max": CEILING,
    }
    base.update(overrides)
    return PPOConfig(**base)


def make_segments(agent: PPOAgent, seed: int = 0, lengths=(40, 30, 26), reward_scale: float = 1.0) -> list[Segment]:
    """Segments acted by the agent's own actor (so old log-probs are realistic), one of each end kind."""
    rng = np.random.default_rng(seed)
    ends = [SegmentEnd.TERMINAL, SegmentEnd.TRUNCATED, SegmentEnd.CUT]
    obs_dim, act_dim = agent.config.obs_dim, agent.config.act_dim
    segments = []
    for i, n in enumerate(lengths):
        obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
        with torch.no_grad():
            mean = agent.actor(torch.from_numpy(obs))
            std = agent.actor.clamped_log_std().exp()
            act = (mean + std * torch.from_numpy(rng.normal(size=(n, act_dim)).astype(np.float32))).float()
            logp = agent.actor.log_prob(torch.from_numpy(obs), act)[0]
        end = ends[i % len(ends)]
        segments.append(
            Segment(
                bot=f"bot{i}",
                agent=0,
                obs=obs,
                act=act.numpy(),
                logp=logp.numpy().astype(np.float32),
                end=end,
                next_obs=None if end is SegmentEnd.TERMINAL else rng.normal(size=obs_dim).astype(np.float32),
                generation=0,
                version=0,
                reward=(reward_scale * rng.normal(size=n)).astype(np.float32),
            )
        )
    return segments


def replace_column(segment: Segment, **arrays) -> Segment:
    fields = {k: getattr(segment, k) for k in segment.__dataclass_fields__}
    fields.update(arrays)
    return Segment(**fields)


def snapshot(agent: PPOAgent) -> list[torch.Tensor]:
    return [p.detach().clone() for p in (*agent.actor.parameters(), *agent.critic.parameters())]


def all_params(agent: PPOAgent) -> list[torch.Tensor]:
    return [*agent.actor.parameters(), *agent.critic.parameters()]


def step_gradients(agent: PPOAgent, *batch: torch.Tensor) -> dict[str, torch.Tensor]:
    """The loss terms of ``batch`` (obs, actions, old log-probs, advantages, returns) as the agent's step computes
    them, every parameter's gradient left in its ``.grad``."""
    return agent.step.gradients.compute(Minibatch(*batch))


def change_loss(monkeypatch, agent: PPOAgent, scale: float = 1.0, term=None) -> None:
    """Make each minibatch's loss ``scale * loss + term()``, on whatever computes the step's gradients.

    The step's gradients come from the written-out maths (the CPU's fused step) or from autograd;
    either way they are scaled here and the term's gradient is added through autograd, so the
    guards after them see what a changed loss would give.
    """
    source = agent.step.gradients
    original = source.compute
    params = all_params(agent)

    def changed(batch: Minibatch) -> dict[str, torch.Tensor]:
        out = original(batch)
        for p in params:
            p.grad.mul_(scale)
        out["loss"] = out["loss"] * scale
        if term is not None:
            extra = term()
            for p, grad in zip(params, torch.autograd.grad(extra, params, allow_unused=True), strict=True):
                if grad is not None:
                    p.grad.add_(grad)
            out["loss"] = out["loss"] + extra.detach()
        return out

    monkeypatch.setattr(source, "compute", changed)


def silence_critic(agent: PPOAgent) -> None:
    """Zero the critic's head so every value (and bootstrap value) is exactly 0."""
    head = agent.critic.net[-1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()


def minibatch_inputs(agent: PPOAgent, n: int = 32, seed: int = 0):
    """obs, actions drawn from the actor, and old log-probs equal to the current ones (ratio 1)."""
    g = torch.Generator().manual_seed(seed)
    dtype = next(agent.actor.parameters()).dtype
    obs = torch.randn(n, agent.config.obs_dim, generator=g, dtype=dtype)
    with torch.no_grad():
        mean = agent.actor(obs)
        std = agent.actor.clamped_log_std().exp()
        actions = mean + std * torch.randn(n, agent.config.act_dim, generator=g, dtype=dtype)
        logp = agent.actor.log_prob(obs, actions)[0]
    return obs, actions, logp


# ── a normal update ──────────────────────────────────────────────────────────


def test_update_returns_all_metrics_and_changes_every_parameter():
    """One update on synthetic segments reports every metric key, trains every tensor, and stays finite."""
    agent = PPOAgent(config())
    agent.observe(make_segments(agent))
    assert agent.ready() and agent.pending_steps == 96
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics.keys() >= METRIC_KEYS
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["train/steps_trained"] == 96.0
    assert metrics["train/skipped_minibatches"] == 0.0
    assert metrics["train/minibatches"] == 2 * 3
    assert metrics["train/advantage_guard"] == 0.0
    assert metrics["train/grad_norm"] > 0.0
    assert 0.0 <= metrics["train/clip_fraction"] <= 1.0
    assert agent.pending_steps == 0 and not agent.ready()
    for old, new in zip(before, snapshot(agent), strict=True):
        assert torch.isfinite(new).all()
        assert not torch.equal(old, new)


def test_the_learning_rate_falls_linearly_with_the_reported_progress():
    """final_lr_fraction: the rate goes from learning_rate at progress 0 to that fraction of it at 1, set per update."""
    agent = PPOAgent(config(learning_rate=1e-3, final_lr_fraction=0.1))
    assert agent.learning_rate == 1e-3
    agent.set_progress(0.5)
    agent.observe(make_segments(agent))
    metrics = agent.update()
    assert metrics["train/learning_rate"] == pytest.approx(1e-3 * (1 - 0.9 * 0.5))
    assert all(group["lr"] == pytest.approx(5.5e-4) for group in agent.optimizer.param_groups)
    agent.set_progress(7.0)  # past the budget: clipped
    assert agent.learning_rate == pytest.approx(1e-4)
    agent.set_progress(math.nan)  # ignored
    assert agent.progress == 1.0
    resumed = PPOAgent(config(learning_rate=1e-3, final_lr_fraction=0.1))
    resumed.set_progress(1.0)
    resumed.load_state_dict(agent.state_dict())  # the checkpoint's rate does not win over the run's
    assert all(group["lr"] == pytest.approx(1e-4) for group in resumed.optimizer.param_groups)


def test_a_constant_rate_ignores_the_progress():
    """The default (final_lr_fraction 1.0, the seed's) trains at learning_rate whatever the run reports."""
    agent = PPOAgent(config(learning_rate=1e-3))
    agent.set_progress(0.9)
    agent.observe(make_segments(agent))
    agent.update()
    assert all(group["lr"] == 1e-3 for group in agent.optimizer.param_groups)


def test_the_mean_bound_penalty_pulls_a_mean_past_the_clip_back():
    """A mean driven to 3 (far past the bots' clip at 1) comes back toward 1 under mean_bound_coef, not without it."""
    means = {}
    for coef in (0.0, 5.0):
        agent = PPOAgent(config(mean_bound_coef=coef, learning_rate=3e-3))
        last = [m for m in agent.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.bias[0] = 3.0
        for seed in range(3):
            agent.observe(make_segments(agent, seed=seed))
            metrics = agent.update()
        obs = torch.from_numpy(np.random.default_rng(0).standard_normal((64, OBS)).astype(np.float32))
        with torch.no_grad():
            means[coef] = float(agent.actor(obs)[:, 0].mean())
        assert (metrics["train/mean_excess"] > 0) == (coef > 0)
    assert means[5.0] < means[0.0] - 0.1, means


def _grad_norm(network: torch.nn.Module) -> float:
    return float(torch.nn.utils.get_total_norm([p.grad for p in network.parameters() if p.grad is not None]))


@pytest.mark.parametrize("fused", [True, False])
def test_clip_per_network_clips_actor_and_critic_each_and_spares_the_actor_a_big_value_error(fused):
    """With returns in the thousands the critic's gradient dwarfs the actor's: the joint clip shrinks the actor's
    with it; per network, each is clipped to max_grad_norm on its own and the actor's keeps its size."""
    actor_norms = {}
    for per_network in (False, True):
        agent = PPOAgent(config(clip_per_network=per_network, fused=fused, rollout_steps=32, epochs=1))
        agent.observe(make_segments(agent, seed=0, lengths=(32,), reward_scale=1000.0))
        agent.update()  # the step leaves its clipped gradients in .grad (the next step zeroes them)
        actor_norm, critic_norm = _grad_norm(agent.actor), _grad_norm(agent.critic)
        if per_network:
            assert actor_norm <= 0.5 + 1e-4 and critic_norm == pytest.approx(0.5, rel=1e-4)
        else:
            assert math.hypot(actor_norm, critic_norm) == pytest.approx(0.5, rel=1e-4)
        actor_norms[per_network] = actor_norm
    assert actor_norms[True] > 10 * actor_norms[False], actor_norms


def test_update_with_nothing_held_is_a_no_op():
    """An update with no segments trains nothing and touches no parameter."""
    agent = PPOAgent(config())
    before = snapshot(agent)
    assert agent.update() == {"train/steps_trained": 0.0}
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))


# ── (a) poisoned rewards ─────────────────────────────────────────────────────


def test_nan_reward_zeroes_advantages_and_keeps_params_finite():
    """A NaN reward triggers the 'zeroed' advantage guard (2) and no NaN reaches any parameter."""
    agent = PPOAgent(config())
    segments = make_segments(agent)
    reward = segments[1].reward.copy()
    reward[5] = np.nan
    segments[1] = replace_column(segments[1], reward=reward)
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/advantage_guard"] == 2.0
    for p in all_params(agent):
        assert torch.isfinite(p).all()
    assert torch.isfinite(agent.actor.log_std).all()


# ── (b) zero-variance advantages ─────────────────────────────────────────────


def test_zero_variance_advantages_take_the_centered_branch():
    """Zero rewards with a zero critic give constant advantages: centered (guard 1), not divided by ~0."""
    agent = PPOAgent(config())
    silence_critic(agent)
    segments = [replace_column(s, reward=np.zeros(s.steps, np.float32)) for s in make_segments(agent)]
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/advantage_guard"] == 1.0
    assert metrics["train/policy_loss"] == 0.0
    for p in all_params(agent):
        assert torch.isfinite(p).all()


# ── (c) exploding gradients ──────────────────────────────────────────────────


def test_nan_old_logprobs_skip_every_minibatch_and_leave_params_unchanged():
    """NaN old log-probs make every minibatch's loss and grad norm NaN: all are skipped and nothing moves."""
    agent = PPOAgent(config())
    segments = [replace_column(s, logp=np.full(s.steps, np.nan, np.float32)) for s in make_segments(agent)]
    agent.observe(segments)
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 6.0
    assert metrics["train/minibatches"] == 0.0
    assert metrics["train/grad_norm"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))
    assert len(agent.optimizer.state) == 0  # Adam never stepped: no moments were poisoned either


def test_one_poisoned_row_skips_only_its_minibatch():
    """A single NaN old log-prob skips exactly one minibatch per epoch; the rest train and stay finite."""
    agent = PPOAgent(config())
    segments = make_segments(agent)
    logp = segments[0].logp.copy()
    logp[3] = np.nan
    segments[0] = replace_column(segments[0], logp=logp)
    agent.observe(segments)
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 2.0  # epochs
    assert metrics["train/minibatches"] == 4.0
    assert not all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))
    for p in all_params(agent):
        assert torch.isfinite(p).all()


def test_finite_but_huge_grad_norm_is_skipped(monkeypatch):
    """A finite gradient norm above skip_grad_norm (1e15) skips the step: parameters stay bitwise equal."""
    agent = PPOAgent(config())
    segments = make_segments(agent)
    # Size the blow-up so the norm is finite and ~1e17 (float32 holds its square), i.e. the "> 1e15" branch, not NaN.
    obs = torch.from_numpy(np.concatenate([s.obs for s in segments]))
    act = torch.from_numpy(np.concatenate([s.act for s in segments]))
    logp = torch.from_numpy(np.concatenate([s.logp for s in segments]))
    adv = torch.from_numpy(np.random.default_rng(0).normal(size=len(obs)).astype(np.float32))
    step_gradients(agent, obs, act, logp, adv, adv)
    base = float(torch.nn.utils.get_total_norm([p.grad for p in all_params(agent)]))
    change_loss(monkeypatch, agent, scale=1e17 / base)
    step_gradients(agent, obs, act, logp, adv, adv)
    seen = float(torch.nn.utils.get_total_norm([p.grad for p in all_params(agent)]))
    assert math.isfinite(seen) and seen > 1e15
    agent.observe(segments)
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 6.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))
    assert len(agent.optimizer.state) == 0


# ── (d) log-std floor and ceiling, log-ratio clamp ──────────────────────────


def test_update_at_floor_never_goes_below_and_accumulates_no_downward_momentum(monkeypatch):
    """With strong downward pressure on dim 0 and upward on dim 1 at the floor, dim 0 stays put, dim 1 rises."""
    agent = PPOAgent(config(learning_rate=1e-2))
    with torch.no_grad():
        agent.actor.log_std.fill_(FLOOR)
    log_std = agent.actor.log_std
    change_loss(monkeypatch, agent, term=lambda: 100.0 * (log_std[0] - log_std[1]))
    agent.observe(make_segments(agent))
    metrics = agent.update()
    assert metrics["train/minibatches"] == 6.0
    log_std = agent.actor.log_std.detach()
    assert (log_std >= FLOOR).all()
    assert log_std[0] == FLOOR
    assert log_std[1] > FLOOR + 1e-2
    adam = agent.optimizer.state[agent.actor.log_std]
    assert adam["exp_avg"][0] == 0.0  # every downward gradient was dropped before Adam saw it
    assert adam["exp_avg"][1] < 0.0


def test_entropy_lifts_log_std_off_the_floor():
    """With zero advantages only the entropy bonus acts; it raises a floored log-std (the seed's gate would freeze it)."""
    agent = PPOAgent(config(learning_rate=1e-2))
    silence_critic(agent)
    with torch.no_grad():
        agent.actor.log_std.fill_(FLOOR)
    agent.observe([replace_column(s, reward=np.zeros(s.steps, np.float32)) for s in make_segments(agent)])
    agent.update()
    assert (agent.actor.log_std.detach() > FLOOR).all()


def test_log_std_never_exceeds_the_ceiling(monkeypatch):
    """Entropy plus a strong upward push cannot move log_std past the ceiling, in the params or the export."""
    agent = PPOAgent(config(learning_rate=5e-2))
    with torch.no_grad():
        agent.actor.log_std.fill_(CEILING - 1e-3)
    history: list[torch.Tensor] = []

    def pushed() -> torch.Tensor:
        history.append(agent.actor.log_std.detach().clone())
        return -100.0 * agent.actor.log_std.sum()

    change_loss(monkeypatch, agent, term=pushed)
    for seed in range(2):
        agent.observe(make_segments(agent, seed=seed))
        agent.update()
    history.append(agent.actor.log_std.detach().clone())
    assert all((h <= CEILING).all() for h in history)
    assert (agent.actor.log_std.detach() == CEILING).all()
    _, tensors = agent.export_actor()
    assert (tensors["log_std"] <= CEILING).all()


def test_update_with_absurd_old_logprobs_stays_finite():
    """Old log-probs of -1e30 (ratio would overflow without the clamp) still give finite steps, none skipped."""
    agent = PPOAgent(config())
    segments = [replace_column(s, logp=np.full(s.steps, -1e30, np.float32)) for s in make_segments(agent)]
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 0.0
    assert math.isfinite(metrics["train/approx_kl"])
    for p in all_params(agent):
        assert torch.isfinite(p).all()


# ── (e) Adam state, (f) checkpoint compatibility ─────────────────────────────


def test_adam_state_persists_across_updates():
    """Adam moments survive between updates: the step count keeps growing rather than restarting."""
    agent = PPOAgent(config())
    agent.observe(make_segments(agent, seed=0))
    agent.update()
    assert len(agent.optimizer.state) == len(all_params(agent))
    state = agent.optimizer.state[agent.actor.log_std]
    assert float(state["step"]) == 6.0
    moments = state["exp_avg"].clone()
    agent.observe(make_segments(agent, seed=1))
    agent.update()
    state = agent.optimizer.state[agent.actor.log_std]
    assert float(state["step"]) == 12.0
    assert not torch.equal(moments, state["exp_avg"])


def test_state_dict_round_trip_resumes_training_bitwise():
    """A resumed agent (networks, Adam, shuffle RNG through a weights_only save) trains exactly like the original."""
    a = PPOAgent(config())
    a.observe(make_segments(a, seed=0))
    a.update()
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    b = PPOAgent(config(seed=123))
    b.load_state_dict(state)  # no warning: filterwarnings=error would fail the test
    assert b.updates == 1
    assert float(b.optimizer.state[b.actor.log_std]["step"]) == 6.0
    segments = make_segments(a, seed=1)
    a.observe(segments)
    b.observe(segments)
    a.update()
    b.update()
    assert all(torch.equal(x, y) for x, y in zip(snapshot(a), snapshot(b), strict=True))


def test_mismatched_adam_shapes_recreate_optimizer_with_warning():
    """A checkpoint whose Adam exp_avg shapes are wrong loads the networks and re-creates Adam, warning."""
    source = PPOAgent(config())
    source.observe(make_segments(source))
    source.update()
    state = source.state_dict()
    state["optimizer"] = copy.deepcopy(state["optimizer"])
    first = next(iter(state["optimizer"]["state"]))
    state["optimizer"]["state"][first]["exp_avg"] = torch.zeros(99)
    agent = PPOAgent(config(seed=7))
    with pytest.warns(UserWarning, match="Adam re-created"):
        agent.load_state_dict(state)
    assert len(agent.optimizer.state) == 0
    assert all(torch.equal(x, y) for x, y in zip(snapshot(source), snapshot(agent), strict=True))
    agent.observe(make_segments(agent, seed=2))
    assert agent.update()["train/minibatches"] == 6.0  # the fresh Adam works


@pytest.mark.parametrize("other", [{"hidden": (8, 8)}, {"hidden": (16,)}, {"obs_dim": OBS + 1}, {"act_dim": ACT + 1}])
def test_load_state_dict_refuses_other_network_sizes(other):
    """A checkpoint from different network sizes raises ValueError instead of loading garbage."""
    state = PPOAgent(config(**other)).state_dict()
    agent = PPOAgent(config())
    with pytest.raises(ValueError, match="sizes"):
        agent.load_state_dict(state)


def test_load_state_dict_refuses_another_algorithm():
    """A checkpoint of another algorithm is refused by name."""
    state = PPOAgent(config()).state_dict()
    state["algo"] = "td3"
    with pytest.raises(ValueError, match="td3"):
        PPOAgent(config()).load_state_dict(state)


# ── options for rollouts acted while the trainer trains ─────────────────────


def test_proximal_anchor_without_lag_is_plain_ppo():
    """Data acted by the very policy being updated: weights 1 and the same anchor, so the same update."""
    plain, anchored = PPOAgent(config()), PPOAgent(config(proximal_anchor=True))
    segments = make_segments(plain)
    plain.observe(segments)
    anchored.observe(segments)
    plain.update()
    anchored.update()
    for a, b in zip(snapshot(plain), snapshot(anchored), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_proximal_anchor_clips_against_the_current_policy_not_the_bots():
    """Behaviour log-probs 1 below the current ones (data a few versions old): plain PPO sees every ratio
    at e^1, far outside the clip range, and learns nothing from the policy term; anchored, the ratios
    start at 1 and the update clips no more than on fresh data."""
    fresh_agent = PPOAgent(config(proximal_anchor=True))
    segments = make_segments(fresh_agent)
    stale = [replace_column(s, logp=s.logp - 1.0) for s in segments]
    plain, anchored = PPOAgent(config()), PPOAgent(config(proximal_anchor=True))
    fresh_agent.observe(segments)
    plain.observe(stale)
    anchored.observe(stale)
    fresh, plain_m, anchored_m = fresh_agent.update(), plain.update(), anchored.update()
    assert plain_m["train/clip_fraction"] > 0.99
    assert anchored_m["train/clip_fraction"] == pytest.approx(fresh["train/clip_fraction"], abs=1e-6)
    assert anchored_m["train/approx_kl"] == pytest.approx(fresh["train/approx_kl"], abs=1e-6)


def test_proximal_anchor_keeps_the_nan_guard():
    """A NaN behaviour log-prob poisons its weight, so its minibatches are skipped as before."""
    agent = PPOAgent(config(proximal_anchor=True))
    segments = [replace_column(s, logp=np.full(s.steps, np.nan, np.float32)) for s in make_segments(agent)]
    agent.observe(segments)
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 6.0 and metrics["train/minibatches"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))


def test_minibatch_advantage_normalization_trains_and_stays_finite():
    agent = PPOAgent(config(advantage_norm="minibatch"))
    agent.observe(make_segments(agent))
    metrics = agent.update()
    assert metrics["train/minibatches"] == 6.0 and all(math.isfinite(v) for v in metrics.values())


def test_update_takes_exactly_its_rollout_and_keeps_the_rest_of_a_split_segment():
    """Segments of 40, 30 and 26 steps with a 50-step rollout: the update trains 50 (two minibatches of 25,
    not a third of leftovers); the second segment's last 20 steps wait for the next update."""
    agent = PPOAgent(config(rollout_steps=50, minibatch_size=25))
    segments = make_segments(agent)
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/steps_trained"] == 50.0 and metrics["train/minibatches"] == 2 * 2
    assert agent.pending_steps == 46 and agent.ready() is False
    tail = agent._segments[0]
    np.testing.assert_array_equal(tail.obs, segments[1].obs[10:])
    assert tail.end is segments[1].end and tail.version == segments[1].version


def test_segment_split_cuts_the_head_and_keeps_the_end_with_the_tail():
    segment = make_segments(PPOAgent(config()))[0]  # a terminal one
    head, tail = segment.split(15)
    assert (head.steps, tail.steps) == (15, segment.steps - 15)
    assert head.end is SegmentEnd.CUT and np.array_equal(head.next_obs, segment.obs[15])
    assert tail.end is segment.end and tail.next_obs is segment.next_obs
    np.testing.assert_array_equal(np.concatenate([head.reward, tail.reward]), segment.reward)
    for bad in (0, segment.steps):
        with pytest.raises(ValueError, match="split point"):
            segment.split(bad)


# ── the guards at the tank arena's large-batch defaults ──────────────────────


def tank_agent(**overrides) -> PPOAgent:
    """``arena train``'s tank PPO (8,192-step rollouts, minibatches of 1,024, 2 epochs, the anchor) at small layers."""
    from arena.defaults import TANK_MATCHES, tank_ppo_options

    return PPOAgent(config(**{**tank_ppo_options(TANK_MATCHES), "hidden": (16, 16), **overrides}))


def tank_segments(agent: PPOAgent) -> list[Segment]:
    return make_segments(agent, lengths=(64,) * (agent.config.rollout_steps // 64))


def test_large_batch_update_trains_every_minibatch_and_stays_finite():
    agent = tank_agent()
    agent.observe(tank_segments(agent))
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/steps_trained"] == 8192.0 and metrics["train/minibatches"] == 2 * 8
    assert metrics["train/skipped_minibatches"] == 0.0 and all(math.isfinite(v) for v in metrics.values())
    assert all(not torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))


def test_large_batch_nan_reward_zeroes_advantages():
    agent = tank_agent()
    segments = tank_segments(agent)
    reward = segments[7].reward.copy()
    reward[3] = np.nan
    segments[7] = replace_column(segments[7], reward=reward)
    agent.observe(segments)
    assert agent.update()["train/advantage_guard"] == 2.0
    assert all(torch.isfinite(p).all() for p in all_params(agent))


def test_large_batch_one_poisoned_row_skips_one_minibatch_per_epoch():
    agent = tank_agent()
    segments = tank_segments(agent)
    logp = segments[40].logp.copy()
    logp[0] = np.nan
    segments[40] = replace_column(segments[40], logp=logp)
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 2.0 and metrics["train/minibatches"] == 14.0
    assert all(torch.isfinite(p).all() for p in all_params(agent))


def test_large_batch_huge_gradient_norm_skips_every_step_and_moves_nothing():
    agent = tank_agent(skip_grad_norm=1e-12)  # every real gradient is "huge" against this bound
    agent.observe(tank_segments(agent))
    before = snapshot(agent)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 16.0 and metrics["train/minibatches"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(agent), strict=True))


def test_large_batch_log_std_stays_within_its_bounds():
    agent = tank_agent(learning_rate=5e-2, entropy_coef=10.0)  # a strong push up
    with torch.no_grad():
        agent.actor.log_std.fill_(CEILING - 1e-3)
    agent.observe(tank_segments(agent))
    agent.update()
    assert (agent.actor.log_std.detach() <= CEILING).all() and (agent.actor.log_std.detach() >= FLOOR).all()
