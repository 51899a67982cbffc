"""Per-connection state of one bot (loop thread only): identity, credit, dedup, error budget."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import MutableMapping
from typing import Any

from bot_protocol import Credit, Hello, RewardMode, SessionSpec, TransitionBatch

from .transition_queue import Arrival
from .weights import WeightsSlot

__all__ = ["BotSession"]


class _BotLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"[{self.extra['bot'] if self.extra else '?'}] {msg}", kwargs


class BotSession:
    """Everything the server tracks for one connected bot.

    Credit: the bot starts with ``credit_window`` and spends one per ``tr`` message
    (accepted or rejected; other message types are free); the server owes one back for
    every ``tr`` it processed and returns them in ``credit`` messages once at least three
    quarters of a window are owed — immediately while the queue is below its high-water
    mark, after the trainer's next drain otherwise.
    """

    def __init__(
        self,
        bot_id: str,
        session_id: str,
        hello: Hello,
        spec: SessionSpec,
        error_budget: int,
        error_window: float,
        delivered: tuple[int, int],
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
        self.credit = spec.limits.credit_window
        self.owed = 0
        self.withheld = False
        """Credit was owed while the queue was full; the trainer's next drain returns it."""
        self.last_seq = -1
        self.undecodable = 0
        self.steps_accepted = 0
        self.frames_accepted = 0
        """``tr`` frames accepted (frames that arrive together reach the queue as one arrival)."""
        self.connected_at = time.monotonic()
        self.last_frame_at = self.connected_at
        """``time.monotonic()`` of the newest accepted batch (the dashboard's "last seen")."""
        self.acting_version: tuple[int, int] | None = None
        """(generation, version) of the policy that acted in the newest accepted batch."""
        self._error_budget = error_budget
        self._error_window = error_window
        self._errors: deque[float] | None = None  # made on the first error: most bots never err
        self.log = _BotLogger(logger, {"bot": bot_id})

    def arrival(self, batch: TransitionBatch | None) -> Arrival:
        """Wrap the next accepted batch (or the end of the session, ``None``) for the queue."""
        arrival = Arrival(self.session_id, self.bot_id, self.terms, self.arrivals, batch)
        self.arrivals += 1
        return arrival

    def spend_credit(self) -> bool:
        """Take one credit for an incoming frame; False if the bot had none (a protocol violation)."""
        if self.credit <= 0:
            return False
        self.credit -= 1
        self.owed += 1
        return True

    def take_owed(self, force: bool = False) -> Credit | None:
        """The credit message to send now, if enough is owed (or any is owed and ``force``)."""
        # Three quarters of a window per grant: one credit message per 6 frames (window 8) keeps
        # the send syscalls down while the bot still has frames in flight when it arrives.
        threshold = 1 if force else max(1, self.spec.limits.credit_window * 3 // 4)
        if self.owed < threshold:
            return None
        grant, self.owed = self.owed, 0
        self.credit += grant
        return Credit(grant=grant, ack=max(self.last_seq, 0))

    def strike(self, now: float | None = None) -> bool:
        """Record a recoverable error; True once the budget for the window is exhausted."""
        now = time.monotonic() if now is None else now
        if self._errors is None:
            self._errors = deque()
        self._errors.append(now)
        while self._errors and now - self._errors[0] > self._error_window:
            self._errors.popleft()
        return len(self._errors) >= self._error_budget
