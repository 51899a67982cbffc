"""agents/loss_kernel.py: the warm-up ``arena train`` runs before its clock compiles what the step calls.

(Its maths is held against autograd in ``tests/agents/test_fused.py``.)
"""

from __future__ import annotations

from agents import PPOAgent, loss_kernel
from tests.agents.test_ppo import config, make_segments


def test_the_warm_up_compiles_the_variant_the_cpu_step_calls():
    """numba compiles one variant per array layout: an update after the warm-up adds none (no compile in a run)."""
    assert loss_kernel.compile_kernel() >= 0.0
    compiled = loss_kernel._compiled
    assert compiled is not None
    before = set(compiled.signatures)  # type: ignore[attr-defined]
    agent = PPOAgent(config())
    assert agent._written_out
    agent.observe(make_segments(agent))
    assert agent.update()["train/minibatches"] > 0
    assert set(compiled.signatures) == before  # type: ignore[attr-defined]
