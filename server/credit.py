"""Flow control: every credit rule of the server, in one place (the contract is docs/protocol.md §6).

The server never stops reading a socket (its keepalive pongs travel there too,
docs/reliability.md M8), so credit is the only back-pressure there is:

- **The window** is announced in ``welcome.limits`` (:func:`session_limits`).
- **Each ``tr`` spends one credit, accepted or rejected**; other messages, and a ``tr`` refused
  for ``no_credit``, spend nothing (:meth:`CreditAccount.spend`).
- **Spent credit is paid back** once three quarters of a window are owed, while the queue is
  below its high-water mark (:meth:`CreditAccount.grant`); at or above it the credit is
  *withheld* until the trainer's next drain leaves room (:func:`withheld_credit`).
- **How deep the queue may get before credit stops** (:func:`queue_bounds`).

:class:`~server.bot_connection.BotConnection` decides *when* a grant point is reached; this
module decides what it pays.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents import Agent
from bot_protocol import Credit, Limits

from .config import ServerConfig
from .transition_queue import OFF_POLICY_QUEUED_PUBLISHES, ON_POLICY_QUEUED_UPDATES

if TYPE_CHECKING:  # session.py holds a CreditAccount: no import cycle at run time
    from .session import BotSession

__all__ = ["CreditAccount", "QueueBounds", "queue_bounds", "session_limits", "withheld_credit"]


def session_limits(config: ServerConfig) -> Limits:
    """The limits every connection is held to and told in ``welcome``, the credit window among them."""
    return Limits(
        max_batch=config.max_batch,
        max_message_bytes=config.max_message_bytes,
        credit_window=config.credit_window,
        max_abs=config.max_abs,
    )


@dataclass(frozen=True)
class QueueBounds:
    """The transition queue's capacity and the depth at which credit is withheld."""

    max_bytes: int
    """Capacity in payload bytes; credit is withheld from half of it (the high-water mark)."""
    credit_steps: int | None
    """Queued steps at which credit is withheld too, whatever their bytes (``None``: bytes only)."""

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {self.max_bytes}")
        if self.credit_steps is not None and self.credit_steps < 1:
            raise ValueError(f"credit_steps must be >= 1 or None, got {self.credit_steps}")


def queue_bounds(config: ServerConfig, agent: Agent, obs_dim: int, act_width: int) -> QueueBounds:
    """How deep the queue may get before bots wait: a bound given in ``config`` is the only one.

    Unless ``queue_max_bytes`` is given, an on-policy agent (one with a ``max_policy_lag``)
    withholds credit at one update's worth of queued steps, an off-policy one at
    ``OFF_POLICY_QUEUED_PUBLISHES`` publishes' worth: every step queued beyond that is trained
    later, on older weights (docs/architecture.md, "Queue depth for an on-policy learner").
    The byte capacity is then derived to hold 4 x the larger of the update and that bound.
    """
    max_bytes, credit_steps = config.queue_max_bytes, config.queue_max_steps
    if max_bytes is None:
        step_bytes = 4 * (2 * obs_dim + act_width + 8)  # obs, act (its packed block), logp, reward, ids, bootstrap rows
        if credit_steps is None and agent.max_policy_lag is not None:
            credit_steps = ON_POLICY_QUEUED_UPDATES * agent.update_steps
        elif credit_steps is None and getattr(agent, "publish_steps", None):  # an off-policy agent's publish
            credit_steps = OFF_POLICY_QUEUED_PUBLISHES * agent.publish_steps  # type: ignore[attr-defined]
        max_bytes = max(64 << 10, 4 * max(agent.update_steps, credit_steps or 0) * step_bytes)
    return QueueBounds(max_bytes, credit_steps)


class CreditAccount:
    """One connection's credit: what the bot may still send and what the server owes it.

    ``available + owed == window`` at every moment a bot can observe, so a bot that sends
    whenever it holds credit and keeps reading never deadlocks: once it runs out, all of
    its window is owed, and owed credit is never dropped, only withheld while the queue is full.
    """

    __slots__ = ("available", "owed", "window", "withheld")

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"credit window must be >= 1, got {window}")
        self.window = window
        self.available = window
        """``tr`` frames the bot may still send (what it was given in ``welcome`` plus grants, minus spends)."""
        self.owed = 0
        self.withheld = False
        """Credit was owed while the queue was full: the trainer's next drain returns it."""

    def spend(self) -> bool:
        """Take one credit for an incoming ``tr``; False if the bot had none (``no_credit``: nothing owed)."""
        if self.available <= 0:
            return False
        self.available -= 1
        self.owed += 1
        return True

    def grant(self, last_seq: int, queue_at_high_water: bool) -> Credit | None:
        """The ``credit`` to send at a grant point, if any; with the queue at its mark, withhold instead.

        Three quarters of a window per grant: one ``credit`` message per 6 frames (window 8)
        keeps the send syscalls down while the bot still has frames in flight when it arrives.
        """
        if queue_at_high_water:
            self.withheld = self.owed > 0
            return None
        return self._pay(last_seq, max(1, self.window * 3 // 4))

    def after_drain(self, last_seq: int) -> Credit | None:
        """After a trainer drain left the queue room: any owed credit, if it had been withheld."""
        if not self.withheld:
            return None
        self.withheld = False
        return self._pay(last_seq, 1)

    def _pay(self, last_seq: int, threshold: int) -> Credit | None:
        if self.owed < threshold:
            return None
        grant, self.owed = self.owed, 0
        self.available += grant
        # ack: the highest seq accepted, 0 before the first (docs/protocol.md §3.3: monitoring only).
        return Credit(grant=grant, ack=max(last_seq, 0))


def withheld_credit(sessions: Iterable[BotSession], queue_full: bool) -> Iterator[tuple[BotSession, Credit]]:
    """The credit to return after a trainer drain: to every bot whose credit was withheld, unless still full."""
    if queue_full:
        return
    for session in sessions:
        credit = session.credit.after_drain(session.last_seq)
        if credit is not None:
            yield session, credit
