"""Event-loop benchmark of the training server: ingest throughput, loop lag under PPO, hot-swap latency.

Run ``python bench/loop.py`` (about 2 minutes) or ``python bench/loop.py --quick``
(under a minute). Progress goes to stderr; the last stdout line is one JSON object with
every figure, the workload that produced it, and the targets.

Process layout (fairness on a 2-core machine): this process hosts the server under
test (the real :class:`server.TrainingServer` in a :class:`server.ServerThread`, or
the bare websockets baseline in its own thread) and otherwise only sleeps and
samples counters. Every bot connection lives in ONE separate *sender* process
(``spawn``, ``bench/loop_senders.py``), all connections on one asyncio loop, driven by jobs
sent over a pipe. So the server process's GIL serves only its event loop and the trainer thread.

What is measured
================

1. **Ingest throughput** (transitions/s). Each bot sends pre-encoded ``tr`` frames
   over and over, patching only ``seq`` (stored as a fixed-width msgpack uint64 so it
   is rewritten without re-encoding; it increases per connection). Workload: a
   tank-like bot driving 8 agents, ``obs_dim`` 24, ``act_dim`` 5, scalar reward, rows
   tick-major (8 ticks x 8 agents = 64 steps per frame; 32 ticks for 256), random
   float32 data, 96-tick episodes staggered across agents (even agents end terminal,
   odd ones truncated with a ``next_obs`` row), so a bot cycles through a few
   pre-built frames. Counted: ``transitions_received`` (steps validated, assembled
   and accounted by the server) over a timed window after a warm-up. Bots obey the
   credit protocol (hello/welcome, one credit per frame, ``credit`` messages
   replenish; default window 8). The trainer thread runs and drains the queue, but
   its agent discards what it gets (``observe`` counts and drops, ``ready`` is never
   true) and the queue holds 1 GiB, so credit is never withheld and memory stays
   flat: only ingest is measured. Ours and the baseline runs are interleaved so the
   machine's noise hits both alike, and each run also reports the loop thread's
   CPU time per frame (``loop_us_per_frame``), which is robust to that noise, and
   the trainer thread's (``trainer_us_per_frame``: splitting batches into segments,
   under the same GIL). ``ratio_ours_raw_per_server_cpu`` is raw's CPU per frame
   over ours (loop + trainer): the throughput ratio a server-bound run can reach.

   Our server is measured at each credit window of ``--credit-windows`` (default 8, the
   server's default, and 32), one server per window, run right beside each other: the
   window decides how many frames a bot may have in flight, so how many the server finds
   waiting per turn and handles as one group (docs/architecture.md, "Credit window").
   The first window's figures are ``ours``/``ratio_ours_raw``; the others add
   ``ours_window{W}``/``ratio_ours_raw_window{W}`` and a verdict each.

   Baseline, same run, same frames: a bare ``websockets.asyncio.server.serve``
   server (``compression=None``) whose handler only ``msgpack.unpackb``-s each frame
   and discards it, fed by raw clients that send as fast as websockets' write flow
   control allows (no credit). Also once with websockets' default ``deflate``
   compression on both ends, to show why the server turns it off.

2. **Event-loop lag under PPO**: a real PPO agent (default :class:`agents.PPOConfig`
   except the sizes; ``rollout_steps`` 2048) fed by 16 :class:`BotClient` bots that
   stamp the policy version they hold (else data goes stale after 32 versions), with
   the same frames. Two feeds: *paced* (a fixed total step rate below the trainer's
   capacity, like bots in a real game: updates of ~rollout_steps) and *flood* (as
   fast as credit allows: the trainer's backpressure is the only limit). The
   server's own :class:`server.looplag.LoopLagMonitor` (20 ms sleeps) is reset after
   the first update finishes; p50/p99/max of wake-up lateness over the window, the
   number of updates done and their size are reported.

3. **Hot-swap latency**: 64 idle :class:`BotClient` bots on one loop in the sender
   process. This process publishes new versions exactly as ``Trainer.update`` does
   (bump ``version``, ``Trainer.republish()``), from a bench thread, every
   ~0.25 s. ``PublishedWeights.published_at`` and the bots' ``ClientStats.swap_times``
   are both ``time.monotonic()`` (CLOCK_MONOTONIC: one clock for all processes on
   Linux). Latency = swap time - publish time, for every (bot, version) pair, and
   per version the time until *all* bots had it (the max over bots) and until the
   *first* did (the server-side floor). The 64 bots share one client loop, so the
   last of them also waits for the others' decode + install (``client_serial_ms``).

``--profile`` adds one extra 64-bot ingest run with cProfile enabled on the server's
event-loop thread (that run's throughput is not reported: profiling slows it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import logging
import math
import os
import pstats
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
from numpy.typing import NDArray
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

# Measure the checkout this file lives in, whatever an editable install elsewhere points to
# (run as ``python bench/loop.py``, sys.path[0] is bench/, not the repository root).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from bench.loop_senders import (  # noqa: E402
    ACT_DIM,
    AGENTS_PER_BOT,
    OBS_DIM,
    FeedJob,
    FrameSpec,
    FrameTemplate,
    IngestJob,
    SenderWorker,
    SwapJob,
)

if TYPE_CHECKING:  # torch-heavy imports stay out of the spawned sender process
    from agents import Agent
    from server import ServerThread, TrainingServer

log = logging.getLogger("bench.loop")

# ── workload targets ─────────────────────────────────────────────────────────

TARGETS: dict[str, float] = {
    "ingest_ratio_min": 0.5,
    "ingest_ratio_aim": 0.7,
    "ingest_tps_min": 200_000,
    "ppo_lag_p99_ms_max": 20.0,
    "swap_p99_ms_max": 50.0,
}

# ── server side ──────────────────────────────────────────────────────────────


class RawServer:
    """The baseline: bare websockets, the handler only ``msgpack.unpackb``-s and discards each frame."""

    def __init__(self, compression: str | None) -> None:
        self.compression = compression
        self.frames = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="raw-server", daemon=True)

    async def _handler(self, connection: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in connection:
                msgpack.unpackb(frame)
                self.frames += 1

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with serve(self._handler, "127.0.0.1", 0, compression=self.compression, max_size=1 << 20) as server:
            self._server = server
            self._ready.set()
            await self._stop.wait()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        assert self._loop is not None

        async def wrapper() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    def __enter__(self) -> RawServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("raw server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _ingest_only_agent(obs_dim: int, act_dim: int) -> Agent:
    """A PPO agent that counts and discards what the trainer drains, and never updates."""
    from agents import PPOAgent, PPOConfig
    from agents.common import Segment

    class IngestOnlyAgent(PPOAgent):
        discarded = 0

        def observe(self, segments: list[Segment]) -> None:
            self.discarded += sum(s.steps for s in segments)

        def ready(self) -> bool:
            return False

        @property
        def drain_steps(self) -> int | None:
            return None  # take everything each drain (a PPO agent takes only what its rollout lacks)

    return IngestOnlyAgent(PPOConfig(obs_dim=obs_dim, act_dim=act_dim))


@dataclass
class Sample:
    """Counters read on a server's loop thread at one instant."""

    t: float
    steps: int
    loop_cpu: float
    process_cpu: float
    trainer_cpu: float = 0.0


