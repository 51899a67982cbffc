"""Weights delivery on the event loop: latest wins per bot, bounded writes per turn, stalled readers aborted.

A publish offers the new weights to every bot's :class:`~server.weights.WeightsSlot`
(:meth:`WeightsDelivery.offer`); a bot with something pending has one sender task, which
exists only while it has work (an idle connection costs no task, docs/reliability.md L4),
sends the newest pending weights until none is left, and ends. Two things make a large
``weights`` frame safe to send to many bots at once:

- **a write gate**: a publish wakes every sender in one loop turn, and ``send`` hands a
  whole frame to the transport before it first yields, so at most
  :data:`WEIGHTS_WRITES_PER_TURN` frames of :data:`LARGE_FRAME_BYTES` or more start per turn;
- **a progress watch**: a bot that reads nothing of its weights for ``ping_timeout`` is
  aborted, since keepalive cannot find it (its ping waits behind the same full buffer).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from .metrics import Metrics
from .session import BotSession
from .weights import PublishedWeights

__all__ = ["LARGE_FRAME_BYTES", "WEIGHTS_WRITES_PER_TURN", "WeightsDelivery", "unsent_bytes"]

LARGE_FRAME_BYTES = 64 * 1024
"""Weights frames from this size on take turns to start writing (see :meth:`WeightsDelivery.start_send`)."""
WEIGHTS_WRITES_PER_TURN = 16
"""Large weights frames that may start writing in one event-loop turn."""


class WeightsDelivery:
    """Sends published weights to bots (loop thread only).

    Args:
        metrics: counts ``weights_sent`` and ``bots_aborted{reason="write_stalled"}``.
        ping_timeout: seconds a bot may read nothing of a pending frame before it is aborted
            (``ServerConfig.ping_timeout``; ``None``: never).
    """

    def __init__(self, metrics: Metrics, ping_timeout: float | None) -> None:
        self.metrics = metrics
        self.ping_timeout = ping_timeout
        self._write_gate: asyncio.Semaphore | None = None
        """Created on the loop at the first large weights frame (see :meth:`start_send`)."""

    def offer(self, session: BotSession, weights: PublishedWeights) -> None:
        """Queue ``weights`` for one bot (latest wins); start its sender task unless one runs."""
        if session.slot.offer(weights) and session.sender is None:
            session.sender = asyncio.get_running_loop().create_task(self._sender(session))

    @staticmethod
    def stop(session: BotSession) -> None:
        """The bot left: cancel its sender, if one runs."""
        if session.sender is not None:
            session.sender.cancel()

    async def _sender(self, session: BotSession) -> None:
        """Send pending published weights until none is left (a newer one may arrive during a send), then end."""
        try:
            with contextlib.suppress(ConnectionClosed):
                while (weights := session.slot.take()) is not None:
                    if not await self.send_with_progress(session.connection, session, weights.frame):
                        return
                    self.metrics.inc("weights_sent")
        finally:
            session.sender = None

    async def start_send(self, connection: ServerConnection, frame: bytes) -> asyncio.Future[None]:
        """Start sending ``frame``; a large one waits its turn so one loop turn writes a bounded amount.

        A publish wakes every bot's sender in the same loop turn, and ``send`` hands the whole
        frame to the transport before it first yields: 1 MiB of weights to 256 bots would be
        256 MiB of copies and socket writes in one turn, while no bot is read. A gate lets at most
        ``WEIGHTS_WRITES_PER_TURN`` large frames start per turn; it is released as soon as the
        write has started, never held while a slow reader drains its socket.
        """
        if len(frame) < LARGE_FRAME_BYTES:
            return _send_task(connection, frame)
        if self._write_gate is None:
            self._write_gate = asyncio.Semaphore(WEIGHTS_WRITES_PER_TURN)
        async with self._write_gate:
            sending = _send_task(connection, frame)
            try:
                await asyncio.sleep(0)  # the send runs up to its first write in this turn, then the next may start
            except BaseException:
                sending.cancel()
                raise
        return sending

    async def send_with_progress(self, connection: ServerConnection, session: BotSession, frame: bytes) -> bool:
        """Send ``frame``; abort the connection if its socket drains nothing for ``ping_timeout`` s.

        While a large frame is backed up in the socket of a bot that stopped reading,
        websockets' keepalive cannot help: its ping waits behind the same full buffer before
        its timeout starts. So the sender watches delivery itself (:func:`unsent_bytes`: the
        transport's buffer plus the kernel's unacknowledged bytes): a slow reader (the count
        shrinks, however slowly) is left alone; a stalled one is aborted (1006: a peer that
        reads nothing cannot read a close frame either). Returns False if aborted.
        """
        deadline = self.ping_timeout
        sending = await self.start_send(connection, frame)
        if deadline is None:
            await sending
            return True
        loop = asyncio.get_running_loop()
        transport = connection.transport
        sock = transport.get_extra_info("socket")
        last_size, last_progress = unsent_bytes(transport, sock), loop.time()
        try:
            while True:
                done, _ = await asyncio.wait({sending}, timeout=min(1.0, deadline / 2))
                if done:
                    await sending  # re-raises ConnectionClosed
                    return True
                size = unsent_bytes(transport, sock)
                if size < last_size:
                    last_size, last_progress = size, loop.time()
                elif loop.time() - last_progress >= deadline:
                    session.log.warning("aborting: the bot read nothing of its weights for %.0f s", deadline)
                    self.metrics.inc("bots_aborted", reason="write_stalled")
                    transport.abort()
                    return False
                else:
                    last_size = size
        finally:
            if not sending.done():
                sending.cancel()


def _send_task(connection: ServerConnection, frame: bytes) -> asyncio.Task[None]:
    """``connection.send(frame)`` as a task whose failure is never reported as unretrieved.

    The sender awaits the task, which re-raises a closed connection; but when the bot leaves,
    the sender is cancelled, and a send that failed in that same turn would otherwise reach
    asyncio's "Task exception was never retrieved" log: a traceback on stderr for a bot that
    simply left.
    """
    sending = asyncio.ensure_future(connection.send(frame))
    sending.add_done_callback(_retrieve)
    return sending


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()


def unsent_bytes(transport: Any, sock: Any) -> int:
    """Bytes written to a connection that its peer has not yet acknowledged.

    The transport's own buffer plus, on Linux, the kernel's send queue (``SIOCOUTQ``):
    with only the former, a slow reader (10 KiB/s) looks stalled for minutes, because the
    kernel wakes a writer only once a large share of its send buffer is free.
    """
    size = int(transport.get_write_buffer_size())
    if _SIOCOUTQ is not None and sock is not None:
        with contextlib.suppress(OSError, ValueError):  # closed, or not a TCP socket: the transport's buffer alone
            size += struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0"))[0]
    return size


if sys.platform.startswith("linux"):
    import fcntl
    import termios

    _SIOCOUTQ: int | None = termios.TIOCOUTQ
    """``SIOCOUTQ`` equals ``TIOCOUTQ`` on Linux: unacknowledged bytes in a TCP socket's send queue."""
else:
    _SIOCOUTQ = None
