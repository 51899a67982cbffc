"""The sender process of ``bench/loop.py``: every bot connection of a run, on one asyncio loop.

Why a process of its own: on a 2-core machine the server under test must have its GIL for its
event loop and trainer thread alone, so the bots that load it live in ONE separate process
(``spawn``), all connections on one loop, driven by jobs sent over a pipe (:class:`SenderWorker`).
It never imports torch or the server: what it sends is what a bot in another language would send.

Three jobs: :class:`IngestJob` (pre-encoded ``tr`` frames as fast as credit allows, or raw for the
bare websockets baseline), :class:`FeedJob` (real :class:`BotClient` bots, paced, stamped with their
current policy) and :class:`SwapJob` (idle bots that only receive weights, with their swap times).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing as mp
import struct
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as MpEvent
from typing import Any, Literal

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

# Imported as ``bench.loop_senders`` by bench/loop.py, which puts the checkout on sys.path first (the
# spawned sender inherits that path), so the checkout measured is the one loop.py lives in.
from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    SUBPROTOCOL,
    Bye,
    Credit,
    Error,
    Hello,
    Policy,
    RewardMode,
    TransitionBatch,
    Weights,
    Welcome,
)
from bot_protocol.client import BotClient, ClientConfig
from bot_protocol.codec import decode_from_server, encode

__all__ = [
    "ACT_DIM",
    "AGENTS_PER_BOT",
    "OBS_DIM",
    "FeedJob",
    "FrameSpec",
    "FrameTemplate",
    "IngestJob",
    "Job",
    "Protocol",
    "SenderWorker",
    "SwapJob",
]

log = logging.getLogger("bench.loop")

# ── workload ─────────────────────────────────────────────────────────────────

OBS_DIM = 24
ACT_DIM = 5
AGENTS_PER_BOT = 8
SEQ_PLACEHOLDER = 2**64 - 1
"""msgpack writes this as ``cf`` + 8 bytes, so the seq can be patched in place."""

Protocol = Literal["arena", "raw"]


@dataclass(frozen=True)
class FrameSpec:
    """Shape of the ``tr`` frames one bot sends: ``steps`` rows from ``n_agents`` agents, tick-major.

    Every agent's episode lasts ``episode_ticks`` ticks, staggered across agents; even agents
    end ``terminal``, odd ones ``truncated`` (with their ``next_obs`` row). The pattern repeats
    after :attr:`cycle` frames, so a bot cycles through that many pre-built frames.
    """

    steps: int = 64
    obs_dim: int = OBS_DIM
    act_dim: int = ACT_DIM
    n_agents: int = AGENTS_PER_BOT
    episode_ticks: int = 96

    @property
    def ticks(self) -> int:
        return self.steps // self.n_agents

    @property
    def cycle(self) -> int:
        return math.lcm(self.ticks, self.episode_ticks) // self.ticks

    def batches(self, seed: int = 0) -> list[TransitionBatch]:
        """The frame cycle: random float32 data, staggered episode ends."""
        if self.steps % self.n_agents or self.episode_ticks < 1:
            raise ValueError("steps must be a multiple of n_agents, and episode_ticks >= 1")
        rng = np.random.default_rng(seed)
        n, ticks = self.steps, self.ticks
        agent = np.tile(np.arange(self.n_agents, dtype=np.uint32), ticks)
        tick = np.repeat(np.arange(ticks), self.n_agents)
        stagger = agent.astype(np.int64) * (self.episode_ticks // self.n_agents)
        out = []
        for frame in range(self.cycle):
            ended = (frame * ticks + tick + stagger) % self.episode_ticks == self.episode_ticks - 1
            flags = np.where(ended, np.where(agent % 2 == 0, FLAG_TERMINAL, FLAG_TRUNCATED), 0).astype(np.uint8)
            n_truncated = int(np.count_nonzero(flags == FLAG_TRUNCATED))
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
                    flags=flags,
                    rew=(0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32),
                    next_obs=rng.standard_normal((n_truncated, self.obs_dim), dtype=np.float32),
                )
            )
        return out


class FrameTemplate:
    """Pre-encoded ``tr`` frames (one bot's cycle) whose ``seq`` is rewritten per send: one bytes join, no msgpack."""

    def __init__(self, spec: FrameSpec, seed: int = 0) -> None:
        marker = b"\xa3seq\xcf" + struct.pack(">Q", SEQ_PLACEHOLDER)
        self._parts: list[tuple[bytes, bytes]] = []
        for batch in spec.batches(seed):
            frame = encode(replace(batch, seq=SEQ_PLACEHOLDER))
            at = frame.find(marker)
            if at < 0:
                raise RuntimeError("seq field not found in the encoded frame")
            cut = at + len(marker) - 8
            self._parts.append((frame[:cut], frame[cut + 8 :]))
        self.nbytes = round(sum(len(p) + 8 + len(s) for p, s in self._parts) / len(self._parts))
        """Mean frame size in bytes."""
        self.steps = spec.steps
        self._pack = struct.Struct(">Q").pack

    def frame(self, seq: int) -> bytes:
        prefix, suffix = self._parts[seq % len(self._parts)]
        return b"".join((prefix, self._pack(seq), suffix))


# ── sender process: jobs ─────────────────────────────────────────────────────


@dataclass(frozen=True)
class IngestJob:
    """Open ``n_conns`` connections and send pre-encoded frames as fast as allowed until stopped."""

    url: str
    protocol: Protocol
    n_conns: int
    frame: FrameSpec
    compression: str | None = None
    max_seconds: float = 60.0


@dataclass(frozen=True)
class FeedJob:
    """``n_bots`` :class:`BotClient` bots sending batches stamped with their current policy."""

    url: str
    n_bots: int
    frame: FrameSpec
    steps_per_s: float = 0.0
    """Total paced rate over all bots; 0 sends as fast as credit allows."""
    max_seconds: float = 120.0


@dataclass(frozen=True)
class SwapJob:
    """``n_bots`` idle :class:`BotClient` bots that only receive weights; returns their swap times."""

    url: str
    n_bots: int
    probe: bytes
    """A ``weights`` frame, to time one client-side decode + install after the run."""
    max_seconds: float = 120.0


Job = IngestJob | FeedJob | SwapJob


@dataclass
class _Link:
    """One sender connection with its own credit accounting (``arena``) or none (``raw``)."""

    ws: ClientConnection
    arena: bool
    credit: int = 0
    window: int = 0
    """The credit window from ``welcome`` (``arena`` only)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    sent: int = 0
    credit_msgs: int = 0
    credit_granted: int = 0
    credit_waits: int = 0
    credit_wait_s: float = 0.0
    errors: int = 0
    receiver: asyncio.Task[None] | None = None

    async def receive(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for data in self.ws:
                if isinstance(data, str):
                    continue
                message = decode_from_server(data)
                if isinstance(message, Credit):
                    self.credit += message.grant
                    self.credit_msgs += 1
                    self.credit_granted += message.grant
                    self.wake.set()
                elif isinstance(message, Error):
                    self.errors += 1
                    log.warning("server error %s: %s", message.code, message.msg)
        self.wake.set()

    async def pump(self, template: FrameTemplate, stopping: asyncio.Event) -> None:
        seq = 0
        while not stopping.is_set():
            if self.arena and self.credit <= 0:
                self.credit_waits += 1
                started = time.perf_counter()
                self.wake.clear()
                await self.wake.wait()
                self.credit_wait_s += time.perf_counter() - started
                if self.receiver is not None and self.receiver.done():
                    return
                continue
            try:
                await self.ws.send(template.frame(seq))
            except ConnectionClosed:
                return
            seq += 1
            self.sent += 1
            self.credit -= 1
            if seq % 16 == 0:  # websockets' send does not yield below its write high-water mark
                await asyncio.sleep(0)


async def _open_link(job: IngestJob, index: int) -> _Link:
    if job.protocol == "raw":
        ws = await connect(job.url, compression=job.compression, max_size=1 << 20, open_timeout=30)
        return _Link(ws, arena=False)
    subprotocols: list[Any] = [SUBPROTOCOL]
    ws = await connect(job.url, subprotocols=subprotocols, compression=None, max_size=64 << 20, open_timeout=30)
    spec = job.frame
    await ws.send(encode(Hello(f"bench{index}", spec.obs_dim, spec.act_dim, spec.n_agents, RewardMode.SCALAR, "bench")))
    welcome = decode_from_server(await ws.recv(decode=False))
    if not isinstance(welcome, Welcome):
        raise RuntimeError(f"handshake refused: {welcome}")
    link = _Link(ws, arena=True, credit=welcome.credit, window=welcome.limits.credit_window)
    link.receiver = asyncio.get_running_loop().create_task(link.receive())
    return link


async def _watch_stop(stop: MpEvent, deadline: float, stopping: asyncio.Event, wake: Callable[[], None]) -> None:
    while not stop.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    stopping.set()
    wake()


async def _ingest(job: IngestJob, conn: Connection, stop: MpEvent) -> dict[str, Any]:
    template = FrameTemplate(job.frame)
    links = await asyncio.gather(*(_open_link(job, i) for i in range(job.n_conns)))
    conn.send(("ready", {"frame_bytes": template.nbytes}))
    stopping = asyncio.Event()

    def wake_all() -> None:
        for link in links:
            link.wake.set()

    wall0, cpu0 = time.perf_counter(), time.process_time()
    watcher = asyncio.create_task(_watch_stop(stop, time.monotonic() + job.max_seconds, stopping, wake_all))
    await asyncio.gather(*(link.pump(template, stopping) for link in links))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    await watcher
    # Say bye only once the server can owe no further credit message: a bot that closes while the
    # server still has to *send* it credit stalls that handler for close_timeout (see the report).
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(link.arena and link.window - link.credit >= link.window // 2 for link in links):
        await asyncio.sleep(0.005)

    async def close(link: _Link) -> None:
        with contextlib.suppress(ConnectionClosed):
            if link.arena:
                await link.ws.send(encode(Bye("bench done")))
            await link.ws.close()
        if link.receiver is not None:
            await link.receiver

    await asyncio.gather(*(close(link) for link in links))
    credit_msgs = sum(link.credit_msgs for link in links)
    return {
        "frames_sent": sum(link.sent for link in links),
        "steps_sent": sum(link.sent for link in links) * template.steps,
        "sender_cpu_util": round(cpu / wall, 3) if wall > 0 else 0.0,
        "credit_msgs_per_frame": round(credit_msgs / max(1, sum(link.sent for link in links)), 3),
        "mean_credit_grant": round(sum(link.credit_granted for link in links) / max(1, credit_msgs), 2),
        "credit_wait_share": round(sum(link.credit_wait_s for link in links) / max(1e-9, wall * len(links)), 3),
        "server_errors": sum(link.errors for link in links),
    }


async def _settle(bots: list[BotClient], seconds: float = 3.0) -> None:
    """Wait until no bot can be owed another credit message, so closing cannot stall a server handler."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(
        bot.limits.credit_window - bot.credit >= bot.limits.credit_window // 2 for bot in bots
    ):
        await asyncio.sleep(0.005)


