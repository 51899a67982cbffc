"""One bot's protocol, sans-I/O: frames (bytes) in, a :class:`Decision` out.

Every rule docs/protocol.md states for a bot connection is applied here and nowhere else:
the ``hello`` checks, credit (the amounts are :mod:`server.credit`'s), sequence numbers,
policy versions, value checks and the error budget. Nothing here awaits or touches a socket,
so each rule is tested on raw bytes; :mod:`server.app` only hands it the frames websockets has
buffered and carries out the decision (:attr:`Decision.replies` in order, then
:attr:`Decision.close`).

Accepted batches go on the transition queue as they are accepted, so each credit decision sees
the queue as the puts before it left it and ``received == trained + dropped + queued + ...``
holds on the loop thread. A group of ``tr`` frames is checked in one numpy pass; if any frame
is refused (a value, its seq or its version) the group is answered again frame by frame, so
each frame gets the answer and counters it would have had alone, whatever arrived with it
(docs/architecture.md, "The life of one step", step 3).

Credit is decided once per read, after every frame of it is answered (:meth:`BotConnection.receive`),
so a ``credit``'s ``ack`` counts every frame it pays for, and a ``tr`` is refused ``no_credit``
exactly when the credit sent before the read it came in was used up (docs/protocol.md §3.3, §6).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot_protocol import (
    ActionSpace,
    Bye,
    CloseCode,
    Error,
    ErrorCode,
    Hello,
    Limits,
    Message,
    PolicyId,
    ProtocolError,
    RewardMode,
    SessionSpec,
    TransitionBatch,
    TransitionHeader,
    Welcome,
    assemble_batches,
    decode_from_bot,
    encode,
)
from bot_protocol.codec import message_from_bot, unpack

from .config import ServerConfig
from .credit import session_limits
from .metrics import Metrics
from .session import BotSession
from .transition_queue import Arrival, TransitionQueue
from .weights import PublishedWeights

__all__ = ["NO_REWARD_FUNCTION", "BotConnection", "BotRules", "Close", "Decision"]

NO_REWARD_FUNCTION = (
    "this server has no reward function for reward terms; send reward 'scalar', "
    "or start the server with one (arena serve does, with the tank's)"
)
"""The ``bad_hello`` message for a terms-mode ``hello`` on a server started without a reward function."""


@dataclass(frozen=True)
class BotRules:
    """What every bot connection of one run is held to: the run's sizes and the protocol's limits.

    No defaults of its own: :meth:`from_config` takes them from :class:`~server.config.ServerConfig`.
    """

    obs_dim: int
    """The observation size of the run's agent; a ``hello`` must declare exactly this."""
    actions: ActionSpace
    """The run's action space (continuous dims and discrete branches); a ``hello`` must declare exactly this."""
    limits: Limits
    """Announced in ``welcome`` and enforced on every ``tr`` (build it with :func:`server.credit.session_limits`)."""
    max_agents_per_bot: int
    error_budget: int
    """Errors answered per ``error_window`` seconds; the one that reaches it is sent, then close 1008."""
    error_window: float
    max_undecodable: int
    """Undecodable frames per connection (never forgiven); the one that reaches it closes 1008."""
    reward_terms: bool
    """Whether the run has a reward function for ``terms`` mode (the game's, given to the server);
    without one a ``hello`` with ``reward: "terms"`` is refused with ``bad_hello``: its rows could
    not be turned into rewards (docs/protocol.md §3.7.4)."""
    state_size: int = 0
    """The recurrent state every row carries (the run's actor's core, told to bots in ``welcome``'s weights)."""

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be >= 1, got {getattr(self, name)}"
            for name in ("obs_dim", "max_agents_per_bot", "error_budget", "max_undecodable")
            if getattr(self, name) < 1
        ]
        if not self.error_window > 0:
            problems.append(f"error_window must be > 0 seconds, got {self.error_window}")
        if problems:
            raise ValueError("invalid BotRules: " + "; ".join(problems))

    @classmethod
    def from_config(
        cls, config: ServerConfig, obs_dim: int, actions: ActionSpace, *, reward_terms: bool, state_size: int = 0
    ) -> BotRules:
        return cls(
            obs_dim=obs_dim,
            actions=actions,
            limits=session_limits(config),
            max_agents_per_bot=config.max_agents_per_bot,
            error_budget=config.error_budget,
            error_window=config.error_window,
            max_undecodable=config.max_undecodable,
            reward_terms=reward_terms,
            state_size=state_size,
        )


