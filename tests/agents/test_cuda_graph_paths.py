"""The CUDA-graph paths of PPO and TD3 against their eager references.

On the CPU: the device-side skip guard of the PPO graph path (:meth:`PPOAgent._guarded_step`,
run without a graph) against the eager loop, on clean, NaN-poisoned and exploding
minibatches, and the TD3 benchmark's direct baseline against the fused agent (fused Adam's
skip input itself: tests/agents/test_guards.py). With a GPU: graph and eager updates from
identical states agree.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agents import PPOAgent, TD3Agent, TD3Config
from bench.td3 import DirectTD3
from tests.agents.ppo.test_agent import change_loss, config, make_segments, replace_column, snapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

LENGTHS = (40, 30, 30)
"""100 steps: with minibatch 32, three full minibatches and a partial one of 4 per epoch."""


def cpu_segments(seed: int = 0, poisoned: str = "none"):
    """Segments acted by a fresh CPU agent (same seed, so the same initial actor as every agent here)."""
    return poison(make_segments(PPOAgent(config(rollout_steps=100)), seed=seed, lengths=LENGTHS), poisoned)


def ppo_pair(device: str = "cpu", **overrides: object) -> tuple[PPOAgent, PPOAgent]:
    """(eager, branchless) agents with one seed, so identical weights; on CUDA the second uses the graph."""
    eager = PPOAgent(config(rollout_steps=100, device=device, cuda_graph=False, **overrides))
    branchless = PPOAgent(config(rollout_steps=100, device=device, cuda_graph=True, **overrides))
    branchless.use_graph = True  # on the CPU: the same guarded step, run without a graph
    # The eager loop's guards in torch too, so the two agree bit for bit (the compiled guards the
    # CPU step uses by default agree with them to float rounding: tests/agents/test_guard_kernel.py).
    eager._guards_compiled = False
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
    """cuda_graph defaults to True but only a CUDA device uses it; a checkpoint load forgets any captured graph."""
    agent = PPOAgent(config())
    assert agent.config.cuda_graph and not agent.use_graph
    agent._graph = object()  # type: ignore[assignment]  # stands for a captured graph
    agent._warmup_left = 0
    agent.load_state_dict(agent.state_dict())
    assert agent._graph is None and agent._warmup_left > 0


def test_checkpoint_load_keeps_this_devices_capturable_flag():
    """optimizer.load_state_dict copies the saved capturable flag; the agent puts back its own (False on the CPU)."""
    agent = PPOAgent(config())
    state = copy.deepcopy(agent.state_dict())
    state["optimizer"]["param_groups"][0]["capturable"] = True  # as saved by a CUDA-graph run
    agent.load_state_dict(state)
    assert agent.optimizer.param_groups[0]["capturable"] is False


def small_td3(device: str = "cpu", **overrides: object) -> TD3Agent:
    """A small TD3 without smoothing noise (so no RNG enters an update), its replay filled with random transitions."""
    settings: dict = {
        "obs_dim": 5,
        "act_dim": 2,
        "hidden": (32, 32),
        "batch_size": 16,
        "buffer_size": 512,
        "warmup_steps": 0,
        "target_noise": 0.0,
        "device": device,
    }
    settings.update(overrides)
    agent = TD3Agent(TD3Config(**settings))
    rng = np.random.default_rng(0)
    n = 512
    agent.replay.add(
        rng.normal(size=(n, 5)).astype(np.float32),
        rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rng.normal(size=n).astype(np.float32),
        rng.normal(size=(n, 5)).astype(np.float32),
        (rng.random(n) < 0.1).astype(np.float32),
    )
    return agent


def test_bench_direct_baseline_computes_the_fused_update():
    """bench/td3.py's direct baseline (separate critics, loop Polyak) reaches the fused agent's weights on the same batches."""
    fused = small_td3()
    direct = DirectTD3(fused)
    for _ in range(3):
        fused.run_cycle()
        direct.run_cycle()
    assert direct.updates == fused.updates == 6

    def params(*modules: torch.nn.Module) -> list[torch.Tensor]:
        return [p for m in modules for p in m.parameters()]

    pairs = [
        (params(fused.actor), params(direct.actor)),
        (params(fused.actor_target), params(direct.actor_target)),
        (params(*fused.critic.split()), params(*direct.critics)),
        (params(*fused.critic_target.split()), params(*direct.critic_targets)),
    ]
    for ours, theirs in pairs:
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


# ── CUDA: graph against eager ────────────────────────────────────────────────


@cuda_only
@pytest.mark.parametrize("poisoned", ["none", "row"])
def test_ppo_graph_update_equals_eager_on_cuda(poisoned):
    """Two updates (warm-up, capture, replays, a partial minibatch eagerly) match the eager loop's."""
    eager, graph = ppo_pair("cuda")
    assert graph._static is not None and not eager.use_graph
    for seed in (0, 1):
        segments = cpu_segments(seed, poisoned)
        eager.observe(segments)
        graph.observe(segments)
        m_eager, m_graph = eager.update(), graph.update()
        assert graph._graph is not None
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
    assert graph._graph is None and graph.optimizer.param_groups[0]["capturable"]
    segments = cpu_segments(1)
    eager.observe(segments)
    graph.observe(segments)
    assert_same_update(eager, graph, eager.update(), graph.update(), atol=1e-5)


@cuda_only
def test_td3_graph_cycle_equals_eager_cycle_on_cuda():
    """From identical states (weights, Adam, replay, sampling RNG), graph cycles and eager cycles give the same weights."""
    graph = small_td3("cuda", save_replay=True)
    assert graph.use_graph
    graph.run_cycle()  # captures (after its warm-up cycles), then replays once
    eager = small_td3("cuda", save_replay=True, cuda_graph=False)
    assert not eager.use_graph
    eager.load_state_dict(copy.deepcopy(graph.state_dict()))  # deep: see the PPO checkpoint test
    for _ in range(4):
        graph.run_cycle()
        eager.run_cycle()
    for name in ("actor", "critic", "actor_target", "critic_target"):
        for a, b in zip(getattr(eager, name).parameters(), getattr(graph, name).parameters(), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=lambda text, name=name: f"{name}: {text}")
    torch.testing.assert_close(graph._stats, eager._stats, rtol=1e-4, atol=1e-5)


@cuda_only
def test_td3_graph_agent_resumes_from_an_eager_checkpoint_on_cuda():
    """A graph agent loading an eager run's checkpoint (capturable=False, step counts on the CPU) captures and matches."""
    eager = small_td3("cuda", save_replay=True, cuda_graph=False)
    eager.run_cycle()
    graph = small_td3("cuda", save_replay=True)
    graph.load_state_dict(copy.deepcopy(eager.state_dict()))
    graph.run_cycle()  # warm-up cycles and capture: more updates than the eager agent's one cycle
    eager.load_state_dict(copy.deepcopy(graph.state_dict()))
    for _ in range(3):
        graph.run_cycle()
        eager.run_cycle()
    for a, b in zip(eager.actor.parameters(), graph.actor.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
