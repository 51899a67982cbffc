"""Sans-I/O tests of one bot's protocol (server/bot_connection.py): raw frames in, a decision out — no sockets.

Each expectation is the documented one (docs/protocol.md §5.1, §6, §7, §8) that the over-socket
tests (tests/server/test_app.py, tests/reliability/) also hold the live server to.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    ActionSpace,
    Architecture,
    Bye,
    CloseCode,
    Credit,
    Error,
    Hello,
    Message,
    TransitionBatch,
    Weights,
    Welcome,
    decode_from_server,
    encode,
)
from server.bot_connection import BotConnection, BotRules, Close, Decision
from server.config import ServerConfig
from server.credit import session_limits, withheld_credit
from server.metrics import Metrics
from server.transition_queue import Arrival, TransitionQueue
from server.weights import PublishedWeights

OBS, ACT, AGENTS = 3, 2, 2
CURRENT = (0, 5)
"""The newest published (generation, version) in these tests."""
LOG = logging.getLogger("tests.bot_connection")


def snapshot(generation: int = CURRENT[0], version: int = CURRENT[1]) -> PublishedWeights:
    tensors = {
        "l0.weight": np.zeros((ACT, OBS), np.float32),
        "l0.bias": np.zeros(ACT, np.float32),
        "log_std": np.zeros(ACT, np.float32),
    }
    weights = Weights.pack(generation, version, Architecture("gaussian_mlp", (OBS, ACT), "tanh", -3.0, 0.0), tensors)
    return PublishedWeights(generation, version, weights, encode(weights), 0.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FullQueue(TransitionQueue):
    """A queue at its high-water mark whatever it holds (a trainer that never drains)."""

    def at_high_water(self, incoming_bytes: int = 0, incoming_steps: int = 0) -> bool:
        return True


class WatchedQueue(TransitionQueue):
    """Records, at each credit decision, the steps queued and the steps about to be."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[int, int]] = []
        self._putting = False

    def put(self, arrival: Arrival) -> bool:
        self._putting = True  # put() asks too, for its own return value: not a credit decision
        try:
            return super().put(arrival)
        finally:
            self._putting = False

    def at_high_water(self, incoming_bytes: int = 0, incoming_steps: int = 0) -> bool:
        if not self._putting:
            self.asked.append((self.steps, incoming_steps))
        return super().at_high_water(incoming_bytes, incoming_steps)


def connect(
    config: ServerConfig | None = None, queue: TransitionQueue | None = None, clock: Clock | None = None
) -> tuple[BotConnection, Metrics, Welcome]:
    """A connection past a good hello, with its metrics and the welcome it was sent."""
    metrics = Metrics()
    rules = BotRules.from_config(config or ServerConfig(), OBS, ActionSpace(ACT), reward_terms=True)
    bot = BotConnection(rules, metrics, queue if queue is not None else TransitionQueue(1 << 30), LOG, clock=clock or Clock())
    decision = bot.receive_hello(encode(Hello("unit", OBS, ACT, n_agents=AGENTS)), snapshot(), "ppo")
    assert decision.close is None and not decision.queued
    (welcome,) = replies(decision)
    assert isinstance(welcome, Welcome)
    return bot, metrics, welcome


def replies(decision: Decision) -> list[Message]:
    return [decode_from_server(frame) for frame in decision.replies]


def errors(decision: Decision) -> list[tuple[str, int | None]]:
    return [(m.code, m.ref) for m in replies(decision) if isinstance(m, Error)]


def credits(decision: Decision) -> list[Credit]:
    return [m for m in replies(decision) if isinstance(m, Credit)]


def tr(seq: int, n: int = 4, version: int = CURRENT[1], generation: int = CURRENT[0], rew: float = 1.0) -> bytes:
    """One 'tr' frame of ``n`` rows (no episode ends); ``rew`` lets a test plant a bad value."""
    batch = TransitionBatch(
        seq=seq,
        generation=generation,
        version=version,
        agent=(np.arange(n) % AGENTS).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=np.full((n, OBS), 0.5, np.float32),
        act=np.zeros((n, ACT), np.float32),
        logp=np.full(n, -1.0, np.float32),
        flags=np.zeros(n, np.uint8),
        rew=np.full(n, rew, np.float32),
    )
    return encode(batch)


def steps(decision: Decision) -> int:
    return sum(arrival.steps for arrival in decision.queued)


def planted(seq: int = 1, **faults: Any) -> bytes:
    """``tr(seq)`` with fields replaced on the wire: the faults a test plants."""
    wire = msgpack.unpackb(tr(seq), raw=False)
    wire.update(faults)
    return msgpack.packb(wire, use_bin_type=True)


