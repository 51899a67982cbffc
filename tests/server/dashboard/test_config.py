"""The dashboard's own settings (server/dashboard_config.py): the defaults hold, and every bad value is refused by name.

How a dashboard combines them with the training server's token is tested in tests/server/test_dashboard.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from server.dashboard.config import DashboardConfig


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"port": 70000}, "port"),
        ({"token": "short"}, "token"),
        ({"push_interval": 0}, "push_interval"),
        ({"frame_fps": math.nan}, "frame_fps"),
        ({"frame_fps": 240}, "frame_fps"),
        ({"max_observers": 0}, "max_observers"),
        ({"history": 0}, "history"),
        ({"ping_interval": -1.0}, "ping_interval"),
        ({"max_frame_bytes": 10}, "max_frame_bytes"),
    ],
)
def test_config_rejects_bad_values(options: dict[str, Any], field: str) -> None:
    """Each bad setting is refused at construction with a message naming the field."""
    with pytest.raises(ValueError, match=field):
        DashboardConfig(**options)


def test_the_defaults_are_valid_and_optional_keepalive_may_be_off():
    config = DashboardConfig()
    assert config.host == "127.0.0.1" and config.token is None and config.rate_window >= config.push_interval
    assert DashboardConfig(ping_interval=None, ping_timeout=None).ping_interval is None


def test_every_problem_is_named_in_one_message():
    with pytest.raises(ValueError) as refused:
        DashboardConfig(push_interval=2.0, rate_window=1.0, send_timeout="10", max_inbound_bytes=64)
    message = str(refused.value)
    assert message.startswith("invalid DashboardConfig: ")
    assert "rate_window must be >= push_interval (2.0), got 1.0" in message
    assert "send_timeout must be a finite number > 0, got '10'" in message and "max_inbound_bytes >= 125" in message
