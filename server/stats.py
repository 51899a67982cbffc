"""One read model of a running server: :class:`ServerStats`, every figure a view of it shows, read at once.

Why one: ``/healthz``, the ``/metrics`` gauges, the dashboard, the TensorBoard rows, the
progress display and ``summary.json`` each ask for one reading, ``TrainingServer.stats()``,
and show what they need of it, so a figure is named and computed once for every view
(docs/architecture.md, "One read model").

Threads: a reading may be taken on any thread and never waits on the trainer (every figure is
a lock-guarded counter, one attribute read or a ``len()``; ``TrainingServer.accounting()`` is
the exact, locked read). Two exceptions: :attr:`ServerStats.loop_lag` is ``None`` when read
off the loop thread, and the per-bot rows (``bots=N``) must be asked for on the loop thread.

Rates: :class:`RateWindow` is the one place a count becomes a per-second rate, so every view
shows the same ``received_per_s`` and ``trained_per_s``; :class:`BotRates` is the
dashboard's per-bot smoothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from bot_protocol import PolicyId

__all__ = [
    "DEFAULT_RATE_WINDOW",
    "BotRates",
    "BotStats",
    "LoopLag",
    "PolicyLag",
    "RateWindow",
    "ServerStats",
    "StatsSource",
]

DEFAULT_RATE_WINDOW = 2.0
"""Seconds the server's rates average over (``DashboardConfig.rate_window``'s default): trained
steps arrive a whole update at a time, so a rate between two close readings would be all spikes."""


@dataclass(frozen=True)
class LoopLag:
    """Event-loop wake-up lateness over the monitor's recent window, in seconds."""

    p50: float
    p99: float
    max: float

    def items(self) -> Iterator[tuple[str, float]]:
        """``("p50", s), ("p99", s), ("max", s)``: the ``stat`` label values of ``loop_lag_seconds``, in that order."""
        yield from (("p50", self.p50), ("p99", self.p99), ("max", self.max))


@dataclass(frozen=True)
class PolicyLag:
    """Versions between the acting and the trained policy in the last update (``None`` before the first)."""

    min: float | None = None
    avg: float | None = None
    max: float | None = None


_NO_POLICY = PolicyId(0, 0)
_NO_POLICY_LAG = PolicyLag()


