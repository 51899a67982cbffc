"""Our CPU per Tank Royale message round trip: websockets' asyncio API against LockstepConnection.

Run ``python bench/royale_io.py`` (about 30 s on 2 cores). ``--bots`` echo clients, each a
process of its own (websockets' sync client, the cheapest bot there is), connect to a server in
this process; each turn the server sends every client a real tick event and waits until every
client answered with a bot intent, as the Tank Royale turn loop does. Measured: the server
process's CPU time per message round trip (one tick out, one intent in, parsed), for

* ``asyncio_api``: the baseline, websockets' documented API: ``await websocket.send`` and an
  ``async for`` reader task per client (what ``arena.royale.server`` used before);
* ``lockstep``: :class:`arena.royale.connection.LockstepConnection`, frames handed to a callback
  from ``data_received`` and sends written without awaiting (what it uses now);
* ``floor_raw_tcp``: the floor under both, the same bytes over plain TCP with an
  ``asyncio.Protocol`` (no websocket framing, no JSON): what the kernel's loopback and the event
  loop alone cost per message on this machine.

Both run in the same process, one after the other, ``--turns`` turns each after a warm-up.
The last stdout line is one JSON object with both figures and their ratio.
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

_CLIENT = """
import sys
from websockets.sync.client import connect
intent = sys.argv[2]
with connect(sys.argv[1], compression=None) as ws:
    for message in ws:
        if message == "bye":
            break
        ws.send(intent)
"""
_RAW_CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
intent = sys.argv[2].encode()
while (data := s.recv(65536)) and data != b"bye":
    s.sendall(intent)
"""
_INTENT = json.dumps(
    {
        "type": "BotIntent",
        "turnRate": 5.0,
        "gunTurnRate": 10.0,
        "radarTurnRate": 45.0,
        "targetSpeed": 8.0,
        "firepower": 1.5,
        **dict.fromkeys(
            (
                "adjustGunForBodyTurn",
                "adjustRadarForBodyTurn",
                "adjustRadarForGunTurn",
                "rescan",
                "fireAssist",
                "bodyColor",
                "turretColor",
                "radarColor",
                "bulletColor",
                "scanColor",
                "tracksColor",
                "gunColor",
                "stdOut",
                "stdErr",
                "teamMessages",
            )
        ),
    }
)  # what the official Python API sends: every field, most of them null


def _tick() -> str:
    """A real tick event: the arena's first tick of a 1v1 as a Tank Royale bot sees it."""
    import numpy as np

    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.engine import TankBattle
    from arena.royale.game import RoyaleGame
    from arena.royale.match import royale_rules
    from arena.royale.seats import game_setup
    from arena.royale.server import RoyaleServerConfig

    rules = royale_rules()
    battle = TankBattle(1, 2, rules, seed=0)
    game = RoyaleGame(battle, [(0, 0, "a"), (0, 1, "b")], ["a", "b"], game_setup(rules, 1, 2, RoyaleServerConfig()), 1)
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    actions[..., 4] = 1.0  # radars turn: a scan event in the tick
    game.fill(actions)
    return game.after_step(battle.step(actions).events)[0][1]


async def _timed_turns(
    send_all: Callable[[], Awaitable[None]], turn: dict[str, Any], bots: int, turns: int, warmup: int
) -> tuple[float, float]:
    """(CPU s, wall s) of ``turns`` turns after ``warmup``: each sends every client a tick, then waits for all answers."""
    loop = asyncio.get_running_loop()
    for _ in range(warmup):
        turn["done"], turn["pending"] = loop.create_future(), bots
        await send_all()
        await turn["done"]
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(turns):
        turn["done"], turn["pending"] = loop.create_future(), bots
        await send_all()
        await turn["done"]
    return time.process_time() - cpu, time.perf_counter() - wall


