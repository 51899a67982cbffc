"""The CLI's option parsing (arena/commands/options.py): typed agent options, flags into the server config."""

from __future__ import annotations

import pytest


def test_agent_options_are_typed_after_the_config_fields():
    from arena.commands.options import _parse_agent_options

    parsed = _parse_agent_options("ppo", ["entropy_coef=0.001", "hidden=128,128", "epochs=2", "max_policy_lag=none"])
    assert parsed == {"entropy_coef": 0.001, "hidden": (128, 128), "epochs": 2, "max_policy_lag": None}
    assert _parse_agent_options("td3", ["policy_delay=3", "cuda_graph=false"]) == {"policy_delay": 3, "cuda_graph": False}


@pytest.mark.parametrize("command", ["train", "serve"])
def test_credit_window_flag_reaches_the_server_config(command):
    """--credit-window sets ServerConfig.credit_window (what welcome.limits tells bots); unset keeps the default."""
    from arena.cli import build_parser
    from arena.commands.options import _server_config
    from server import ServerConfig

    parser = build_parser()
    assert _server_config(parser.parse_args([command, "--credit-window", "32"])).credit_window == 32
    assert _server_config(parser.parse_args([command])).credit_window == ServerConfig().credit_window
