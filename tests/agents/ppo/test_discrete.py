"""PPO with discrete branches (agents/ppo with agents.networks.MixedActor): it learns, masks hold, checkpoints resume.

The distribution's maths on its own: tests/agents/test_networks.py. Here: the agent's path, its loss, a
contextual bandit it must learn (with and without the best action masked), a mixed space, persistence.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig, Segment, SegmentEnd, agent_from_checkpoint
from agents.networks import MixedActor
from agents.ppo.batch import Minibatch
from agents.ppo.gradients import AutogradGradients, WrittenOutGradients, make_gradients
from agents.ppo.loss import minibatch_loss, reference_surrogate
from agents.ppo.steps import BranchlessStep, EagerStep, GraphStep, MultiRankStep, WrittenOutStep, choose_step
from tests.agents.ppo.test_agent import config, snapshot
from tests.agents.ppo.test_steps import assert_same_update, poison

pytestmark = pytest.mark.usefixtures("one_torch_thread")

STATES = 3


def bandit_config(**overrides: object) -> PPOConfig:
    """Three states, three actions, no continuous dims; one-step episodes, so an advantage is r - V(s)."""
    settings: dict[str, object] = {
        "obs_dim": STATES,
        "act_dim": 0,
        "branches": (STATES,),
        "hidden": (16,),
        "rollout_steps": 192,
        "minibatch_size": 64,
        "epochs": 4,
        "learning_rate": 3e-3,
    }
    settings.update(overrides)
    return PPOConfig(**settings)  # type: ignore[arg-type]


def act(agent: PPOAgent, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(packed actions, log-probs) sampled from the agent's actor as a bot would: Gumbel-max over the masked logits."""
    actor = agent.actor
    assert isinstance(actor, MixedActor)
    cfg = agent.config
    with torch.no_grad():
        out = actor(torch.from_numpy(obs))
        mean, logits = actor.split_output(out)
        cont = mean + actor.clamped_log_std().exp() * torch.from_numpy(rng.normal(size=mean.shape).astype(np.float32))
        gumbel = torch.from_numpy(-np.log(-np.log(rng.uniform(1e-12, 1.0, logits.shape))).astype(np.float32))
        masked = torch.where(torch.from_numpy(mask), logits + gumbel, -math.inf)
        dact = torch.stack([part.argmax(-1) for part in masked.split(cfg.branches, dim=-1)], dim=-1)
        logp = actor.log_prob_and_entropy(out, cont, dact, torch.from_numpy(mask)).logp
    packed = np.concatenate([cont.numpy(), dact.numpy().astype(np.float32), mask.astype(np.float32)], axis=1)
    return packed, logp.numpy()


def segment(columns: tuple[np.ndarray, ...], end: SegmentEnd, next_obs: np.ndarray | None) -> Segment:
    """A segment of policy version 0 from its (obs, packed act, logp, reward) columns."""
    obs, packed, logp, reward = columns
    return Segment("bot", 0, obs, packed, logp, end, next_obs, generation=0, version=0, reward=reward)


def one_step_segments(obs: np.ndarray, packed: np.ndarray, logp: np.ndarray, reward: np.ndarray) -> list[Segment]:
    """A terminal segment per row: a bandit's episodes."""
    rows = [slice(i, i + 1) for i in range(len(obs))]
    return [segment((obs[r], packed[r], logp[r], reward[r]), SegmentEnd.TERMINAL, None) for r in rows]


def bandit_round(agent: PPOAgent, rng: np.random.Generator, masked_share: float) -> dict[str, float]:
    """One rollout acted by the agent, then its update. Reward 1 for the state's own action, 0.5 for the next one.

    In ``masked_share`` of the steps the state's own action is illegal: the best legal one is then the next.
    """
    n = agent.config.rollout_steps
    states = rng.integers(STATES, size=n)
    obs = np.eye(STATES, dtype=np.float32)[states]
    mask = np.ones((n, STATES), dtype=bool)
    mask[np.arange(n), states] = rng.uniform(size=n) >= masked_share
    packed, logp = act(agent, obs, mask, rng)
    taken = packed[:, 0].astype(np.int64)  # no continuous dims: the branch's index is the first column
    assert mask[np.arange(n), taken].all(), "an illegal action was sampled"
    reward = np.where(taken == states, 1.0, np.where(taken == (states + 1) % STATES, 0.5, 0.0)).astype(np.float32)
    agent.observe(one_step_segments(obs, packed, logp, reward))
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 0.0 and math.isfinite(metrics["train/policy_loss"])
    return metrics


def probabilities(agent: PPOAgent, mask: np.ndarray) -> np.ndarray:
    """(state, action) probabilities of the masked policy, one row per state."""
    actor = agent.actor
    assert isinstance(actor, MixedActor)
    with torch.no_grad():
        logits = actor(torch.eye(STATES))
        return torch.softmax(logits.masked_fill(~torch.from_numpy(mask), -math.inf), -1).numpy()