def _rate(before: Sample, after: Sample, frame_steps: int) -> dict[str, float]:
    """Throughput over a window, plus the loop thread's CPU cost per frame (robust to a noisy machine)."""
    wall = after.t - before.t
    steps = after.steps - before.steps
    loop_cpu = after.loop_cpu - before.loop_cpu
    frames = steps / frame_steps
    return {
        "tps": round(steps / wall),
        "window_s": round(wall, 2),
        "loop_cpu_util": round(loop_cpu / wall, 3),
        "server_process_cpu_util": round((after.process_cpu - before.process_cpu) / wall, 3),
        "loop_us_per_frame": round(loop_cpu / frames * 1e6, 1) if frames else 0.0,
        "trainer_us_per_frame": round((after.trainer_cpu - before.trainer_cpu) / frames * 1e6, 1) if frames else 0.0,
        "tps_per_loop_core": round(steps / loop_cpu) if loop_cpu > 0 else 0,
    }


def _ms(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v * 1000, 2) for k, v in values.items()}


@dataclass
class Settings:
    warmup: float
    window: float
    ppo_seconds: float
    ppo_bots: int
    ppo_rate: float
    swap_bots: int
    swap_publishes: int
    swap_interval: float
    profile: bool


def _wait_idle(server: TrainingServer, timeout: float = 120.0) -> None:
    """Wait until every bot of the previous run has left and the trainer has drained its backlog.

    The loop can accept frames faster than the trainer thread splits them into segments, so a
    run may leave a backlog in the (1 GiB) queue; the next run must not start while the trainer
    still holds the GIL for it, or while the queue is past its high-water mark (credit withheld).
    """
    deadline = time.monotonic() + timeout
    while (server.sessions or len(server.queue)) and time.monotonic() < deadline:
        time.sleep(0.02)