@dataclass(frozen=True)
class BotStats:
    """One connected bot, as the dashboard's bot table lists it."""

    bot_id: str
    name: str
    client: str
    agents: int
    reward: str
    policy: PolicyId
    """The policy that acted in its newest accepted batch; before its first batch, the newest one handed to its socket."""
    policy_is: str
    """``"acting"`` or ``"delivered"``: which of the two :attr:`policy` is."""
    steps: int
    connected_at: float
    last_frame_at: float
    """``time.monotonic()`` of its newest accepted batch."""
    rank: int | None = None
    """The learner rank it plays for (``arena serve --distributed``); None when the learner is alone."""

    def to_view(self, now: float) -> dict[str, Any]:
        """Plain values for another process (rank 0's dashboard): times as ages, as clocks of other hosts differ."""
        return {"bot_id": self.bot_id, "name": self.name, "client": self.client, "agents": self.agents,
                "reward": self.reward, "policy": list(self.policy), "policy_is": self.policy_is, "steps": self.steps,
                "connected_for": now - self.connected_at, "idle_for": now - self.last_frame_at,
                "rank": self.rank}  # fmt: skip

    @classmethod
    def from_view(cls, view: Mapping[str, Any], now: float) -> BotStats:
        """A row :meth:`to_view` wrote on another rank; its bot id is prefixed with that rank (``r1/…``),
        as each rank numbers its bots on its own."""
        return cls(bot_id=f"r{view['rank']}/{view['bot_id']}", name=str(view["name"]), client=str(view["client"]),
                   agents=int(view["agents"]), reward=str(view["reward"]), policy=PolicyId(*view["policy"]),
                   policy_is=str(view["policy_is"]), steps=int(view["steps"]),
                   connected_at=now - float(view["connected_for"]), last_frame_at=now - float(view["idle_for"]),
                   rank=int(view["rank"]))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ServerStats:
    """Every figure the server's views show, read at one moment (see the module docstring for threads).

    Every field has a default, so a view's tests can build the reading they need; a real one
    comes from ``TrainingServer.stats()``, which reads its own parts (and its trainer's
    :meth:`~server.trainer.Trainer.reading`, its sessions' :meth:`~server.session.BotSession.stats`).
    """

    taken_at: float = 0.0
    """``time.monotonic()`` when it was read (ages and rates are relative to it)."""
    agent: str = ""
    """The learner's name (``ppo``, ``td3``…)."""
    policy: PolicyId = _NO_POLICY
    """The newest policy published to bots (what ``welcome`` carries)."""
    trainer_policy: PolicyId = _NO_POLICY
    """The trainer's own policy: ahead of :attr:`policy` by the one hop to the loop, or equal."""
    connected_bots: int = 0
    updates: int = 0
    gradient_steps: int = 0
    """Minibatch steps taken or skipped, over all updates."""
    update_seconds_total: float = 0.0
    """Wall time spent inside the agent's updates."""
    steps_trained: int = 0
    """Transitions the learner has consumed, checkpoints included (a resumed run continues it): the step axis."""
    transitions_received: int = 0
    """Steps accepted from bots by this server (counters start at 0 with the process)."""
    transitions_trained: int = 0
    """Steps consumed by an update of this server."""
    dropped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Accepted steps not trained on, by reason (``stale``, ``queue_full``…), in the order they first happened."""
    queue_arrivals: int = 0
    """Arrivals waiting in the transition queue (``queue_segments`` in /metrics, ``queue_depth`` in TensorBoard)."""
    queue_steps: int = 0
    queue_bytes: int = 0
    received_per_s: float = 0.0
    """Steps accepted per second over the server's :class:`RateWindow`."""
    trained_per_s: float = 0.0
    """Steps trained per second over the same window."""
    loop_lag: LoopLag | None = None
    """``None`` when the window changed under a reader on another thread (see the module docstring)."""
    policy_lag: PolicyLag = _NO_POLICY_LAG
    trainer_alive: bool = False
    """The trainer thread runs."""
    trainer_failed: bool = False
    """The trainer gave up (crashes beyond its restart quota)."""
    trainer_heartbeat_age: float = 0.0
    """Seconds since the trainer last began a unit of work."""
    last_update: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """The newest update's stats row (the trainer never changes one after storing it)."""
    bots: tuple[BotStats, ...] = ()
    """The first connected bots, longest-connected first (only as many as asked for)."""
    rank: int | None = None
    """This learner's rank among ``world_size`` (``arena serve --distributed``); None when alone."""
    world_size: int | None = None

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def trainer_ok(self) -> bool:
        """Alive and not failed: what ``/healthz`` calls healthy."""
        return self.trainer_alive and not self.trainer_failed

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, the ``/healthz`` JSON body): both ports answer it, the dashboard shows it."""
        healthy = self.trainer_ok
        return healthy, {
            "status": "ok" if healthy else "degraded",
            "trainer_alive": healthy,
            "trainer_heartbeat_age_s": round(self.trainer_heartbeat_age, 3),
            "generation": self.policy.generation,
            "policy_version": self.policy.version,
            "connected_bots": self.connected_bots,
            "agent": self.agent,
            **({"rank": self.rank, "world_size": self.world_size} if self.rank is not None else {}),
        }


class StatsSource(Protocol):
    """Anything that hands out readings (a ``TrainingServer``): what the views depend on instead of the server."""

    def stats(self, bots: int = 0) -> ServerStats: ...


class RateWindow:
    """Per-second rates of cumulative counts over about the last ``window`` seconds (any thread).

    The rule is the dashboard's: the window starts at the newest reading at least ``window``
    seconds old (or the oldest kept, early on), so a rate covers whole updates and never
    jumps to 0 between two readings taken close together. Readers on several threads share
    one window: clock and counts are read under its lock, so readings stay in order. A
    reading closer than ``window / 32`` to the previous one is used but not kept, so a flood
    of callers (health probes) cannot grow it.

    Args:
        window: seconds (> 0).
        start: a first reading ``(clock(), counts)``, e.g. zeros when counting begins.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        window: float,
        start: tuple[float, Sequence[float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (math.isfinite(window) and window > 0):
            raise ValueError(f"window must be a finite number of seconds > 0, got {window!r}")
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()  # guards _points, nothing else
        self._points: deque[tuple[float, tuple[float, ...]]] = deque()
        if start is not None:
            self._points.append((start[0], tuple(start[1])))

    def measure(self, read: Callable[[], Sequence[float]]) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
        """``(now, counts, per-second rates)``, with ``counts = read()`` taken now (``read`` must not block)."""
        with self._lock:
            now = self._clock()
            counts = tuple(read())
            points = self._points
            if not points or now - points[-1][0] >= self.window / 32:
                points.append((now, counts))
            while len(points) > 2 and points[1][0] <= now - self.window:
                points.popleft()  # keep the newest point at least window old: the window's start
            since, before = points[0]
        span = max(now - since, 1e-6)
        return now, counts, tuple((c - b) / span for c, b in zip(counts, before, strict=True))


class BotRates:
    """Each bot's steps/s, smoothed: an exponential moving average over about ``window`` seconds.

    Fed one reading with per-bot rows per call (the dashboard's samples); a bot's rate moves
    toward its steps since the previous call over the time between the two.
    """

    def __init__(self, window: float, started: float) -> None:
        self.window = window
        self._last = started
        self._steps: dict[str, tuple[int, float]] = {}
        """bot_id → (steps at the previous call, smoothed steps/s)."""

    def update(self, stats: ServerStats) -> dict[str, float]:
        """bot_id → steps/s for every bot in ``stats.bots`` (bots gone since are forgotten)."""
        now = stats.taken_at
        dt = max(now - self._last, 1e-6)
        self._last = now
        smoothing = 1.0 - math.exp(-dt / self.window)
        previous, self._steps = self._steps, {}
        rates = {}
        for bot in stats.bots:
            before, rate = previous.get(bot.bot_id, (bot.steps, 0.0))
            rate += ((bot.steps - before) / dt - rate) * smoothing
            self._steps[bot.bot_id] = (bot.steps, rate)
            rates[bot.bot_id] = rate
        return rates
