"""The interface the trainer drives (agents/base.py): every algorithm ``make_agent`` builds implements it."""

from __future__ import annotations

import pytest

from agents import AGENTS, Agent, make_agent

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("name", AGENTS)
def test_every_agent_is_an_agent_with_its_sizes_and_a_bot_ready_actor(name):
    agent = make_agent(name, 3, 2, hidden=(8,), **({} if name == "ppo" else {"buffer_size": 64, "batch_size": 8}))
    assert isinstance(agent, Agent)
    assert agent.name == name and agent.update_steps >= 1
    assert agent.max_policy_lag is None or agent.max_policy_lag >= 0
    assert agent.pending_steps == 0 and not agent.ready()
    arch, tensors = agent.export_actor()
    assert arch["layers"][0] == 3 and arch["layers"][-1] == 2 and "l0.weight" in tensors
    assert isinstance(agent.explore_settings(), dict)


def test_an_object_without_the_trainers_methods_is_not_an_agent():
    class Half:
        name = "half"
        update_steps = 1
        max_policy_lag = None

        def observe(self, segments):
            pass

    assert not isinstance(Half(), Agent)
