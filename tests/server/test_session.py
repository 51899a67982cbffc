"""One bot's record (server/session.py): what a new session starts from, and its arrivals numbered in order."""

from __future__ import annotations

import logging

from bot_protocol import Hello, Limits, PolicyId, RewardMode, SessionSpec
from server.session import BotSession
from tests.server.test_assembler import rows


def test_a_new_session_holds_a_full_window_and_the_policy_it_was_welcomed_with(caplog):
    spec = SessionSpec(4, 2, 3, RewardMode.TERMS, Limits(credit_window=5))
    hello = Hello("unit", 4, 2, n_agents=3, reward=RewardMode.TERMS)
    session = BotSession("unit-1", "s-1", hello, spec, PolicyId(1, 7), logging.getLogger("tests.session"))
    assert session.terms and session.connection is None and session.sender is None
    assert (session.credit.window, session.credit.available, session.credit.owed) == (5, 5, 0)
    assert session.last_seq == -1 and session.acting_version is None
    assert session.slot.delivered == PolicyId(1, 7) and session.slot.take() is None
    assert session.steps_accepted == session.frames_accepted == 0 and session.last_frame_at == session.connected_at
    with caplog.at_level(logging.INFO, logger="tests.session"):
        session.log.info("hello accepted")
    assert [r.getMessage() for r in caplog.records] == ["[unit-1] hello accepted"]  # every line names its bot


def test_arrivals_are_numbered_in_order_and_the_last_marks_the_end():
    spec = SessionSpec(4, 2, 1, RewardMode.SCALAR)
    session = BotSession("b-2", "s-2", Hello("b", 4, 2), spec, PolicyId(0, 0), logging.getLogger("tests.session"))
    batch = rows([0, 0], [0, 0])
    first, second, end = session.arrival(batch), session.arrival(batch), session.arrival(None)
    assert [a.index for a in (first, second, end)] == [0, 1, 2] and session.arrivals == 3
    assert (first.session, first.bot, first.terms) == ("s-2", "b-2", False)
    assert first.batch is batch and end.batch is None