SHORT_OBS = {"obs": b"\x00" * 12}  # 4 rows of obs_dim 3 need 48 bytes
SHORT_EPISODE = {"episode": b"\x00" * 4}
BAD_FLAG = {"flags": bytes([3, 0, 0, 0])}
BAD_AGENT = {"agent": np.array([0, 1, AGENTS, 0], "<u4").tobytes()}
BAD_SEQ = {"seq": -1}
NAN_REW = {"rew": np.array([1.0, np.nan, 1.0, 1.0], "<f4").tobytes()}
BIG_OBS = {"obs": np.full(4 * OBS, 2e6, "<f4").tobytes()}
REPLAYED = {"seq": 0}  # seq 0 is accepted first
NEWER = {"ver": CURRENT[1] + 1}


# ── the handshake (§5.1, §3.1) ────────────────────────────────────────────────


def test_a_good_hello_is_welcomed_with_limits_credit_and_the_current_weights():
    config = ServerConfig(credit_window=5, max_batch=64)
    bot, metrics, welcome = connect(config)
    assert welcome.bot_id == "unit-1" and welcome.agent == "ppo" and len(welcome.session) == 16
    assert welcome.limits == session_limits(config) and welcome.limits.credit_window == 5
    assert welcome.credit == 5
    assert (welcome.weights.generation, welcome.weights.version) == CURRENT
    session = bot.session
    assert (session.bot_id, session.session_id, session.last_seq) == ("unit-1", welcome.session, -1)
    assert session.slot.delivered == CURRENT  # the welcome's weights count as delivered
    assert metrics.counter_total("handshakes_rejected") == 0


def test_bot_ids_are_the_name_cut_to_40_characters_and_a_process_wide_number():
    rules = BotRules.from_config(ServerConfig(), OBS, ActionSpace(ACT), reward_terms=True)
    numbers = iter([7, 8])
    first = BotConnection(rules, Metrics(), TransitionQueue(1 << 20), LOG, numbers)
    second = BotConnection(rules, Metrics(), TransitionQueue(1 << 20), LOG, numbers)
    first.receive_hello(encode(Hello("x" * 64, OBS, ACT)), snapshot(), "ppo")
    second.receive_hello(encode(Hello("x" * 64, OBS, ACT)), snapshot(), "ppo")
    assert (first.session.bot_id, second.session.bot_id) == ("x" * 40 + "-7", "x" * 40 + "-8")


def hello_frame(**fields: object) -> bytes:
    wire = {"v": 1, "t": "hello", "name": "unit", "obs_dim": OBS, "act_dim": ACT, "n_agents": 1, "reward": "scalar"}
    wire.update(fields)
    return msgpack.packb(wire, use_bin_type=True)


@pytest.mark.parametrize(
    ("frame", "code", "reason"),
    [
        (hello_frame(obs_dim=OBS + 1), "bad_hello", f"this run trains obs_dim={OBS}, act_dim={ACT}; hello declared"),
        (hello_frame(act_dim=ACT + 3), "bad_hello", f"this run trains obs_dim={OBS}, act_dim={ACT}; hello declared"),
        (hello_frame(n_agents=5), "bad_hello", "n_agents 5 exceeds 4"),  # above this server's max_agents_per_bot
        (hello_frame(reward="terms"), "bad_hello", "this server has no reward function for reward terms"),
        (hello_frame(n_agents=5000), "bad_field", ""),  # above the protocol's 4096
        (hello_frame(v=2), "bad_version", "unsupported protocol version"),
        (tr(0), "unexpected", "'tr' before the hello/welcome handshake"),
        (encode(Bye("early")), "unexpected", "the first message must be 'hello'"),
        (b"\xc1 not msgpack", "undecodable", ""),
    ],
)
def test_a_refused_hello_gets_its_error_then_close_1008(frame: bytes, code: str, reason: str):
    metrics = Metrics()
    bot = BotConnection(
        BotRules.from_config(ServerConfig(max_agents_per_bot=4), OBS, ActionSpace(ACT), reward_terms=False),
        metrics,
        TransitionQueue(1 << 20),
        LOG,
    )
    decision = bot.receive_hello(frame, snapshot(), "ppo")
    (error,) = replies(decision)
    assert isinstance(error, Error) and error.code == code and error.ref is None
    assert decision.close is not None and decision.close.code == CloseCode.POLICY_VIOLATION
    assert decision.close.reason.startswith(reason) and decision.close.reason == error.msg[:120]
    assert metrics.counter("handshakes_rejected", reason=code) == 1
    with pytest.raises(RuntimeError):
        bot.session  # noqa: B018  # no session was opened