def _ingest_ours_once(
    worker: SenderWorker, thread: ServerThread, server: TrainingServer, settings: Settings, n: int, n_steps: int
) -> dict[str, Any]:
    """One timed ingest window on our server with ``n`` bots sending ``n_steps``-step frames."""

    def read() -> Sample:
        steps = int(server.metrics.counter("transitions_received"))
        return Sample(time.perf_counter(), steps, time.thread_time(), time.process_time(), server.trainer.cpu_seconds())

    def sample() -> Sample:
        taken: Sample = thread.call(read)  # on the loop thread: thread_time() is the loop's CPU time
        return taken

    rejected0 = server.metrics.counter_total("frames_rejected")
    groups0, frames0 = server.metrics.counter("frame_groups"), server.metrics.counter("frames_accepted")
    worker.begin(IngestJob(server.url, "arena", n, FrameSpec(n_steps), max_seconds=settings.window * 4 + 20))
    time.sleep(settings.warmup)
    before = sample()
    thread.call(server.lag.reset)
    time.sleep(settings.window)
    after = sample()
    backlog = server.queue.nbytes  # > 0: the loop accepted faster than the trainer thread drained
    lag = thread.call(server.lag.percentiles)
    sender = worker.finish()
    _wait_idle(server)
    row = {**_rate(before, after, n_steps), "loop_lag_ms": _ms(lag), **sender}
    row["frames_rejected"] = int(server.metrics.counter_total("frames_rejected") - rejected0)
    row["queue_mb_at_end"] = round(backlog / 2**20, 1)
    groups = server.metrics.counter("frame_groups") - groups0
    row["frames_per_group"] = round((server.metrics.counter("frames_accepted") - frames0) / groups, 2) if groups else 0.0
    print(
        f"ours w{server.config.credit_window:<4} {n_steps:>4}-step frames, {n:>2} bots:  {row['tps']:>10,} steps/s  "
        f"(loop cpu {row['loop_cpu_util']:.0%}, {row['loop_us_per_frame']:.0f} + trainer {row['trainer_us_per_frame']:.0f} "
        f"us/frame, sender cpu {row['sender_cpu_util']:.0%}, lag p50 {row['loop_lag_ms']['p50']} ms)",
        file=sys.stderr,
    )
    return row


def _ingest_raw_once(
    worker: SenderWorker, settings: Settings, compression: str | None, n: int, n_steps: int
) -> dict[str, Any]:
    """One timed ingest window on the bare websockets baseline."""
    with RawServer(compression) as raw:

        def sample() -> Sample:
            taken: Sample = raw.call(
                lambda: Sample(time.perf_counter(), raw.frames * n_steps, time.thread_time(), time.process_time())
            )
            return taken

        worker.begin(IngestJob(raw.url, "raw", n, FrameSpec(n_steps), compression, settings.window * 4 + 20))
        time.sleep(settings.warmup)
        before = sample()
        time.sleep(settings.window)
        after = sample()
        sender = worker.finish()
    row = {**_rate(before, after, n_steps), "sender_cpu_util": sender["sender_cpu_util"]}
    label = "raw+deflate" if compression else "raw"
    print(
        f"{label:<11} {n_steps:>4}-step frames, {n:>2} clients: {row['tps']:>10,} steps/s  "
        f"(loop cpu {row['loop_cpu_util']:.0%}, {row['loop_us_per_frame']:.0f} us/frame, "
        f"sender cpu {row['sender_cpu_util']:.0%})",
        file=sys.stderr,
    )
    return row