async def _measure(lockstep: bool, bots: int, turns: int, warmup: int, tick: str) -> dict[str, float]:
    from websockets.asyncio.server import ServerConnection, serve

    from arena.royale import schema
    from arena.royale.connection import LockstepConnection

    clients: list[ServerConnection] = []
    joined = asyncio.Event()
    turn: dict[str, Any] = {"pending": 0, "done": None}

    def arrived(text: str | bytes) -> None:
        schema.decode(text)
        turn["pending"] -= 1
        if turn["pending"] == 0:
            turn["done"].set_result(None)

    async def handler(websocket: ServerConnection) -> None:
        if lockstep:
            assert isinstance(websocket, LockstepConnection)
            websocket.on_text = lambda data: arrived(data.decode())
        clients.append(websocket)
        if len(clients) == bots:
            joined.set()
        if lockstep:
            await websocket.wait_closed()
        else:
            async for message in websocket:
                arrived(message)

    factory = LockstepConnection if lockstep else ServerConnection
    async with serve(handler, "127.0.0.1", 0, compression=None, ping_interval=None, create_connection=factory) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, url, _INTENT]) for _ in range(bots)]

        async def send_all() -> None:
            for ws in clients:
                if lockstep:
                    ws.send_now(tick)  # type: ignore[attr-defined]
                else:
                    await ws.send(tick)

        try:
            await asyncio.wait_for(joined.wait(), 60)
            cpu, wall = await _timed_turns(send_all, turn, bots, turns, warmup)
        finally:
            for ws in clients:
                await ws.send("bye")
            for p in procs:
                await asyncio.to_thread(p.wait, 10)  # the loop must run: the clients close with a handshake
    return {"server_cpu_us_per_message": round(1e6 * cpu / turns / bots, 1), "turns_per_s": round(turns / wall, 1)}


async def _measure_raw(bots: int, turns: int, warmup: int, tick: str) -> dict[str, float]:
    """The floor: one write out and one read in per message over plain TCP (a message fits one segment)."""
    loop = asyncio.get_running_loop()
    clients: list[asyncio.Transport] = []
    joined = asyncio.Event()
    turn: dict[str, Any] = {"pending": 0, "done": None}

    class Echoed(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            clients.append(transport)
            if len(clients) == bots:
                joined.set()

        def data_received(self, data: bytes) -> None:
            turn["pending"] -= 1
            if turn["pending"] == 0:
                turn["done"].set_result(None)

    server = await loop.create_server(Echoed, "127.0.0.1", 0)
    port = str(server.sockets[0].getsockname()[1])
    procs = [subprocess.Popen([sys.executable, "-c", _RAW_CLIENT, port, _INTENT]) for _ in range(bots)]
    payload = tick.encode()

    async def send_all() -> None:
        for transport in clients:
            transport.write(payload)

    try:
        await asyncio.wait_for(joined.wait(), 60)
        cpu, wall = await _timed_turns(send_all, turn, bots, turns, warmup)
    finally:
        for transport in clients:
            transport.write(b"bye")
        for p in procs:
            await asyncio.to_thread(p.wait, 10)
        server.close()
    return {"server_cpu_us_per_message": round(1e6 * cpu / turns / bots, 1), "turns_per_s": round(turns / wall, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bots", type=int, default=2, help="echo clients, one process each (default 2: a 1v1)")
    parser.add_argument("--turns", type=int, default=4000, help="turns measured per variant (default 4000)")
    parser.add_argument("--warmup", type=int, default=500, help="turns before measuring (default 500)")
    args = parser.parse_args()
    if args.bots < 1 or args.turns < 1 or args.warmup < 0:
        parser.error("--bots and --turns must be >= 1, --warmup >= 0")
    tick = _tick()
    figures = {}
    for name in ("asyncio_api", "lockstep", "floor_raw_tcp"):
        if name == "floor_raw_tcp":
            figures[name] = asyncio.run(_measure_raw(args.bots, args.turns, args.warmup, tick))
        else:
            figures[name] = asyncio.run(_measure(name == "lockstep", args.bots, args.turns, args.warmup, tick))
        print(f"  {name}: {figures[name]['server_cpu_us_per_message']:.1f} us of server CPU per message round trip, "
              f"{figures[name]['turns_per_s']:,.0f} turns/s", file=sys.stderr)  # fmt: skip
    ratio = figures["asyncio_api"]["server_cpu_us_per_message"] / figures["lockstep"]["server_cpu_us_per_message"]
    summary = {
        "bench": "royale_io",
        "unit": "server CPU µs per message round trip (tick out, intent in)",
        "bots": args.bots,
        "turns": args.turns,
        "tick_bytes": len(tick),
        "baseline_asyncio_api": figures["asyncio_api"],
        "lockstep": figures["lockstep"],
        "floor_raw_tcp": figures["floor_raw_tcp"],
        "cpu_ratio": round(ratio, 2),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
