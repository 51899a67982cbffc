"""Turns per second of Tank Royale bots (official Python bot API) playing in our arena over the Tank Royale protocol.

Run ``python bench/royale.py`` (about a minute on 2 cores; needs ``pip install -e '.[royale]'``).
It boots two bots written with the official Python bot API (``tests/data/royale_bots``:
SpinBot and Walls by default) the way ``arena match --bot royale:PATH`` does, plays
``--rounds`` rounds in lockstep (the next turn starts the moment both intents are in; the
turn timeout, Tank Royale's standard 30 ms, only bounds a turn) and prints turns/s beside
Tank Royale's default pace of 30 turns per second (33 ms a turn). ``--games K`` plays K
such 1v1 games side by side (2K bot processes, one engine) and reports their total.

Where the time goes is printed too: the server's CPU per turn (engine step with events,
JSON, websocket) and each bot process's CPU (the official API parses every tick into
objects and serializes every intent; that is most of a turn). The last stdout line is one
JSON object with all figures.

``--bot-ceiling`` also measures what the bots alone allow, whatever our server costs: one
official-API bot (``--ceiling-bot``, SpinBot by default), booted the same way, plays against
an *instant responder* in this process, a websocket server that speaks only as much of the
protocol as the bot needs (``server-handshake``, ``game-started-event-for-bot``,
``round-started-event``) and then answers each ``bot-intent`` at once with the next
``tick-event-for-bot``, pre-encoded (the arena's own tick of a real position, without events
and bullets: the bot's cheapest turn), only its turn number patched in. Then two such bots
against it in lockstep (the next tick goes out once both intents are in): the ceiling of one
1v1 game of official-API bots on this machine. Each figure: turns/s over ``--ceiling-turns``
turns after a warm-up, each bot process's CPU per turn, the responder's CPU per turn; under
the key ``bot_ceiling`` of the JSON line. ``--ceiling-only`` skips the match; ``--ceiling-pin``
puts each bot process on a CPU of its own (docs/royale.md "Speed" has the figures).
"""

from __future__ import annotations

import os
import sys

# Run as ``python bench/royale.py``, this file's folder comes first on sys.path and would shadow
# the ``arena`` package: put the repository root there instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

TANK_ROYALE_TPS = 30
"""Tank Royale's ``DEFAULT_TURNS_PER_SECOND`` (the GUI's default pace)."""
TANK_ROYALE_TURN_MS = 30
"""The turn timeout the issue calls standard: a turn of Tank Royale lasts at least this long."""
TARGET_TPS = 1000
TARGET_SERVER_MS = 0.2
"""Our side of a turn (engine, JSON, websocket I/O), in CPU ms per game-turn: the issue's bound."""