def bench_ingest(
    worker: SenderWorker,
    settings: Settings,
    conns: list[int],
    raw_conns: list[int],
    steps: list[int],
    windows: list[int] | None = None,
) -> dict[str, Any]:
    """Ingest throughput of our server and of the baseline, interleaved so machine noise hits both alike.

    ``windows``: credit windows to measure our server at (default: ``ServerConfig``'s alone). The
    first one's figures are ``ours`` and ``ratio_ours_raw``; each other window W adds
    ``ours_window{W}`` and ``ratio_ours_raw_window{W}``, measured right beside them.
    """
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    windows = windows or [ServerConfig().credit_window]
    configs = {
        w: ServerConfig(port=0, queue_max_bytes=1 << 30, max_batch=1024, max_message_bytes=1 << 20, credit_window=w)
        for w in windows
    }
    servers = {w: TrainingServer(_ingest_only_agent(OBS_DIM, ACT_DIM), configs[w], TrainerConfig()) for w in windows}
    ours: dict[int, dict[str, Any]] = {w: {} for w in windows}
    raw: dict[str, Any] = {}
    first = configs[windows[0]]
    out: dict[str, Any] = {
        "server_config": {
            "credit_window": first.credit_window,
            "credit_windows": windows,
            "queue_max_bytes": first.queue_max_bytes,
            "max_batch": first.max_batch,
            "max_message_bytes": first.max_message_bytes,
            "segment_steps": first.segment_steps,
        },
    }
    with contextlib.ExitStack() as stack:
        threads = {w: stack.enter_context(ServerThread(servers[w])) for w in windows}
        for n_steps in steps:
            for n in conns:
                for w in windows:
                    row = _ingest_ours_once(worker, threads[w], servers[w], settings, n, n_steps)
                    ours[w][f"steps{n_steps}_bots{n}"] = row
                if n in raw_conns:
                    raw[f"steps{n_steps}_clients{n}"] = _ingest_raw_once(worker, settings, None, n, n_steps)
        out["raw_deflate"] = {f"steps{steps[0]}_clients1": _ingest_raw_once(worker, settings, "deflate", 1, steps[0])}
        if settings.profile:
            out["profile"] = _profile_ingest(worker, threads[windows[0]], servers[windows[0]], settings, max(conns), steps[0])
        out["accounting"] = servers[windows[0]].accounting()
    for i, w in enumerate(windows):
        suffix = "" if i == 0 else f"_window{w}"
        out[f"ours{suffix}"] = ours[w]
        ratio, per_cpu, per_server_cpu = _ratios(ours[w], raw, steps, raw_conns)
        out[f"ratio_ours_raw{suffix}"] = ratio
        out[f"ratio_ours_raw_per_loop_cpu{suffix}"] = per_cpu
        out[f"ratio_ours_raw_per_server_cpu{suffix}"] = per_server_cpu
    out["raw"] = raw
    return out


