"""Event-loop lag: how late a periodic wake-up fires. A GIL-holding trainer shows up here first.

One long C call holding the GIL in the trainer can stall the loop for a long time
(docs/reliability.md, M13); keepalive pongs wait behind such stalls, so the lag is
sampled continuously and exported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

import numpy as np

__all__ = ["LoopLagMonitor"]

logger = logging.getLogger(__name__)


class LoopLagMonitor:
    """Sleeps ``interval`` seconds in a loop and records how late each wake-up was."""

    def __init__(self, interval: float = 0.02, warn_after: float = 0.1, window: int = 3000) -> None:
        self.interval = interval
        self.warn_after = warn_after
        self.samples: deque[float] = deque(maxlen=window)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def reset(self) -> None:
        self.samples.clear()

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.perf_counter() - before - self.interval)
            self.samples.append(lag)
            if lag > self.warn_after:
                logger.warning("event loop stalled for %.0f ms", lag * 1000)

    def percentiles(self) -> dict[str, float]:
        """p50, p99 and max lag in seconds over the window (zeros before the first sample)."""
        if not self.samples:
            return {"p50": 0.0, "p99": 0.0, "max": 0.0}
        values = np.fromiter(self.samples, dtype=np.float64)
        p50, p99 = np.percentile(values, [50, 99])
        return {"p50": float(p50), "p99": float(p99), "max": float(values.max())}