def test_a_terms_hello_is_welcomed_where_the_run_has_a_reward_function():
    """``reward_terms`` (a server started with a reward function) is what makes terms mode available."""
    rules = BotRules.from_config(ServerConfig(), OBS, ActionSpace(ACT), reward_terms=True)
    bot = BotConnection(rules, Metrics(), TransitionQueue(1 << 20), LOG)
    (welcome,) = replies(bot.receive_hello(hello_frame(reward="terms"), snapshot(), "ppo"))
    assert isinstance(welcome, Welcome) and bot.session.terms


def test_a_text_frame_closes_1003_without_an_error_before_and_after_the_hello():
    rules = BotRules.from_config(ServerConfig(), OBS, ActionSpace(ACT), reward_terms=True)
    bot = BotConnection(rules, Metrics(), TransitionQueue(1 << 20), LOG)
    assert bot.receive_hello("hello?", snapshot(), "ppo") == Decision(
        close=Close(CloseCode.UNSUPPORTED_DATA, "binary frames only")
    )
    bot, metrics, _ = connect()
    decision = bot.receive([tr(0), "hello as text"], CURRENT)
    assert steps(decision) == 4 and not errors(decision)  # what came before the text frame is kept
    assert decision.close == Close(CloseCode.UNSUPPORTED_DATA, "binary frames only")
    assert metrics.counter("frames_closed", reason="text_frame") == 1
    assert metrics.counter_total("frames_rejected") == 0


# ── accepting frames ─────────────────────────────────────────────────────────


def test_frames_that_arrive_together_are_counted_and_queued_as_one_arrival():
    bot, metrics, _ = connect()
    decision = bot.receive([tr(0), tr(1), tr(2)], CURRENT)
    assert decision.close is None and not errors(decision)
    (arrival,) = decision.queued
    assert arrival.batch is not None and arrival.batch.n == 12 and arrival.batch.seq == 2
    assert (arrival.session, arrival.index) == (bot.session.session_id, 0)
    assert metrics.counter("transitions_received") == 12
    assert metrics.counter("frames_accepted") == 3 and metrics.counter("frame_groups") == 1
    session = bot.session
    assert (session.last_seq, session.steps_accepted, session.frames_accepted) == (2, 12, 3)
    assert session.acting_version == CURRENT


def test_runs_of_one_policy_version_become_one_arrival_each():
    bot, _, _ = connect()
    decision = bot.receive([tr(0, version=3), tr(1, version=3), tr(2, version=4)], CURRENT)
    assert [(a.batch.version, a.batch.n) for a in decision.queued if a.batch is not None] == [(3, 8), (4, 4)]
    assert bot.session.acting_version == (0, 4)


# ── credit (§6) ──────────────────────────────────────────────────────────────


def test_credit_goes_back_in_one_message_once_three_quarters_of_the_window_are_owed():
    bot, _, welcome = connect()  # window 8: a grant from 6 owed
    first = bot.receive([tr(s) for s in range(5)], CURRENT)
    assert credits(first) == []  # 5 owed: below the mark
    second = bot.receive([tr(5)], CURRENT)
    assert credits(second) == [Credit(grant=6, ack=5)]  # ack: the highest seq accepted, this group's included
    assert bot.session.credit.available == welcome.credit - 6 + 6


def test_the_ack_of_a_credit_counts_every_frame_it_pays_for():
    """§3.3: ``ack`` is the highest seq accepted among the frames answered before the credit; a first group
    of seqs 50-55 is acknowledged 55, not 0 (credit once went out before its group was checked)."""
    bot, _, _ = connect()
    assert credits(bot.receive([tr(s) for s in range(50, 56)], CURRENT)) == [Credit(grant=6, ack=55)]
    bot, _, _ = connect()
    decision = bot.receive([tr(s) for s in range(50, 55)] + [tr(55, rew=float("nan"))], CURRENT)
    assert [type(m).__name__ for m in replies(decision)] == ["Error", "Credit"]
    assert errors(decision) == [("nonfinite", 55)] and credits(decision) == [Credit(grant=6, ack=54)]


def test_credit_comes_after_the_answers_to_the_frames_it_pays_for():
    """§6: a whole window refused for a version never published is owed like a window of accepted frames;
    its credit message follows its errors, and acknowledges nothing (0) since nothing was accepted."""
    bot, _, welcome = connect()
    decision = bot.receive([tr(s, version=99) for s in range(welcome.credit)], CURRENT)
    kinds = [type(m).__name__ for m in replies(decision)]
    assert kinds == ["Error"] * welcome.credit + ["Credit"]
    assert credits(decision) == [Credit(grant=welcome.credit, ack=0)]
    assert not decision.queued and decision.close is None


