"""The lock-guarded, byte-bounded hand-over from the event loop to the trainer thread.

Only plain-numpy :class:`~agents.common.Segment` objects go in. The event loop never
blocks here: :meth:`TransitionQueue.put` takes the lock only to append, and reports
whether the queue has room so the session knows whether to return credit now or
later. The trainer swaps the whole list out in :meth:`drain` and works outside the lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from agents.common import Segment

__all__ = ["TransitionQueue"]


class TransitionQueue:
    """FIFO of segments bounded by payload bytes.

    Policy when full: bots are throttled by credit — the server stops returning credit
    once the queue reaches its high-water mark (half the capacity), leaving the other
    half for frames bots already had credit for. If those still push it past capacity,
    the **oldest** segments are dropped and passed to ``on_dropped`` so they are counted:
    nothing is dropped silently and the event loop never waits.
    """

    def __init__(self, max_bytes: int, on_dropped: Callable[[Segment], None] | None = None) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self._on_dropped = on_dropped
        self._segments_lock = threading.Lock()  # guards _segments, _bytes and _steps, nothing else
        self._segments: deque[Segment] = deque()
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
        return len(self._segments)

    @property
    def high_water(self) -> int:
        return self.max_bytes // 2

    @property
    def full(self) -> bool:
        """At or above the high-water mark: time to withhold credit."""
        return self._bytes >= self.high_water

    def put(self, segments: Iterable[Segment]) -> bool:
        """Append segments (never blocks); returns True while below the high-water mark."""
        dropped: list[Segment] = []
        with self._segments_lock:
            for segment in segments:
                self._segments.append(segment)
                self._bytes += segment.nbytes
                self._steps += segment.steps
            while self._bytes > self.max_bytes and len(self._segments) > 1:
                old = self._segments.popleft()
                self._bytes -= old.nbytes
                self._steps -= old.steps
                dropped.append(old)
            room = self._bytes < self.high_water
            if self._segments:
                self._nonempty.set()
        for old in dropped:  # callbacks run outside the lock
            if self._on_dropped is not None:
                self._on_dropped(old)
        return room

    def drain(self) -> list[Segment]:
        """Take every queued segment (oldest first), leaving the queue empty."""
        with self._segments_lock:
            taken = list(self._segments)
            self._segments.clear()
            self._bytes = 0
            self._steps = 0
            self._nonempty.clear()
        return taken

    def wait(self, timeout: float) -> bool:
        """Block the *trainer* until something is queued or ``timeout`` seconds pass."""
        return self._nonempty.wait(timeout)
