"""agents/ppo/steps.py: the path each agent runs, and the paths against the reference step.

On the CPU: the step a CUDA graph captures (:class:`BranchlessStep`, run without a graph) and the
multi-rank step over one rank against the reference (:class:`EagerStep`), bit for bit, on clean,
NaN-poisoned and exploding minibatches. With a GPU: graph and eager updates from identical states agree.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agents import PPOAgent
from agents.distributed import GradientAverager
from agents.ppo.steps import BranchlessStep, EagerStep, GraphStep, MultiRankStep, WrittenOutStep, choose_step
from tests.agents.ppo.test_agent import change_loss, config, make_segments, replace_column, snapshot
from tests.agents.test_distributed import world_of_one  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

LENGTHS = (40, 30, 30)
"""100 steps: with minibatch 32, three full minibatches and a partial one of 4 per epoch."""


def test_each_device_and_option_gets_its_path():
    """One rank on the CPU: the written-out step (fused) or the reference; CUDA: the graph or the reference."""
    assert choose_step(config()) is WrittenOutStep
    assert choose_step(config(fused=False)) is EagerStep
    assert choose_step(config(device="cuda")) is GraphStep
    assert choose_step(config(device="cuda", cuda_graph=False)) is EagerStep
    assert choose_step(config(), sync=lambda params, ok: ok) is MultiRankStep


def cpu_segments(seed: int = 0, poisoned: str = "none"):
    """Segments acted by a fresh CPU agent (same seed, so the same initial actor as every agent here)."""
    return poison(make_segments(PPOAgent(config(rollout_steps=100)), seed=seed, lengths=LENGTHS), poisoned)


def ppo_pair(device: str = "cpu", **overrides: object) -> tuple[PPOAgent, PPOAgent]:
    """(eager, branchless) agents with one seed, so identical weights; on CUDA the second uses the graph."""
    eager = PPOAgent(config(rollout_steps=100, device=device, cuda_graph=False, **overrides))
    branchless = PPOAgent(config(rollout_steps=100, device=device, cuda_graph=True, **overrides))
    if device == "cpu":
        branchless.use_step(BranchlessStep)  # the step a graph captures, run without one
    # The reference's guards in torch, so the two agree bit for bit (the compiled guards the CPU
    # step uses by default agree with them to float rounding: test_guard_kernel.py).
    eager.use_step(EagerStep)
    return eager, branchless


def poison(segments, kind: str):
    """Make some minibatches non-finite: one NaN old log-prob ('row') or all of them ('all')."""
    if kind == "row":
        logp = segments[0].logp.copy()
        logp[3] = np.nan
        segments[0] = replace_column(segments[0], logp=logp)
    elif kind == "all":
        segments = [replace_column(s, logp=np.full(s.steps, np.nan, np.float32)) for s in segments]
    return segments


def adam_moments(agent: PPOAgent) -> list[tuple[float, torch.Tensor, torch.Tensor]]:
    """(step, exp_avg, exp_avg_sq) per parameter; a parameter Adam never stepped counts as (0, zeros, zeros)."""
    out = []
    for p in (*agent.actor.parameters(), *agent.critic.parameters()):
        st = agent.optimizer.state.get(p, {})
        zeros = torch.zeros_like(p)
        out.append((float(st.get("step", 0.0)), st.get("exp_avg", zeros).cpu(), st.get("exp_avg_sq", zeros).cpu()))
    return out


def assert_same_update(eager: PPOAgent, other: PPOAgent, m_eager: dict, m_other: dict, atol: float = 0.0) -> None:
    for a, b in zip(snapshot(eager), snapshot(other), strict=True):
        torch.testing.assert_close(b.cpu(), a.cpu(), rtol=atol, atol=atol)
    for (step_a, m_a, v_a), (step_b, m_b, v_b) in zip(adam_moments(eager), adam_moments(other), strict=True):
        assert step_a == step_b
        torch.testing.assert_close(m_b, m_a, rtol=atol, atol=atol)
        torch.testing.assert_close(v_b, v_a, rtol=atol, atol=atol)
    assert m_other.keys() == m_eager.keys()
    for key in ("train/skipped_minibatches", "train/minibatches", "train/steps_trained"):
        assert m_other[key] == m_eager[key], key
    for key, value in m_eager.items():
        # The graph path sums statistics in float32 on the device, the eager loop in Python floats.
        assert m_other[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key


# ── CPU: the device-side guard without a graph ───────────────────────────────


@pytest.mark.parametrize("poisoned", ["none", "row", "all"])
def test_branchless_update_equals_the_eager_loop(poisoned):
    """The graph path's step, run eagerly on the CPU, gives the eager loop's parameters, Adam state, skips and metrics."""
    eager, branchless = ppo_pair()
    segments = cpu_segments(poisoned=poisoned)
    before = snapshot(eager)
    eager.observe(segments)
    branchless.observe(segments)
    m_eager, m_branchless = eager.update(), branchless.update()
    assert m_eager["train/skipped_minibatches"] == {"none": 0.0, "row": 2.0, "all": 8.0}[poisoned]
    assert_same_update(eager, branchless, m_eager, m_branchless)
    if poisoned == "all":
        assert all(torch.equal(a, b) for a, b in zip(before, snapshot(branchless), strict=True))
    for p in snapshot(branchless):
        assert torch.isfinite(p).all()


def test_branchless_update_skips_a_finite_but_huge_gradient_norm(monkeypatch):
    """A loss scaled so the norm is finite but above skip_grad_norm: every minibatch is skipped, nothing moves."""
    eager, branchless = ppo_pair(skip_grad_norm=1e3)
    segments = cpu_segments()
    for agent in (eager, branchless):
        change_loss(monkeypatch, agent, scale=1e6)
        agent.observe(segments)
    before = snapshot(branchless)
    m_eager, m_branchless = eager.update(), branchless.update()
    assert m_branchless["train/skipped_minibatches"] == 8.0
    assert_same_update(eager, branchless, m_eager, m_branchless)
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(branchless), strict=True))


def test_branchless_update_keeps_the_log_std_floor_gate_and_clamp(monkeypatch):
    """At the floor, pushed down on dim 0 and up on dim 1: both paths gate, step and clamp the log-std alike."""
    eager, branchless = ppo_pair(learning_rate=5e-2)
    segments = cpu_segments()
    for agent in (eager, branchless):
        with torch.no_grad():
            agent.actor.log_std.fill_(agent.config.log_std_min)
        log_std = agent.actor.log_std
        change_loss(monkeypatch, agent, term=lambda log_std=log_std: 100.0 * (log_std[0] - log_std[1]))
        agent.observe(segments)
    assert_same_update(eager, branchless, eager.update(), branchless.update())
    log_std = branchless.actor.log_std.detach()
    assert log_std[0] == branchless.config.log_std_min < log_std[1]


def test_cuda_graph_is_ignored_on_the_cpu():
    """cuda_graph defaults to True but only a CUDA device uses it."""
    agent = PPOAgent(config())
    assert agent.config.cuda_graph and isinstance(agent.step, WrittenOutStep)


def test_a_checkpoint_load_keeps_the_path_and_forgets_a_captured_graph():
    """Loading replaces Adam, whose state a graph captured: the same path is rebuilt over the new one, to capture again."""
    agent = PPOAgent(config())
    agent.use_step(GraphStep)
    assert isinstance(agent.step, GraphStep)
    agent.step.graph = object()  # type: ignore[assignment]  # stands for a captured graph
    agent.step.warmup_left = 0
    agent.load_state_dict(agent.state_dict())
    assert isinstance(agent.step, GraphStep) and agent.step.graph is None and agent.step.warmup_left > 0


def test_checkpoint_load_keeps_this_devices_capturable_flag():
    """optimizer.load_state_dict copies the saved capturable flag; the agent puts back its own (False on the CPU)."""
    agent = PPOAgent(config())
    state = copy.deepcopy(agent.state_dict())
    state["optimizer"]["param_groups"][0]["capturable"] = True  # as saved by a CUDA-graph run
    agent.load_state_dict(state)
    assert agent.optimizer.param_groups[0]["capturable"] is False


# ── several ranks (one here) ─────────────────────────────────────────────────


@pytest.mark.usefixtures("world_of_one")
@pytest.mark.parametrize("fused", [True, False])
def test_a_multi_rank_update_over_one_rank_equals_the_reference(fused):
    """Averaged over one rank a gradient is itself (x / 1 == x): the multi-rank step is the reference's, bit for bit,
    through a checkpoint load (which keeps the path)."""
    reference = PPOAgent(config(rollout_steps=100, fused=fused))
    reference.use_step(EagerStep)
    ranked = PPOAgent(config(rollout_steps=100, fused=fused))
    sync = GradientAverager()
    ranked.distribute(sync)
    assert isinstance(ranked.step, MultiRankStep) and ranked.gradient_sync is sync
    for seed, poisoned in ((0, "row"), (1, "none")):
        segments = cpu_segments(seed, poisoned)
        reference.observe(segments)
        ranked.observe(segments)
        assert_same_update(reference, ranked, reference.update(), ranked.update())
        ranked.load_state_dict(ranked.state_dict())
        assert isinstance(ranked.step, MultiRankStep)
    assert sync.calls == 2 * 2 * 4  # updates x epochs x minibatches


# ── CUDA: graph against eager ────────────────────────────────────────────────


@cuda_only
@pytest.mark.parametrize("poisoned", ["none", "row"])
def test_ppo_graph_update_equals_eager_on_cuda(poisoned):
    """Two updates (warm-up, capture, replays, a partial minibatch eagerly) match the eager loop's."""
    eager, graph = ppo_pair("cuda")
    assert isinstance(graph.step, GraphStep) and isinstance(eager.step, EagerStep)
    for seed in (0, 1):
        segments = cpu_segments(seed, poisoned)
        eager.observe(segments)
        graph.observe(segments)
        m_eager, m_graph = eager.update(), graph.update()
        assert graph.step.graph is not None
        assert m_graph["train/skipped_minibatches"] == (2.0 if poisoned == "row" else 0.0)
        assert_same_update(eager, graph, m_eager, m_graph, atol=1e-5)


