"""What official-API bots observe agrees with the engine's own record of the same turns.

Three sample bots of tests/data/royale_bots, written with the official Python bot API — Scanner
(only turns its radar), SpinBot (fires at what it scans) and Walls (drives into the walls) — are
booted for a short match in our arena. Each runs inside a thin wrapper (``tests/data/royale_record.py``)
that writes down what the API hands the bot: every tick (state and events, after the API's own
mapping) and every round and game end (results). Beside them the test keeps the engine's record
of the same match (a ``MatchObserver``: ``battle.last_events``, the engine's ``StepEvents``, and its
state after each step) and derives from it, by Tank Royale's rules of who hears what, what each bot
should have seen. The two must agree exactly: the same turns, the same events with the same
bots, bullets, damage and energies (floats cross the protocol unrounded), the same results
(rounded to ints, as the protocol carries them).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.games.tank.engine import TankBattle
from arena.games.tank.events import BulletEvents
from arena.royale.match import MatchListeners, RoyaleMatch, play_royale_match, royale_rules
from arena.royale.seats import RoyaleBotSpec
from arena.royale.server import RoyaleServerConfig
from tests.conftest import DATA, timeout

DATA = DATA
BOTS = DATA / "royale_bots"
official_api = pytest.mark.skipif(
    importlib.util.find_spec("robocode_tank_royale") is None,
    reason="the official Tank Royale bot API (pip install -e '.[royale]')",
)

Event = tuple[Any, ...]


def recorded(name: str, home: Path) -> RoyaleBotSpec:
    """Sample bot ``name`` wrapped so that it writes what it observes to $ROYALE_RECORD_DIR (same name, same config)."""
    bot = home / name
    bot.mkdir(parents=True)
    shutil.copy(BOTS / name / f"{name}.json", bot)
    (bot / f"{name}.py").write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(BOTS / name)!r}, {str(DATA)!r}]\n"
        f"from {name} import {name}\n"
        "from royale_record import recording\n"
        f"recording({name})().start()\n"
    )
    return RoyaleBotSpec.parse(f"royale:{bot}")


# --- the engine's record, and what it says each bot should see -----------------------------------


def _bullet(rec: BulletEvents, k: int) -> Event:
    return (int(rec.owner[k]) + 1, float(rec.power[k]), float(rec.x[k]), float(rec.y[k]), float(rec.heading[k]))


class EngineRecord:
    """A MatchObserver of a one-arena match: the engine's events and state after every step.

    ``views[(round, turn)][bot_id]`` is what that bot should observe that turn, from the engine's
    ``StepEvents`` by Tank Royale's rules of who hears what: ``(energy, x, y, sorted events)``, for
    every bot alive when the turn began. ``rounds`` keeps each round's end: its turn, the engine's
    scores, damage ledgers and winner, and the survival points earned.
    """

    def __init__(self) -> None:
        self.views: dict[tuple[int, int], dict[int, tuple[float, float, float, list[Event]]]] = {}
        self.rounds: list[dict[str, Any]] = []
        self.alive = np.zeros(0, bool)
        self.survival = np.zeros(0)

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        assert battle.n_matches == 1
        self.alive = battle.alive[0].copy()
        self.survival = np.zeros(battle.n_tanks)

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        ev, r, T = battle.last_events, battle.rules, battle.n_tanks
        assert ev is not None, "the royale game records events"
        energy, x, y = battle.energy[0].tolist(), battle.x[0].tolist(), battle.y[0].tolist()
        before, after = self.alive, battle.alive[0].copy()
        seen: dict[int, list[Event]] = {t: [] for t in range(T) if before[t]}

        def to(t: int, *event: Any) -> None:
            if t in seen:
                seen[t].append(event)

        for t in range(T):
            for j in np.flatnonzero(ev.scanned[0, t]).tolist():
                to(t, "ScannedBotEvent", t + 1, j + 1, energy[j], x[j], y[j])
            if ev.hit_wall[0, t]:
                to(t, "HitWallEvent")
            for j in np.flatnonzero(ev.collided[0, t]).tolist():
                to(t, "HitBotEvent", j + 1, energy[j], x[j], y[j], bool(ev.rammed[0, t, j]))
        for k in range(len(ev.fired)):
            to(int(ev.fired.owner[k]), "BulletFiredEvent", _bullet(ev.fired, k))
        hits = ev.bullet_hits
        for k in range(len(hits)):
            owner, victim, damage = int(hits.owner[k]), int(hits.victim[k]), float(hits.damage[k])
            to(owner, "BulletHitBotEvent", victim + 1, _bullet(hits, k), damage, energy[victim])
            to(victim, "HitByBulletEvent", _bullet(hits, k), damage, energy[victim])
        for k in range(len(ev.bullet_walls)):
            to(int(ev.bullet_walls.owner[k]), "BulletHitWallEvent", _bullet(ev.bullet_walls, k))
        one, two = ev.bullet_bullets
        for k in range(len(one)):
            to(int(one.owner[k]), "BulletHitBulletEvent", _bullet(one, k), _bullet(two, k))
            to(int(two.owner[k]), "BulletHitBulletEvent", _bullet(two, k), _bullet(one, k))
        died = before & ~after
        for j in np.flatnonzero(died).tolist():
            for t in seen:
                to(t, *(("DeathEvent",) if t == j else ("BotDeathEvent", j + 1)))
        self.survival += r.score_survival * died.sum() * after
        winner = int(battle.winner[0])
        if battle.round_over[0] and winner >= 0:
            to(winner, "WonRoundEvent")
        key = (int(battle.round[0]), int(battle.tick[0]))
        self.views[key] = {t + 1: (energy[t], x[t], y[t], sorted(seen[t], key=repr)) for t in seen}
        if battle.round_over[0]:
            self.rounds.append(
                {
                    "round": key[0],
                    "turn": key[1],
                    "scores": battle.scores[0].astype(float).copy(),
                    "bullet_damage": battle.bullet_damage_dealt[0].sum(axis=1) * r.score_bullet_damage,
                    "ram_damage": battle.ram_damage_dealt[0].sum(axis=1) * r.score_ram_damage,
                    "last_survivor": np.eye(T)[winner] * r.score_last_survivor * (T - 1) if winner >= 0 else np.zeros(T),
                    "survival": self.survival.copy(),
                }
            )
        self.alive = after


# --- what the bots wrote down ---------------------------------------------------------------------


def _api_bullet(b: dict[str, Any]) -> Event:
    return (b["owner_id"], b["power"], b["x"], b["y"], b["direction"])


def observed(e: dict[str, Any]) -> Event:
    """One event as the bot got it, in the engine view's terms (API class name and fields)."""
    kind = e["type"]
    fields: dict[str, Event] = {
        "ScannedBotEvent": (e.get("scanned_by_bot_id"), e.get("scanned_bot_id"), e.get("energy"), e.get("x"), e.get("y")),
        "HitBotEvent": (e.get("victim_id"), e.get("energy"), e.get("x"), e.get("y"), e.get("rammed")),
        "BotDeathEvent": (e.get("victim_id"),),
    }
    if kind in fields:
        return (kind, *fields[kind])
    if kind == "BulletHitBotEvent":
        return (kind, e["victim_id"], _api_bullet(e["bullet"]), e["damage"], e["energy"])
    if kind == "HitByBulletEvent":
        return (kind, _api_bullet(e["bullet"]), e["damage"], e["energy"])
    if kind == "BulletHitBulletEvent":
        return (kind, _api_bullet(e["bullet"]), _api_bullet(e["hit_bullet"]))
    if kind in ("BulletFiredEvent", "BulletHitWallEvent"):
        return (kind, _api_bullet(e["bullet"]))
    return (kind,)  # HitWallEvent, DeathEvent, WonRoundEvent (and anything unexpected, by name)


