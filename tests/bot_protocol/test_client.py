"""Tests of bot_protocol.client (BotClient, BlockingBotClient) against the real server on a loopback port."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from arena.games.reach import ACT_DIM, OBS_DIM, ReachGame, play_steps
from bot_protocol import ActionSpace, Architecture, Policy, RewardMode
from bot_protocol.client import BlockingBotClient, BotClient, ClientConfig
from tests.conftest import reach_batch as batch
from tests.conftest import serving, timeout


def test_blocking_client_mid_round_disconnect_keeps_every_step(server):
    """A bot that vanishes mid-episode loses nothing: its open steps become a truncated segment."""
    bot = BlockingBotClient(ClientConfig(server.url, "quitter", OBS_DIM, ACT_DIM, n_agents=2, batch_steps=10), seed=1)
    bot.connect()
    game = ReachGame(2, seed=3, max_steps=1000)
    play_steps(bot, game, 15)  # 30 rows: 3 batches, no episode has ended
    bot.flush()
    asyncio.run_coroutine_threadsafe(bot.client._connection.close(), bot._loop).result(5)  # abrupt: no bye
    deadline = time.monotonic() + timeout(10)
    while (server.sessions or server.accounting()["open"]) and time.monotonic() < deadline:
        time.sleep(0.02)  # the trainer closes the open segments when it drains the session's end
    acc = server.accounting()
    assert acc["received"] == 30
    assert acc["open"] == 0
    assert acc["queued"] + acc["pending_in_agent"] + acc["trained"] == 30
    bot.close()


async def test_client_reconnects_after_a_drop(aserver):
    """The client library reconnects with backoff and keeps sending after its connection drops."""
    client = BotClient(ClientConfig(aserver.url, "phoenix", OBS_DIM, ACT_DIM, n_agents=2, backoff_initial=0.05))
    await client.connect()
    await client.send(batch(seq=0))
    await client._connection.close()  # the server side sees an ordinary disconnect
    await asyncio.sleep(0.1)
    await client.send(batch(seq=0))  # seq is restamped by the client
    assert client.stats.reconnects == 1
    await client.close()
    assert client.config.reward is RewardMode.SCALAR


async def test_client_adopts_welcome_weights_after_a_fresh_server_restart():
    """After a restart from scratch (version back to 0) the welcome's weights are adopted, not refused."""
    async with serving() as first:
        client = BotClient(ClientConfig(first.url, "loyal", OBS_DIM, ACT_DIM, n_agents=2, reconnect=False))
        await client.connect()
        first.trainer.version = 5
        first.trainer.republish()
        deadline = time.monotonic() + timeout(5)
        while client.policy.version != 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert client.policy.version == 5
        await client.close()
    async with serving() as second:
        client.config = ClientConfig(second.url, "loyal", OBS_DIM, ACT_DIM, n_agents=2, reconnect=False)
        client._closing = False
        await client.connect()
        assert client.policy.version == 0
        await client.send(batch(seq=0))
        await client.close()
        assert second.metrics.counter_total("frames_rejected") == 0


async def test_oversized_batches_are_split_by_the_client(aserver):
    """A batch above the server's max_batch is sent as several valid messages."""
    client = BotClient(ClientConfig(aserver.url, "wide", OBS_DIM, ACT_DIM, n_agents=2))
    await client.connect()
    await client.send(batch(n=2500))
    assert client.stats.messages_sent == 3
    await client.close()
    deadline = time.monotonic() + timeout(5)
    while aserver.sessions and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert aserver.accounting()["received"] == 2500


def test_config_declares_discrete_branches_in_hello():
    """A discrete bot's config says its branches in hello; act_dim may then be 0, and only then."""
    config = ClientConfig("ws://x:1", "d", 4, 0, branches=(3, 2))
    assert config.hello().branches == (3, 2) and config.hello().act_dim == 0
    assert config.actions == ActionSpace(0, (3, 2))
    assert ClientConfig("ws://x:1", "c", 4, 2).hello().branches == ()
    with pytest.raises(ValueError, match="act_dim must be >= 1 unless"):
        ClientConfig("ws://x:1", "c", 4, 0)


def test_blocking_client_acts_under_a_mask_and_records_dact_and_mask():
    """bot.act(obs, mask=...) draws legal discrete actions with the current policy; record() holds dact and mask."""
    space = ActionSpace(1, (3,))
    bot = BlockingBotClient(ClientConfig("ws://x:1", "d", 2, 1, n_agents=2, branches=space.branches, batch_steps=64), seed=0)
    tensors = {
        "l0.weight": np.ones((4, 2), np.float32),
        "l0.bias": np.zeros(4, np.float32),
        "log_std": np.zeros(1, np.float32),
    }
    bot.client.policy = Policy(Architecture("mixed_mlp", (2, 4), "tanh", -3.0, 0.5, continuous=1, branches=(3,)), tensors)
    try:
        obs = np.ones((2, 2), np.float32)
        legal = np.array([[False, True, False], [True, False, True]])
        actions, logp, dact = bot.act(obs, mask=legal)
        assert dact.tolist()[0] == [1] and dact[1, 0] in (0, 2)
        bot.record(obs, actions, logp, reward=[0.0, 0.0], dact=dact, mask=legal)
        batch = bot._recorder.flush()
        assert batch.dact.tolist() == dact.tolist() and batch.mask.tolist() == legal.astype(int).tolist()
    finally:
        bot.close()


def test_a_recurrent_bot_keeps_states_sends_them_resets_at_ends_and_keeps_them_across_a_hot_swap():
    """docs/protocol.md §4.7's life of a state, through a real server: rows carry the state acted from, an ended
    episode starts from zeros, and new weights mid-episode continue from the states as they are."""
    from agents import make_agent
    from tests.conftest import running_server

    agent = make_agent("ppo", OBS_DIM, ACT_DIM, rollout_steps=64, minibatch_size=32, hidden=(16,), recurrent="gru",
                       recurrent_size=5, sequence_length=4)  # fmt: skip
    with running_server(OBS_DIM, ACT_DIM, agent=agent) as server:
        bot = BlockingBotClient(ClientConfig(server.url, "memory", OBS_DIM, ACT_DIM, n_agents=2, batch_steps=8), seed=1)
        bot.connect()
        try:
            assert bot.policy.state_size == 5 and bot.states.shape == (2, 5) and not bot.states.any()
            rng = np.random.default_rng(0)
            swaps_seen, last_version = 0, bot.policy.version
            deadline = time.monotonic() + timeout(20)
            tick = 0
            while swaps_seen < 2 and time.monotonic() < deadline:
                obs = rng.normal(size=(2, OBS_DIM)).astype(np.float32)
                before = bot.states.copy()
                actions, logp = bot.act(obs)
                assert bot._acting is not None
                if bot._acting.version != last_version:
                    swaps_seen += 1  # acted with new weights: from the states the old ones left, untouched
                    last_version = bot._acting.version
                np.testing.assert_array_equal(bot._acted_from, before)
                assert not np.array_equal(bot.states, before)
                ended = np.array([tick % 7 == 6, False])
                bot.record(obs, actions, logp, reward=[0.0, 0.0], terminal=ended)
                assert not bot.states[0].any() if ended[0] else bot.states[0].any()  # an ended episode restarts at zeros
                tick += 1
                time.sleep(0.002)
            assert swaps_seen >= 2, "the trainer published no new weights"
            assert server.accounting()["received"] > 0
        finally:
            bot.close()
