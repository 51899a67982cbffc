"""A websocket connection for lockstep turns: frames go straight to a callback, sends never await.

Why: a Tank Royale turn is one small text frame out to each bot and one back, and through
websockets' asyncio API each costs a future, a task switch and an ``async with``, more CPU than
the engine step and the JSON together (docs/royale.md, "Speed"). :class:`LockstepConnection`
keeps websockets for the handshake, framing, limits, ping/pong and the closing handshake, and
drops only that machinery on the hot path:

* incoming text frames go to :attr:`~LockstepConnection.on_text` from ``data_received`` itself;
  binary frames to :attr:`~LockstepConnection.on_binary`;
* :meth:`~LockstepConnection.send_now` writes a frame to the transport without awaiting; a bot
  that stops reading is closed (1008) past ``max_write_buffer`` rather than growing memory.

Until ``on_text`` is set, frames take websockets' usual path, so the class is a drop-in
``create_connection`` for ``serve``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event, State

__all__ = ["CLOSE_NOT_READING", "LockstepConnection"]

log = logging.getLogger(__name__)

CLOSE_NOT_READING = 1008
"""Close code for a bot whose unread frames passed ``max_write_buffer`` (a policy violation)."""


class LockstepConnection(ServerConnection):
    """``ServerConnection`` with a synchronous receive callback and a non-awaiting send (see the module docstring)."""

    max_write_buffer: int = 1 << 20
    """Bytes of unsent frames a bot may leave in our buffer before it is closed for not reading."""

    on_text: Callable[[bytes], None] | None = None
    """Called with each complete text message (UTF-8 bytes) from ``data_received``; None: websockets' own path."""
    on_binary: Callable[[], None] | None = None
    """Called for each binary message while ``on_text`` is set (Tank Royale speaks text only)."""

    _fragments: list[bytes] | None = None
    _fragment_text = True

    def process_event(self, event: Event) -> None:
        on_text = self.on_text
        if on_text is None or not isinstance(event, Frame):
            super().process_event(event)
            return
        opcode = event.opcode
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if not event.fin:  # the first frame of a fragmented message
                self._fragments, self._fragment_text = [bytes(event.data)], opcode is Opcode.TEXT
                return
            data = bytes(event.data)
            text = opcode is Opcode.TEXT
        elif opcode is Opcode.CONT:
            if self._fragments is None:  # the protocol layer refuses this; never reached
                return
            self._fragments.append(bytes(event.data))
            if not event.fin:
                return
            data, text, self._fragments = b"".join(self._fragments), self._fragment_text, None
        else:  # ping, pong, close: websockets answers those itself
            super().process_event(event)
            return
        if text:
            on_text(data)
        elif self.on_binary is not None:
            self.on_binary()

    def send_now(self, text: str) -> bool:
        """Send one text frame without awaiting. False when the connection is not open (the bot left).

        A bot that does not read its frames is closed with 1008 once ``max_write_buffer`` bytes wait
        for it, and this returns False from then on. (The close frame queues behind that unread
        backlog, which the abort drops, so the bot itself only sees its connection end.)
        """
        if self.protocol.state is not State.OPEN:
            return False
        unsent = self.transport.get_write_buffer_size()
        if unsent > self.max_write_buffer:
            log.warning(
                "closing a Tank Royale bot that stopped reading its frames (%d bytes unsent, more than the limit of %d)",
                unsent,
                self.max_write_buffer,
            )
            self.protocol.send_close(CLOSE_NOT_READING, "not reading: too many unsent frames")
            self.send_data()
            self.transport.abort()  # its frames will never be read: do not wait for a closing handshake
            return False
        self.protocol.send_text(text.encode())
        self.send_data()
        return True