def expected_results(rounds: list[dict[str, Any]], upto: int, t: int) -> dict[str, int]:
    """Tank ``t``'s game results after ``upto`` rounds, from the engine's record (what the protocol rounds to ints)."""
    played = rounds[:upto]
    totals = sum(r["scores"] for r in played)
    places = Counter(int(np.flatnonzero(np.argsort(-r["scores"], kind="stable") == t)[0]) for r in played)
    return {
        "rank": int(np.flatnonzero(np.argsort(-totals, kind="stable") == t)[0]) + 1,
        "survival": round(float(sum(r["survival"][t] for r in played))),
        "last_survivor_bonus": round(float(sum(r["last_survivor"][t] for r in played))),
        "bullet_damage": round(float(sum(r["bullet_damage"][t] for r in played))),
        "ram_damage": round(float(sum(r["ram_damage"][t] for r in played))),
        "total_score": round(float(totals[t])),
        "first_places": places[0],
        "second_places": places[1],
        "third_places": places[2],
    }


LINEUPS = {
    # Scanner only scans (and is shot), SpinBot fires at what it scans and dies against the walls, Walls hits them too.
    "melee": (
        ["Scanner", "SpinBot", "Walls"],
        dict(seed=3, rounds=1, ticks=700),
        {
            "Scanner": {"ScannedBotEvent", "HitByBulletEvent", "BotDeathEvent"},
            "SpinBot": {"ScannedBotEvent", "BulletFiredEvent", "BulletHitWallEvent", "HitWallEvent", "DeathEvent"},
            "Walls": {"HitWallEvent", "BulletFiredEvent", "BulletHitBotEvent"},
            "*": {"BulletHitBulletEvent"},  # two bullets met (in any bot's view)
        },
    ),
    # Two rounds to the end: deaths and won rounds, results summed over the game.
    "duel": (
        ["SpinBot", "Walls"],
        dict(seed=0, rounds=2, ticks=700),
        {"SpinBot": {"DeathEvent", "BulletHitBotEvent"}, "Walls": {"WonRoundEvent", "BotDeathEvent", "HitByBulletEvent"}},
    ),
}