async def _feed(job: FeedJob, conn: Connection, stop: MpEvent) -> dict[str, Any]:
    spec = job.frame
    cycle = spec.batches(seed=1)
    bots = [
        BotClient(
            ClientConfig(job.url, f"feed{i}", spec.obs_dim, spec.act_dim, n_agents=spec.n_agents, batch_steps=spec.steps)
        )
        for i in range(job.n_bots)
    ]
    await asyncio.gather(*(bot.connect() for bot in bots))
    conn.send(("ready", None))
    stopping = asyncio.Event()
    period = spec.steps * job.n_bots / job.steps_per_s if job.steps_per_s > 0 else 0.0

    async def run(index: int, bot: BotClient) -> None:
        next_at = time.monotonic() + period * index / job.n_bots  # stagger the bots over one period
        sent = 0
        while not stopping.is_set():
            if period:
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at = max(next_at + period, time.monotonic() - period)  # no catch-up burst after a stall
            # Wait for credit here rather than inside send(): stopping then never interrupts a send half-way.
            while bot.credit <= 0 and not stopping.is_set():
                await asyncio.sleep(0.005)
            if stopping.is_set():
                return
            policy = bot.policy
            assert policy is not None
            batch = cycle[(sent + index) % len(cycle)]
            await bot.send(replace(batch, generation=policy.generation, version=policy.version))
            sent += 1

    watcher = asyncio.create_task(_watch_stop(stop, time.monotonic() + job.max_seconds, stopping, lambda: None))
    await asyncio.gather(*(run(i, bot) for i, bot in enumerate(bots)))
    await watcher
    await _settle(bots)
    await asyncio.gather(*(bot.close() for bot in bots))
    return {
        "steps_sent": sum(bot.stats.steps_sent for bot in bots),
        "weights_swapped": sum(bot.stats.weights_swapped for bot in bots),
        "server_errors": sum(len(bot.stats.errors) for bot in bots),
    }


