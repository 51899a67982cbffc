"""``arena worker``: a learning bot process for a remote ``arena serve`` (split from ``arena.cli``).

It plays tank matches as one websocket bot, retries an unreachable server with backoff, says at
once when it loses and regains the server, and stops at its budget or on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import replace

__all__ = ["WORKER_BACKOFF", "WORKER_PROGRESS_EVERY", "WORKER_STOP_GRACE", "run_worker"]


def run_worker(args: argparse.Namespace) -> int:
    """``arena worker``: exit 0 at the budget or on a signal, 1 if it never reached its server or its bot failed,
    2 on a refusal that retrying cannot fix."""
    import random
    import socket

    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    from bot_protocol.client import BlockingBotClient, ClientConfig, HandshakeRejected

    from ..games.tank.actions import ACT_DIM
    from ..games.tank.observation import OBS_DIM
    from .play import MatchLog, play_learning_bot
    from .spec import LearningBotSpec

    name = args.name or f"worker-{socket.gethostname()}"
    ClientConfig(args.url, name, OBS_DIM, ACT_DIM, n_agents=args.matches, token=args.token)  # bad URL: one line now
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    opponents = args.opponent or ["sitting"]
    spec = LearningBotSpec(
        args.url, tuple(opponents), args.matches, args.ticks_per_round, args.token, seed, name, rounds=args.rounds
    )
    log = MatchLog()
    stop = threading.Event()
    client: list[BlockingBotClient] = []  # the connected client, once there is one (read by the progress line)
    failure: list[BaseException] = []
    retryable = (OSError, TimeoutError, ConnectionError, ConnectionClosed, InvalidHandshake)

    connections = [0]  # handshakes done by the play thread (counted here: a connection may not outlive one poll)

    def connected(bot: BlockingBotClient) -> None:
        client[:] = [bot]
        connections[0] += 1
        welcome = bot.client.welcome
        server_id = f" (the server's id: {welcome.bot_id!r})" if welcome is not None else ""
        print(f"arena worker: connected to {args.url} as {name!r}{server_id}, policy version {bot.policy.version}", flush=True)

    def play() -> None:
        delay, attempt = WORKER_BACKOFF[0], 0
        while not stop.is_set() and (args.rounds is None or log.rounds < args.rounds):
            try:
                # fresh games after a reconnect, still reproducible
                play_learning_bot(replace(spec, seed=seed + attempt), stop, log, connected=connected)
            except HandshakeRejected as exc:  # bad token or sizes: retrying would not help
                failure.append(exc)
                stop.set()
                return
            except retryable as exc:
                if client:  # it was connected: the server went away, start the backoff over
                    delay = WORKER_BACKOFF[0]
                client.clear()
                print(
                    f"arena worker: cannot reach {args.url} ({str(exc) or type(exc).__name__}); retrying in {delay:.0f} s",
                    flush=True,
                )
                stop.wait(delay * random.uniform(0.75, 1.0))
                delay = min(WORKER_BACKOFF[1], delay * 2)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)
                stop.set()
                return
            attempt += 1

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    budget = f"{args.minutes:g} min" if args.minutes else f"{args.rounds} rounds" if args.rounds else "until stopped"
    print(
        f"arena worker: {name!r} vs {', '.join(opponents)}, {args.matches} matches, seed {seed}, {budget}; server {args.url}",
        flush=True,
    )
    started = time.monotonic()
    bot_thread = threading.Thread(target=play, name="worker-bot", daemon=True)
    bot_thread.start()
    last_line = started

    seen = (0, False)  # (handshakes, connection up) as of the last check; the client also reconnects by itself

    def up() -> bool:
        return bool(client) and client[0].client.connected

    def progress(final: bool = False) -> str:
        rate = f"{log.win_rate_last_100:.0%}" if log.rounds else "–"
        version = client[0].policy.version if client else "–"
        reconnects = client[0].stats.reconnects if client else 0
        if final:
            state = "stopped:"
        elif up():
            state = "playing:"
        else:
            state = "lost the server, reconnecting:" if connections[0] else "waiting for the server:"
        return (
            f"arena worker: {state}  rounds={log.rounds}  win rate (last 100)={rate}  policy version={version}  "
            f"ticks={log.ticks:,}  reconnects={reconnects}  elapsed={time.monotonic() - started:.0f} s"
        )

    while bot_thread.is_alive():
        bot_thread.join(0.25)
        now = time.monotonic()
        now_seen = (connections[0] + (client[0].stats.reconnects if client else 0), up())
        if now_seen != seen:
            if now_seen[0] > seen[0] and seen[0] and (now_seen[1] or not seen[1]):
                print(f"arena worker: reconnected to {args.url}", flush=True)
            if not now_seen[1] and (seen[1] or now_seen[0] > seen[0]):  # up since the last check, down now
                print(f"arena worker: lost the server at {args.url}; reconnecting with backoff", flush=True)
            seen = now_seen
        if args.minutes is not None and now - started >= args.minutes * 60:
            stop.set()
        if now - last_line >= WORKER_PROGRESS_EVERY:
            last_line = now
            print(progress(), flush=True)
        if stop.is_set():
            bot_thread.join(WORKER_STOP_GRACE)  # the bot says bye; a reconnect in progress may not finish
            break
    if failure:
        exc = failure[0]
        if isinstance(exc, HandshakeRejected):
            print(f"arena worker: error: {args.url}: {exc}", file=sys.stderr)
            return 2
        print(f"arena worker: error: the bot failed: {exc!r}", file=sys.stderr)
        return 1
    print(progress(final=True), flush=True)
    if not connections[0] and not log.ticks:
        print(f"arena worker: error: never reached {args.url} ({budget})", file=sys.stderr)
        return 1
    return 0


WORKER_BACKOFF = (1.0, 10.0)
"""Seconds before the first retry of an unreachable server, and the most between retries (doubling, jittered)."""
WORKER_PROGRESS_EVERY = 10.0
"""Seconds between progress lines of ``arena worker``."""
WORKER_STOP_GRACE = 15.0
"""Seconds ``arena worker`` waits for its bot to say bye after a stop; then it exits anyway."""
