"""``arena worker``'s run, from its plan: one learning bot that outlives its server's restarts.

Reads a :class:`~arena.commands.worker_plan.WorkerPlan` only. Two threads share a
:class:`RemoteWorker`: the bot thread plays the bot's matches, retrying an unreachable server with
backoff (:meth:`RemoteWorker._play_with_backoff`); the main thread watches it, says at once when the
server is lost and regained, prints a progress line every :data:`WORKER_PROGRESS_EVERY` seconds and
stops the bot at the budget or on SIGTERM/SIGINT (:meth:`RemoteWorker._watch`). What the bot thread
knows of its connection, the main thread reads through a :class:`ServerLink`.
"""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from bot_protocol.client import BlockingBotClient, HandshakeRejected

from ..bots.play import MatchLog, play_learning_bot
from .worker_plan import WorkerPlan

__all__ = ["WORKER_BACKOFF", "WORKER_PROGRESS_EVERY", "WORKER_STOP_GRACE", "RemoteWorker", "ServerLink", "run_worker"]

WORKER_BACKOFF = (1.0, 10.0)
"""Seconds before the first retry of an unreachable server, and the most between retries (doubling, jittered)."""
WORKER_PROGRESS_EVERY = 10.0
"""Seconds between progress lines of ``arena worker``."""
WORKER_STOP_GRACE = 15.0
"""Seconds ``arena worker`` waits for its bot to say bye after a stop; then it exits anyway."""
RETRYABLE = (OSError, TimeoutError, ConnectionError, ConnectionClosed, InvalidHandshake)
"""What an unreachable or vanished server raises: the worker waits and tries again."""


def run_worker(plan: WorkerPlan) -> int:
    """Play ``plan``'s bot until its budget or a signal; the exit code: 0 done, 1 it never reached its server or its
    bot failed, 2 a refusal that retrying cannot fix (a bad token, other sizes)."""
    _compile_engine(plan)
    worker = RemoteWorker(plan)
    print(plan.describe(), flush=True)
    with stop_on_signals(worker.stop):
        worker.run()
    return worker.finish()


