"""The lock-guarded, byte-bounded hand-over from the event loop to the trainer thread.

What goes in is an :class:`Arrival`: one validated ``tr`` batch of one bot session (plain
numpy arrays over the frame's bytes, never tensors), or the marker that a session ended.
The event loop never blocks here: :meth:`TransitionQueue.put` takes the lock only to
append. The trainer swaps the whole list out in :meth:`drain` and works outside the lock.

Why whole batches and not per-agent segments: splitting each frame into per-agent pieces
on the loop was most of the loop's time; the trainer does it once per drain over many frames
instead (docs/architecture.md, "The life of one step", step 5).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bot_protocol import TransitionBatch

__all__ = ["OFF_POLICY_QUEUED_PUBLISHES", "ON_POLICY_QUEUED_UPDATES", "Arrival", "TransitionQueue"]


OFF_POLICY_QUEUED_PUBLISHES = 16
"""An off-policy agent's default bound: credit is withheld once this many publishes' worth of steps
(``agent.publish_steps``: 64 at TD3's defaults, so 1,024 steps) are queued. A bot far faster than the
trainer then waits for it, the update-to-data ratio the config states is the one the run gets, and the
bot acts with weights at most ~16 publishes old. Bounded only in bytes, a fast bot outran the trainer and
left much of its data untrained (docs/agents.md, "Pace: warm-up, update-to-data ratio, publishing")."""

ON_POLICY_QUEUED_UPDATES = 1
"""Updates' worth of steps an on-policy agent's queue holds before credit is withheld.

One: bots collect the next rollout while the trainer trains on this one, so a rollout is
trained about one version after it was acted. A deeper queue only ages the data (docs/architecture.md,
"Queue depth for an on-policy learner"). Off-policy agents have a bound of their own
(:data:`OFF_POLICY_QUEUED_PUBLISHES`): for them age does not matter (a replay buffer takes any
policy's data), the update-to-data ratio does.
"""


@dataclass(frozen=True, eq=False)
class Arrival:
    """One session's next batch (``batch``), or its end (``batch is None``)."""

    session: str
    """Session id: unique per connection."""
    bot: str
    terms: bool
    """True when the session sends reward terms (else scalar rewards)."""
    index: int
    """0, 1, 2, … per session, so the trainer notices a batch dropped in between."""
    batch: TransitionBatch | None

    @property
    def nbytes(self) -> int:
        return self.batch.nbytes if self.batch is not None else 0

    @property
    def steps(self) -> int:
        return self.batch.n if self.batch is not None else 0


class TransitionQueue:
    """FIFO of arrivals bounded by payload bytes.

    Policy when full: bots are throttled by credit — the server stops returning credit
    once the queue reaches its high-water mark (half the capacity), leaving the other
    half for frames bots already had credit for. If those still push it past capacity,
    the **oldest** batches are dropped and passed to ``on_dropped`` so they are counted:
    nothing is dropped silently and the event loop never waits. End-of-session markers
    are never dropped.
    """

    def __init__(
        self, max_bytes: int, on_dropped: Callable[[Arrival], None] | None = None, credit_steps: int | None = None
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if credit_steps is not None and credit_steps < 1:
            raise ValueError(f"credit_steps must be >= 1 or None, got {credit_steps}")
        self.max_bytes = max_bytes
        self.credit_steps = credit_steps
        """Steps at which credit is withheld too, whatever their bytes (``None``: bytes only).

        An on-policy learner's queue is a staleness bound before it is a memory bound: every
        rollout's worth queued beyond the one being collected is trained a version later."""
        self._on_dropped = on_dropped
        self._arrivals_lock = threading.Lock()  # guards _arrivals, _bytes and _steps, nothing else
        self._arrivals: deque[Arrival] = deque()
        self._bytes = 0
        self._steps = 0
        self._nonempty = threading.Event()

    @property
    def nbytes(self) -> int:
        return self._bytes

    @property
    def steps(self) -> int:
        return self._steps

    def __len__(self) -> int:
        return len(self._arrivals)

    @property
    def high_water(self) -> int:
        return self.max_bytes // 2

    @property
    def full(self) -> bool:
        """At or above the high-water mark: time to withhold credit."""
        return self.at_high_water()

    def at_high_water(self, incoming_bytes: int = 0, incoming_steps: int = 0) -> bool:
        """Whether the queue, plus frames already received and about to be put, reaches the high-water mark
        (half of ``max_bytes``, or ``credit_steps`` steps)."""
        if self._bytes + incoming_bytes >= self.high_water:
            return True
        return self.credit_steps is not None and self._steps + incoming_steps >= self.credit_steps

    def put(self, arrival: Arrival) -> bool:
        """Append one arrival (never blocks); returns True while below the high-water mark."""
        dropped: list[Arrival] = []
        with self._arrivals_lock:
            self._arrivals.append(arrival)
            self._bytes += arrival.nbytes
            self._steps += arrival.steps
            if self._bytes > self.max_bytes:
                dropped = self._trim()
            room = not self.at_high_water()
            self._nonempty.set()
        if self._on_dropped is not None:
            for old in dropped:  # callbacks run outside the lock
                self._on_dropped(old)
        return room

    def _trim(self) -> list[Arrival]:
        """Drop the oldest batches (never end markers, never the newest) until within capacity."""
        assert self._arrivals_lock.locked(), "requires holding _arrivals_lock"
        dropped: list[Arrival] = []
        kept: deque[Arrival] = deque()
        while len(self._arrivals) > 1 and self._bytes > self.max_bytes:
            old = self._arrivals.popleft()
            if old.batch is None:
                kept.append(old)
                continue
            self._bytes -= old.nbytes
            self._steps -= old.steps
            dropped.append(old)
        kept.extend(self._arrivals)
        self._arrivals = kept
        return dropped

    def drain(self, max_steps: int | None = None) -> list[Arrival]:
        """Take queued arrivals, oldest first: all of them, or whole arrivals up to ``max_steps``.

        A limited drain takes at least one arrival (a batch larger than ``max_steps`` is never split).
        """
        with self._arrivals_lock:
            if max_steps is None or self._steps <= max_steps:
                taken = list(self._arrivals)
                self._arrivals.clear()
                self._bytes = 0
                self._steps = 0
            else:
                taken = []
                steps = 0
                while self._arrivals and (not taken or steps + self._arrivals[0].steps <= max_steps):
                    arrival = self._arrivals.popleft()
                    taken.append(arrival)
                    steps += arrival.steps
                    self._bytes -= arrival.nbytes
                    self._steps -= arrival.steps
            if not self._arrivals:
                self._nonempty.clear()
        return taken

    def wait(self, timeout: float) -> bool:
        """Block the *trainer* until something is queued or ``timeout`` seconds pass."""
        return self._nonempty.wait(timeout)