async def _swap(job: SwapJob, conn: Connection, stop: MpEvent) -> dict[str, Any]:
    bots = [BotClient(ClientConfig(job.url, f"swap{i}", OBS_DIM, ACT_DIM, n_agents=AGENTS_PER_BOT)) for i in range(job.n_bots)]
    await asyncio.gather(*(bot.connect() for bot in bots))
    conn.send(("ready", None))
    await _watch_stop(stop, time.monotonic() + job.max_seconds, asyncio.Event(), lambda: None)
    await asyncio.gather(*(bot.close() for bot in bots))
    # What one bot spends turning a weights frame into a policy (the 64 bots share this loop, so
    # the last bot of a publish waits for the other 63 installs: a client-side, bench-only cost).
    rounds = 50
    started = time.perf_counter()
    for _ in range(rounds):
        message = decode_from_server(job.probe)
        assert isinstance(message, Weights)
        Policy.from_weights(message)
    install_us = (time.perf_counter() - started) / rounds * 1e6
    return {
        "swap_times": [list(bot.stats.swap_times) for bot in bots],
        "rejected": sum(bot.stats.weights_rejected for bot in bots),
        "client_install_us": round(install_us, 1),
    }


def _worker_main(conn: Connection, stop: MpEvent) -> None:
    """Sender process: run jobs until ``None`` arrives. Replies ``ready``, then ``done`` or ``error``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="[senders] %(levelname)s %(name)s: %(message)s")
    runners: dict[type, Callable[[Any, Connection, MpEvent], Coroutine[Any, Any, dict[str, Any]]]] = {
        IngestJob: _ingest,
        FeedJob: _feed,
        SwapJob: _swap,
    }
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            result = asyncio.run(runners[type(job)](job, conn, stop))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
        else:
            conn.send(("done", result))


class SenderWorker:
    """The parent's handle on the sender process."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_worker_main, args=(child, self._stop), name="bench-senders", daemon=True)

    def __enter__(self) -> SenderWorker:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError, BrokenPipeError):
            self._stop.set()
            self._conn.send(None)
        self._process.join(15)
        if self._process.is_alive():
            log.warning("sender process did not exit; terminating it")
            self._process.terminate()
            self._process.join(5)

    def _reply(self, expect: str, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            raise TimeoutError(f"sender process sent no {expect!r} within {timeout:.0f} s")
        kind, payload = self._conn.recv()
        if kind == "error":
            raise RuntimeError(f"sender process failed:\n{payload}")
        if kind != expect:
            raise RuntimeError(f"sender process replied {kind!r}, expected {expect!r}")
        return payload

    def begin(self, job: Job, timeout: float = 60.0) -> Any:
        """Start ``job``; returns once every connection is open."""
        self._stop.clear()
        self._conn.send(job)
        return self._reply("ready", timeout)

    def finish(self, timeout: float = 60.0) -> dict[str, Any]:
        """Stop the running job and return its result."""
        self._stop.set()
        result: dict[str, Any] = self._reply("done", timeout)
        return result