def test_a_tr_beyond_the_credit_is_refused_no_credit_and_spends_nothing():
    bot, metrics, welcome = connect(queue=FullQueue(1 << 20))  # the queue is full: nothing comes back
    decision = bot.receive([tr(s) for s in range(welcome.credit + 1)], CURRENT)
    assert errors(decision) == [("no_credit", None)]
    assert credits(decision) == []
    assert steps(decision) == 4 * welcome.credit  # the refused frame is dropped
    assert metrics.counter("frames_rejected", code="no_credit") == 1
    account = bot.session.credit
    assert (account.available, account.owed, account.withheld) == (0, welcome.credit, True)
    # docs/protocol.md §6 rule 4: credit = welcome.credit + grants - tr sent + tr answered no_credit
    sent, refused = welcome.credit + 1, 1
    assert account.available == welcome.credit + 0 - sent + refused


def test_credit_earned_within_a_read_lets_no_frame_of_that_read_through():
    """The read's one grant point comes after all of it is answered: a window refused for a version never
    published, and a frame past it, read together, get their errors and no_credit, then the window back."""
    bot, metrics, welcome = connect()
    decision = bot.receive([tr(s, version=99) for s in range(welcome.credit)] + [tr(welcome.credit)], CURRENT)
    assert [code for code, _ in errors(decision)] == ["bad_field"] * welcome.credit + ["no_credit"]
    assert [type(m).__name__ for m in replies(decision)][-1] == "Credit"
    assert credits(decision) == [Credit(grant=welcome.credit, ack=0)]
    assert steps(decision) == 0 and metrics.counter("frames_rejected", code="no_credit") == 1


@pytest.mark.parametrize("full", [False, True], ids=["room", "full"])
@pytest.mark.parametrize("reads", [(11,), (5, 6), (6, 5), (8, 3), (1,) * 11], ids=["one", "5+6", "6+5", "8+3", "singly"])
def test_a_tr_is_refused_no_credit_exactly_when_the_credit_sent_before_it_is_used_up(reads: tuple[int, ...], full: bool):
    """§6 rule 3: a bot that reads every answer to one read before its next frames arrive (no credit in
    flight) holds exactly the server's count, so a frame is refused no_credit exactly when the bot's own
    credit (rule 4) was 0 as it sent it, however a burst past the window was split into reads."""
    bot, _, welcome = connect(queue=FullQueue(1 << 30) if full else None)
    frames = [tr(s) for s in range(welcome.credit + 3)]
    held = welcome.credit  # the bot's credit by rule 4, from the answers it has read
    expected: list[bool] = []
    refused: list[bool] = []
    start = 0
    for size in reads:
        for _ in range(size):
            expected.append(held <= 0)
            held -= 1
        decision = bot.receive(frames[start : start + size], CURRENT)
        start += size
        codes = [code for code, _ in errors(decision)]
        assert set(codes) <= {"no_credit"}
        refused += [False] * (size - len(codes)) + [True] * len(codes)  # once out of credit, the rest of the read
        held += sum(credit.grant for credit in credits(decision)) + len(codes)
    assert refused == expected
    assert refused.count(True) == (3 if full or reads in ((11,), (5, 6)) else 0)
    assert bot.session.credit.available == held  # rule 4: the bot's count is the server's


def test_withheld_credit_comes_back_after_the_next_drain_whatever_is_owed():
    bot, _, _ = connect(queue=FullQueue(1 << 20))
    bot.receive([tr(0), tr(1)], CURRENT)  # 2 owed, below the mark, and withheld anyway
    session = bot.session
    assert list(withheld_credit([session], queue_full=True)) == []  # still full: still withheld
    assert list(withheld_credit([session], queue_full=False)) == [(session, Credit(grant=2, ack=1))]
    assert list(withheld_credit([session], queue_full=False)) == []  # paid once
    assert (session.credit.available, session.credit.owed, session.credit.withheld) == (8, 0, False)


def test_a_group_that_fills_the_queue_earns_no_credit():
    queue = WatchedQueue(1 << 30, credit_steps=24)
    bot, _, _ = connect(queue=queue)
    decision = bot.receive([tr(s) for s in range(6)], CURRENT)  # 6 owed, but their 24 steps reach the mark
    assert credits(decision) == [] and bot.session.credit.withheld
    assert steps(decision) == 24 and queue.steps == 24
    assert queue.asked == [(24, 0)]  # asked once the group was queued


