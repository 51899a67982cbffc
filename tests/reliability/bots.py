"""Raw test bots for the load cases (``test_load.py``): a fleet of connections in a separate process.

Why a separate process: on a 2-core runner, 64-256 client connections on the server's
own GIL would measure the clients, not the server (``bench/loop.py`` does the same).
The fleet runs in ONE ``spawn``-ed process, every connection on one asyncio loop, driven
over a pipe by :class:`Fleet`. This module must stay importable without torch (the
spawned child imports it).

A fleet bot speaks the protocol by hand (``docs/protocol.md``): hello → welcome, then
pre-encoded ``tr`` frames (:class:`FrameTemplate`, only ``seq`` and ``ver`` are patched
in place, no msgpack per send) paced at ``rate`` frames/s, one credit per frame. Every
bot records what it sent, the credit it waited for, each ``weights`` version with its
arrival time (``time.monotonic()``, the same clock as ``PublishedWeights.published_at``
on Linux) and how its connection ended. A *slow reader* (:func:`_slow_reader`) is a
receive-only bot that reads its socket at a fixed byte rate through websockets'
sans-I/O client protocol, with a small ``SO_RCVBUF``, so the server's writes back up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing as mp
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

import msgpack
import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from bot_protocol import FLAG_TERMINAL, SUBPROTOCOL, Bye, Credit, Error, Hello, RewardMode, TransitionBatch, Welcome, encode
from bot_protocol.codec import decode_from_server, unpack

__all__ = ["Fleet", "FleetJob", "FrameSpec", "FrameTemplate"]

PLACEHOLDER = 2**64 - 1
"""msgpack writes this as ``cf`` + 8 bytes, so the field can be patched without re-encoding."""


@dataclass(frozen=True)
class FrameSpec:
    """Shape of one bot's ``tr`` frames: ``rows`` steps of ``n_agents`` agents, tick-major, scalar reward.

    Every agent's episode ends (terminal) every ``episode_ticks`` ticks, staggered across agents.
    With the defaults a frame is 128 rows x 133 B = 16.6 KiB on the wire.
    """

    rows: int = 128
    obs_dim: int = 24
    act_dim: int = 5
    n_agents: int = 8
    episode_ticks: int = 48

    @property
    def ticks(self) -> int:
        return self.rows // self.n_agents

    def batches(self, seed: int = 0) -> list[TransitionBatch]:
        if self.rows % self.n_agents:
            raise ValueError("rows must be a multiple of n_agents")
        rng = np.random.default_rng(seed)
        n, ticks = self.rows, self.ticks
        agent = np.tile(np.arange(self.n_agents, dtype=np.uint32), ticks)
        tick = np.repeat(np.arange(ticks), self.n_agents)
        stagger = agent.astype(np.int64) * max(1, self.episode_ticks // self.n_agents)
        cycle = math.lcm(ticks, self.episode_ticks) // ticks
        out = []
        for frame in range(cycle):
            ended = (frame * ticks + tick + stagger) % self.episode_ticks == self.episode_ticks - 1
            out.append(
                TransitionBatch(
                    seq=0,
                    generation=0,
                    version=0,
                    agent=agent,
                    episode=np.zeros(n, np.uint32),
                    obs=rng.standard_normal((n, self.obs_dim), dtype=np.float32),
                    act=rng.standard_normal((n, self.act_dim), dtype=np.float32),
                    logp=(rng.standard_normal(n, dtype=np.float32) - 3.0).astype(np.float32),
                    flags=np.where(ended, FLAG_TERMINAL, 0).astype(np.uint8),
                    rew=(0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32),
                )
            )
        return out


class FrameTemplate:
    """Pre-encoded ``tr`` frames whose ``seq`` and ``ver`` are rewritten per send (one bytes join)."""

    def __init__(self, spec: FrameSpec, seed: int = 0) -> None:
        seq_marker = b"\xa3seq\xcf" + struct.pack(">Q", PLACEHOLDER)
        ver_marker = b"\xa3ver\xcf" + struct.pack(">Q", PLACEHOLDER)
        self._parts: list[tuple[bytes, bytes, bytes]] = []
        for batch in spec.batches(seed):
            frame = encode(replace(batch, seq=PLACEHOLDER, version=PLACEHOLDER))
            seq_at, ver_at = frame.find(seq_marker), frame.find(ver_marker)
            if seq_at < 0 or ver_at < seq_at:
                raise RuntimeError("seq/ver fields not found in order in the encoded frame")
            seq_cut, ver_cut = seq_at + len(seq_marker) - 8, ver_at + len(ver_marker) - 8
            self._parts.append((frame[:seq_cut], frame[seq_cut + 8 : ver_cut], frame[ver_cut + 8 :]))
        self.nbytes = round(sum(len(a) + len(b) + len(c) + 16 for a, b, c in self._parts) / len(self._parts))
        """Mean frame size in bytes."""
        self.rows = spec.rows
        self.cycle = len(self._parts)
        """Frames before the pattern repeats (episode phases included)."""
        self._pack = struct.Struct(">Q").pack

    def frame(self, seq: int, version: int = 0) -> bytes:
        head, middle, tail = self._parts[seq % len(self._parts)]
        return b"".join((head, self._pack(seq), middle, self._pack(version), tail))


@dataclass(frozen=True)
class FleetJob:
    """What the fleet process runs: ``n_bots`` senders (plus ``slow_readers`` receive-only bots)."""

    url: str
    n_bots: int
    frame: FrameSpec = FrameSpec()
    rate: float = 10.0
    """Frames per second per bot; 0 sends as fast as credit allows; < 0 never sends (idle bots)."""
    seconds: float = 60.0
    """Longest the senders run (the parent normally stops them earlier)."""
    stamp_version: bool = True
    """Stamp each frame with the newest (generation, version) the bot holds (else 0, 0)."""
    ping_interval: float | None = 10.0
    ping_timeout: float | None = 10.0
    close_timeout: float = 5.0
    slow_readers: int = 0
    slow_read_bps: float = 10 * 1024
    """Bytes per second a slow reader takes from its socket once it has its welcome (0: none at all)."""
    slow_rcvbuf: int = 16 * 1024
    record_timeline: float = 0.25
    """Seconds between samples of the fleet's total frames sent (0: none)."""
    connect_concurrency: int = 64


