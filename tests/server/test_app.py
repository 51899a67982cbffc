"""Integration tests: the real server on a loopback port, real websocket clients, real threads."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request

import msgpack
import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from arena.games.reach import ACT_DIM, OBS_DIM, ReachGame, play_reach
from arena.games.tank.rewards import TANK_REWARD
from bot_protocol import SUBPROTOCOL, Bye, Credit, Error, Hello, RewardMode, Welcome, decode_from_server, encode
from bot_protocol.client import BlockingBotClient, BotClient, ClientConfig, HandshakeRejected
from server import TrainerConfig
from tests.conftest import reach_batch as batch
from tests.conftest import running_server, serving, timeout


async def open_bot(url: str, hello: Hello | None = None, **kwargs):
    """A raw websocket that has completed hello → welcome."""
    ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None, **kwargs)
    await ws.send(encode(hello or Hello("raw", OBS_DIM, ACT_DIM, n_agents=2)))
    welcome = decode_from_server(await ws.recv())
    assert isinstance(welcome, Welcome)
    return ws, welcome


def test_ppo_learns_through_the_server_with_hot_swapped_weights():
    """Four threaded bots play "reach": returns rise, versions advance mid-play, every step is accounted for."""
    with running_server(agent=None) as server:
        games: dict[int, tuple[ReachGame, BlockingBotClient]] = {}
        swaps_while_playing: dict[int, list[int]] = {}

        def play(i: int) -> None:
            games[i] = play_reach(server.url, n_agents=8, steps=1100, seed=i, name=f"reach{i}")
            swaps_while_playing[i] = [v for _, v, _ in games[i][1].stats.swap_times]

        threads = [threading.Thread(target=play, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout(240))
        assert len(games) == 4, "a bot thread failed"
        deadline = time.monotonic() + timeout(30)
        while time.monotonic() < deadline:  # bots have left; the queue drains and the last update runs
            acc = server.accounting()
            if acc["queued"] == 0 and acc["open"] == 0:
                break
            time.sleep(0.05)
        acc = server.accounting()

    sent = sum(bot.stats.steps_sent for _, bot in games.values())
    assert sent == 4 * 8 * 1100
    assert acc["received"] == sent
    assert acc["received"] == acc["trained"] + acc["dropped"] + acc["queued"] + acc["open"] + acc["pending_in_agent"]
    assert acc["trained"] >= 0.8 * sent

    for i, (_, bot) in games.items():
        assert bot.stats.weights_swapped >= 3, f"bot {i} never hot-swapped weights"
        assert swaps_while_playing[i] == sorted(swaps_while_playing[i]), "versions must only increase"
        assert bot.stats.reconnects == 0

    # Each bot's first episodes ran the untrained policy; its last ones ran weights swapped in mid-play.
    early = np.mean([np.mean(g.finished[:16]) for g, _ in games.values()])
    late = np.mean([np.mean(g.finished[-16:]) for g, _ in games.values()])
    assert late > early + 3.0, f"mean return did not clearly improve: {early:.2f} → {late:.2f}"


async def test_wrong_token_gets_401_and_no_session():
    """A missing or wrong bearer token is refused in the HTTP handshake (401), before any session exists."""
    async with serving(token="s3cret-token") as server:
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic czNjcmV0LXRva2Vu"}):
            with pytest.raises(InvalidStatus) as info:
                await connect(server.url, subprotocols=[SUBPROTOCOL], additional_headers=headers)
            assert info.value.response.status_code == 401
        with pytest.raises(HandshakeRejected, match="401"):
            await BotClient(ClientConfig(server.url, "b", OBS_DIM, ACT_DIM, token="nope-nope")).connect()
        assert not server.sessions
        client = BotClient(ClientConfig(server.url, "b", OBS_DIM, ACT_DIM, token="s3cret-token"))
        await client.connect()
        assert client.policy is not None
        await client.close()


async def test_wrong_or_missing_subprotocol_gets_400(aserver):
    """The handshake requires the arena.v1 subprotocol."""
    for protocols in (None, ["arena.v0"]):
        with pytest.raises(InvalidStatus) as info:
            await connect(aserver.url, subprotocols=protocols)
        assert info.value.response.status_code == 400


async def test_browser_origin_gets_403(aserver):
    """A browser page (Origin header) cannot open a bot connection."""
    with pytest.raises(InvalidStatus) as info:
        await connect(aserver.url, subprotocols=[SUBPROTOCOL], origin="https://evil.example")
    assert info.value.response.status_code == 403


async def test_upgrades_websockets_refuses_are_counted_in_metrics(aserver):
    """400 (no arena.v1), 403 (an Origin) and 426 (no upgrade) come from websockets' own checks; each is a
    handshakes_rejected reason on /metrics (§1), like the refusals the server makes itself."""
    with pytest.raises(InvalidStatus):
        await connect(aserver.url)
    with pytest.raises(InvalidStatus):
        await connect(aserver.url, subprotocols=[SUBPROTOCOL], origin="https://evil.example")
    base = aserver.url.replace("ws://", "http://")
    with pytest.raises(urllib.error.HTTPError) as info:
        await asyncio.to_thread(urllib.request.urlopen, base + "/", timeout=5)
    assert info.value.code == 426
    info.value.close()

    def scrape() -> str:
        with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
            return str(response.read().decode())

    text = await asyncio.to_thread(scrape)
    for reason in ("bad_request", "origin", "not_websocket"):
        assert f'arena_handshakes_rejected{{reason="{reason}"}} 1\n' in text, reason
    assert not aserver.sessions


@pytest.mark.parametrize(
    "hello", [Hello("big", OBS_DIM + 1, ACT_DIM), Hello("big", OBS_DIM, ACT_DIM + 3), Hello("many", OBS_DIM, ACT_DIM, 5000)]
)
async def test_wrong_sizes_in_hello_get_error_and_1008(aserver, hello):
    """A hello with sizes this run cannot train gets error bad_hello (or bad_field), then close 1008."""
    async with connect(aserver.url, subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(encode(hello))
        reply = decode_from_server(await ws.recv())
        assert isinstance(reply, Error) and reply.code in ("bad_hello", "bad_field")
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1008
    with pytest.raises(HandshakeRejected, match="bad_hello"):
        await BotClient(ClientConfig(aserver.url, "b", OBS_DIM + 1, ACT_DIM, reconnect=False)).connect()


async def test_terms_mode_needs_the_servers_reward_function(aserver):
    """A server started without a reward function refuses terms-mode bots (bad_hello, then 1008): it knows
    no game's shaping. Started with the tank's, it welcomes them and assembles their rows with it."""
    terms_hello = Hello("terms", OBS_DIM, ACT_DIM, 1, RewardMode.TERMS)
    async with connect(aserver.url, subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(encode(terms_hello))
        reply = decode_from_server(await ws.recv())
        assert isinstance(reply, Error) and reply.code == "bad_hello" and "no reward function" in reply.msg
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1008
    async with serving(reward=TANK_REWARD) as tank:
        assert tank.trainer.builder.reward is TANK_REWARD
        ws, _ = await open_bot(tank.url, terms_hello)
        await ws.close()


async def test_malformed_frames_get_errors_and_other_bots_are_unaffected(aserver):
    """Bad frames are answered with error codes, then 1008 after too many; a healthy bot keeps streaming."""
    good, _ = await open_bot(aserver.url)
    bad, _ = await open_bot(aserver.url)
    await good.send(encode(batch(seq=0)))
    wrong_shape = msgpack.unpackb(encode(batch(seq=1)), raw=False)
    wrong_shape["obs"] = b"\x00" * 12
    await bad.send(msgpack.packb(wrong_shape, use_bin_type=True))
    reply = decode_from_server(await bad.recv())
    assert isinstance(reply, Error) and reply.code == "shape" and reply.ref == 1
    poisoned = msgpack.unpackb(encode(batch(seq=2)), raw=False)
    poisoned["rew"] = np.array([0, np.nan, 0, 0], np.float32).tobytes()
    await bad.send(msgpack.packb(poisoned, use_bin_type=True))
    assert decode_from_server(await bad.recv()).code == "nonfinite"
    await bad.send(msgpack.packb({"v": 1, "t": "teleport"}))
    assert decode_from_server(await bad.recv()).code == "unknown_type"
    for _ in range(3):
        await bad.send(b"\xc1 not msgpack")
    with pytest.raises(ConnectionClosed):
        while True:
            await bad.recv()
    assert bad.close_code == 1008
    await good.send(encode(batch(seq=1)))
    await good.send(encode(batch(seq=1)))  # a replayed seq is dropped and answered
    reply = decode_from_server(await good.recv())
    assert isinstance(reply, Error) and reply.code == "duplicate"
    await good.send(encode(batch(seq=2)))
    await good.close()
    deadline = time.monotonic() + timeout(5)
    while aserver.sessions and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert aserver.accounting()["received"] == 12  # good's three batches; nothing from bad
    assert aserver.metrics.counter("frames_rejected", code="shape") == 1
    assert aserver.metrics.counter("frames_rejected", code="nonfinite") == 1


async def test_text_frame_closes_1003(aserver):
    """The protocol is binary-only."""
    ws, _ = await open_bot(aserver.url)
    await ws.send("hello?")
    with pytest.raises(ConnectionClosed):
        await ws.recv()
    assert ws.close_code == 1003


async def test_hello_timeout_closes_1008():
    """A connection that never says hello is closed with 1008 after hello_timeout."""
    async with serving(hello_timeout=0.3) as server:
        ws = await connect(server.url, subprotocols=[SUBPROTOCOL])
        start = time.monotonic()
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1008 and ws.close_reason == "hello timeout"
        assert time.monotonic() - start < timeout(3)


async def test_frames_beyond_credit_are_refused():
    """While the queue is full no credit comes back, and a frame beyond the window gets no_credit."""
    async with serving(queue_max_bytes=64) as server:
        server.trainer.stop(checkpoint=False)  # nothing drains the queue: credit stays withheld
        ws, welcome = await open_bot(server.url)
        for seq in range(welcome.credit + 1):
            await ws.send(encode(batch(seq=seq, flags=[1, 1, 1, 1])))  # every row ends an episode: segments close
        async with asyncio.timeout(timeout(5)):
            reply = decode_from_server(await ws.recv())
        assert isinstance(reply, Error) and reply.code == "no_credit"
        assert server.accounting()["received"] == 4 * welcome.credit
        await ws.close()


async def test_a_credit_acknowledges_the_frames_it_pays_for(aserver):
    """§3.3: six frames numbered 50-55 earn one credit whose ack is 55, however the server read them."""
    ws, _ = await open_bot(aserver.url)
    for seq in range(50, 56):
        await ws.send(encode(batch(seq=seq)))
    async with asyncio.timeout(timeout(5)):
        reply = decode_from_server(await ws.recv())
    assert reply == Credit(grant=6, ack=55)
    await ws.close()


async def test_a_burst_beyond_credit_gets_at_most_its_excess_refused(aserver):
    """§6 rules 3 and 4: frames sent past the window without reading are refused no_credit unless credit the
    server sent before reading them covers them: how many depends on how it read them, never more than the excess."""
    ws, welcome = await open_bot(aserver.url)
    burst = welcome.credit + 3
    for seq in range(burst):
        await ws.send(encode(batch(seq=seq)))
    await ws.send(encode(Bye("done")))  # everything before it is answered first
    replies = []
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(timeout(5)):
            while True:
                replies.append(decode_from_server(await ws.recv()))
    assert ws.close_code == 1000
    refused = [m.code for m in replies if isinstance(m, Error)]
    assert set(refused) <= {"no_credit"} and len(refused) <= burst - welcome.credit
    assert aserver.accounting()["received"] == 4 * (burst - len(refused))
    granted = sum(m.grant for m in replies if isinstance(m, Credit))
    assert welcome.credit + granted - burst + len(refused) >= 0  # rule 4: what the bot holds in the end


async def test_close_only_refusals_are_counted_apart_from_error_codes():
    """A text frame is closed 1003 with no error message: frames_closed{reason}, not frames_rejected{code}."""
    async with serving() as server:
        ws, _ = await open_bot(server.url)
        await ws.send("hello as text")
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(timeout(5)):
                await ws.recv()
        assert ws.close_code == 1003
        assert server.metrics.counter("frames_closed", reason="text_frame") == 1
        assert server.metrics.counter_total("frames_rejected") == 0
        ws, _ = await open_bot(server.url)
        await ws.send(b"\x00" * (server.config.max_message_bytes + 1))  # over the size limit: websockets closes 1009
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(timeout(5)):
                await ws.recv()
        assert ws.close_code == 1009
        deadline = time.monotonic() + timeout(5)
        while server.metrics.counter("frames_closed", reason="too_big") != 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)


async def test_a_window_of_bad_frames_in_a_row_still_leaves_the_bot_able_to_send():
    """Rejected 'tr's spend credit and earn it back like accepted ones (§6): after a whole window of bad frames
    (under the error budget) the credit returned lets the bot send, and its next good frame is accepted."""
    async with serving() as server:
        ws, welcome = await open_bot(server.url)
        credit = welcome.credit
        for seq in range(credit):  # every credit spent on a frame that is refused (a version never published)
            await ws.send(encode(batch(seq=seq, version=99)))
            credit -= 1
        errors = 0
        async with asyncio.timeout(timeout(5)):
            while errors < welcome.credit or credit == 0:
                reply = decode_from_server(await ws.recv())
                if isinstance(reply, Error):
                    assert reply.code == "bad_field"
                    errors += 1
                elif isinstance(reply, Credit):
                    credit += reply.grant
        assert credit >= 1  # nothing is owed for good: the rule never leaves a bot short
        await ws.send(encode(batch(seq=welcome.credit, flags=[1, 1, 1, 1])))
        deadline = time.monotonic() + timeout(5)
        while server.accounting()["received"] < 4:
            assert time.monotonic() < deadline, server.accounting()
            await asyncio.sleep(0.02)
        await ws.close()


async def test_version_from_the_future_is_refused(aserver):
    """A batch claiming a policy version the server never published is refused."""
    ws, _ = await open_bot(aserver.url)
    await ws.send(encode(batch(seq=0, version=99)))
    reply = decode_from_server(await ws.recv())
    assert isinstance(reply, Error) and reply.code == "bad_field"
    await ws.close()


def test_healthz_and_metrics_endpoints():
    """GET /healthz answers JSON without auth; /metrics is Prometheus text behind the token."""
    with running_server(token="s3cret-token") as server:
        base = server.url.replace("ws://", "http://")
        with urllib.request.urlopen(base + "/healthz", timeout=5) as response:
            assert response.status == 200
            assert b'"trainer_alive": true' in response.read()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "/metrics", timeout=5)
        assert info.value.code == 401
        info.value.close()
        request = urllib.request.Request(base + "/metrics", headers={"Authorization": "Bearer s3cret-token"})
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
            content_types = response.headers.get_all("Content-Type")
        assert content_types == ["text/plain; version=0.0.4; charset=utf-8"]  # one header, Prometheus' own
        assert "# TYPE arena_connected_bots gauge" in text
        # Counters are series from the start, at 0, not absent until their first event.
        for series in ("arena_transitions_trained 0", "arena_weights_sent 0", "arena_handshakes_rejected", "arena_updates 0",
                       'arena_frames_rejected{code="shape"} 0', "arena_episodes 0", "arena_bots_connected 0"):  # fmt: skip
            assert series in text, series
        assert 'arena_loop_lag_seconds{stat="p99"}' in text


async def test_shutdown_closes_bots_1001_and_writes_a_checkpoint(tmp_path):
    """Closing the server sends 1001 to every bot and leaves a loadable final checkpoint."""
    async with serving(trainer=TrainerConfig(checkpoint_dir=tmp_path / "ckpt")) as server:
        ws, _ = await open_bot(server.url)
    with pytest.raises(ConnectionClosed):
        await ws.recv()
    assert ws.close_code == 1001
    assert list((tmp_path / "ckpt").glob("ckpt-0000-*.pt"))


class _FailingAgent:
    """A real PPO agent whose every update raises (an injected trainer fault)."""

    def __init__(self) -> None:
        from agents import make_agent

        self._agent = make_agent("ppo", OBS_DIM, ACT_DIM, hidden=(16,), rollout_steps=128)

    def __getattr__(self, name: str):
        return getattr(self._agent, name)

    def update(self) -> dict[str, float]:
        raise RuntimeError("injected trainer fault")


async def test_wait_failed_wakes_a_waiter_on_another_event_loop():
    """The server runs in its own thread and loop; a waiter on this loop hears the trainer give up at once
    (an asyncio.Event of the server's loop woke it only when its own timeout fired: 30 s in the C6 test)."""
    async with serving(agent=_FailingAgent(), trainer=TrainerConfig(max_restarts=0)) as server:
        # The bot plays on a plain thread: nothing else would wake this loop while it waits.
        bot = threading.Thread(target=play_reach, args=(server.url, 4, 100))  # 400 steps: the first update
        started = time.monotonic()
        bot.start()
        failed = await asyncio.wait_for(server.wait_failed(), timeout(30))
        assert "injected" in str(failed) and time.monotonic() - started < timeout(10)
        bot.join(timeout(30))
        assert "injected" in str(await server.wait_failed())  # a waiter after the fact returns at once