@cuda_only
def test_ppo_graph_recaptures_after_a_checkpoint_load():
    """Loading a checkpoint replaces Adam, so the graph is captured again and still matches the eager loop."""
    eager, graph = ppo_pair("cuda")
    for agent in (eager, graph):
        agent.observe(cpu_segments(0))
        agent.update()
    # A deep copy, as a checkpoint file would give: optimizer.load_state_dict keeps the very
    # tensors it is handed when device and dtype already match, so the two Adams would share moments.
    graph.load_state_dict(copy.deepcopy(eager.state_dict()))
    assert graph.step.graph is None and graph.optimizer.param_groups[0]["capturable"]
    segments = cpu_segments(1)
    eager.observe(segments)
    graph.observe(segments)
    assert_same_update(eager, graph, eager.update(), graph.update(), atol=1e-5)


@cuda_only
@pytest.mark.parametrize("continuous", [2, 0])
def test_ppo_graph_update_equals_eager_on_cuda_for_discrete_and_mixed_actions(continuous):
    """Masked categoricals in the captured step: two updates, one with a poisoned minibatch, match the eager loop's."""
    from tests.agents.ppo.test_discrete import mixed_config, mixed_segments

    eager = PPOAgent(mixed_config(act_dim=continuous, rollout_steps=96, minibatch_size=32, device="cuda", cuda_graph=False))
    graph = PPOAgent(mixed_config(act_dim=continuous, rollout_steps=96, minibatch_size=32, device="cuda"))
    assert isinstance(graph.step, GraphStep)
    for seed, poisoned in ((0, "none"), (1, "row")):
        segments = poison(mixed_segments(PPOAgent(mixed_config(act_dim=continuous)), seed), poisoned)
        eager.observe(segments)
        graph.observe(segments)
        m_eager, m_graph = eager.update(), graph.update()
        assert graph.step.graph is not None
        assert_same_update(eager, graph, m_eager, m_graph, atol=1e-5)
