"""Per-connection state of one bot (loop thread only): identity, credit, the newest seq, delivery, stats.

The record the rest of the server reads (the dashboard's bot table, ``/metrics``, tests).
The rules that change it live elsewhere: :mod:`server.bot_connection` (frames in, a
decision out) and :mod:`server.credit` (the credit rules behind :attr:`BotSession.credit`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import MutableMapping
from typing import Any

from bot_protocol import Hello, PolicyId, RewardMode, SessionSpec, TransitionBatch

from .credit import CreditAccount
from .stats import BotStats
from .transition_queue import Arrival
from .weights import WeightsSlot

__all__ = ["BotSession"]


class _BotLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"[{self.extra['bot'] if self.extra else '?'}] {msg}", kwargs


class BotSession:
    """Everything the server tracks for one connected bot.

    Made by :meth:`server.bot_connection.BotConnection.receive_hello` once a ``hello`` is
    accepted; its protocol state (:attr:`credit`, :attr:`last_seq`) and the stats are
    updated by that connection's rules only.
    """

    def __init__(
        self,
        bot_id: str,
        session_id: str,
        hello: Hello,
        spec: SessionSpec,
        delivered: PolicyId,
        logger: logging.Logger,
        connection: Any = None,
    ) -> None:
        self.bot_id = bot_id
        self.session_id = session_id
        self.hello = hello
        self.connection = connection
        """The websocket connection (the server's I/O object; this class never awaits on it)."""
        self.spec = spec
        self.terms = hello.reward is RewardMode.TERMS
        self.arrivals = 0
        self.slot = WeightsSlot(delivered)
        self.sender: asyncio.Task[None] | None = None
        """The task sending this bot's pending weights; exists only while something is pending."""
        self.credit = CreditAccount(spec.limits.credit_window)
        """What the bot may send and what is owed back to it (the rules: :mod:`server.credit`)."""
        self.last_seq = -1
        """The newest accepted ``seq`` (-1 before the first): a ``tr`` at or below it is a duplicate."""
        self.highest_seq_seen = -1
        """The highest ``seq`` of any ``tr`` read, accepted or refused (-1 before the first): an
        accepted one more than one above it skipped numbers no frame carried (``seq_gaps``)."""
        self.steps_accepted = 0
        self.frames_accepted = 0
        """``tr`` frames accepted (frames that arrive together reach the queue as one arrival)."""
        self.connected_at = time.monotonic()
        self.last_frame_at = self.connected_at
        """``time.monotonic()`` of the newest accepted batch (the dashboard's "last seen")."""
        self.acting_version: PolicyId | None = None
        """The policy that acted in the newest accepted batch (None before the first)."""
        self.log = _BotLogger(logger, {"bot": bot_id})

    def stats(self, rank: int | None = None) -> BotStats:
        """This bot's row of a :class:`~server.stats.ServerStats` (loop thread: the session changes there)."""
        acting = self.acting_version
        hello = self.hello
        return BotStats(
            bot_id=self.bot_id,
            name=hello.name,
            client=hello.client,
            agents=hello.n_agents,
            reward=str(hello.reward),
            policy=acting if acting is not None else self.slot.delivered,
            policy_is="acting" if acting is not None else "delivered",
            steps=self.steps_accepted,
            connected_at=self.connected_at,
            last_frame_at=self.last_frame_at,
            rank=rank,
        )

    def arrival(self, batch: TransitionBatch | None) -> Arrival:
        """Wrap the next accepted batch (or the end of the session, ``None``) for the queue."""
        arrival = Arrival(self.session_id, self.bot_id, self.terms, self.arrivals, batch)
        self.arrivals += 1
        return arrival