@dataclass
class _Bot:
    name: str
    index: int
    ws: ClientConnection | None = None
    bot_id: str = ""
    credit: int = 0
    window: int = 0
    generation: int = 0
    version: int = 0
    frames_sent: int = 0
    steps_sent: int = 0
    last_ack: int = -1
    credit_msgs: int = 0
    credit_waits: int = 0
    credit_wait_s: float = 0.0
    sending: int = 0
    """1 while a frame is being written (it is not counted in frames_sent yet)."""
    closing: bool = False
    close_code: int | None = None
    """The close code received (1006: none, the TCP connection just ended)."""
    close_sent: int | None = None
    """The close code this bot sent (1011 when its own keepalive ping timed out)."""
    close_reason: str = ""
    close_at: float | None = None
    receiver: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.wake = asyncio.Event()
        self.errors: list[str] = []
        self.versions: list[tuple[int, int, float]] = []
        """(generation, version, arrival monotonic time) of each weights message (welcome's first)."""

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bot_id": self.bot_id,
            "frames_sent": self.frames_sent,
            "steps_sent": self.steps_sent,
            "last_seq": self.frames_sent - 1,
            "last_ack": self.last_ack,
            "credit_msgs": self.credit_msgs,
            "credit_waits": self.credit_waits,
            "credit_wait_s": round(self.credit_wait_s, 3),
            "errors": list(self.errors),
            "versions": list(self.versions),
            "close_code": self.close_code,
            "close_sent": self.close_sent,
            "close_reason": self.close_reason,
            "close_at": self.close_at,
            "unexpected_close": self.close_code is not None and not self.closing,
        }


class _Shared:
    """Cross-process counters and switches (created by the parent, passed to the child)."""

    def __init__(self, ctx: Any) -> None:
        self.stop: MpEvent = ctx.Event()
        self.hold: MpEvent = ctx.Event()
        """Set by the parent: every sender stops once it has sent the same whole number of frame
        cycles as the others (so the server's state is the same at every quiescent snapshot)."""
        self.held: MpEvent = ctx.Event()
        """Set by the child once every sender is waiting on ``hold``."""
        self.sent: Any = ctx.Value("q", 0, lock=False)
        """Frames sent by the whole fleet (written by the child only)."""


