"""What the dashboard's observers are sent: the sample history, the update rows, the bot table,
the newest match frame, and each as the JSON text message that carries it.

Why apart from the observer server (:mod:`server.dashboard`): this is the read model and the
wire format, with no socket in it. It turns one :class:`~server.stats.ServerStats` snapshot
into one chart point, and encodes a message once per cursor pair (stats) or per frame and
variant (frames), however many observers want it; the server decides *when* to sample and
whom to send what. The messages (``arena.observe.v1``: ``hello``, ``stats``, ``frame``) are
specified in docs/protocol.md, Appendix C.

Threads: :meth:`ObserverFeed.publish_stats` (one append under a lock) and
:meth:`ObserverFeed.publish_frame` (one reference assignment, latest wins) may run on any
thread; everything else runs on the event loop.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from websockets.typing import Subprotocol

from ..stats import BotRates, ServerStats
from .config import DashboardConfig, DashboardHost

__all__ = ["SUBPROTOCOL", "Cursors", "Frame", "ObserverFeed"]

# The dashboard's one logger name: a logging configuration for "server.dashboard" covers
# this module's warning too.
logger = logging.getLogger("server.dashboard")

SUBPROTOCOL = Subprotocol("arena.observe.v1")
"""The observer websocket's subprotocol; a client must offer it (HTTP 400 otherwise)."""

_MAX_STAT_KEYS = 64
"""Keys kept per trainer stats row (a runaway hook cannot grow every message)."""
_ROWS_PER_MESSAGE = 200
"""Most samples (and most update rows) in one stats message. A new observer's replay of the
whole history goes out in chunks, each encoded separately with the loop free in between:
encoded at once, a full history is a long loop stall."""

Frame = tuple[int, Mapping[str, Any], Mapping[str, Any]]
"""(seq, header, frame) of one published match frame, replaced whole: one reference assignment, atomic."""


class Cursors(NamedTuple):
    """The ``i`` of the next sample and of the next update row an observer has not been sent.

    A pair rather than two loose ints because it is the key of the encoded-message cache:
    observers at the same cursors share one encoding.
    """

    sample: int
    update: int


