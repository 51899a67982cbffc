"""TD3's CUDA-graph path against its eager reference (PPO's: tests/agents/ppo/test_steps.py).

On the CPU: the TD3 benchmark's direct baseline against the fused agent (fused Adam's skip input
itself: tests/agents/test_guards.py). With a GPU: graph and eager cycles from identical states agree.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agents import TD3Agent, TD3Config
from bench.td3 import DirectTD3

pytestmark = pytest.mark.usefixtures("one_torch_thread")

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


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