def _ratios(
    ours: dict[str, Any], raw: dict[str, Any], steps: list[int], raw_conns: list[int]
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Ours over raw: throughput, throughput per loop-thread CPU, and raw's CPU per frame over ours (loop + trainer)."""
    ratio: dict[str, float] = {}
    per_cpu: dict[str, float] = {}
    per_server_cpu: dict[str, float] = {}
    for n_steps in steps:
        for n in raw_conns:
            mine, base = ours.get(f"steps{n_steps}_bots{n}"), raw.get(f"steps{n_steps}_clients{n}")
            if mine and base and base["tps"] and base["tps_per_loop_core"]:
                ratio[f"steps{n_steps}_conns{n}"] = round(mine["tps"] / base["tps"], 3)
                per_cpu[f"steps{n_steps}_conns{n}"] = round(mine["tps_per_loop_core"] / base["tps_per_loop_core"], 3)
                server_us = mine["loop_us_per_frame"] + mine["trainer_us_per_frame"]
                if server_us > 0:
                    per_server_cpu[f"steps{n_steps}_conns{n}"] = round(base["loop_us_per_frame"] / server_us, 3)
    return ratio, per_cpu, per_server_cpu


def _profile_ingest(
    worker: SenderWorker, thread: ServerThread, server: TrainingServer, settings: Settings, n: int, n_steps: int
) -> dict[str, Any]:
    """cProfile the event-loop thread during one extra ingest run; returns the top functions."""
    profiler = cProfile.Profile()
    worker.begin(IngestJob(server.url, "arena", n, FrameSpec(n_steps), max_seconds=settings.window * 4 + 20))
    time.sleep(settings.warmup)
    thread.call(profiler.enable)
    frames_before = server.metrics.counter("frames_accepted")
    time.sleep(max(2.0, settings.window))
    thread.call(profiler.disable)
    worker.finish()
    _wait_idle(server)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    print(f"── cProfile of the event-loop thread, {n} bots x {n_steps}-step frames (by tottime) ──", file=sys.stderr)
    print(text.getvalue(), file=sys.stderr)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in table.values()) or 1.0

    def cumulative(name: str, file_part: str) -> float:
        return sum(v[3] for (path, _, func), v in table.items() if func == name and file_part in path) / total

    frames = int(server.metrics.counter("frames_accepted") - frames_before)
    shares = {
        "_on_group (all work on received frames)": cumulative("_on_group", "server/app.py"),
        "BotConnection.receive (the protocol rules)": cumulative("receive", "server/bot_connection.py"),
        "unpack (msgpack + limits)": cumulative("unpack", "bot_protocol/codec.py"),
        "TransitionHeader.from_wire (sizes, flags, ints)": cumulative("from_wire", "bot_protocol/transitions.py"),
        "assemble_batches (one value check per group)": cumulative("assemble_batches", "bot_protocol/transitions.py"),
        "SegmentAssembler.add": cumulative("add", "server/assembler.py"),
        "TransitionQueue.put": cumulative("put", "server/transition_queue.py"),
        "Metrics.inc": cumulative("inc", "server/metrics.py"),
        "_grant (credit replies)": cumulative("_grant", "server/bot_connection.py"),
        "_return_withheld_credit (per trainer drain)": cumulative("_return_withheld_credit", "server/app.py"),
        "_send_quietly (credit sends)": cumulative("_send_quietly", "server/app.py"),
    }
    top = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
    return {
        "bots": n,
        "frame_steps": n_steps,
        "frames_profiled": int(frames),
        "profiled_loop_us_per_frame": round(total / max(frames, 1) * 1e6, 1),
        "cum_share": {k: round(v, 3) for k, v in shares.items()},
        "top_tottime": [
            {"fn": f"{os.path.basename(path)}:{line}:{func}", "share": round(v[2] / total, 3)} for (path, line, func), v in top
        ],
    }


