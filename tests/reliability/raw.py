"""Raw-socket helpers for the hostile-client cases (``test_hostile.py``, B2 of docs/reliability.md).

A real websocket client cannot send what these tests need (an unmasked frame, a length
header that lies, RSV bits, a request that stops half-way), so :class:`RawSocket` speaks
HTTP/1.1 and RFC 6455 framing by hand over an asyncio stream. Server frames are parsed
minimally (they are never masked and never fragmented by our server).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot_protocol import SUBPROTOCOL, Hello, Welcome, decode_from_server, encode

__all__ = [
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONT",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "RawClosed",
    "RawFrame",
    "RawResponse",
    "RawSocket",
    "frame",
    "upgrade_request",
]

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bool = True,
    length: int | None = None,
    key: bytes = b"\x37\xfa\x21\x3d",
) -> bytes:
    """One client frame, possibly broken on purpose.

    Args:
        rsv: the three reserved bits as a number 0-7 (4 = RSV1, 2 = RSV2, 1 = RSV3).
        mask: False sends an unmasked frame (a protocol error from a client).
        length: the payload length written in the header; defaults to ``len(payload)``
            (a larger value makes a header that promises more than is sent).
    """
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv & 7) << 4 | (opcode & 0xF)])
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 1 << 16:
        head += bytes([m | 126]) + struct.pack("!H", n)
    else:
        head += bytes([m | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    masked = (
        int.from_bytes(payload, "big") ^ int.from_bytes((key * (len(payload) // 4 + 1))[: len(payload)], "big")
    ).to_bytes(len(payload), "big")
    return head + key + masked


def upgrade_request(
    host: str,
    *,
    path: str = "/",
    token: str | None = None,
    protocols: tuple[str, ...] | None = (SUBPROTOCOL,),
    origin: str | None = None,
    extra: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A websocket upgrade request (what ``websockets.asyncio.client.connect`` would send)."""
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    if protocols:
        lines.append(f"Sec-WebSocket-Protocol: {', '.join(protocols)}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if origin is not None:
        lines.append(f"Origin: {origin}")
    lines += [f"{k}: {v}" for k, v in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    """Header names lower-cased (the last value wins)."""
    elapsed: float
    """Seconds from the end of the request to the end of the response head."""


@dataclass
class RawFrame:
    opcode: int
    payload: bytes
    fin: bool = True
    rsv: int = 0


@dataclass
class RawClosed:
    """How the server ended the connection."""

    code: int | None
    """The close frame's code; ``None`` when the TCP connection ended without one (1006)."""
    reason: str
    elapsed: float
    """Seconds from :meth:`RawSocket.mark` to the close frame (or EOF)."""
    frames: list[RawFrame] = field(default_factory=list)
    """Data frames received before the close."""


class RawSocket:
    """A TCP connection to the server that the test drives byte by byte."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host
        self.t0 = time.monotonic()

    @classmethod
    async def open(cls, url: str, local_addr: tuple[str, int] | None = None) -> RawSocket:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, local_addr=local_addr, limit=1 << 22)
        return cls(reader, writer, f"{parts.hostname}:{parts.port}")

    @classmethod
    async def upgraded(
        cls, url: str, hello: Hello | None = None, local_addr: tuple[str, int] | None = None, **request: object
    ) -> tuple[RawSocket, Welcome | None]:
        """Open, upgrade (asserting 101) and, when ``hello`` is given, complete hello → welcome."""
        sock = await cls.open(url, local_addr)
        try:
            response = await sock.handshake(**request)  # type: ignore[arg-type]
            assert response.status == 101, f"upgrade refused: HTTP {response.status}"
            welcome = await sock.hello(hello) if hello is not None else None
        except BaseException:
            await sock.aclose()
            raise
        return sock, welcome

    def mark(self) -> None:
        """Restart the clock that :class:`RawClosed` and :class:`RawResponse` measure from."""
        self.t0 = time.monotonic()

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()

    async def handshake(self, **request: object) -> RawResponse:
        self.send(upgrade_request(self.host, **request))  # type: ignore[arg-type]
        self.mark()
        return await self.read_response()

    async def read_response(self) -> RawResponse:
        head = await self.reader.readuntil(b"\r\n\r\n")
        elapsed = time.monotonic() - self.t0
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if status != 101 and length:
            await self.reader.readexactly(length)
        return RawResponse(status, headers, elapsed)

    async def hello(self, hello: Hello) -> Welcome:
        self.send(frame(OP_BINARY, encode(hello)))
        while True:
            f = await self.read_frame()
            if f.opcode == OP_BINARY:
                welcome = decode_from_server(f.payload)
                assert isinstance(welcome, Welcome), f"expected welcome, got {welcome!r}"
                return welcome
            assert f.opcode in (OP_PING, OP_PONG), f"unexpected frame {f.opcode:#x} before welcome"

    async def read_frame(self) -> RawFrame:
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        if b1 & 0x80:  # a server never masks; tolerate it anyway
            key = await self.reader.readexactly(4)
            raw = await self.reader.readexactly(n)
            payload = bytes(c ^ key[i % 4] for i, c in enumerate(raw))
        else:
            payload = await self.reader.readexactly(n)
        return RawFrame(b0 & 0xF, payload, bool(b0 & 0x80), (b0 >> 4) & 7)

    async def read_close(self, limit: float) -> RawClosed:
        """Read frames until the server's close frame or EOF (answering nothing), within ``limit`` s."""
        frames: list[RawFrame] = []
        async with asyncio.timeout(limit):
            while True:
                try:
                    f = await self.read_frame()
                except (asyncio.IncompleteReadError, ConnectionError):
                    return RawClosed(None, "", time.monotonic() - self.t0, frames)
                if f.opcode == OP_CLOSE:
                    elapsed = time.monotonic() - self.t0
                    code = struct.unpack("!H", f.payload[:2])[0] if len(f.payload) >= 2 else None
                    return RawClosed(code, f.payload[2:].decode("utf-8", "replace"), elapsed, frames)
                frames.append(f)

    async def wait_eof(self, limit: float) -> float:
        """Discard whatever arrives until the server closes TCP; seconds since :meth:`mark`."""
        async with asyncio.timeout(limit):
            try:
                while await self.reader.read(65536):
                    pass
            except ConnectionError:
                pass
        return time.monotonic() - self.t0

    async def aclose(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()

    async def __aenter__(self) -> RawSocket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
