"""TLS (``wss://`` with a self-signed certificate made here) and per-address admission control.

The live-server attack cases (H11 brute force, H16 floods) are in ``test_hostile.py``; this
file checks TLS and a blocked address end to end. The admission rules themselves, with an
injected clock, are tested in ``tests/server/test_admission.py``.
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


def test_serve_refuses_a_missing_certificate_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "arena.cli", "serve", "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", "k.pem"],
        capture_output=True,
        text=True,
        timeout=timeout(60),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("arena serve: error: --tls-cert")


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