def bench_ppo_lag(worker: SenderWorker, settings: Settings, steps_per_s: float) -> dict[str, Any]:
    """Loop lag of the real server while a real PPO agent trains on what bots send."""
    from agents import make_agent
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    update_seconds: list[float] = []
    agent = make_agent("ppo", OBS_DIM, ACT_DIM)
    server = TrainingServer(
        agent, ServerConfig(port=0), TrainerConfig(), update_hook=lambda s: update_seconds.append(s["time/update_seconds"])
    )
    with ServerThread(server) as thread:
        worker.begin(FeedJob(server.url, settings.ppo_bots, FrameSpec(64), steps_per_s, settings.ppo_seconds * 4 + 60))
        deadline = time.monotonic() + 60
        while server.trainer.updates < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        if server.trainer.updates < 1:
            raise TimeoutError("no PPO update within 60 s")
        thread.call(server.lag.reset)
        first_update = len(update_seconds)
        before: dict[str, float] = {**server.accounting(), "updates": server.trainer.updates, "t": time.perf_counter()}
        time.sleep(settings.ppo_seconds)
        lag = thread.call(server.lag.percentiles)
        samples = np.asarray(thread.call(lambda: list(server.lag.samples)), dtype=np.float64)
        after: dict[str, float] = {**server.accounting(), "updates": server.trainer.updates, "t": time.perf_counter()}
        sender = worker.finish()
    durations = update_seconds[first_update:]
    delta = {k: after[k] - before.get(k, 0) for k in after if k.startswith(("received", "trained", "dropped", "updates", "t"))}
    wall = delta.pop("t")
    row: dict[str, Any] = {
        "feed": f"{settings.ppo_bots} BotClient bots, 64-step frames, "
        + (f"paced at {steps_per_s:,.0f} steps/s total" if steps_per_s else "as fast as credit allows"),
        "window_s": round(wall, 2),
        "loop_lag_ms": _ms(lag),
        "lag_samples": len(samples),
        "lag_over_20ms": int((samples > 0.020).sum()),
        "updates": delta["updates"],
        "update_s_mean": round(float(np.mean(durations)), 3) if durations else None,
        "update_s_max": round(float(np.max(durations)), 3) if durations else None,
        "steps_per_update": round(delta["trained"] / delta["updates"]) if delta["updates"] else None,
        "steps_received_per_s": round(delta["received"] / wall),
        "in_window": {k: v for k, v in delta.items() if k != "updates"},
        "sender": sender,
    }
    lag_ms = _ms(lag)
    print(
        f"ppo lag ({row['feed']}): p50 {lag_ms['p50']} ms, p99 {lag_ms['p99']} ms, "
        f"max {lag_ms['max']} ms over {delta['updates']:.0f} updates",
        file=sys.stderr,
    )
    return row


def bench_hot_swap(worker: SenderWorker, settings: Settings) -> dict[str, Any]:
    """Publish→swap latency to 64 connected bots, publishing the way ``Trainer._update`` does."""
    from agents import make_agent
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    server = TrainingServer(make_agent("ppo", OBS_DIM, ACT_DIM), ServerConfig(port=0), TrainerConfig())
    published: dict[int, float] = {}
    with ServerThread(server):
        trainer = server.trainer
        frame_bytes = len(trainer.published.frame)
        job = SwapJob(
            server.url, settings.swap_bots, trainer.published.frame, settings.swap_interval * settings.swap_publishes + 60
        )
        worker.begin(job)

        def publish_all() -> None:
            rng = random.Random(0)
            for _ in range(settings.swap_publishes):
                time.sleep(settings.swap_interval * rng.uniform(0.8, 1.2))
                trainer.version += 1
                trainer.republish()  # the latencies are read after the run, so recording it after is safe
                published[trainer.published.version] = trainer.published.published_at

        publisher = threading.Thread(target=publish_all, name="bench-publisher")
        publisher.start()
        publisher.join()
        time.sleep(0.5)
        result = worker.finish()
    per_pair: list[float] = []
    per_version: dict[int, list[float]] = {v: [] for v in published}
    for swaps in result["swap_times"]:
        for _gen, ver, at in swaps:
            if ver in published:
                latency = at - published[ver]
                per_pair.append(latency)
                per_version[ver].append(latency)
    n_bots = settings.swap_bots
    all_bots = [max(v) for v in per_version.values() if len(v) == n_bots]
    first_bot = [min(v) for v in per_version.values() if v]
    pairs, everyone, first = np.asarray(per_pair), np.asarray(all_bots), np.asarray(first_bot)

    def pct(values: NDArray[np.float64], q: float) -> float | None:
        return round(float(np.percentile(values, q)) * 1000, 2) if len(values) else None

    row = {
        "bots": n_bots,
        "publishes": len(published),
        "weights_frame_bytes": frame_bytes,
        "pairs": len(pairs),
        "missing_pairs": n_bots * len(published) - len(pairs),
        "rejected": result["rejected"],
        "client_install_us": result["client_install_us"],
        "client_serial_ms": round(result["client_install_us"] * n_bots / 1000, 1),
        "pair_ms": {"p50": pct(pairs, 50), "p99": pct(pairs, 99), "max": pct(pairs, 100)},
        "all_bots_ms": {"p50": pct(everyone, 50), "p99": pct(everyone, 99), "max": pct(everyone, 100)},
        "first_bot_ms": {"p50": pct(first, 50), "p99": pct(first, 99), "max": pct(first, 100)},
    }
    print(
        f"hot swap ({n_bots} bots, {len(published)} publishes): per bot p50 {row['pair_ms']['p50']} ms, "
        f"p99 {row['pair_ms']['p99']} ms; all bots p50 {row['all_bots_ms']['p50']} ms, p99 {row['all_bots_ms']['p99']} ms",
        file=sys.stderr,
    )
    return row