@official_api
@pytest.mark.expensive
@pytest.mark.parametrize("lineup", list(LINEUPS))
def test_what_official_api_bots_observe_agrees_with_the_engine(tmp_path: Path, lineup: str) -> None:
    """Official-API bots play a short match; each bot's view of every turn is the engine's record of it."""
    names, match, wanted = LINEUPS[lineup]
    rounds = match["rounds"]
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    engine = EngineRecord()
    result = play_royale_match(
        [recorded(name, tmp_path / "bots") for name in names],
        RoyaleMatch(
            rounds,
            seed=match["seed"],
            rules=royale_rules(match["ticks"]),
            config=RoyaleServerConfig(turn_timeout=timeout(2.0)),
            log_dir=tmp_path,
            bot_env={"ROYALE_RECORD_DIR": str(record_dir)},
        ),
        MatchListeners(observer=engine),
    )
    assert result["rounds"] == rounds and result["royale"]["skipped_turns"] == dict.fromkeys(names, 0)
    ids = range(1, len(names) + 1)
    logs = {bot: [json.loads(line) for line in (record_dir / f"{bot}.jsonl").read_text().splitlines()] for bot in ids}
    kinds: dict[int, set[str]] = {bot: set() for bot in logs}

    for bot, log in logs.items():
        assert log[0] == {"kind": "game_started", "my_id": bot, "rounds": rounds}
        ticks = {(e["round"], e["turn"]): e for e in log if e["kind"] == "tick"}
        # The same turns: every turn the bot began alive, none after its death, none twice.
        assert sorted(ticks) == sorted(key for key, view in engine.views.items() if bot in view), names[bot - 1]
        assert len(ticks) == sum(e["kind"] == "tick" for e in log)
        for key, tick in ticks.items():
            energy, x, y, events = engine.views[key][bot]
            assert all(e["turn_number"] == key[1] for e in tick["events"]), (names[bot - 1], key)
            got = sorted((observed(e) for e in tick["events"]), key=repr)
            assert (tick["energy"], tick["x"], tick["y"], got) == (energy, x, y, events), (names[bot - 1], key)
            kinds[bot].update(e[0] for e in got)
        # The same round ends and results (the game's totals so far, as Tank Royale sends them).
        ends = [e for e in log if e["kind"] == "round_ended"]
        assert [(e["round"], e["turn"]) for e in ends] == [(r["round"], r["turn"]) for r in engine.rounds]
        for n, end in enumerate(ends, 1):
            got_results = {k: v for k, v in end["results"].items() if k not in ("type", "bullet_kill_bonus", "ram_kill_bonus")}
            assert got_results == expected_results(engine.rounds, n, bot - 1), (names[bot - 1], n)
            parts = sum(v for k, v in end["results"].items() if k not in ("type", "rank", "total_score") and "places" not in k)
            assert abs(parts - end["results"]["total_score"]) <= 3  # kill bonuses: the rest of the engine's total
        game_end = [e for e in log if e["kind"] == "game_ended"]
        assert len(game_end) == 1 and game_end[0]["rounds"] == rounds and game_end[0]["results"] == ends[-1]["results"]

    # Bullets: every bullet a bot saw hit something was one its owner saw fired, with that power.
    fired = {}
    for bot, log in logs.items():
        for tick in (e for e in log if e["kind"] == "tick"):
            for e in tick["events"]:
                if e["type"] == "BulletFiredEvent":
                    fired[(tick["round"], e["bullet"]["bullet_id"])] = (bot, e["bullet"]["power"])
    for log in logs.values():
        for tick in (e for e in log if e["kind"] == "tick"):
            for e in tick["events"]:
                for b in (e.get("bullet"), e.get("hit_bullet")):
                    if b is not None:
                        assert fired[(tick["round"], b["bullet_id"])] == (b["owner_id"], b["power"])

    # The match exercised what these bots rely on (Scanner only scans: it never fires nor moves into a wall).
    # Checked over all the bots' views: which bot hears a hit can move by a turn with the official bots' own
    # threads on a busy machine (SpinBot heard no BulletHitBotEvent in one duel of six under pytest-xdist), while
    # every event any bot heard is checked against the engine's record above.
    heard = set().union(*kinds.values())
    wanted_kinds = set().union(*wanted.values())
    assert wanted_kinds <= heard, wanted_kinds - heard
    if "Scanner" in names:
        assert not {"BulletFiredEvent", "HitWallEvent"} & kinds[names.index("Scanner") + 1]


