"""agents/ppo/kernels.py: the warm-up ``arena train`` runs before its clock compiles what the step calls.

(The loops' maths: the loss against the reference in ``test_fused.py``, the guards against the
reference in ``test_guard_kernel.py``, GAE in ``tests/agents/test_common.py``.)
"""

from __future__ import annotations

from agents import PPOAgent, common
from agents.ppo import guard_kernel, kernels, loss_kernel
from agents.ppo.steps import WrittenOutStep
from tests.agents.ppo.test_agent import config, make_segments


def test_the_warm_up_compiles_every_variant_the_cpu_step_calls():
    """numba compiles one variant per argument types and layouts: an update after the warm-up adds none."""
    assert kernels.compile_all() >= 0.0
    compiled = [loss_kernel._compiled, guard_kernel._compiled, common._gae]
    assert all(c is not None for c in compiled)
    before = [set(c.signatures) for c in compiled]
    agent = PPOAgent(config())
    assert isinstance(agent.step, WrittenOutStep)
    agent.observe(make_segments(agent))
    assert agent.update()["train/minibatches"] > 0
    assert [set(c.signatures) for c in compiled] == before
