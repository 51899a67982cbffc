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
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

TANK_ROYALE_TPS = 30
"""Tank Royale's ``DEFAULT_TURNS_PER_SECOND`` (the GUI's default pace)."""
TANK_ROYALE_TURN_MS = 30
"""The turn timeout the issue calls standard: a turn of Tank Royale lasts at least this long."""
TARGET_TPS = 1000


def main() -> int:
    from arena.royale.server import RoyaleBotSpec, RoyaleServerConfig, play_royale_match, royale_rules

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
    args = parser.parse_args()
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
        players,
        args.rounds,
        seed=args.seed,
        rules=royale_rules(args.ticks_per_round),
        config=config,
        n_matches=args.games,
    )
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
        "bot_cpu_ms_per_turn": per_bot_ms,
        "wall_seconds_with_boot": round(wall, 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
