"""TLS (``wss://`` with a self-signed certificate made here) and per-address admission control.

The live-server attack cases (H11 brute force, H16 floods) are in ``test_hostile.py``; this
file checks the admission rules themselves with an injected clock, and TLS end to end.
"""

from __future__ import annotations

import ssl
import subprocess
import sys

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from bot_protocol import SUBPROTOCOL
from bot_protocol.client import BotClient, ClientConfig
from server import ServerConfig
from server.admission import Admission

from ..conftest import self_signed_certificate, serving, timeout


async def test_tls_serves_wss_and_the_client_verifies_the_certificate(tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    async with serving(tls_cert=cert, tls_key=key, token="s3cret-token") as server:
        assert server.url.startswith("wss://")
        trusted = ssl.create_default_context(cafile=cert)
        bot = BotClient(ClientConfig(server.url, "tls-bot", 4, 2, token="s3cret-token", ssl=trusted, reconnect=False))
        await bot.connect()
        assert bot.policy is not None
        await bot.close()
        # A client that does not trust the certificate refuses the server.
        with pytest.raises(ssl.SSLCertVerificationError):
            async with connect(server.url, subprotocols=[SUBPROTOCOL], open_timeout=timeout(5)):  # type: ignore[list-item]
                pass


def test_a_non_loopback_bind_needs_a_token_and_tls_flags_go_together():
    with pytest.raises(ValueError, match="requires a token"):
        ServerConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        ServerConfig(tls_cert="cert.pem")


def test_serve_refuses_a_missing_certificate_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "arena.cli", "serve", "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", "k.pem"],
        capture_output=True,
        text=True,
        timeout=timeout(60),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("arena serve: error: --tls-cert")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_auth_failures_block_the_address_then_expire():
    clock = _Clock()
    admission = Admission(max_per_address=8, handshakes_per_s=None, limit_loopback=True, clock=clock)
    for _ in range(5):
        assert admission.check("10.0.0.1", authorized=False) is None  # answered 401 by the server
    refusal = admission.check("10.0.0.1", authorized=True)
    assert refusal is not None and refusal.status == 429 and refusal.retry_after == 60
    assert admission.check("10.0.0.2", authorized=True) is None  # other addresses are unaffected
    clock.now += 61
    assert admission.check("10.0.0.1", authorized=True) is None


def test_failures_outside_the_window_do_not_add_up():
    clock = _Clock()
    admission = Admission(handshakes_per_s=None, limit_loopback=True, clock=clock)
    for _ in range(8):
        admission.check("10.0.0.1", authorized=False)
        clock.now += 15  # 4 failures per minute at most
    assert admission.check("10.0.0.1", authorized=True) is None


def test_per_address_cap_and_handshake_rate():
    clock = _Clock()
    admission = Admission(max_per_address=2, handshakes_per_s=3, limit_loopback=True, clock=clock)
    for _ in range(2):
        assert admission.check("10.0.0.1", True) is None
        admission.opened("10.0.0.1")
    refusal = admission.check("10.0.0.1", True)
    assert refusal is not None and refusal.status == 429 and "connections" in refusal.reason
    refusal = admission.check("10.0.0.1", True)  # the 4th handshake within the same instant
    assert refusal is not None and "handshakes" in refusal.reason
    admission.closed("10.0.0.1")
    clock.now += 1
    assert admission.check("10.0.0.1", True) is None


def test_loopback_is_exempt_unless_asked():
    admission = Admission(max_per_address=1, handshakes_per_s=1)
    for _ in range(5):
        assert admission.check("127.0.0.1", False) is None
        admission.opened("127.0.0.1")
    assert admission.check("::1", True) is None


async def test_a_blocked_address_gets_429_from_the_live_server():
    options = {"token": "good-token-123", "limit_loopback": True, "auth_failures_before_block": 2}
    async with serving(**options) as server:
        for _ in range(2):
            with pytest.raises(InvalidStatus) as bad:
                async with connect(
                    server.url, subprotocols=[SUBPROTOCOL], additional_headers={"Authorization": "Bearer nope"}
                ):  # type: ignore[list-item]
                    pass
            assert bad.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as blocked:
            headers = {"Authorization": "Bearer good-token-123"}
            async with connect(server.url, subprotocols=[SUBPROTOCOL], additional_headers=headers):  # type: ignore[list-item]
                pass
        assert blocked.value.response.status_code == 429
        assert blocked.value.response.headers["Retry-After"] == "60"
        # Another loopback address is another client.
        async with connect(
            server.url,
            subprotocols=[SUBPROTOCOL],
            additional_headers=headers,
            local_addr=("127.0.0.2", 0),  # type: ignore[list-item]
        ) as ok:
            assert ok.subprotocol == SUBPROTOCOL
