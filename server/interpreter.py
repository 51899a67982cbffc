"""Process-wide interpreter settings that serve the event loop's latency while a server runs.

Why each helps is in docs/architecture.md, "Threads and locks" (the 256-bot soak, L2). Both
are put back when the server closes, so a program that embeds a server (tests, a notebook)
gets its interpreter back as it was.
"""

from __future__ import annotations

import gc
import sys

__all__ = ["InterpreterTuning"]


class InterpreterTuning:
    """Freeze the collector and shorten the GIL switch interval; :meth:`restore` undoes both.

    Everything alive at :meth:`apply` (torch, numpy, the agent and its networks) lives as long
    as the server: frozen, the collector never scans it again, where every full collection of
    it would stall the loop (docs/architecture.md, "Threads and locks"). Objects that die while
    frozen wait for :meth:`restore` to be collected.

    Args:
        switch_interval: ``sys.setswitchinterval`` while applied (``None`` leaves it alone):
            each time the loop thread returns from a socket call it must win the GIL back
            from a busy trainer thread, waiting up to this long.
    """

    def __init__(self, switch_interval: float | None) -> None:
        self.switch_interval = switch_interval
        self._saved: tuple[float, bool] | None = None
        """(switch interval, whether this object froze the collector) to restore."""

    def apply(self) -> None:
        self._saved = (sys.getswitchinterval(), gc.get_freeze_count() == 0)
        if self._saved[1]:
            gc.freeze()
        if self.switch_interval is not None:
            sys.setswitchinterval(self.switch_interval)

    def restore(self) -> None:
        """Put back what :meth:`apply` changed (idempotent; nothing if it never ran)."""
        if self._saved is None:
            return
        switch_interval, froze = self._saved
        self._saved = None
        sys.setswitchinterval(switch_interval)
        if froze:
            gc.unfreeze()