class ObserverFeed:
    """The state behind every observer message, and its encoding.

    Args:
        host: the server shown; :meth:`take_sample` reads one snapshot of it.
        config: the history lengths, the bot-table size, the rate window, the frame limits and
            the timing the ``hello`` announces.
    """

    def __init__(self, host: DashboardHost, config: DashboardConfig) -> None:
        self.host = host
        self.config = config
        self.started = time.monotonic()
        """The dashboard's clock origin: every ``t`` in a message is seconds since this."""
        # Loop-thread state: samples, update rows, per-bot rates.
        self._samples: deque[dict[str, Any]] = deque(maxlen=config.history)
        self._updates: deque[dict[str, Any]] = deque(maxlen=config.update_history)
        self._sample_ids = itertools.count()
        self._update_ids = itertools.count()
        self._next_sample = 0
        self._next_update = 0
        self._bots: list[dict[str, Any]] = []
        self._health: dict[str, Any] = {}
        self._agent = ""
        """The learner's name, from the newest snapshot (the observers' ``hello`` carries it)."""
        self._bot_rates = BotRates(config.rate_window, self.started)
        self._last_update_seen = -1.0
        self._stats_cache: dict[Cursors, tuple[str, Cursors]] = {}
        """Encoded stats message and the cursors after it, by the cursors before it (cleared each sample)."""
        self._frame_cache: dict[tuple[int, bool], str | None] = {}
        self._oversize_logged = False
        # Cross-thread hand-over.
        self._inbox_lock = threading.Lock()  # guards _inbox and _stats_published, nothing else
        self._inbox: deque[dict[str, Any]] = deque(maxlen=config.update_history)
        self._stats_published = False
        """Set by the first publish_stats: from then on the trainer's last_metrics is not polled."""
        self._frame_ids = itertools.count()
        self.latest_frame: Frame | None = None
        """The newest published frame, replaced whole by :meth:`publish_frame` (read on the loop)."""
        self.last_frame_at = -math.inf
        """``time.monotonic()`` of the newest :meth:`publish_frame` (``-inf`` before any)."""

    # ── other threads → feed ─────────────────────────────────────────────────

    def publish_stats(self, stats: Mapping[str, Any]) -> None:
        """Record one trainer update's stats (any thread). See :meth:`server.dashboard.Dashboard.publish_stats`."""
        row: dict[str, Any] = {"t": round(time.monotonic() - self.started, 3)}
        for key, value in itertools.islice(stats.items(), _MAX_STAT_KEYS):
            if isinstance(value, int | float) and not isinstance(value, bool):
                row[str(key)[:64]] = _finite(value)
        with self._inbox_lock:
            self._inbox.append(row)
            self._stats_published = True

    def publish_frame(self, header: Mapping[str, Any], frame: Mapping[str, Any]) -> None:
        """Offer the newest frame (any thread; never blocks). See :meth:`server.dashboard.Dashboard.publish_frame`."""
        self.latest_frame = (next(self._frame_ids), header, frame)
        self.last_frame_at = time.monotonic()

    # ── sampling (loop thread) ───────────────────────────────────────────────

    def take_sample(self, observers: int) -> None:
        """One chart point from one server snapshot, plus the bot table and any new update rows.

        ``observers`` (the open observer connections) is charted with the rest; the feed does
        not hold the connections, so the caller says how many there are.
        """
        stats = self.host.stats(bots=self.config.max_bots_listed)
        now = stats.taken_at
        lag, policy_lag = stats.loop_lag, stats.policy_lag
        i = next(self._sample_ids)
        self._samples.append(
            {
                "i": i,
                "t": round(now - self.started, 3),
                "transitions_per_s": round(stats.received_per_s, 1),
                "trained_per_s": round(stats.trained_per_s, 1),
                "transitions_received": stats.transitions_received,
                "policy_version": stats.policy.version,
                "generation": stats.policy.generation,
                "policy_lag_min": policy_lag.min,
                "policy_lag_avg": policy_lag.avg,
                "policy_lag_max": policy_lag.max,
                "loop_lag_p50_ms": _ms(lag.p50) if lag is not None else None,  # None only off the loop thread
                "loop_lag_p99_ms": _ms(lag.p99) if lag is not None else None,
                "loop_lag_max_ms": _ms(lag.max) if lag is not None else None,
                "connected_bots": stats.connected_bots,
                "queue_steps": stats.queue_steps,
                "observers": observers,
            }
        )
        self._next_sample = i + 1
        for row in self._drain_updates(stats):
            row["i"] = j = next(self._update_ids)
            self._updates.append(row)
            self._next_update = j + 1
        self._bots = self._bot_table(stats)
        healthy, self._health = stats.health()
        self._health["healthy"] = healthy
        self._agent = stats.agent
        self._stats_cache.clear()

    def _drain_updates(self, stats: ServerStats) -> list[dict[str, Any]]:
        with self._inbox_lock:
            rows, published = list(self._inbox), self._stats_published
            self._inbox.clear()
        if published:
            return rows
        # Nobody calls publish_stats (a bare TrainingServer): take the trainer's newest update
        # from the snapshot instead (the trainer never mutates a stats dict after storing it).
        last = stats.last_update
        updates = last.get("updates", -1.0)
        if updates == self._last_update_seen:
            return []
        self._last_update_seen = updates
        row: dict[str, Any] = {"t": round(stats.taken_at - self.started, 3)}
        for key, value in itertools.islice(last.items(), _MAX_STAT_KEYS):
            row[key] = _finite(value)
        return [row]

    def _bot_table(self, stats: ServerStats) -> list[dict[str, Any]]:
        """One row per bot in the snapshot; its rate from its steps between samples (:class:`~server.stats.BotRates`)."""
        now = stats.taken_at
        rates = self._bot_rates.update(stats)
        return [
            {
                "id": bot.bot_id,
                "name": bot.name,
                "client": bot.client[:60],
                "agents": bot.agents,
                "reward": bot.reward,
                "generation": bot.policy.generation,
                "version": bot.policy.version,
                "version_is": bot.policy_is,
                "steps": bot.steps,
                "transitions_per_s": round(rates[bot.bot_id], 1),
                "connected_s": round(now - bot.connected_at, 1),
                "last_seen_s": round(now - bot.last_frame_at, 1),
                "rank": bot.rank,
            }
            for bot in stats.bots
        ]

    # ── cursors and messages (loop thread) ───────────────────────────────────

    def start_cursors(self) -> Cursors:
        """Where a new observer starts: the oldest row still kept, so it is replayed the whole history."""
        return Cursors(
            self._samples[0]["i"] if self._samples else self._next_sample,
            self._updates[0]["i"] if self._updates else self._next_update,
        )

    def behind(self, cursors: Cursors) -> bool:
        """Whether rows past ``cursors`` remain (a replay longer than one message)."""
        return cursors.sample < self._next_sample or cursors.update < self._next_update

    def hello_message(self) -> str:
        """The ``hello`` a new observer gets first."""
        hello = {
            "type": "hello",
            "protocol": SUBPROTOCOL,
            "agent": self._agent,
            "push_interval": self.config.push_interval,
            "frame_fps": self.config.frame_fps,
            "history": self.config.history,
        }
        return json.dumps(hello)

    def stats_message(self, cursors: Cursors) -> tuple[str, Cursors]:
        """The next rows after ``cursors``, and the cursors after them (encoded once per cursor pair per sample)."""
        cached = self._stats_cache.get(cursors)
        if cached is None:
            samples = _rows_from(self._samples, cursors.sample)
            updates = _rows_from(self._updates, cursors.update)
            message = {
                "type": "stats",
                "t": round(time.monotonic() - self.started, 3),
                "samples": samples,
                "updates": updates,
                "bots": self._bots,
                "health": self._health,
            }
            text = json.dumps(message, separators=(",", ":"), allow_nan=False)
            after = Cursors(
                samples[-1]["i"] + 1 if samples else cursors.sample,
                updates[-1]["i"] + 1 if updates else cursors.update,
            )
            cached = self._stats_cache[cursors] = (text, after)
        return cached

    def frame_message(self, latest: Frame, with_header: bool) -> str | None:
        """The frame message (encoded once per frame and variant); None if it cannot be sent."""
        seq, header, frame = latest
        if self._frame_cache and next(iter(self._frame_cache))[0] != seq:
            self._frame_cache.clear()
        key = (seq, with_header)
        if key in self._frame_cache:
            return self._frame_cache[key]
        message: dict[str, Any] = {"type": "frame", "seq": seq, "frame": frame}
        if with_header:
            message["header"] = header
        text: str | None
        try:
            text = json.dumps(message, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:  # not JSON (NaN, numpy scalars): the publisher's bug
            text = None
            self._log_bad_frame(f"frame {seq} is not plain JSON ({exc})")
        if text is not None and len(text) > self.config.max_frame_bytes:
            text = None
            self._log_bad_frame(f"frame {seq} encodes to more than max_frame_bytes={self.config.max_frame_bytes}")
        self._frame_cache[key] = text
        return text

    def _log_bad_frame(self, why: str) -> None:
        if not self._oversize_logged:
            self._oversize_logged = True
            logger.warning("dropping match frames: %s (logged once)", why)


def _rows_from(rows: deque[dict[str, Any]], first: int, limit: int = _ROWS_PER_MESSAGE) -> list[dict[str, Any]]:
    """Up to ``limit`` rows from the one whose ``i`` is ``first`` (``rows`` holds consecutive ``i``)."""
    if not rows:
        return []
    start = max(0, first - rows[0]["i"])
    return list(itertools.islice(rows, start, start + limit))


def _ms(seconds: float) -> float:
    """Seconds as milliseconds, to the charts' resolution."""
    return round(seconds * 1000, 2)


def _finite(value: Any) -> float | None:
    """A stat as JSON can carry it: 6 significant digits (the charts show fewer), ``None`` if not finite."""
    number = float(value)
    return float(f"{number:.6g}") if math.isfinite(number) else None
