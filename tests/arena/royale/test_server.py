"""The Tank Royale endpoint (arena/royale/server.py) with real sockets: handshakes and bad messages.

Hand-made bots (plain websocket clients speaking the JSON protocol) test the server's rules
exactly. Games played over the endpoint are tests/arena/royale/test_match.py's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from arena.royale.server import RoyaleServer, RoyaleServerConfig
from tests.conftest import timeout


async def handshake(ws: ClientConnection, name: str = "Raw", secret: str | None = None, session: str | None = None) -> None:
    hello = json.loads(await ws.recv())
    assert hello["type"] == "ServerHandshake" and hello["version"].startswith("1.")
    await ws.send(
        json.dumps(
            {
                "type": "BotHandshake",
                "sessionId": session or hello["sessionId"],
                "name": name,
                "version": "1.0",
                "authors": ["tests"],
                "secret": secret,
            }
        )
    )


async def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    """Read until the server closes; returns (code, reason)."""
    with pytest.raises(ConnectionClosed):
        for _ in range(100):
            await asyncio.wait_for(ws.recv(), timeout(5))
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason


# --- handshake and bad messages -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        ('{"type": "BotReady"}', "expected a bot-handshake first"),
        ("not json", "not valid JSON"),
        (b"\x00\x01", "JSON text frames"),
        ('{"type": "ControllerHandshake"}', "not a message a bot sends"),
    ],
)
async def test_a_bad_first_message_closes_with_the_reason(first: Any, reason: str) -> None:
    """Before the handshake every error is fatal: close 1008 with what was wrong."""
    async with RoyaleServer() as server, connect(server.url) as ws:
        json.loads(await ws.recv())
        await ws.send(first)
        code, text = await closed_with(ws)
        assert code == 1008 and text is not None and reason in text


async def test_session_and_secret_are_checked() -> None:
    """A handshake must echo the session id and carry the secret the server wants."""
    async with RoyaleServer(RoyaleServerConfig(secret="letmein")) as server:
        async with connect(server.url) as ws:
            await handshake(ws, session="guessed")
            assert (await closed_with(ws))[1] == "bot-handshake: 'sessionId' is not the one in server-handshake"
        async with connect(server.url) as ws:
            await handshake(ws, secret="wrong")
            code, text = await closed_with(ws)
            assert code == 1008 and text is not None and "secret" in text
        async with connect(server.url) as ws:
            await handshake(ws, secret="letmein")
            conn = await asyncio.wait_for(server.joined.get(), timeout(5))
            assert conn.handshake.name == "Raw"


async def test_invalid_messages_are_dropped_until_the_budget_runs_out() -> None:
    """After the handshake a bad message is dropped (the bot stays); the max_errors-th closes 1008."""
    async with RoyaleServer(RoyaleServerConfig(max_errors=3)) as server, connect(server.url) as ws:
        await handshake(ws)
        conn = await asyncio.wait_for(server.joined.get(), timeout(5))
        await ws.send('{"type": "BotIntent", "turnRate": "fast"}')
        await ws.send('{"type": "Teleport"}')
        await ws.send('{"type": "BotReady"}')
        await asyncio.wait_for(conn.ready.wait(), timeout(5))  # still served after two bad messages
        assert conn.errors == 2
        await ws.send(b"binary")
        code, text = await closed_with(ws)
        assert code == 1008 and text is not None and text.startswith("too many invalid messages: ")
        async with connect(server.url) as again:  # the server itself is fine
            await handshake(again)
            await asyncio.wait_for(server.joined.get(), timeout(5))


async def test_oversized_message_closes_1009() -> None:
    async with RoyaleServer(RoyaleServerConfig(max_message_bytes=4096)) as server, connect(server.url) as ws:
        await handshake(ws)
        await ws.send('{"type": "BotIntent", "stdOut": "' + "x" * 8000 + '"}')
        assert (await closed_with(ws))[0] == 1009