def test_the_grant_point_of_a_read_sees_everything_it_queued():
    queue = WatchedQueue(1 << 30)
    bot, _, _ = connect(queue=queue)
    bot.receive([tr(s) for s in range(5)], CURRENT)
    queue.asked.clear()
    decision = bot.receive([tr(5), tr(6), encode(Hello("again", OBS, ACT)), tr(7)], CURRENT)
    assert [type(m).__name__ for m in replies(decision)] == ["Error", "Credit"]
    assert errors(decision) == [("unexpected", None)]
    assert credits(decision) == [Credit(grant=8, ack=7)]
    assert queue.asked == [(20 + 12, 0)]  # asked once, with seqs 5, 6 and 7 on the queue
    assert steps(decision) == 12 and queue.steps == 20 + 12


# ── sequence numbers (§7.1 duplicate) and versions (§8) ─────────────────────


@pytest.mark.parametrize(
    "refused",
    [tr(1, rew=float("nan")), tr(1, version=99), planted(1, **SHORT_OBS), planted(1, **BAD_AGENT)],
    ids=["nonfinite", "newer", "shape", "agent"],
)
def test_the_frame_after_a_refused_one_is_no_seq_gap(refused: bytes):
    """A refused frame's seq was seen: seq 2 after a refused seq 1 skipped nothing, alone or in a group."""
    for reads in ([[tr(0), refused, tr(2)]], [[tr(0)], [refused], [tr(2)]]):
        bot, metrics, _ = connect()
        for frames in reads:
            bot.receive(frames, CURRENT)
        assert bot.session.last_seq == 2
        assert metrics.counter("seq_gaps") == 0 and metrics.counter("seq_gap_frames") == 0
    bot, metrics, _ = connect()
    bot.receive([tr(0), refused, tr(4)], CURRENT)  # 2 and 3 were never seen
    assert metrics.counter("seq_gaps") == 1 and metrics.counter("seq_gap_frames") == 2


def test_a_frame_refused_no_credit_is_seen_too():
    bot, metrics, welcome = connect(queue=FullQueue(1 << 30))
    bot.receive([tr(s) for s in range(welcome.credit + 1)], CURRENT)  # the last is refused no_credit
    assert len(list(withheld_credit([bot.session], queue_full=False))) == 1  # the trainer caught up
    decision = bot.receive([tr(welcome.credit + 1)], CURRENT)
    assert steps(decision) == 4 and metrics.counter("seq_gaps") == 0


def test_a_replayed_or_older_seq_is_refused_duplicate_and_never_queued_twice():
    bot, metrics, _ = connect()
    decision = bot.receive([tr(s) for s in (0, 1, 2, 1, 5, 4, 5, 6)], CURRENT)
    # ref is the refused frame's own seq (4 here), not the last accepted one (5): §7.1's duplicate row
    assert errors(decision) == [("duplicate", 1), ("duplicate", 4), ("duplicate", 5)]
    assert steps(decision) == 5 * 4  # seqs 0, 1, 2, 5, 6, once each
    assert bot.session.last_seq == 6
    assert metrics.counter("seq_gaps") == 1 and metrics.counter("seq_gap_frames") == 2  # 3 and 4
    assert metrics.counter("frames_rejected", code="duplicate") == 3
    again = bot.receive([tr(6)], CURRENT)  # in a later group too
    assert errors(again) == [("duplicate", 6)] and not again.queued
    assert metrics.counter("transitions_received") == 20


def test_an_older_policy_is_accepted_and_one_never_published_is_refused_bad_field():
    bot, metrics, _ = connect()
    decision = bot.receive([tr(0, version=1), tr(1, version=CURRENT[1] + 1), tr(2, generation=0, version=0)], CURRENT)
    assert errors(decision) == [("bad_field", 1)]
    (error,) = [m for m in replies(decision) if isinstance(m, Error)]
    assert error.msg == "policy (gen, ver) newer than any published"
    assert [(a.batch.version, a.batch.n) for a in decision.queued if a.batch is not None] == [(1, 4), (0, 4)]
    assert metrics.counter("transitions_received") == 8
    newer_generation = bot.receive([tr(3, generation=1, version=0)], CURRENT)
    assert errors(newer_generation) == [("bad_field", 3)]


# ── a bad value in a group ───────────────────────────────────────────────────


def test_a_bad_value_in_a_group_keeps_the_good_frames_and_counts_the_bad_one_once():
    """The group is answered frame by frame, as if each had come alone (one arrival and group each)."""
    bot, metrics, _ = connect()
    frames = [tr(0), tr(1), tr(2, rew=float("nan")), tr(3), tr(4, rew=2e6)]
    decision = bot.receive(frames, CURRENT)
    assert errors(decision) == [("nonfinite", 2), ("range", 4)]
    assert [a.batch.seq for a in decision.queued if a.batch is not None] == [0, 1, 3]
    assert metrics.counter("frames_rejected", code="nonfinite") == 1
    assert metrics.counter("frames_rejected", code="range") == 1
    assert metrics.counter("transitions_received") == 12 and metrics.counter("frames_accepted") == 3
    assert metrics.counter("frame_groups") == 3
    assert bot.session.last_seq == 3