# --- arena match --turn-timeout-ms -----------------------------------------------------------------


def arena(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=timeout(120))


@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "inf"])
def test_match_refuses_a_bad_turn_timeout(value: str) -> None:
    """--turn-timeout-ms must be a positive, finite number of milliseconds: one readable line, exit 2."""
    result = arena("match", "--bot", "royale:tests/data/royale_bots/Scanner", "--bot", "sitting", f"--turn-timeout-ms={value}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "--turn-timeout-ms" in lines[0] and value in lines[0]


def test_match_turn_timeout_needs_tank_royale_bots() -> None:
    result = arena("match", "--bot", "sitting", "--bot", "spinner", "--turn-timeout-ms", "100", "--rounds", "1")
    assert result.returncode == 2 and "Tank Royale" in result.stderr, result.stderr


@official_api
@pytest.mark.expensive
def test_match_turn_timeout_reaches_the_server() -> None:
    """SlowBot sleeps 0.3 s every 10th turn: skipped at Tank Royale's 30 ms, not with --turn-timeout-ms 2000."""
    slow = f"royale:{BOTS / 'SlowBot'}"
    common = ["match", "--bot", slow, "--bot", "sitting", "--rounds", "1", "--ticks-per-round", "25", "--json"]
    patient = arena(*common, "--turn-timeout-ms", "2000")
    assert patient.returncode == 0, patient.stderr
    assert json.loads(patient.stdout)["royale"]["skipped_turns"] == {"SlowBot": 0}
    hasty = arena(*common, "--turn-timeout-ms", "50")
    assert hasty.returncode == 0, hasty.stderr
    assert json.loads(hasty.stdout)["royale"]["skipped_turns"]["SlowBot"] >= 2