async def _open(job: FleetJob, bot: _Bot) -> None:
    ws = await connect(
        job.url,
        subprotocols=[Subprotocol(SUBPROTOCOL)],
        compression=None,
        max_size=64 << 20,
        open_timeout=30,
        ping_interval=job.ping_interval,
        ping_timeout=job.ping_timeout,
        close_timeout=job.close_timeout,
    )
    spec = job.frame
    await ws.send(encode(Hello(bot.name, spec.obs_dim, spec.act_dim, spec.n_agents, RewardMode.SCALAR, "reliability")))
    welcome = decode_from_server(await ws.recv(decode=False))
    if not isinstance(welcome, Welcome):
        raise RuntimeError(f"{bot.name}: handshake refused: {welcome}")
    bot.ws, bot.bot_id = ws, welcome.bot_id
    bot.credit, bot.window = welcome.credit, welcome.limits.credit_window
    bot.generation, bot.version = welcome.weights.generation, welcome.weights.version
    bot.versions.append((bot.generation, bot.version, time.monotonic()))
    bot.receiver = asyncio.get_running_loop().create_task(_receive(bot, ws))


def _weights_identity(data: bytes) -> tuple[int, int]:
    """(gen, ver) of a ``weights`` frame from its first bytes (the encoder writes v, t, gen, ver first)."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data[:256])
    found: dict[str, Any] = {}
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        found[key] = unpacker.unpack()
        if "gen" in found and "ver" in found:
            break
    if found.get("t") != "weights":
        raise RuntimeError(f"unexpected large server frame: {found.get('t')!r}")
    return int(found["gen"]), int(found["ver"])


async def _receive(bot: _Bot, ws: ClientConnection) -> None:
    try:
        async for data in ws:
            if isinstance(data, str):
                bot.errors.append("text frame")
                continue
            if len(data) > 4096:  # only weights are this big: read the identity, skip the tensors
                identity = _weights_identity(data)
                bot.versions.append((*identity, time.monotonic()))
                bot.generation, bot.version = max((bot.generation, bot.version), identity)
                continue
            kind, fields = unpack(data, 64 << 20)
            if kind == Credit.TYPE:
                bot.credit += int(fields["grant"])
                bot.last_ack = int(fields["ack"])
                bot.credit_msgs += 1
                bot.wake.set()
            elif kind == "weights":
                identity = (int(fields["gen"]), int(fields["ver"]))
                bot.versions.append((*identity, time.monotonic()))
                bot.generation, bot.version = max((bot.generation, bot.version), identity)
            elif kind == Error.TYPE:
                bot.errors.append(str(fields.get("code")))
    except ConnectionClosed:
        pass
    finally:
        bot.close_at = time.monotonic()
        if ws.close_code is not None:
            bot.close_code = int(ws.close_code)
            bot.close_reason = ws.close_reason or ""
        else:
            bot.close_code = 1006
        sent = ws.protocol.close_sent
        bot.close_sent = int(sent.code) if sent is not None else None
        bot.wake.set()


async def _pump(job: FleetJob, bot: _Bot, template: FrameTemplate, shared: _Shared, state: dict[str, Any]) -> None:
    """Send paced frames while credit allows, until ``stopping``; obey ``hold``."""
    stopping: asyncio.Event = state["stopping"]
    if job.rate < 0:
        await stopping.wait()
        return
    period = 1.0 / job.rate if job.rate > 0 else 0.0
    next_at = time.monotonic() + period * bot.index / max(1, job.n_bots)  # stagger the bots over one period
    while not stopping.is_set():
        quota = state["quota"]
        if quota is not None and bot.frames_sent >= quota:  # held: wait for the parent's resume
            await asyncio.sleep(0.005)
            next_at = time.monotonic()
            continue
        if period:
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            next_at = max(next_at + period, time.monotonic() - period)  # no catch-up burst after a stall
        if bot.credit <= 0:
            started = time.perf_counter()
            bot.credit_waits += 1
            while bot.credit <= 0 and not stopping.is_set() and bot.close_code is None:
                bot.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await bot.wake.wait()
            bot.credit_wait_s += time.perf_counter() - started
            if bot.close_code is not None:
                return
            continue  # re-check stop and hold before sending
        if stopping.is_set() or (state["quota"] is not None and bot.frames_sent >= state["quota"]):
            continue
        assert bot.ws is not None
        version = bot.version if job.stamp_version else 0
        bot.sending = 1
        try:
            await bot.ws.send(template.frame(bot.frames_sent, version))
        except ConnectionClosed:
            return
        finally:
            bot.sending = 0
        bot.frames_sent += 1
        bot.steps_sent += template.rows
        bot.credit -= 1
        shared.sent.value += 1
        if period == 0 and bot.frames_sent % 16 == 0:
            await asyncio.sleep(0)  # websockets' send does not yield below its write high-water mark


async def _slow_reader(job: FleetJob, bot: _Bot, stopping: asyncio.Event) -> None:
    """A receive-only bot reading ``slow_read_bps`` bytes/s through websockets' sans-I/O protocol.

    Once ``stopping`` is set it reads at full speed until the socket has been quiet for
    0.5 s, so it ends holding whatever the server had sent it, then says bye.
    """
    uri = parse_uri(job.url)
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, job.slow_rcvbuf)  # before connect: caps the TCP window
    sock.setblocking(False)
    protocol = ClientProtocol(uri, subprotocols=[Subprotocol(SUBPROTOCOL)], max_size=None)

    async def flush() -> None:
        for out in protocol.data_to_send():  # the request, pongs, the close reply
            if out:
                try:
                    await loop.sock_sendall(sock, out)
                except OSError:  # the server already tore the connection down
                    protocol.receive_eof()
                    return

    def handle(event: Any) -> None:
        if isinstance(event, Response) or event.opcode is not Opcode.BINARY:
            return
        kind, fields = unpack(event.data, 64 << 20)
        if kind == Welcome.TYPE:
            bot.bot_id = str(fields["bot_id"])
            fields = fields["weights"]
        elif kind != "weights":
            return
        bot.versions.append((int(fields["gen"]), int(fields["ver"]), time.monotonic()))

    try:
        await loop.sock_connect(sock, (uri.host, uri.port))
        protocol.send_request(protocol.connect())
        await flush()
        hello_sent = False
        chunk_bytes = 1024
        draining_since: float | None = None
        while True:
            if stopping.is_set() and draining_since is None:
                draining_since = time.monotonic()
            fast = draining_since is not None or not bot.bot_id  # the welcome comes in at full speed
            try:
                async with asyncio.timeout(0.5 if fast else None):
                    data = await loop.sock_recv(sock, 1 << 20 if fast else chunk_bytes)
            except TimeoutError:
                if draining_since is not None:
                    break  # quiet for 0.5 s while draining: everything sent has been read
                continue
            except OSError:  # reset by the server
                data = b""
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            for event in protocol.events_received():
                handle(event)
            if not hello_sent and protocol.state.name == "OPEN":
                spec = job.frame
                hello = Hello(bot.name, spec.obs_dim, spec.act_dim, spec.n_agents, RewardMode.SCALAR, "slow-reader")
                protocol.send_binary(encode(hello))
                hello_sent = True
            await flush()
            if not data or protocol.close_code is not None:
                bot.close_code = protocol.close_code or 1006
                bot.close_reason = protocol.close_reason or ""
                bot.close_at = time.monotonic()
                return
            if not fast:  # read_bps 0: a stalled reader (until stopping)
                delay = len(data) / job.slow_read_bps if job.slow_read_bps > 0 else math.inf
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if math.isinf(delay) else delay):
                        await stopping.wait()
        bot.closing = True
        protocol.send_binary(encode(Bye("done")))
        protocol.send_close()
        await flush()
    finally:
        sock.close()


async def _run(job: FleetJob, conn: Connection, shared: _Shared) -> dict[str, Any]:
    template = FrameTemplate(job.frame)
    bots = [_Bot(f"load{i}", i) for i in range(job.n_bots)]
    slow = [_Bot(f"slow{i}", i) for i in range(job.slow_readers)]
    gate = asyncio.Semaphore(job.connect_concurrency)

    async def open_one(bot: _Bot) -> None:
        async with gate:
            await _open(job, bot)

    await asyncio.gather(*(open_one(bot) for bot in bots))
    state: dict[str, Any] = {"stopping": asyncio.Event(), "quota": None}
    stopping: asyncio.Event = state["stopping"]
    slow_tasks = [asyncio.create_task(_slow_reader(job, bot, stopping)) for bot in slow]
    deadline = time.monotonic() + 10
    while any(not b.bot_id and b.close_code is None for b in slow) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    conn.send(("ready", {"frame_bytes": template.nbytes, "bot_ids": [b.bot_id for b in bots + slow]}))
    timeline: list[tuple[float, int]] = []

    async def watch() -> None:
        end = time.monotonic() + job.seconds
        next_sample = time.monotonic()
        cycle = template.cycle
        while not shared.stop.is_set() and time.monotonic() < end:
            if shared.hold.is_set():
                if state["quota"] is None:  # stop every bot at the same whole number of frame cycles
                    most = max((b.frames_sent + b.sending for b in bots), default=0)
                    state["quota"] = -(-most // cycle) * cycle
                elif not shared.held.is_set() and all(
                    b.frames_sent >= state["quota"] or b.close_code is not None for b in bots
                ):
                    shared.held.set()
            elif state["quota"] is not None:
                state["quota"] = None
                shared.held.clear()
            if job.record_timeline and time.monotonic() >= next_sample:
                timeline.append((time.monotonic(), int(shared.sent.value)))
                next_sample += job.record_timeline
            await asyncio.sleep(0.01)
        timeline.append((time.monotonic(), int(shared.sent.value)))
        stopping.set()
        for bot in bots:
            bot.wake.set()

    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(_pump(job, bot, template, shared, state) for bot in bots))
    await watcher
    # Wait until no bot is owed a credit message: closing while the server still has to send one
    # would make that handler wait for close_timeout (the bench found this; see bench/loop.py).
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(
        b.close_code is None and b.window - b.credit >= max(1, b.window * 3 // 4) for b in bots
    ):
        await asyncio.sleep(0.005)
    done, _ = await asyncio.wait(slow_tasks, timeout=60) if slow_tasks else (set(), set())
    for task in done:
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    stopped = {"bots": [b.summary() for b in bots], "slow": [b.summary() for b in slow], "timeline": timeline}
    conn.send(("stopped", stopped))
    command = await asyncio.to_thread(conn.recv)  # the parent inspects the server while connections are still open
    if command is None:  # the parent is leaving (a failed test): drop everything and exit
        return {"exit": True}
    if command != "close":
        raise RuntimeError(f"unexpected command {command!r}")

    async def close(bot: _Bot) -> None:
        bot.closing = True
        if bot.ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await bot.ws.send(encode(Bye("done")))
            await bot.ws.close()
        if bot.receiver is not None:
            await bot.receiver

    await asyncio.gather(*(close(bot) for bot in bots))
    for task in slow_tasks:
        task.cancel()
    await asyncio.gather(*slow_tasks, return_exceptions=True)
    return {"bots": [b.summary() for b in bots], "slow": [b.summary() for b in slow], "timeline": timeline}


def _main(conn: Connection, shared: _Shared) -> None:
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            result = asyncio.run(_run(job, conn, shared))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
        else:
            if result.get("exit"):
                return
            conn.send(("done", result))


class Fleet:
    """The parent's handle on the fleet process. ``with Fleet() as fleet: fleet.begin(job) ... fleet.stop()``."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.shared = _Shared(ctx)
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_main, args=(child, self.shared), name="reliability-fleet", daemon=True)
        self.ready: dict[str, Any] = {}
        self.stopped: dict[str, Any] = {}

    def __enter__(self) -> Fleet:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shared.stop.set()
        with contextlib.suppress(OSError, BrokenPipeError):
            self._conn.send(None)
        self._process.join(15)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)

    def _reply(self, expect: str, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            raise TimeoutError(f"fleet process sent no {expect!r} within {timeout:.0f} s")
        kind, payload = self._conn.recv()
        if kind == "error":
            raise RuntimeError(f"fleet process failed:\n{payload}")
        if kind != expect:
            raise RuntimeError(f"fleet process replied {kind!r}, expected {expect!r}")
        return payload

    def begin(self, job: FleetJob, timeout: float = 120.0) -> dict[str, Any]:
        """Open every connection; returns once all are open (``frame_bytes``, ``bot_ids``)."""
        self.shared.stop.clear()
        self.shared.hold.clear()
        self.shared.held.clear()
        self.shared.sent.value = 0
        self._conn.send(job)
        self.ready = self._reply("ready", timeout)
        return self.ready

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """Stop sending; returns per-bot stats while the connections are still open."""
        self.shared.stop.set()
        self.stopped = self._reply("stopped", timeout)
        return self.stopped

    def close(self, timeout: float = 60.0) -> dict[str, Any]:
        """Say bye and close every connection; returns the final per-bot stats."""
        self._conn.send("close")
        result: dict[str, Any] = self._reply("done", timeout)
        return result

    def pause(self, timeout: float = 10.0) -> int:
        """Hold every sender at a common whole number of frame cycles; returns the fleet's frames sent."""
        self.shared.hold.set()
        if not self.shared.held.wait(timeout):
            raise TimeoutError("the fleet did not pause")
        return int(self.shared.sent.value)

    def resume(self, timeout: float = 10.0) -> None:
        self.shared.hold.clear()
        deadline = time.monotonic() + timeout
        while self.shared.held.is_set():  # the child acknowledges by clearing it
            if time.monotonic() > deadline:
                raise TimeoutError("the fleet did not resume")
            time.sleep(0.002)

    @property
    def sent(self) -> int:
        return int(self.shared.sent.value)


if __name__ == "__main__":  # pragma: no cover - a manual smoke run
    print(FrameTemplate(FrameSpec()).nbytes, file=sys.stderr)
