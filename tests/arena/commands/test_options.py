"""The CLI's shared option parsing (arena/commands/options.py): typed agent options."""

from __future__ import annotations


def test_agent_options_are_typed_after_the_config_fields():
    from arena.commands.options import parse_agent_options

    parsed = parse_agent_options("ppo", ["entropy_coef=0.001", "hidden=128,128", "epochs=2", "max_policy_lag=none"])
    assert parsed == {"entropy_coef": 0.001, "hidden": (128, 128), "epochs": 2, "max_policy_lag": None}
    assert parse_agent_options("td3", ["policy_delay=3", "cuda_graph=false"]) == {"policy_delay": 3, "cuda_graph": False}