def test_a_discrete_config_builds_the_mixed_actor_and_takes_the_written_out_step_on_the_cpu():
    """The CPU's written-out step holds the masked categoricals' maths too; ``fused=False`` is the reference."""
    agent = PPOAgent(bandit_config())
    assert isinstance(agent.actor, MixedActor) and type(agent.step) is WrittenOutStep
    assert agent.actor.log_std.shape == (0,)  # no continuous dims: the log-std guards act on nothing
    assert type(PPOAgent(bandit_config(fused=False)).step) is EagerStep


def test_discrete_branches_take_the_cuda_graph_over_the_reference_gradients_on_cuda():
    """The fused autograd nodes hold the Gaussian's log-density only, so the graph captures the reference's."""
    cfg = bandit_config(device="cuda")
    assert choose_step(cfg) is GraphStep and choose_step(cfg, sync=lambda params, ok: ok) is MultiRankStep
    assert choose_step(bandit_config(device="cuda", cuda_graph=False)) is EagerStep
    agent = PPOAgent(bandit_config())  # the networks on the CPU; the path as the CUDA config chooses it
    gradients = make_gradients((agent.actor, agent.critic), agent.optimizer, cfg)
    assert isinstance(gradients, AutogradGradients) and gradients.surrogate is reference_surrogate


@pytest.mark.parametrize("continuous", [2, 0])
def test_the_step_a_graph_captures_equals_the_reference_for_discrete_and_mixed_actions(continuous: int):
    """:class:`BranchlessStep` (what the CUDA graph captures) over the reference gradients the graph uses, run on
    the CPU: bit for bit the reference step's update, a minibatch with a NaN log-prob skipped by both."""
    cfg = mixed_config(act_dim=continuous, rollout_steps=96, minibatch_size=32, fused=False)
    eager, branchless = PPOAgent(cfg), PPOAgent(cfg)
    eager.use_step(EagerStep)
    branchless.use_step(BranchlessStep)
    for seed, poisoned in ((0, "none"), (1, "row")):
        segments = poison(mixed_segments(eager, seed), poisoned)
        eager.observe(segments)
        branchless.observe(segments)
        m_eager, m_branchless = eager.update(), branchless.update()
        assert m_branchless["train/skipped_minibatches"] == (2.0 if poisoned == "row" else 0.0)
        assert_same_update(eager, branchless, m_eager, m_branchless)


def test_discrete_ranks_on_the_cpu_average_the_written_out_gradients():
    cfg = bandit_config()
    assert choose_step(cfg, sync=lambda params, ok: ok) is MultiRankStep
    agent = PPOAgent(cfg)
    assert isinstance(make_gradients((agent.actor, agent.critic), agent.optimizer, cfg), WrittenOutGradients)


def test_ppo_learns_a_contextual_bandit_over_discrete_actions():
    agent = PPOAgent(bandit_config())
    rng = np.random.default_rng(0)
    for _ in range(12):
        bandit_round(agent, rng, masked_share=0.0)
    probs = probabilities(agent, np.ones((STATES, STATES), dtype=bool))
    assert (probs.argmax(-1) == np.arange(STATES)).all(), probs
    assert probs[np.arange(STATES), np.arange(STATES)].min() > 0.8, probs


def test_ppo_prefers_the_best_legal_action_when_the_best_is_masked():
    agent = PPOAgent(bandit_config())
    rng = np.random.default_rng(1)
    for _ in range(12):
        bandit_round(agent, rng, masked_share=0.5)
    own_masked = ~np.eye(STATES, dtype=bool)
    probs = probabilities(agent, own_masked)
    assert (probs[~own_masked] == 0.0).all()  # an illegal action has probability exactly 0
    assert probs[np.arange(STATES), (np.arange(STATES) + 1) % STATES].min() > 0.75, probs
    assert (probabilities(agent, np.ones((STATES, STATES), dtype=bool)).argmax(-1) == np.arange(STATES)).all()


def mixed_config(**overrides: object) -> PPOConfig:
    base: dict[str, object] = {"obs_dim": 4, "act_dim": 2, "branches": (3, 2), "mean_bound_coef": 0.5}
    base.update(overrides)
    return config(**base)


