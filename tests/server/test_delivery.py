"""Weights delivery (server/delivery.py): bytes written that the peer has not acknowledged, and quiet failed sends.

The sender tasks, the write gate and the stalled-reader abort need live bot connections: they are
covered over sockets by tests/server/test_app.py and tests/reliability/ (the slow and stalled readers).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sys

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from server.delivery import WeightsDelivery, unsent_bytes
from server.metrics import Metrics
from tests.conftest import timeout

SENT = 2 << 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's send queue is read with Linux's SIOCOUTQ")
async def test_unsent_bytes_count_the_kernels_send_queue_and_shrink_as_the_peer_reads():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the peer takes almost nothing unread
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    _, writer = await asyncio.open_connection(*listener.getsockname())
    peer, _ = listener.accept()
    peer.setblocking(False)
    try:
        transport = writer.transport
        sock = transport.get_extra_info("socket")
        assert unsent_bytes(transport, sock) == 0
        writer.write(b"x" * SENT)
        await asyncio.sleep(0.05)
        waiting = unsent_bytes(transport, sock)
        assert waiting >= SENT - (256 << 10)  # all of it but what fits the peer's receive buffer
        assert waiting > transport.get_write_buffer_size()  # the transport's buffer alone would look drained
        assert unsent_bytes(transport, None) == transport.get_write_buffer_size()  # no socket: the buffer alone
        read = 0
        while read < SENT // 2:
            try:
                read += len(peer.recv(1 << 16))
            except BlockingIOError:
                await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        assert unsent_bytes(transport, sock) <= waiting - (SENT // 2 - (256 << 10))
    finally:
        peer.close()
        listener.close()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await asyncio.wait_for(writer.wait_closed(), timeout(5))


async def test_a_send_that_fails_as_its_bot_leaves_logs_no_unretrieved_task_exception(caplog: pytest.LogCaptureFixture):
    """A bot that leaves while its weights are sent cancels the sender; the failed send is not news on stderr."""
    accepted: asyncio.Queue[ServerConnection] = asyncio.Queue()
    done = asyncio.Event()

    async def handler(connection: ServerConnection) -> None:
        await accepted.put(connection)
        await done.wait()

    delivery = WeightsDelivery(Metrics(), ping_timeout=None)
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", compression=None):
            connection = await asyncio.wait_for(accepted.get(), timeout(5))
        await asyncio.wait_for(connection.wait_closed(), timeout(5))
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            sending = await delivery.start_send(connection, b"w" * 64)  # as if the sender awaiting it had been cancelled
            await asyncio.wait({sending}, timeout=timeout(5))
            assert isinstance(sending.exception(), ConnectionClosed)  # awaiting it still re-raises
            unretrieved = await delivery.start_send(connection, b"w" * 64)
            await asyncio.wait({unretrieved}, timeout=timeout(5))
            del unretrieved
            gc.collect()
        done.set()
    assert "never retrieved" not in caplog.text
