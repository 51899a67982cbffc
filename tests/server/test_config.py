"""ServerConfig and TrainerConfig (server/config.py): the defaults hold, and every bad value is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import MIN_TOKEN_CHARS, ServerConfig, TrainerConfig, is_loopback, listen_problems, url_host


def test_the_defaults_are_valid():
    assert ServerConfig().host == "127.0.0.1" and ServerConfig().token is None
    assert TrainerConfig().checkpoint_dir is None


def test_a_non_loopback_bind_needs_a_token_and_tls_flags_go_together():
    with pytest.raises(ValueError, match="requires a token"):
        ServerConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        ServerConfig(tls_cert="cert.pem")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"port": -1}, "port"),
        ({"port": 65536}, "port"),
        ({"token": "x" * (MIN_TOKEN_CHARS - 1)}, "token"),
        ({"hello_timeout": 0.0}, "hello_timeout"),
        ({"loop_lag_interval": -1.0}, "loop_lag_interval"),
        ({"credit_window": 0}, "credit_window"),
        ({"max_batch": 0}, "max_batch"),
        ({"max_message_bytes": 4095}, "max_message_bytes"),
        ({"max_abs": float("nan")}, "max_abs"),
        ({"queue_max_bytes": 0}, "queue_max_bytes"),
        ({"queue_max_steps": 0}, "queue_max_steps"),
        ({"queue_max_steps": 10, "queue_max_bytes": 10}, "not both"),
        ({"max_connections_per_ip": 0}, "max_connections_per_ip"),
        ({"max_handshakes_per_ip_per_s": 0.5}, "max_handshakes_per_ip_per_s"),
        ({"auth_failures_before_block": 0}, "auth_failures_before_block"),
        ({"gil_switch_interval": 0.5}, "gil_switch_interval"),
        ({"tls_key": "key.pem"}, "tls_cert and tls_key"),
    ],
)
def test_server_config_refuses_bad_values_by_name(options, field):
    with pytest.raises(ValueError, match=f"^invalid ServerConfig: .*{field}"):
        ServerConfig(**options)


def test_server_config_reports_every_problem_at_once():
    with pytest.raises(ValueError) as refused:
        ServerConfig(port=70000, credit_window=0, max_abs=-1.0)
    message = str(refused.value)
    assert "port must be in [0, 65535], got 70000" in message
    assert "credit_window must be >= 1, got 0" in message and "max_abs must be > 0, got -1.0" in message


def test_loopback_binds_need_no_token_and_none_disables_optional_limits():
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert ServerConfig(host=host).token is None
    ServerConfig(host="0.0.0.0", token="long-enough-token")
    ServerConfig(max_connections_per_ip=None, max_handshakes_per_ip_per_s=None, gil_switch_interval=None, ping_interval=None)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"checkpoint_interval": 0.0}, "checkpoint_interval"),
        ({"idle_wait": 0.0}, "idle_wait"),
        ({"first_checkpoint_after": -1.0}, "first_checkpoint_after"),
        ({"drain_interval": 1.5}, "drain_interval"),
        ({"keep_checkpoints": 0}, "keep_checkpoints"),
        ({"publish_every": 0}, "publish_every"),
        ({"resume": True}, "resume needs a checkpoint_dir"),
        ({"torch_threads": 0}, "torch_threads"),
        ({"rollback_after_skips": 0}, "rollback_after_skips"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"restart_interval": -1.0}, "restart_interval"),
    ],
)
def test_trainer_config_refuses_bad_values_by_name(options, words):
    with pytest.raises(ValueError, match=words):
        TrainerConfig(**options)


def test_trainer_config_resumes_from_a_checkpoint_dir(tmp_path: Path):
    assert TrainerConfig(checkpoint_dir=tmp_path, resume=True).resume


def test_listen_problems_is_one_rule_for_every_port():
    assert listen_problems(0, None) == [] and listen_problems(65535, "x" * MIN_TOKEN_CHARS) == []
    assert listen_problems(-1, None) == ["port must be in [0, 65535], got -1"]
    assert listen_problems(8765, "short") == [f"token must be at least {MIN_TOKEN_CHARS} characters"]
    assert len(listen_problems(70000, "short")) == 2


def test_loopback_hosts_and_their_url_form():
    assert all(is_loopback(h) for h in ("localhost", "127.0.0.1", "127.8.8.8", "::1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.com", ""))
    assert url_host("127.0.0.1") == "127.0.0.1" and url_host("::1") == "[::1]"