def mixed_segments(agent: PPOAgent, seed: int, lengths: tuple[int, ...] = (40, 30, 26)) -> list[Segment]:
    """Segments of random masks acted by the agent's actor, one of each end kind."""
    rng = np.random.default_rng(seed)
    ends = [SegmentEnd.TERMINAL, SegmentEnd.TRUNCATED, SegmentEnd.CUT]
    segments = []
    for i, n in enumerate(lengths):
        obs = rng.normal(size=(n, agent.config.obs_dim)).astype(np.float32)
        mask = rng.uniform(size=(n, 5)) > 0.4
        mask[:, 0] = mask[:, 3] = True  # one legal action at least in each branch
        packed, logp = act(agent, obs, mask, rng)
        end = ends[i % len(ends)]
        next_obs = None if end is SegmentEnd.TERMINAL else rng.normal(size=4).astype(np.float32)
        segments.append(segment((obs, packed, logp, rng.normal(size=n).astype(np.float32)), end, next_obs))
    return segments


@pytest.mark.parametrize("proximal_anchor", [False, True])
def test_a_mixed_space_update_runs_with_every_term_named_and_finite(proximal_anchor: bool):
    agent = PPOAgent(mixed_config(proximal_anchor=proximal_anchor))
    before = snapshot(agent)
    agent.observe(mixed_segments(agent, seed=0))
    metrics = agent.update()
    assert metrics["train/minibatches"] == 6.0 and metrics["train/skipped_minibatches"] == 0.0
    for term in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "mean_excess", "std_mean"):
        assert math.isfinite(metrics[f"train/{term}"]), term
    assert not all(torch.equal(x, y) for x, y in zip(before, snapshot(agent), strict=True))
    assert agent.actor.log_std.detach().le(agent.config.log_std_max).all()


def test_the_losss_entropy_is_the_gated_gaussians_plus_the_masked_categoricals():
    """At the ceiling the Gaussian's entropy carries no gradient; the categoricals' always does."""
    agent = PPOAgent(mixed_config(log_std_init=0.0, mean_bound_coef=0.0))
    actor = agent.actor
    assert isinstance(actor, MixedActor)
    segment = mixed_segments(agent, seed=3, lengths=(32,))[0]
    batch = Minibatch(
        torch.from_numpy(segment.obs), torch.from_numpy(segment.act), torch.from_numpy(segment.logp),
        torch.zeros(32), torch.zeros(32),
    )  # fmt: skip
    terms = minibatch_loss(actor, agent.critic, batch, agent.config)
    whole = actor.log_prob_and_entropy(actor(batch.obs), *actor.split_actions(batch.actions)).entropy
    torch.testing.assert_close(terms["entropy"], whole.mean(), rtol=0, atol=1e-5)
    terms["loss"].backward()
    assert actor.log_std.grad is not None and actor.log_std.grad.eq(0.0).all()  # no advantage, std at the ceiling
    assert actor.net[-1].bias.grad[2:].abs().sum() > 0  # the logits' entropy gradient


def test_without_continuous_dims_the_std_metric_is_nan_and_the_rest_finite():
    metrics = bandit_round(PPOAgent(bandit_config(rollout_steps=64)), np.random.default_rng(2), masked_share=0.3)
    assert math.isnan(metrics["train/std_mean"]) and math.isfinite(metrics["train/entropy"])


def test_a_rollout_of_another_action_width_is_refused_by_name():
    agent = PPOAgent(mixed_config())
    segment = mixed_segments(agent, seed=0, lengths=(96,))[0]
    fields = {k: getattr(segment, k) for k in segment.__dataclass_fields__}
    agent.observe([Segment(**{**fields, "act": segment.act[:, :2]})])  # the continuous part only
    with pytest.raises(ValueError, match="actions are 2 wide, this agent's 9"):
        agent.update()


def test_a_checkpoint_rebuilds_the_mixed_actor_and_resumes_bitwise():
    a = PPOAgent(mixed_config())
    a.observe(mixed_segments(a, seed=0))
    a.update()
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    b = agent_from_checkpoint(state)
    assert isinstance(b, PPOAgent) and isinstance(b.actor, MixedActor) and b.config == a.config
    arch_a, tensors_a = a.export_actor()
    arch_b, tensors_b = b.export_actor()
    assert arch_a == arch_b and all(np.array_equal(tensors_a[k], tensors_b[k]) for k in tensors_a)
    segments = mixed_segments(a, seed=1)
    a.observe(segments)
    b.observe(segments)
    a.update()
    b.update()
    assert all(torch.equal(x, y) for x, y in zip(snapshot(a), snapshot(b), strict=True))


def test_a_checkpoint_of_another_kind_of_actor_is_refused_by_name():
    mixed = PPOAgent(mixed_config()).state_dict()
    with pytest.raises(ValueError, match=r"discrete branches \(3, 2\), this run's \(\)"):
        PPOAgent(config(obs_dim=4)).load_state_dict(mixed)
    with pytest.raises(ValueError, match=r"discrete branches \(\), this run's \(3, 2\)"):
        PPOAgent(mixed_config()).load_state_dict(PPOAgent(config(obs_dim=4)).state_dict())
