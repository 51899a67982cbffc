"""The credit rules (server/credit.py) on their own: the window, spends, grants, withheld credit, queue bounds.

How a connection reaches a grant point is tested on raw frames in tests/server/test_bot_connection.py;
here each rule is driven directly, with real agents and real sessions.
"""

from __future__ import annotations

import logging

import pytest

from agents import make_agent
from bot_protocol import Credit, Hello, Limits, PolicyId, RewardMode, SessionSpec
from server.config import ServerConfig
from server.credit import CreditAccount, QueueBounds, queue_bounds, session_limits, withheld_credit
from server.session import BotSession
from server.transition_queue import OFF_POLICY_QUEUED_PUBLISHES, ON_POLICY_QUEUED_UPDATES

OBS, ACT = 3, 2


def session(name: str, window: int = 4) -> BotSession:
    spec = SessionSpec(OBS, ACT, 1, RewardMode.SCALAR, Limits(credit_window=window))
    return BotSession(name, f"{name}-session", Hello(name, OBS, ACT), spec, PolicyId(0, 0), logging.getLogger("tests.credit"))


def test_session_limits_announce_the_configs_limits():
    config = ServerConfig(max_batch=64, max_message_bytes=8192, credit_window=3, max_abs=10.0)
    assert session_limits(config) == Limits(max_batch=64, max_message_bytes=8192, credit_window=3, max_abs=10.0)


def test_each_tr_spends_one_credit_and_none_is_spent_without_credit():
    """``available + owed == window`` throughout; a ``tr`` at zero credit is refused and owes nothing."""
    account = CreditAccount(3)
    for spent in range(1, 4):
        assert account.spend()
        assert (account.available, account.owed) == (3 - spent, spent)
    assert not account.spend()
    assert (account.available, account.owed) == (0, 3)


def test_credit_is_paid_once_three_quarters_of_the_window_are_owed():
    account = CreditAccount(8)
    for seq in range(5):
        account.spend()
        assert account.grant(last_seq=seq, queue_at_high_water=False) is None  # 5 owed < 6
    account.spend()
    assert account.grant(last_seq=5, queue_at_high_water=False) == Credit(grant=6, ack=5)
    assert (account.available, account.owed, account.withheld) == (8, 0, False)


def test_a_window_of_one_is_paid_for_every_frame_and_ack_is_zero_before_the_first_seq():
    account = CreditAccount(1)
    account.spend()
    assert account.grant(last_seq=-1, queue_at_high_water=False) == Credit(grant=1, ack=0)
    with pytest.raises(ValueError, match="credit window must be >= 1"):
        CreditAccount(0)


def test_credit_owed_while_the_queue_is_full_is_withheld_then_paid_whatever_the_amount():
    account = CreditAccount(8)
    assert account.after_drain(last_seq=0) is None  # nothing withheld: nothing to pay
    assert account.grant(last_seq=0, queue_at_high_water=True) is None and not account.withheld  # nothing owed
    account.spend()
    assert account.grant(last_seq=0, queue_at_high_water=True) is None and account.withheld
    assert account.after_drain(last_seq=0) == Credit(grant=1, ack=0)  # 1 owed, far below 6: paid anyway
    assert (account.available, account.owed, account.withheld) == (8, 0, False)
    assert account.after_drain(last_seq=0) is None


def test_withheld_credit_goes_only_to_the_bots_it_was_withheld_from_and_not_while_full():
    waiting, paid_up = session("waiting"), session("paid-up")
    waiting.credit.spend()
    waiting.credit.spend()
    waiting.last_seq = 1
    waiting.credit.grant(waiting.last_seq, queue_at_high_water=True)
    assert list(withheld_credit([waiting, paid_up], queue_full=True)) == []
    assert waiting.credit.withheld  # still owed: nothing is dropped while the queue is full
    assert list(withheld_credit([waiting, paid_up], queue_full=False)) == [(waiting, Credit(grant=2, ack=1))]
    assert list(withheld_credit([waiting, paid_up], queue_full=False)) == []


def test_an_on_policy_agent_withholds_credit_at_one_update_of_queued_steps():
    agent = make_agent("ppo", OBS, ACT, rollout_steps=128, hidden=(8,))
    bounds = queue_bounds(ServerConfig(), agent, OBS, ACT)
    assert bounds.credit_steps == ON_POLICY_QUEUED_UPDATES * 128
    assert bounds.max_bytes >= 64 << 10  # the floor: a tiny update still gets 64 KiB


def test_an_off_policy_agent_withholds_credit_at_its_publish_budget():
    agent = make_agent("td3", OBS, ACT, hidden=(8,), buffer_size=1024, updates_per_publish=8, utd_ratio=0.5)
    assert agent.max_policy_lag is None and agent.publish_steps == 16
    bounds = queue_bounds(ServerConfig(), agent, OBS, ACT)
    assert bounds.credit_steps == OFF_POLICY_QUEUED_PUBLISHES * 16
    step_bytes = 4 * (2 * OBS + ACT + 8)
    assert bounds.max_bytes >= 4 * max(agent.update_steps, bounds.credit_steps) * step_bytes


def test_a_bound_given_in_the_config_is_the_only_bound():
    agent = make_agent("ppo", OBS, ACT, rollout_steps=128, hidden=(8,))
    assert queue_bounds(ServerConfig(queue_max_bytes=5000), agent, OBS, ACT) == QueueBounds(5000, None)
    by_steps = queue_bounds(ServerConfig(queue_max_steps=10_000), agent, OBS, ACT)
    assert by_steps.credit_steps == 10_000  # not the update's 128
    assert by_steps.max_bytes >= 4 * 10_000 * 4 * (2 * OBS + ACT + 8)  # bytes derived to hold them


@pytest.mark.parametrize(("max_bytes", "credit_steps", "field"), [(0, None, "max_bytes"), (1, 0, "credit_steps")])
def test_queue_bounds_must_be_positive(max_bytes, credit_steps, field):
    with pytest.raises(ValueError, match=field):
        QueueBounds(max_bytes, credit_steps)