def _compile_engine(plan: WorkerPlan) -> None:
    """Compile (or load) the numba engine and scripted bots before the budget's clock starts, as ``arena train`` does,
    and say where they are cached; nothing with ``--engine numpy``."""
    from .compile import compile_kernels

    # The population's kernel only for a worker that plays it (``drawn``, or ``drawn:...`` narrowed).
    drawn = any(o.partition(":")[0] == "drawn" for o in plan.spec.opponents)
    result = compile_kernels(ppo=False, tank=plan.spec.engine == "numba", drawn=drawn)
    if result is not None:
        print(f"arena worker: {result[0]}", flush=True)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` inside the block (the bot then says bye); the previous handlers come back after.

    Call from the main thread (Python handles signals there only).
    """
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: a handler not installed from Python, which cannot be put back
                signal.signal(sig, handler)


class ServerLink:
    """The worker's connection as its bot thread knows it, read by the main thread.

    The bot thread writes (:meth:`connected`, :meth:`lost`); the main thread reads. Each write is one
    attribute assignment, so a reader sees the old value or the new one, never half of either.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: BlockingBotClient | None = None
        """The connected client, once there is one (None again while the server cannot be reached)."""
        self.handshakes = 0
        """Handshakes done by the bot thread (counted here: a connection may not outlive one look at it)."""

    def connected(self, bot: BlockingBotClient) -> None:
        """``play_learning_bot``'s ``connected`` hook (the bot thread): note the client and say who the server made us."""
        self.client = bot
        self.handshakes += 1
        welcome = bot.client.welcome
        server_id = f" (the server's id: {welcome.bot_id!r})" if welcome is not None else ""
        print(f"arena worker: connected to {self.url} as {bot.config.name!r}{server_id}, "
              f"policy version {bot.policy.version}", flush=True)  # fmt: skip

    def lost(self) -> bool:
        """Forget the client (the bot thread, when the server cannot be reached); whether there was one."""
        had, self.client = self.client is not None, None
        return had

    @property
    def up(self) -> bool:
        client = self.client
        return client is not None and client.client.connected

    def seen(self) -> tuple[int, bool]:
        """(handshakes and the client's own reconnects, up): what the main thread compares between two looks."""
        client = self.client
        return self.handshakes + (client.stats.reconnects if client is not None else 0), self.up

    def changes(self, before: tuple[int, bool], now: tuple[int, bool]) -> list[str]:
        """The lines that say what happened between two looks (:meth:`seen`): reconnected, lost, both or neither."""
        lines = []
        if now[0] > before[0] and before[0] and (now[1] or not before[1]):
            lines.append(f"arena worker: reconnected to {self.url}")
        if not now[1] and (before[1] or now[0] > before[0]):  # up since the last look, down now
            lines.append(f"arena worker: lost the server at {self.url}; reconnecting with backoff")
        return lines


class RemoteWorker:
    """One ``arena worker``: its bot thread, the watch of it, and how it ended (see the module docstring)."""

    def __init__(self, plan: WorkerPlan) -> None:
        self.plan = plan
        self.log = MatchLog()
        self.stop = threading.Event()
        self.link = ServerLink(plan.url)
        self.failure: BaseException | None = None
        """Why the bot thread gave up (set before it sets ``stop``), or None."""
        self.started = time.monotonic()
        """When the worker started: its ``--minutes`` budget and the progress line's elapsed time count from here."""

    def run(self) -> None:
        """Start the bot thread and watch it until it ends, the budget is spent or ``stop`` is set."""
        thread = threading.Thread(target=self._play_with_backoff, name="worker-bot", daemon=True)
        thread.start()
        self._watch(thread)

    def _play_with_backoff(self) -> None:
        """The bot thread: play until stopped or ``--rounds`` is reached, each connection attempt with fresh games.

        An unreachable server is retried after a jittered delay that doubles up to :data:`WORKER_BACKOFF`'s
        most, and starts over once a connection was made; any other error ends the worker.
        """
        plan, delay, attempt = self.plan, WORKER_BACKOFF[0], 0
        while not self.stop.is_set() and (plan.spec.rounds is None or self.log.rounds < plan.spec.rounds):
            try:  # fresh games after a reconnect, still reproducible
                spec = replace(plan.spec, seed=plan.spec.seed + attempt)
                play_learning_bot(spec, self.stop, self.log, connected=self.link.connected)
            except HandshakeRejected as exc:  # a bad token or sizes: retrying would not help
                self._give_up(exc)
                return
            except RETRYABLE as exc:
                if self.link.lost():  # it was connected: the server went away, start the backoff over
                    delay = WORKER_BACKOFF[0]
                print(f"arena worker: cannot reach {plan.url} ({str(exc) or type(exc).__name__}); "
                      f"retrying in {delay:.0f} s", flush=True)  # fmt: skip
                self.stop.wait(delay * random.uniform(0.75, 1.0))
                delay = min(WORKER_BACKOFF[1], delay * 2)
            except BaseException as exc:  # reported by the main thread
                self._give_up(exc)
                return
            attempt += 1

    def _give_up(self, exc: BaseException) -> None:
        self.failure = exc
        self.stop.set()

    def _watch(self, thread: threading.Thread) -> None:
        """The main thread: say the link's changes, keep the budget, print progress, and let the bot say bye."""
        seen, last_line = (0, False), self.started
        while thread.is_alive():
            thread.join(0.25)
            now_seen = self.link.seen()
            for line in self.link.changes(seen, now_seen):
                print(line, flush=True)
            seen = now_seen
            now = time.monotonic()
            if self.plan.minutes is not None and now - self.started >= self.plan.minutes * 60:
                self.stop.set()
            if now - last_line >= WORKER_PROGRESS_EVERY:
                last_line = now
                print(self.progress_line(), flush=True)
            if self.stop.is_set():
                thread.join(WORKER_STOP_GRACE)  # the bot says bye; a reconnect in progress may not finish
                break

    def progress_line(self, final: bool = False) -> str:
        """The worker's state, rounds, recent win rate, policy version, ticks, reconnects and time, in one line."""
        log, client = self.log, self.link.client
        if final:
            state = "stopped:"
        elif self.link.up:
            state = "playing:"
        else:
            state = "lost the server, reconnecting:" if self.link.handshakes else "waiting for the server:"
        rate = f"{log.win_rate_last_100:.0%}" if log.rounds else "–"
        version = client.policy.version if client is not None else "–"
        reconnects = client.stats.reconnects if client is not None else 0
        return (
            f"arena worker: {state}  rounds={log.rounds}  win rate (last 100)={rate}  policy version={version}  "
            f"ticks={log.ticks:,}  reconnects={reconnects}  elapsed={time.monotonic() - self.started:.0f} s"
        )

    def finish(self) -> int:
        """Say how the worker ended (the last progress line, or the error) and return its exit code."""
        exc = self.failure
        if isinstance(exc, HandshakeRejected):
            print(f"arena worker: error: {self.plan.url}: {exc}", file=sys.stderr)
            return 2
        if exc is not None:
            print(f"arena worker: error: the bot failed: {exc!r}", file=sys.stderr)
            return 1
        print(self.progress_line(final=True), flush=True)
        if not self.link.handshakes and not self.log.ticks:
            print(f"arena worker: error: never reached {self.plan.url} ({self.plan.budget})", file=sys.stderr)
            return 1
        return 0