@dataclass(frozen=True)
class Close:
    """Close the connection with this code and reason (a reason already short enough for a close frame)."""

    code: CloseCode
    reason: str


@dataclass(frozen=True)
class Decision:
    """What the I/O side must do about the frames it handed in, in this order."""

    queued: tuple[Arrival, ...] = ()
    """The accepted batches, in order, as they were put on the transition queue (already there)."""
    replies: tuple[bytes, ...] = ()
    """Frames to send to the bot (``welcome``, ``credit``, ``error``), in order."""
    close: Close | None = None
    """Set when the connection must end (after the replies): nothing more is read from it."""


class _Outcome:
    """A decision being made: what it queued and what to send so far."""

    __slots__ = ("close", "queued", "replies")

    def __init__(self) -> None:
        self.queued: list[Arrival] = []
        self.replies: list[bytes] = []
        self.close: Close | None = None

    def decision(self) -> Decision:
        return Decision(tuple(self.queued), tuple(self.replies), self.close)


_Verdict = tuple[ErrorCode, str] | None
"""Why a ``tr`` is refused before its values are looked at (its seq or version), or None."""


class BotConnection:
    """One bot connection's protocol state machine: waiting for ``hello``, then open.

    Args:
        rules: the run's sizes and limits, shared by every connection.
        metrics: where the protocol's counters go (``frames_rejected``, ``seq_gaps``, ...).
        queue: where accepted batches go; its high-water mark is the one thing about the
            rest of the server a credit decision needs.
        logger: the logger the session's messages go to (each prefixed with its bot id).
        bot_numbers: the process-wide counter that makes bot ids unique (``<name>-<k>``).
        clock: ``time.monotonic`` (a test may pass its own).
    """

    def __init__(
        self,
        rules: BotRules,
        metrics: Metrics,
        queue: TransitionQueue,
        logger: logging.Logger,
        bot_numbers: Iterator[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self.metrics = metrics
        self.queue = queue
        self._logger = logger
        self._bot_numbers = bot_numbers if bot_numbers is not None else itertools.count(1)
        self._clock = clock
        self._session: BotSession | None = None
        self._undecodable = 0
        self._errors: deque[float] | None = None
        """Times of the errors answered within the last ``error_window``; made on the first: most bots never err."""

    @property
    def session(self) -> BotSession:
        """The session a welcome opened (an error to ask before)."""
        if self._session is None:
            raise RuntimeError("no session before the bot's hello is accepted")
        return self._session

    # ── the handshake ────────────────────────────────────────────────────────

    def receive_hello(self, frame: bytes | str, current: PublishedWeights, agent: str) -> Decision:
        """The connection's first frame: a welcome (and :attr:`session` set) or a refusal and its close.

        ``current`` is the policy the welcome carries; ``agent`` names the learner in it.
        """
        if isinstance(frame, str):
            return Decision(close=Close(CloseCode.UNSUPPORTED_DATA, "binary frames only"))
        rules = self.rules
        try:
            hello = decode_from_bot(frame, None, rules.limits.max_message_bytes)
            if not isinstance(hello, Hello):
                raise ProtocolError(ErrorCode.UNEXPECTED, "the first message must be 'hello'")
            self._check_hello(hello)
        except ProtocolError as exc:
            self.metrics.inc("handshakes_rejected", reason=str(exc.code))
            error = encode(Error(str(exc.code), exc.message))
            return Decision(replies=(error,), close=Close(CloseCode.POLICY_VIOLATION, _close_reason(exc.message)))
        bot_id = f"{hello.name[:40]}-{next(self._bot_numbers)}"  # stays within the 64-character id limit
        spec = SessionSpec(
            rules.obs_dim, rules.actions.continuous, hello.n_agents, hello.reward, rules.limits, rules.actions.branches,
            rules.state_size,
        )  # fmt: skip
        session = BotSession(bot_id, uuid.uuid4().hex[:16], hello, spec, current.identity, self._logger)
        self._session = session
        welcome = Welcome(
            bot_id=bot_id,
            session=session.session_id,
            agent=agent,
            limits=rules.limits,
            credit=session.credit.available,
            weights=current.message,
            explore=current.message.explore,
        )
        return Decision(replies=(encode(welcome),))

    def _check_hello(self, hello: Hello) -> None:
        rules = self.rules
        if hello.obs_dim != rules.obs_dim or hello.actions != rules.actions:
            raise ProtocolError(
                ErrorCode.BAD_HELLO,
                f"this run trains obs_dim={rules.obs_dim}, {_declared(rules.actions)}; hello declared "
                f"obs_dim={hello.obs_dim}, {_declared(hello.actions)}",
            )
        if hello.n_agents > rules.max_agents_per_bot:
            raise ProtocolError(ErrorCode.BAD_HELLO, f"n_agents {hello.n_agents} exceeds {rules.max_agents_per_bot}")
        if hello.reward is RewardMode.TERMS and not rules.reward_terms:
            raise ProtocolError(ErrorCode.BAD_HELLO, NO_REWARD_FUNCTION)

    # ── after the welcome ────────────────────────────────────────────────────

    def receive(self, frames: Sequence[bytes | str], current: PolicyId) -> Decision:
        """Frames that arrived together, answered in arrival order; ``current``: the newest published policy.

        Consecutive well-formed ``tr`` frames the bot had credit for are collected as headers
        (sizes checked, values not yet) and accepted as one group; any other frame first
        settles the group, then is answered on its own. Once every frame is answered comes the
        read's one grant point: the ``ack`` counts them all, and no credit earned within the read
        lets a ``tr`` of the same read through.
        """
        session = self.session
        spec = session.spec
        out = _Outcome()
        group: list[TransitionHeader] = []
        for frame in frames:
            if isinstance(frame, str):
                if self._accept_group(group, current, out):
                    self.metrics.inc("frames_closed", reason="text_frame")
                    out.close = Close(CloseCode.UNSUPPORTED_DATA, "binary frames only")
                return out.decision()
            try:
                kind, fields = unpack(frame, self.rules.limits.max_message_bytes)
            except ProtocolError as exc:
                if not (self._accept_group(group, current, out) and self._undecodable_frame(exc, out)):
                    return out.decision()
                group = []
                continue
            structure: ProtocolError | None = None
            if kind == TransitionBatch.TYPE and session.credit.available > 0:
                try:
                    header = TransitionHeader.from_wire(fields, spec)
                except ProtocolError as exc:
                    structure = exc  # answered in order below, once the group before it is settled
                else:
                    session.credit.spend()  # each 'tr' spends one credit, accepted or not
                    group.append(header)
                    continue
            if not (self._accept_group(group, current, out) and self._message(kind, fields, structure, current, out)):
                return out.decision()
            group = []
        if self._accept_group(group, current, out):
            self._grant(out)
        return out.decision()

    def _undecodable_frame(self, exc: ProtocolError, out: _Outcome) -> bool:
        """A frame that is no message (or of another protocol version); False when it closes the connection.

        A wrong ``v`` is fatal, as during the handshake: its ``error`` says why, then close 1008
        (the bot cannot speak this server's protocol, so there is nothing to recover).
        """
        if exc.code is ErrorCode.BAD_VERSION:
            self.metrics.inc("frames_closed", reason="bad_version")
            out.replies.append(encode(Error(str(exc.code), exc.message)))
            out.close = Close(CloseCode.POLICY_VIOLATION, "unsupported protocol version")
            return False
        self._undecodable += exc.code is ErrorCode.UNDECODABLE
        if self._undecodable >= self.rules.max_undecodable:
            self.metrics.inc("frames_closed", reason="too_many_undecodable")
            out.close = Close(CloseCode.POLICY_VIOLATION, "too many undecodable frames")
            return False
        return self._reject(out, exc.code, exc.message)

    def _message(
        self,
        kind: str,
        fields: Mapping[str, Any],
        structure: ProtocolError | None,
        current: PolicyId,
        out: _Outcome,
    ) -> bool:
        """One message outside a group; False when the connection must end.

        A ``tr`` lands here when its structure is wrong (``structure``: the error its header
        raised) or when the bot had no credit as it was read.
        """
        session = self.session
        if kind == TransitionBatch.TYPE:
            # Each 'tr' spends one credit, accepted or not; every other type is free.
            if not session.credit.spend():
                self._saw(_seq_of(fields))
                return self._reject(out, ErrorCode.NO_CREDIT, "'tr' sent without flow-control credit")
            batch: TransitionBatch | None = None
            if structure is None:  # not read yet: it came when the bot had no credit
                try:
                    header = TransitionHeader.from_wire(fields, session.spec)
                    batch = assemble_batches([header], session.spec, explain=True)
                except ProtocolError as exc:
                    structure = exc
            if structure is not None:
                seq = _seq_of(fields)
                self._saw(seq)
                return self._reject(out, structure.code, structure.message, seq)
            assert batch is not None  # explain=True raises instead
            return self._accept_group([batch], current, out)
        try:
            message: Message = message_from_bot(kind, fields, session.spec)
        except ProtocolError as exc:
            return self._reject(out, exc.code, exc.message, _seq_of(fields))
        if isinstance(message, Bye):
            session.log.info("said bye: %s", message.reason[:80])
            out.close = Close(CloseCode.NORMAL, "bye")
            return False
        if isinstance(message, Error):  # free: no credit, no strike (docs/protocol.md §3.4)
            session.log.warning("bot reported error %s: %s", message.code, message.msg[:120])
            return True
        return self._reject(out, ErrorCode.UNEXPECTED, f"'{message.TYPE}' is not expected now")

    def _accept_group(self, group: Sequence[TransitionHeader | TransitionBatch], current: PolicyId, out: _Outcome) -> bool:
        """Accept or reject ``tr`` frames of this session in order; accepted runs are queued joined.

        Fast path: when every frame's seq and version pass, one value check over the whole
        group. If any frame is refused, :meth:`_accept_one_by_one` answers every frame of the
        group instead, so a frame's answer never depends on what arrived with it (a frame
        with a bad value and a replayed seq gets the value's error, alone or not). False when
        the connection must end.
        """
        if not group:
            return True
        session = self.session
        if _all_pass(group, session.last_seq, current):
            batches = _join(session.spec, group)
            if batches is not None:
                self._accept(group, batches, out)
                return True
        return self._accept_one_by_one(group, current, out)

    def _accept_one_by_one(
        self, group: Sequence[TransitionHeader | TransitionBatch], current: PolicyId, out: _Outcome
    ) -> bool:
        """Answer each frame as if it had come alone: its values first, then its seq and version.

        The slow path of a group with a bad value, in one pass: the good frames are kept
        (each its own arrival), every bad one gets its exact error and counter.
        """
        spec = self.session.spec
        for frame in group:
            if isinstance(frame, TransitionHeader):
                try:
                    batch = assemble_batches([frame], spec, explain=True)
                except ProtocolError as exc:
                    self._saw(frame.seq)
                    if not self._reject(out, exc.code, exc.message, frame.seq):
                        return False
                    continue
                assert batch is not None  # explain=True raises instead
                frame = batch
            verdict = _verdict(frame, self.session.last_seq, current)
            if verdict is not None:
                self._saw(frame.seq)
                if not self._reject(out, *verdict, frame.seq):
                    return False
                continue
            self._accept([frame], [frame], out)
        return True

    def _accept(
        self, kept: Sequence[TransitionHeader | TransitionBatch], batches: Sequence[TransitionBatch], out: _Outcome
    ) -> None:
        """Record accepted frames (their seqs, the stats and counters) and queue their batches."""
        session, metrics = self.session, self.metrics
        for frame in kept:
            seen = session.highest_seq_seen
            if frame.seq > seen + 1 and seen >= 0:
                # Numbers no frame carried (dropped by the bot's own limits, or lost by a buggy
                # bot): counted, so a bot that skips seqs shows up in /metrics. A refused frame's
                # seq was seen, so the frame after it is no gap.
                metrics.inc("seq_gaps")
                metrics.inc("seq_gap_frames", frame.seq - seen - 1)
            session.last_seq = frame.seq
            self._saw(frame.seq)
        steps = sum(batch.n for batch in batches)
        session.steps_accepted += steps
        session.frames_accepted += len(kept)
        session.acting_version = batches[-1].policy_id
        session.last_frame_at = self._clock()
        metrics.inc("transitions_received", steps)
        metrics.inc("frames_accepted", len(kept))
        metrics.inc("frame_groups")
        for batch in batches:
            arrival = session.arrival(batch)
            self.queue.put(arrival)
            out.queued.append(arrival)

    def _saw(self, seq: int | None) -> None:
        """Note the ``seq`` of a ``tr`` read (accepted or refused): numbers seen are no gap."""
        session = self.session
        if seq is not None and seq > session.highest_seq_seen:
            session.highest_seq_seen = seq

    def _grant(self, out: _Outcome) -> None:
        """A grant point: owed credit goes back now, unless the queue is full (then the trainer's next drain returns it).

        Only at the end of a read: the frames just answered are queued already, so a read
        that fills the queue earns no credit.
        """
        session = self.session
        credit = session.credit.grant(session.last_seq, self.queue.at_high_water())
        if credit is not None:
            out.replies.append(encode(credit))

    def _reject(self, out: _Outcome, code: ErrorCode, message: str, ref: int | None = None) -> bool:
        """Answer a recoverable error (counted by code); close 1008 once the bot exhausts its error budget.

        A rejected ``tr`` still spent the bot's credit: the next grant point returns it.
        """
        self.metrics.inc("frames_rejected", code=str(code))
        out.replies.append(encode(Error(str(code), message, ref)))
        if self._strike():
            self.session.log.warning("closing: error budget exhausted (last: %s)", code)
            out.close = Close(CloseCode.POLICY_VIOLATION, "too many errors")
            return False
        return True

    def _strike(self) -> bool:
        """Record an error answered now; True once ``error_budget`` fall within ``error_window`` seconds."""
        now = self._clock()
        if self._errors is None:
            self._errors = deque()
        errors = self._errors
        errors.append(now)
        while errors and now - errors[0] > self.rules.error_window:
            errors.popleft()
        return len(errors) >= self.rules.error_budget


def _declared(actions: ActionSpace) -> str:
    """A space as ``hello`` spells it: ``act_dim=2``, or with its discrete branches ``act_dim=0, branches=[3, 2]``."""
    if not actions.branches:
        return f"act_dim={actions.continuous}"
    return f"act_dim={actions.continuous}, branches={list(actions.branches)}"


def _all_pass(group: Sequence[TransitionHeader | TransitionBatch], last_seq: int, current: PolicyId) -> bool:
    """Whether every frame of the group passes its seq and version checks, taken in order."""
    for frame in group:
        if _verdict(frame, last_seq, current) is not None:
            return False
        last_seq = frame.seq
    return True


def _verdict(frame: TransitionHeader | TransitionBatch, last_seq: int, current: PolicyId) -> _Verdict:
    if frame.seq <= last_seq:
        return ErrorCode.DUPLICATE, f"seq {frame.seq} already seen"
    if frame.policy_id > current:
        return ErrorCode.BAD_FIELD, "policy (gen, ver) newer than any published"
    return None


def _join(spec: SessionSpec, frames: Sequence[TransitionHeader | TransitionBatch]) -> list[TransitionBatch] | None:
    """Accepted frames as batches, one per run of equal (generation, version); None if a value is bad."""
    headers = [frame for frame in frames if isinstance(frame, TransitionHeader)]
    if not headers:
        return [frame for frame in frames if isinstance(frame, TransitionBatch)]  # checked one by one already
    batches: list[TransitionBatch] = []
    start = 0
    for end in range(1, len(headers) + 1):
        if end < len(headers) and _same_policy(headers[end], headers[start]):
            continue
        batch = assemble_batches(headers[start:end], spec, explain=False)
        if batch is None:
            return None
        batches.append(batch)
        start = end
    return batches


def _same_policy(a: TransitionHeader, b: TransitionHeader) -> bool:
    """``a.policy_id == b.policy_id`` without building either: this runs once per frame of a group."""
    return a.generation == b.generation and a.version == b.version


def _close_reason(text: str, limit: int = 120) -> str:
    """A close reason must fit a control frame (125 bytes): cut by bytes, not characters."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def _seq_of(fields: Mapping[str, Any]) -> int | None:
    """The ``ref`` of an error about this message: its ``seq``, when that is a valid one."""
    seq = fields.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