def test_in_a_group_with_a_bad_value_each_frame_is_checked_values_first_then_seq():
    bot, _, _ = connect()
    decision = bot.receive([tr(0), tr(1, rew=float("inf")), tr(1), tr(0)], CURRENT)
    assert errors(decision) == [("nonfinite", 1), ("duplicate", 0)]  # seq 1 was never accepted: its resend is
    assert [a.batch.seq for a in decision.queued if a.batch is not None] == [0, 1]


def test_a_long_group_with_a_bad_value_is_answered_in_one_pass():
    window = 256
    bot, metrics, _ = connect(ServerConfig(credit_window=window))
    frames = [tr(s, n=1, rew=float("nan") if s == 100 else 1.0) for s in range(window)]
    decision = bot.receive(frames, CURRENT)
    assert errors(decision) == [("nonfinite", 100)]
    assert len(decision.queued) == window - 1 and metrics.counter("frame_groups") == window - 1


# ── the validation order (§3.7.3) ────────────────────────────────────────────


@pytest.mark.parametrize(
    ("faults", "code", "field"),
    [
        ({**BAD_AGENT, **SHORT_OBS}, "shape", "'obs'"),  # structure, then values
        ({**NAN_REW, **SHORT_OBS}, "shape", "'obs'"),
        ({**BAD_SEQ, **SHORT_OBS}, "shape", "'obs'"),  # the columns' lengths, then seq, gen, ver
        ({**SHORT_EPISODE, **SHORT_OBS}, "shape", "'obs'"),  # episode last of the structure
        ({**BAD_SEQ, **SHORT_EPISODE}, "bad_field", "'seq'"),
        ({**BAD_FLAG, **SHORT_OBS}, "bad_field", "'flags'"),  # flags before the float columns
        ({**BAD_AGENT, **NAN_REW}, "bad_field", "'agent'"),  # agent ids first of the values
        ({**BIG_OBS, **NAN_REW}, "range", "'obs'"),  # float columns in wire order
        ({**NAN_REW, **REPLAYED}, "nonfinite", "'rew'"),  # values, then the connection's checks
        ({**NAN_REW, **NEWER}, "nonfinite", "'rew'"),
        ({**REPLAYED, **NEWER}, "duplicate", "seq 0"),  # a replay before a version never published
    ],
)
@pytest.mark.parametrize("company", ["alone", "good", "bad"])
def test_a_frame_with_two_faults_gets_the_first_in_the_documented_order(
    faults: dict[str, Any], code: str, field: str, company: str
):
    """Whatever arrived with it (nothing, a good frame, a frame with a bad value), a frame gets the same answer."""
    bot, _, _ = connect()
    assert steps(bot.receive([tr(0)], CURRENT)) == 4
    frame = planted(**faults)
    others = {"alone": [], "good": [tr(7)], "bad": [tr(7, rew=float("inf"))]}[company]
    decision = bot.receive([frame, *others], CURRENT)
    seq = msgpack.unpackb(frame, raw=False)["seq"]
    answers = [m for m in replies(decision) if isinstance(m, Error)]
    assert (answers[0].code, answers[0].ref) == (code, seq if seq >= 0 else None)
    assert field in answers[0].msg
    assert len(answers) == 1 + (company == "bad")


def test_credit_is_checked_before_anything_else():
    bot, _, welcome = connect(queue=FullQueue(1 << 30))
    decision = bot.receive([tr(s) for s in range(welcome.credit)] + [planted(99, **BAD_AGENT, **SHORT_OBS)], CURRENT)
    assert errors(decision) == [("no_credit", None)]


# ── malformed frames and the error budget (§7.1) ─────────────────────────────


def test_structural_errors_name_the_seq_and_free_messages_cost_nothing():
    bot, metrics, welcome = connect()
    wrong_shape = msgpack.unpackb(tr(0), raw=False)
    wrong_shape["obs"] = b"\x00" * 12
    decision = bot.receive(
        [
            msgpack.packb(wrong_shape, use_bin_type=True),
            msgpack.packb({"v": 1, "t": "teleport", "seq": 9}),
            encode(Error("bad_weights", "sha256 mismatch")),  # a bot's error: logged, free
            encode(Hello("again", OBS, ACT)),
            tr(1),
        ],
        CURRENT,
    )
    assert errors(decision) == [("shape", 0), ("unknown_type", 9), ("unexpected", None)]
    assert steps(decision) == 4 and decision.close is None
    assert bot.session.credit.available + bot.session.credit.owed == welcome.credit  # 2 'tr's spent, 2 owed
    assert bot.session.credit.owed == 2
    assert metrics.counter_total("frames_rejected") == 3


