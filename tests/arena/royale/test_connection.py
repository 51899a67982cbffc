"""LockstepConnection over a real loopback socket: a bot that stops reading is closed, not buffered for ever.

Why a real socket: what this guards is the transport's write buffer, which only grows when the
kernel's socket buffers are full, i.e. when a real peer stops reading.
"""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from arena.royale.connection import CLOSE_NOT_READING, LockstepConnection
from tests.conftest import timeout

FRAME = "x" * (64 << 10)
"""One 64 KiB text frame: the 1 MiB limit plus the kernel's loopback buffers fill in a few hundred."""
MAX_FRAMES = 2000
"""128 MiB: a connection not closed by then has no limit at all (keeps the test bounded if it breaks)."""


async def test_a_bot_that_stops_reading_is_closed_with_1008(caplog: pytest.LogCaptureFixture) -> None:
    """The server keeps sending while the client reads nothing: past ``max_write_buffer`` unsent bytes
    the connection is closed 1008 and aborted, the log says how many bytes were unsent and the limit,
    and ``send_now`` answers False from then on."""
    outcome: asyncio.Future[tuple[LockstepConnection, int, bool]] = asyncio.get_running_loop().create_future()

    async def flood(websocket: ServerConnection) -> None:
        assert isinstance(websocket, LockstepConnection)
        sent = 0
        while sent < MAX_FRAMES and websocket.send_now(FRAME):
            sent += 1
            await asyncio.sleep(0)  # let the loop write what the socket takes
        again = websocket.send_now(FRAME)
        await websocket.wait_closed()
        outcome.set_result((websocket, sent, again))

    caplog.set_level(logging.WARNING, logger="arena.royale.connection")
    async with serve(
        flood, "127.0.0.1", 0, create_connection=LockstepConnection, compression=None, ping_interval=None
    ) as server:
        port = server.sockets[0].getsockname()[1]
        # max_queue=1: the client's own buffering stops after one frame, so the backlog lands on the server.
        async with connect(f"ws://127.0.0.1:{port}", compression=None, max_queue=1, ping_interval=None) as ws:
            websocket, sent, again = await asyncio.wait_for(outcome, timeout(5))
            assert sent < MAX_FRAMES, "the server never closed a client that reads nothing"
            assert websocket.protocol.close_sent is not None and websocket.protocol.close_sent.code == CLOSE_NOT_READING
            assert websocket.protocol.state is State.CLOSED and again is False
            # The close frame sat behind the unread backlog, which the abort dropped: the client just sees the end.
            with pytest.raises(ConnectionClosed):
                for _ in range(MAX_FRAMES):
                    await asyncio.wait_for(ws.recv(), timeout(5))

    [record] = [r for r in caplog.records if "stopped reading" in r.getMessage()]
    found = re.search(r"(\d+) bytes unsent.* (\d+)", record.getMessage())
    assert found is not None, record.getMessage()
    unsent, limit = int(found[1]), int(found[2])
    assert limit == LockstepConnection.max_write_buffer and unsent > limit
