"""server.stats: the one read model, against a real server on a loopback port with a real bot.

Every view (``/healthz``, ``/metrics``, the dashboard, TensorBoard rows, ``summary.json``) shows
figures of one :class:`ServerStats` snapshot; this checks the snapshot itself agrees with what
the bot did and with what the HTTP endpoints answer, and the rate rule on a clock of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect

from agents import make_agent
from arena.outputs.tensorboard import ServerScalars
from bot_protocol import SUBPROTOCOL, Hello, PolicyId, TransitionBatch, Welcome, decode_from_server, encode
from server import ServerConfig, ServerThread, TrainingServer
from server.stats import BotRates, BotStats, RateWindow, ServerStats
from tests.conftest import timeout

OBS, ACT = 4, 2


def _batch(seq: int, n: int = 4) -> TransitionBatch:
    rng = np.random.default_rng(seq)
    return TransitionBatch(
        seq=seq,
        generation=0,
        version=0,
        agent=(np.arange(n) % 2).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, OBS)).astype(np.float32),
        act=rng.standard_normal((n, ACT)).astype(np.float32),
        logp=np.full(n, -2.0, np.float32),
        flags=np.zeros(n, np.uint8),
        rew=np.ones(n, np.float32),
    )


def _get(url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout(5)) as response:
        body: bytes = response.read()
        return body


async def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout(10)
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_snapshot_of_a_live_server_matches_the_bot_and_the_endpoints() -> None:
    """Counts, bots, policy and rates follow a real bot; /healthz and /metrics answer from the same figures."""
    server = TrainingServer(make_agent("ppo", OBS, ACT, rollout_steps=512, hidden=(16,)), ServerConfig(port=0))
    running = await asyncio.to_thread(ServerThread(server).start)
    try:
        base = server.url.replace("ws://", "http://")
        ws = await connect(server.url, subprotocols=[SUBPROTOCOL], compression=None)
        await ws.send(encode(Hello("stats-bot", OBS, ACT, n_agents=2)))
        assert isinstance(decode_from_server(await ws.recv()), Welcome)
        for seq in range(3):
            await ws.send(encode(_batch(seq)))
        await _until(lambda: server.stats().transitions_received == 12)

        stats = server.stats()  # off the loop thread, as TensorBoard rows and the progress display read it
        assert stats.connected_bots == 1 and stats.agent == "ppo"
        assert stats.policy == stats.trainer_policy == PolicyId(0, 0) and str(stats.policy) == "0.0"
        assert stats.updates == 0 and stats.transitions_trained == 0 and stats.dropped_total == 0
        assert stats.trainer_ok and stats.received_per_s > 0
        assert stats.loop_lag is not None and stats.loop_lag.max >= stats.loop_lag.p99 >= 0
        assert stats.bots == (), "per-bot rows only when asked for"

        (bot,) = await asyncio.to_thread(running.call, lambda: server.stats(bots=8).bots)
        assert isinstance(bot, BotStats)
        assert (bot.name, bot.agents, bot.steps, bot.reward) == ("stats-bot", 2, 12, "scalar")
        assert bot.policy == PolicyId(0, 0) and bot.policy_is == "acting"

        healthy, body = server.stats().health()
        answered = json.loads(await asyncio.to_thread(_get, base + "/healthz"))
        assert healthy and list(answered) == list(body) == [
            "status", "trainer_alive", "trainer_heartbeat_age_s", "generation", "policy_version", "connected_bots", "agent",
        ]  # fmt: skip
        assert {k: v for k, v in answered.items() if k != "trainer_heartbeat_age_s"} == {
            k: v for k, v in body.items() if k != "trainer_heartbeat_age_s"
        }
        text = (await asyncio.to_thread(_get, base + "/metrics")).decode()
        assert "arena_connected_bots 1\n" in text and "arena_policy_generation 0\n" in text
        assert 'arena_loop_lag_seconds{stat="p99"}' in text

        row = ServerScalars(server)()
        assert row["server/transitions_received"] == 12.0 and row["server/connected_bots"] == 1.0

        await ws.close()
        await _until(lambda: server.stats().connected_bots == 0)
    finally:
        await asyncio.to_thread(running.stop)
    assert not server.stats().trainer_alive, "a snapshot of a closed server still reads (summary.json does)"


def test_rates_start_at_the_newest_reading_a_window_old() -> None:
    """The dashboard's rule: rates cover about ``window`` seconds, and a burst of close readings is not kept."""
    now = [0.0]
    window = RateWindow(2.0, start=(0.0, (0.0, 0.0)), clock=lambda: now[0])
    counts = (0.0, 0.0)

    def at(t: float, received: float, trained: float) -> tuple[float, ...]:
        nonlocal counts
        now[0], counts = t, (received, trained)
        _, read, rates = window.measure(lambda: counts)
        assert read == counts
        return rates

    assert at(1.0, 10, 0) == (10.0, 0.0)
    assert at(2.0, 20, 0) == (10.0, 0.0)
    assert at(3.0, 30, 40) == (10.0, 20.0)  # from t=1: the newest reading at least 2 s old
    assert at(3.01, 30.1, 40) == pytest.approx((20.1 / 2.01, 40 / 2.01))  # still from t=1
    assert len(window._points) == 3, "a reading within window/32 of the previous one is used, not kept"
    with pytest.raises(ValueError, match="window"):
        RateWindow(0.0)


def test_bot_rates_smooth_each_bot_and_forget_bots_gone() -> None:
    """A bot's rate moves toward its steps/s between two snapshots; a new bot starts at 0."""

    def bot(bot_id: str, steps: int) -> BotStats:
        return BotStats(bot_id, bot_id, "", 1, "scalar", PolicyId(0, 0), "acting", steps, 0.0, 0.0)

    def snapshot(t: float, *bots: BotStats) -> ServerStats:
        return ServerStats(taken_at=t, bots=bots)

    rates = BotRates(window=2.0, started=0.0)
    assert rates.update(snapshot(1.0, bot("a", 100))) == {"a": 0.0}
    first: dict[str, Any] = rates.update(snapshot(2.0, bot("a", 200), bot("b", 5)))
    assert 0 < first["a"] < 100 and first["b"] == 0.0
    assert set(rates.update(snapshot(3.0, bot("b", 5)))) == {"b"}