def test_an_undecodable_frame_spends_no_credit():
    """§6 rules 2 and 4, §7.1: the server cannot tell an undecodable frame was meant as a 'tr', so it spends nothing."""
    bot, _, welcome = connect()
    decision = bot.receive([tr(0), tr(1)[:-1], tr(1)], CURRENT)  # the second is cut short: no msgpack map
    assert errors(decision) == [("undecodable", None)] and steps(decision) == 8
    account = bot.session.credit
    # rule 4: welcome.credit + grants - tr sent + tr answered no_credit or undecodable
    assert account.available == welcome.credit + 0 - 3 + 1 and account.owed == 2


def test_seqs_past_2_to_the_53_come_back_exactly_in_ack_and_ref():
    """§3: ``ack`` and ``ref`` echo the bot's own seq over the whole u64 range, as uint64 (a JavaScript
    number would round them), and small values in their shortest form."""
    top = 2**64 - 1
    bot, _, _ = connect()
    decision = bot.receive([tr(s) for s in range(top - 5, top + 1)], CURRENT)
    assert credits(decision) == [Credit(grant=6, ack=top)]
    assert decision.replies[-1].endswith(b"\xa3ack\xcf" + top.to_bytes(8, "big"))
    refused = bot.receive([tr(2**53 + 1)], CURRENT)
    assert errors(refused) == [("duplicate", 2**53 + 1)]
    small, _, _ = connect()
    assert small.receive([tr(s) for s in range(6)], CURRENT).replies[-1].endswith(b"\xa3ack\x05")


def test_the_error_that_exhausts_the_budget_is_sent_then_close_1008():
    clock = Clock()
    bot, metrics, _ = connect(ServerConfig(error_budget=4, error_window=60.0), clock=clock)
    unknown = msgpack.packb({"v": 1, "t": "teleport"})
    first = bot.receive([unknown, unknown, unknown], CURRENT)
    assert len(errors(first)) == 3 and first.close is None
    clock.now += 61.0  # the window forgets those three
    second = bot.receive([unknown, unknown, unknown], CURRENT)
    assert len(errors(second)) == 3 and second.close is None
    third = bot.receive([unknown, tr(0)], CURRENT)  # the 4th in 60 s: answered, then closed; the rest unread
    assert errors(third) == [("unknown_type", None)]
    assert third.close == Close(CloseCode.POLICY_VIOLATION, "too many errors")
    assert not third.queued and metrics.counter("transitions_received") == 0


def test_errors_in_a_group_stop_at_the_one_that_exhausts_the_budget():
    """Each frame is answered as if it had come alone: the one before the errors is kept, the one after the
    closing error is never looked at."""
    bot, _, _ = connect(ServerConfig(error_budget=2))
    decision = bot.receive([tr(0), tr(0), tr(0), tr(1)], CURRENT)
    assert errors(decision) == [("duplicate", 0), ("duplicate", 0)]
    assert decision.close == Close(CloseCode.POLICY_VIOLATION, "too many errors")
    assert [a.batch.seq for a in decision.queued if a.batch is not None] == [0]


def test_the_third_undecodable_frame_closes_1008_without_an_error():
    bot, metrics, _ = connect()
    decision = bot.receive([b"\xc1 not msgpack", b"\x93\x01\x02", b"\xc1"], CURRENT)
    assert errors(decision) == [("undecodable", None), ("undecodable", None)]
    assert decision.close == Close(CloseCode.POLICY_VIOLATION, "too many undecodable frames")
    assert metrics.counter("frames_closed", reason="too_many_undecodable") == 1
    assert metrics.counter("frames_rejected", code="undecodable") == 2


def test_another_protocol_version_after_the_hello_gets_bad_version_then_close_1008():
    """§11: as during the handshake, the error says why, then the close; what came before is kept."""
    bot, metrics, _ = connect()
    decision = bot.receive([tr(0), msgpack.packb({"v": 2, "t": "tr"}), tr(1)], CURRENT)
    assert steps(decision) == 4 and errors(decision) == [("bad_version", None)]
    assert decision.close == Close(CloseCode.POLICY_VIOLATION, "unsupported protocol version")
    assert metrics.counter("frames_closed", reason="bad_version") == 1
    assert metrics.counter_total("frames_rejected") == 0