def main() -> int:
    from arena.royale.match import RoyaleMatch, play_royale_match, royale_rules
    from arena.royale.seats import RoyaleBotSpec
    from arena.royale.server import RoyaleServerConfig

    bots_dir = Path(_here).parent / "tests" / "data" / "royale_bots"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bot", action="append", help=f"bot directory (twice; default: SpinBot and Walls in {bots_dir})")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per game (default 5)")
    parser.add_argument("--games", type=int, default=1, help="1v1 games side by side (default 1)")
    parser.add_argument("--ticks-per-round", type=int, default=2000, help="round tick cap (default 2000)")
    parser.add_argument(
        "--turn-timeout-ms", type=float, default=TANK_ROYALE_TURN_MS, help="upper bound of a turn (default 30, Tank Royale's)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--bot-ceiling",
        action="store_true",
        help="also measure official-API bots against an instant responder (one bot, then two in lockstep)",
    )
    parser.add_argument("--ceiling-only", action="store_true", help="measure only the bot ceiling (implies --bot-ceiling)")
    parser.add_argument(
        "--ceiling-bot", default=str(bots_dir / "SpinBot"), help="bot directory for the ceiling (default: SpinBot)"
    )
    parser.add_argument("--ceiling-turns", type=int, default=3000, help="turns measured per ceiling run (default 3000)")
    parser.add_argument("--ceiling-warmup", type=int, default=300, help="turns played before measuring (default 300)")
    parser.add_argument(
        "--ceiling-pin",
        action="store_true",
        help="pin each ceiling bot process to a CPU of its own (bot i: the i-th CPU this process may use)",
    )
    args = parser.parse_args()
    if args.ceiling_turns < 1 or args.ceiling_warmup < 1:
        parser.error("--ceiling-turns and --ceiling-warmup must be >= 1")
    if args.ceiling_pin and not hasattr(os, "sched_setaffinity"):
        parser.error("--ceiling-pin needs os.sched_setaffinity (Linux)")
    if args.ceiling_only:
        ceiling = bot_ceiling(Path(args.ceiling_bot), args.ceiling_turns, args.ceiling_warmup, args.ceiling_pin)
        print(json.dumps({"bench": "royale-bot-ceiling", "bot_ceiling": ceiling, **_machine()}))
        return 0
    dirs = args.bot or [str(bots_dir / "SpinBot"), str(bots_dir / "Walls")]
    if len(dirs) != 2:
        parser.error("give --bot twice (a 1v1)")
    players = [RoyaleBotSpec.parse(f"royale:{d}") for d in dirs]
    config = RoyaleServerConfig(turn_timeout=args.turn_timeout_ms / 1000.0)
    print(
        f"royale bench: {players[0].name} vs {players[1].name}, {args.games} game(s) x {args.rounds} rounds, "
        f"turn timeout {args.turn_timeout_ms:g} ms, {os.cpu_count()} CPUs",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    result = play_royale_match(
        players, RoyaleMatch(args.rounds, seed=args.seed, rules=royale_rules(args.ticks_per_round), config=config,
                             n_matches=args.games)
    )  # fmt: skip
    wall = time.perf_counter() - started
    royale = result["royale"]
    tps = float(royale["turns_per_s"])
    bot_cpu = royale["bot_cpu_s"]
    turns = int(royale["turns"])  # summed over the games
    per_bot_ms = {name: round(1000 * cpu / max(turns, 1), 3) for name, cpu in bot_cpu.items()}
    for row in result["bots"]:
        print(f"  {row['name']}: {row['wins']} wins, mean score {row['mean_score']}", file=sys.stderr)
    print(
        f"  {turns:,} turns in {royale['seconds']:.1f} s: {tps:,.0f} turns/s"
        f" = {tps / TANK_ROYALE_TPS:.0f}x Tank Royale's default {TANK_ROYALE_TPS} turns/s"
        f" (a {TANK_ROYALE_TURN_MS} ms turn timeout allows at most {1000 / TANK_ROYALE_TURN_MS:.0f})",
        file=sys.stderr,
    )
    print(
        f"  server CPU {royale['server_cpu_ms_per_turn']:.2f} ms/turn; bot CPU (incl. start-up) {bot_cpu} s;"
        f" skipped turns {royale['skipped_turns']}; wall with booting {wall:.1f} s",
        file=sys.stderr,
    )
    summary = {
        "bench": "royale",
        "unit": "turns/s of 1v1 games between official-Python-API bots over the Tank Royale protocol (all games)",
        "bots": [p.name for p in players],
        "games": args.games,
        "rounds_per_game": args.rounds,
        "turns": turns,
        "seconds": royale["seconds"],
        "turns_per_s": round(tps, 1),
        "tank_royale_default_turns_per_s": TANK_ROYALE_TPS,
        "speedup_vs_tank_royale_default": round(tps / TANK_ROYALE_TPS, 1),
        "target_turns_per_s": TARGET_TPS,
        "meets_target": tps >= TARGET_TPS,
        "turn_timeout_ms": args.turn_timeout_ms,
        "skipped_turns": royale["skipped_turns"],
        "server_cpu_ms_per_turn": royale["server_cpu_ms_per_turn"],
        "target_server_cpu_ms_per_turn": TARGET_SERVER_MS,
        "meets_server_target": royale["server_cpu_ms_per_turn"] <= TARGET_SERVER_MS,
        "bot_cpu_ms_per_turn": per_bot_ms,
        "wall_seconds_with_boot": round(wall, 1),
        **_machine(),
    }
    if args.bot_ceiling:
        summary["bot_ceiling"] = bot_ceiling(Path(args.ceiling_bot), args.ceiling_turns, args.ceiling_warmup, args.ceiling_pin)
    print(json.dumps(summary))
    return 0


def _machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version()}