# ── main ─────────────────────────────────────────────────────────────────────


@contextlib.contextmanager
def _stage(name: str) -> Iterator[None]:
    started = time.perf_counter()
    print(f"── {name} ──", file=sys.stderr)
    yield
    print(f"   ({time.perf_counter() - started:.1f} s)", file=sys.stderr)


def _code_root() -> str:
    """Where the measured packages were imported from."""
    import bot_protocol
    import server

    roots = {os.path.dirname(os.path.dirname(os.path.abspath(m.__file__ or ""))) for m in (bot_protocol, server)}
    return ", ".join(sorted(roots))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short windows (under a minute in all)")
    parser.add_argument("--warmup", type=float, help="seconds of sending before each ingest window (default 1, quick 0.5)")
    parser.add_argument("--window", type=float, help="seconds of each ingest measurement window (default 3, quick 1)")
    parser.add_argument("--ppo-seconds", type=float, help="seconds of each PPO lag window (default 15, quick 5)")
    parser.add_argument("--ppo-bots", type=int, default=16, help="bots feeding the PPO server (default 16)")
    parser.add_argument(
        "--ppo-rate",
        type=float,
        default=2560.0,
        help="paced feed, steps/s over all bots (default 2560: 16 bots x 8 agents x 20 Hz)",
    )
    parser.add_argument("--no-flood", action="store_true", help="skip the as-fast-as-credit-allows PPO feed")
    parser.add_argument("--swap-bots", type=int, default=64)
    parser.add_argument("--swap-publishes", type=int, help="publishes in the hot-swap test (default 20, quick 8)")
    parser.add_argument("--swap-interval", type=float, default=0.25, help="seconds between publishes (±20%% jitter)")
    parser.add_argument("--profile", action="store_true", help="cProfile the loop thread during one extra 64-bot ingest run")
    parser.add_argument("--skip", default="", help="comma-separated stages to skip: ingest,ppo,swap")
    parser.add_argument(
        "--credit-windows",
        default="8,32",
        help="comma-separated credit windows to measure ingest at, the server default first (default: 8,32)",
    )
    return parser.parse_args(argv)