def test_bye_closes_1000_after_what_came_before_it_is_queued():
    bot, _, _ = connect()
    decision = bot.receive([tr(0), encode(Bye("done")), tr(1)], CURRENT)
    assert steps(decision) == 4
    assert decision.close == Close(CloseCode.NORMAL, "bye")


def test_rules_are_validated_at_construction():
    good = BotRules.from_config(ServerConfig(), OBS, ActionSpace(ACT), reward_terms=True)
    with pytest.raises(ValueError, match="obs_dim"):
        dataclasses.replace(good, obs_dim=0)
    with pytest.raises(ValueError, match="error_window"):
        dataclasses.replace(good, error_window=0.0)


# ── a run with discrete branches (§3.1, §3.7.1) ──────────────────────────────


DISCRETE = ActionSpace(1, (3, 2))
"""One continuous dim beside two branches: the mixed case, which holds the discrete one."""


def connect_discrete() -> tuple[BotConnection, TransitionQueue]:
    """A connection of a run acting in :data:`DISCRETE`, past a good hello."""
    queue = TransitionQueue(1 << 30)
    rules = BotRules.from_config(ServerConfig(), OBS, DISCRETE, reward_terms=True)
    bot = BotConnection(rules, Metrics(), queue, LOG, clock=Clock())
    decision = bot.receive_hello(encode(Hello("unit", OBS, 1, n_agents=AGENTS, branches=(3, 2))), snapshot(), "ppo")
    assert decision.close is None
    return bot, queue


def discrete_tr(seq: int, dact: list[list[int]], mask: np.ndarray | None = None) -> bytes:
    n = len(dact)
    batch = TransitionBatch(
        seq=seq,
        generation=CURRENT[0],
        version=CURRENT[1],
        agent=(np.arange(n) % AGENTS).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=np.full((n, OBS), 0.5, np.float32),
        act=np.full((n, 1), 0.25, np.float32),
        logp=np.full(n, -1.0, np.float32),
        flags=np.zeros(n, np.uint8),
        rew=np.ones(n, np.float32),
        dact=np.array(dact, np.uint32),
        mask=mask,
    )
    return encode(batch)


def test_a_hello_must_declare_the_runs_branches():
    rules = BotRules.from_config(ServerConfig(), OBS, DISCRETE, reward_terms=True)
    for hello in (Hello("old", OBS, 1, n_agents=1), Hello("other", OBS, 1, n_agents=1, branches=(3, 3))):
        decision = BotConnection(rules, Metrics(), TransitionQueue(1 << 30), LOG).receive_hello(
            encode(hello), snapshot(), "ppo"
        )
        (error,) = replies(decision)
        assert isinstance(error, Error) and error.code == "bad_hello"
        assert "this run trains obs_dim=3, act_dim=1, branches=[3, 2]" in error.msg
        assert decision.close is not None and decision.close.code == CloseCode.POLICY_VIOLATION


def test_discrete_rows_are_queued_as_one_packed_float_block():
    """[continuous | one index a branch | the mask as 0/1]: the queue and the learner see one float block."""
    bot, _ = connect_discrete()
    mask = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]], np.uint8)
    decision = bot.receive([discrete_tr(0, [[2, 1], [0, 0]], mask), discrete_tr(1, [[1, 0], [2, 1]])], CURRENT)
    assert not errors(decision) and steps(decision) == 4
    blocks = np.concatenate([arrival.batch.act for arrival in decision.queued if arrival.batch is not None])
    assert blocks.shape == (4, DISCRETE.packed_width)
    np.testing.assert_array_equal(blocks[:2], [[0.25, 2, 1, 1, 0, 1, 1, 1], [0.25, 0, 0, 1, 1, 1, 1, 0]])
    np.testing.assert_array_equal(blocks[2:, 3:], np.ones((2, 5)))  # no mask sent: every action legal


def test_discrete_faults_get_their_codes_and_lose_nothing_else():
    bot, _ = connect_discrete()
    all_forbidden = np.array([[0, 0, 0, 1, 1]], np.uint8)
    forbidden_taken = np.array([[1, 0, 1, 1, 1]], np.uint8)
    decision = bot.receive(
        [
            discrete_tr(0, [[3, 0]]),  # branch 0 has 3 actions
            discrete_tr(1, [[0, 0]], all_forbidden),
            discrete_tr(2, [[1, 0]], forbidden_taken),
            discrete_tr(3, [[2, 1]], forbidden_taken),
        ],
        CURRENT,
    )
    assert errors(decision) == [("bad_action", 0), ("bad_mask", 1), ("illegal_action", 2)]
    assert steps(decision) == 1 and bot.session.last_seq == 3