# --- the bot ceiling: official-API bots against an instant responder ------------------------------


def bot_ceiling(bot_dir: Path, turns: int = 3000, warmup: int = 300, pin: bool = False) -> dict[str, Any]:
    """Turns/s of one official-API bot, then of two in lockstep, against the instant responder.

    Returns ``{"single": run, "lockstep_pair": run, "tick_bytes", "note"}``, each run as
    :func:`run_instant_responder` returns it. Progress goes to stderr.
    """
    out: dict[str, Any] = {}
    for key, n in (("single", 1), ("lockstep_pair", 2)):
        run = asyncio.run(run_instant_responder([bot_dir] * n, turns, warmup, pin))
        out[key] = run
        cpu = ", ".join(f"{ms:.3f}" for ms in run["bot_cpu_ms_per_turn"])
        print(
            f"  ceiling, {n} x {run['bots'][0]} vs an instant responder: {run['turns_per_s']:,.0f} turns/s"
            f" over {run['turns']:,} turns; bot CPU {cpu} ms/turn, responder CPU {run['responder_cpu_ms_per_turn']:.3f}"
            f" ms/turn (load average before: {run['load_average_before']})",
            file=sys.stderr,
            flush=True,
        )
    prefix, suffix = _tick_template(1)
    out["tick_bytes"] = len(prefix) + len(suffix) + len(str(warmup + turns))
    out["note"] = (
        "pre-encoded tick-event-for-bot (bot state of a real position, no events, no bullets), "
        "answered the moment the intent(s) arrive; turns/s = the bots' ceiling, whatever the server costs"
    )
    return out


def _log_tails(booted: list[Any]) -> str:
    return "".join(f"\n--- {b.bot.base_name} log:\n{b.log_tail()}" for b in booted)


def _tick_template(my_id: int) -> tuple[str, str]:
    """A ``tick-event-for-bot`` of a real position as our server writes it, split where the turn number goes.

    Built by the arena's own code (``RoyaleGame.after_step`` after one step of a 1v1), then
    emptied of events and bullets so that every turn costs the bot the same.
    """
    import numpy as np

    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.engine import TankBattle
    from arena.royale.game import RoyaleGame
    from arena.royale.match import royale_rules
    from arena.royale.schema import GameSetup, dumps

    battle = TankBattle(1, 2, royale_rules(), seed=0)
    game = RoyaleGame(battle, [(0, 0, "A"), (0, 1, "B")], ["A", "B"], GameSetup(), None)
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    game.fill(actions)
    info = battle.step(actions)
    tick = json.loads(dict(game.after_step(info.events))[my_id - 1])
    marker = -987654321
    tick.update(turnNumber=marker, events=[], bulletStates=[])
    prefix, suffix = dumps(tick).split(f'"turnNumber":{marker}')
    return prefix + '"turnNumber":', suffix