def _credit_windows(text: str) -> list[int]:
    try:
        windows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"bench/loop.py: --credit-windows wants comma-separated integers, got {text!r}") from None
    if not windows or min(windows) < 1 or len(set(windows)) != len(windows):
        raise SystemExit(f"bench/loop.py: --credit-windows wants distinct integers >= 1, got {text!r}")
    return windows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="[server] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("server.looplag").setLevel(logging.ERROR)  # saturating ingest stalls the loop on purpose: see the JSON
    quick = args.quick
    settings = Settings(
        warmup=args.warmup if args.warmup is not None else (0.5 if quick else 1.0),
        window=args.window if args.window is not None else (1.0 if quick else 3.0),
        ppo_seconds=args.ppo_seconds if args.ppo_seconds is not None else (5.0 if quick else 15.0),
        ppo_bots=args.ppo_bots,
        ppo_rate=args.ppo_rate,
        swap_bots=args.swap_bots,
        swap_publishes=args.swap_publishes if args.swap_publishes is not None else (8 if quick else 20),
        swap_interval=args.swap_interval,
        profile=args.profile,
    )
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    windows = _credit_windows(args.credit_windows)
    started = time.perf_counter()
    frame_bytes = {str(steps): FrameTemplate(FrameSpec(steps)).nbytes for steps in (64, 256, 1024)}
    out: dict[str, Any] = {
        "workload": {
            "obs_dim": OBS_DIM,
            "act_dim": ACT_DIM,
            "reward": "scalar",
            "agents_per_bot": AGENTS_PER_BOT,
            "rows": "tick-major, random float32",
            "episodes": f"{FrameSpec().episode_ticks} ticks per agent, staggered; even agents end terminal, odd truncated",
            "frame_bytes": frame_bytes,
            "bytes_per_step": round(frame_bytes["64"] / 64, 1),
            "senders": "all connections in 1 separate spawned process, one asyncio loop",
        },
        "settings": {**asdict(settings), "quick": quick, "cpus": os.cpu_count(), "code_root": _code_root()},
        "targets": TARGETS,
    }
    with SenderWorker() as worker:
        if "ingest" not in skip:
            with _stage("ingest: our TrainingServer (credit protocol) vs bare websockets + msgpack.unpackb, interleaved"):
                out["ingest"] = bench_ingest(worker, settings, [1, 16, 64], [1, 16], [64, 256, 1024], windows)
        if "ppo" not in skip:
            with _stage("loop lag while PPO trains"):
                out["ppo_lag_paced"] = bench_ppo_lag(worker, settings, settings.ppo_rate)
                if not args.no_flood:
                    out["ppo_lag_flood"] = bench_ppo_lag(worker, settings, 0.0)
        if "swap" not in skip:
            with _stage("hot-swap latency"):
                out["hot_swap"] = bench_hot_swap(worker, settings)
    out["verdict"] = _verdict(out)
    out["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(f"done in {out['elapsed_s']} s", file=sys.stderr)
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0


def _verdict(out: dict[str, Any]) -> dict[str, bool | None]:
    """Each target: met (True), missed (False) or not measured (None)."""
    ingest = out.get("ingest", {})
    ratios = list(ingest.get("ratio_ours_raw", {}).values())
    ours = ingest.get("ours", {})
    windows = ingest.get("server_config", {}).get("credit_windows", [])[1:]
    tuned = {
        f"ingest_ratio_min_window{w}": min(values) >= TARGETS["ingest_ratio_min"] if values else None
        for w in windows
        for values in [list(ingest.get(f"ratio_ours_raw_window{w}", {}).values())]
    }

    def best(prefix: str) -> int | None:
        return max((row["tps"] for key, row in ours.items() if key.startswith(prefix)), default=None)

    best64, best256 = best("steps64_"), best("steps256_")
    lag = out.get("ppo_lag_paced", {}).get("loop_lag_ms", {}).get("p99")
    swap = out.get("hot_swap", {}).get("pair_ms", {}).get("p99")
    return {
        "ingest_ratio_min": min(ratios) >= TARGETS["ingest_ratio_min"] if ratios else None,
        "ingest_ratio_aim": min(ratios) >= TARGETS["ingest_ratio_aim"] if ratios else None,
        **tuned,
        "ingest_tps_min_steps64": best64 >= TARGETS["ingest_tps_min"] if best64 is not None else None,
        "ingest_tps_min_steps256": best256 >= TARGETS["ingest_tps_min"] if best256 is not None else None,
        "ppo_lag_p99": lag < TARGETS["ppo_lag_p99_ms_max"] if lag is not None else None,
        "swap_p99": swap < TARGETS["swap_p99_ms_max"] if swap is not None and math.isfinite(swap) else None,
    }


if __name__ == "__main__":
    sys.exit(main())