async def run_instant_responder(bot_dirs: list[Path], turns: int, warmup: int, pin: bool = False) -> dict[str, Any]:
    """Boot ``bot_dirs`` (one game: all of them at once) against a responder that costs as little as it can.

    The responder shakes hands, starts the game and round 1 and sends turn 1; from then on,
    the moment every bot has sent its ``bot-intent`` for turn ``n``, it sends each its
    pre-encoded tick of turn ``n + 1``. After ``warmup`` turns it measures ``turns`` turns:
    wall time, each bot process's CPU (``/proc``) and this process's CPU (the responder's).
    ``pin`` puts bot ``i`` on the ``i``-th CPU this process may use (Linux), right after it starts
    (before the API starts its threads, which inherit it); the responder stays unpinned.
    """
    from websockets.asyncio.server import ServerConnection, serve

    from arena.royale import schema
    from arena.royale.booter import boot, find_bot
    from arena.royale.seats import stop_bots

    n = len(bot_dirs)
    cpus = sorted(os.sched_getaffinity(0)) if pin else []
    bots = [find_bot(d) for d in bot_dirs]
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None  # other jobs share the cores
    setup = schema.GameSetup(participants=2, number_of_rounds=1, turn_timeout_us=30_000, game_type="1v1")
    names = {1: bots[0].display_name, 2: bots[-1].display_name if n > 1 else "Nobody"}
    templates = [_tick_template(i + 1) for i in range(n)]
    sockets: list[ServerConnection | None] = [None] * n
    joined: asyncio.Queue[int] = asyncio.Queue()
    done = asyncio.get_running_loop().create_future()
    state = {"turn": 0, "answered": 0}
    owes = [False] * n
    ready = [asyncio.Event() for _ in range(n)]
    marks: list[tuple[float, float, list[float]]] = []
    booted: list[Any] = []

    def cpu_of_bots() -> list[float]:
        return [b.cpu_seconds() or 0.0 for b in booted]

    async def next_turn() -> None:
        state["turn"] += 1
        state["answered"] = 0
        turn = state["turn"]
        if turn == warmup + 1 or turn == warmup + turns + 1:
            marks.append((time.perf_counter(), time.process_time(), cpu_of_bots()))
            if len(marks) == 2:
                if not done.done():
                    done.set_result(None)
                return
        text = str(turn)
        for i, ws in enumerate(sockets):
            assert ws is not None
            owes[i] = True
            prefix, suffix = templates[i]
            await ws.send(prefix + text + suffix)

    async def handle(ws: ServerConnection) -> None:
        await ws.send(schema.server_handshake("ceiling", "instant responder", setup))
        hello = schema.decode(await ws.recv())
        if not isinstance(hello, schema.BotHandshake) or hello.secret is None or not hello.secret.startswith("seat"):
            await ws.close(1008, "not a bot of this bench")
            return
        seat = int(hello.secret[4:])
        sockets[seat] = ws
        joined.put_nowait(seat)
        async for text in ws:
            if not isinstance(text, str) or "BotIntent" not in text or not owes[seat]:
                if isinstance(text, str) and "BotReady" in text:
                    ready[seat].set()
                continue  # (an intent nobody asked for is dropped)
            owes[seat] = False
            state["answered"] += 1
            if state["answered"] == n:
                await next_turn()

    with tempfile.TemporaryDirectory(prefix="royale-ceiling-") as tmp:
        async with serve(handle, "127.0.0.1", 0, compression=None, ping_interval=None) as server:
            port = server.sockets[0].getsockname()[1]
            try:
                for i, bot in enumerate(bots):
                    booted.append(boot(bot, f"ws://127.0.0.1:{port}", f"seat{i}", Path(tmp)))
                    if pin:
                        os.sched_setaffinity(booted[-1].process.pid, {cpus[i % len(cpus)]})
                for _ in range(n):
                    try:
                        await asyncio.wait_for(joined.get(), 60)
                    except TimeoutError:
                        raise RuntimeError(f"bots did not connect within 60 s{_log_tails(booted)}") from None
                # All connected: start the game, wait for every bot-ready, then round 1 and its first tick.
                for i, ws in enumerate(sockets):
                    assert ws is not None
                    await ws.send(schema.game_started(i + 1, setup, (400.0, 300.0, 0.0), names))
                await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 30)
                for ws in sockets:
                    assert ws is not None
                    await ws.send(schema.round_started(1))
                await next_turn()
                try:
                    await asyncio.wait_for(done, 60 + turns / 50)
                except TimeoutError:
                    raise RuntimeError(f"the bots stopped answering at turn {state['turn']}{_log_tails(booted)}") from None
            finally:
                server.close()
                await asyncio.to_thread(stop_bots, booted)
    (t0, c0, b0), (t1, c1, b1) = marks
    seconds = t1 - t0
    return {
        "bots": [b.display_name for b in bots],
        "turns": turns,
        "seconds": round(seconds, 3),
        "turns_per_s": round(turns / seconds, 1),
        "bot_cpu_ms_per_turn": [round(1000 * (after - before) / turns, 3) for before, after in zip(b0, b1, strict=True)],
        "responder_cpu_ms_per_turn": round(1000 * (c1 - c0) / turns, 3),
        "load_average_before": load,
        "pinned_cpus": [cpus[i % len(cpus)] for i in range(n)] if pin else None,
    }


if __name__ == "__main__":
    sys.exit(main())
