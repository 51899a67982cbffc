"""Our TankBattle as a Tank Royale game, sans I/O: battle state and events → bot messages, intents → actions.

A :class:`RoyaleGame` sits on a :class:`~arena.games.tank.engine.TankBattle` (``M`` matches of ``T``
tanks) and a list of *seats*: the tanks driven by Tank Royale bots, which see our other tanks as
ordinary enemies. Each match is one Tank Royale game of ``rounds`` rounds.

Call order, once per turn (``arena.royale.match`` and ``arena.royale.train`` do this):

1. :meth:`fill` writes the seats' merged intents into the action array, right before ``battle.step``;
2. :meth:`after_step` turns the step's events into one ``tick-event-for-bot`` per seat (plus
   ``round-ended``/``game-ended``) and marks the seats that now owe an intent;
3. intents arrive (:meth:`intent`) until every seat answered or the turn timeout; seats still
   owing one get :meth:`skipped`;
4. the caller resets ended rounds and sends :meth:`round_started` after step 3, so a round's last
   tick is waited for like any other, as Tank Royale does; not answering it is no skipped turn,
   and after the game's last round nothing is waited for (docs/royale.md, "A round's end").

The tick event of turn ``n`` shows the state after ``n`` steps of the round; a round's first step
runs without intents, as Tank Royale's turn 1. Conventions match Tank Royale's without conversion
(origin bottom-left, y up, degrees, 0 = east, counter-clockwise positive); a bot's id is its tank
index + 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.events import BulletEvents, StepEvents
from . import schema
from .schema import BotIntent, GameSetup, IntentState

__all__ = ["ENDLESS_ROUNDS", "RoyaleGame", "Seat"]

ENDLESS_ROUNDS = 1_000_000
"""``numberOfRounds`` announced for a game without a round budget (training)."""
_HOLD = -1.0  # fire action that never fires
_MIN_FIRE = 1e-9  # fire action for the smallest power (an action of exactly 0 holds)

# Columns of the score parts (Tank Royale's ResultsForBot).
_SURVIVAL, _LAST, _BULLET, _BULLET_KILL, _RAM, _RAM_KILL = range(6)


@dataclass
class Seat:
    """One Tank Royale bot's tank: tank ``tank`` of match ``match``; its bot id is ``tank + 1``."""

    match: int
    tank: int
    name: str
    intent: IntentState = field(default_factory=IntentState)
    owes: int = 0
    """Turn number of the tick sent that the bot has not answered yet (0: none)."""
    last_turn: bool = False
    """The turn it owes ended its round: the next round waits for its answer (or the turn timeout), but
    an answer that does not come is no skipped turn (Tank Royale's round end; see the module docstring)."""
    skipped: int = 0
    """Turns this bot skipped (no intent before the timeout), all rounds."""
    connected: bool = True
    """False once the bot left: its tank stays in the game without intent (Tank Royale's ``onBotLeft``)."""
    left_at: tuple[int, int] | None = None
    """``(round, turn)`` when its bot left the game (None: it stayed)."""


class RoyaleGame:
    """Tank Royale bots on seats of a TankBattle (see the module docstring for the call order).

    Args:
        battle: the battle; this turns on its ``record_events`` and owns its ``turn_coupling``/``rescan``.
        seats: ``(match, tank, name)`` of every tank a Tank Royale bot drives.
        names: every tank's battle name, per tank index (what ``botNames`` reports).
        setup: the game setup the bots are told (rounds, arena, timeouts).
        rounds: rounds per match, or None to play until the caller stops (training).
    """

    def __init__(
        self,
        battle: TankBattle,
        seats: Sequence[tuple[int, int, str]],
        names: Sequence[str],
        setup: GameSetup,
        rounds: int | None,
    ) -> None:
        M, T, B = battle.n_matches, battle.n_tanks, battle.n_bullets
        if len(names) != T:
            raise ValueError(f"names must name all {T} tanks, got {len(names)}")
        if rounds is not None and rounds < 1:
            raise ValueError(f"rounds must be >= 1 or None, got {rounds}")
        taken: set[tuple[int, int]] = set()
        for m, t, _ in seats:
            if not (0 <= m < M and 0 <= t < T) or (m, t) in taken:
                raise ValueError(f"seat (match {m}, tank {t}) is outside the battle or taken twice")
            taken.add((m, t))
        self.battle = battle
        self.seats = [Seat(m, t, name) for m, t, name in seats]
        self.names = list(names)
        self.setup = setup
        self.rounds = rounds
        battle.record_events = True
        self.coupling = np.ones((M, T, 3))
        self.rescan = np.zeros((M, T), bool)
        battle.turn_coupling = self.coupling
        battle.rescan = self.rescan
        self.bullet_ids = np.zeros((M, B), np.int64)
        self.next_bullet = np.zeros(M, np.int64)
        self.alive_before = battle.alive.copy()
        self.parts = np.zeros((M, T, 6))
        """Score parts accumulated over the game (survival, last survivor, bullet damage and kill bonus, ram ...)."""
        self.round_parts = np.zeros((M, T, 6))
        self.totals = np.zeros((M, T))
        self.places = np.zeros((M, T, 3), np.int64)
        self.finished = np.zeros(M, bool)
        """Matches whose game is over (all rounds played)."""
        self.pending = 0
        """Seats that owe an intent for the last tick (a round's last tick included, see ``Seat.last_turn``)."""
        self.ended = np.zeros(M, bool)
        """Matches whose round ended in the last step (reset those not ``finished``, then :meth:`round_started`)."""
        self._stepped = np.ones(M, bool)
        self._by_match: list[list[int]] = [[] for _ in range(M)]
        for i, seat in enumerate(self.seats):
            self._by_match[seat.match].append(i)

    # --- game and round start -------------------------------------------------------------------

    def game_started(self) -> list[tuple[int, str]]:
        """``game-started-event-for-bot`` for every seat (its id, the setup, its start pose, all battle names)."""
        b = self.battle
        bot_names = {t + 1: name for t, name in enumerate(self.names)}
        return [
            (
                i,
                schema.game_started(
                    s.tank + 1,
                    self.setup,
                    (float(b.x[s.match, s.tank]), float(b.y[s.match, s.tank]), float(b.heading[s.match, s.tank])),
                    bot_names,
                ),
            )
            for i, s in enumerate(self.seats)
        ]

    def round_started(self, matches: NDArray[np.bool_] | None = None) -> list[tuple[int, str]]:
        """A round (re)started in ``matches`` (all when None): clear intents and bullets ids, tell the seats.

        Call after ``battle.reset`` of those matches (and once at the start, for round 1).
        """
        b = self.battle
        rows = np.arange(b.n_matches) if matches is None else np.flatnonzero(matches)
        out = []
        for m in rows.tolist():
            self.next_bullet[m] = 0
            self.round_parts[m] = 0.0
            self.alive_before[m] = b.alive[m]
            for i in self._by_match[m]:
                seat = self.seats[i]
                seat.intent.clear()
                if seat.owes:  # an unanswered last turn of the round before: dropped, no skipped turn
                    seat.owes = 0
                    self.pending -= 1
                seat.last_turn = False
                if seat.connected:
                    out.append((i, schema.round_started(int(b.round[m]))))
        return out

    # --- intents --------------------------------------------------------------------------------

    def intent(self, seat: int, delta: BotIntent) -> bool:
        """Merge a seat's ``bot-intent``; returns True when no seat owes an intent any more."""
        s = self.seats[seat]
        s.intent.merge(delta)
        if s.owes:
            s.owes = 0
            s.last_turn = False
            self.pending -= 1
        return self.pending == 0

    def skipped(self) -> list[tuple[int, str]]:
        """The turn timed out: a ``skipped-turn-event`` for each seat still owing its intent (its last one stays).

        A seat owing its round's last turn is only let off (Tank Royale sends no skipped turn for it).
        """
        out = []
        for i, s in enumerate(self.seats):
            if s.owes:
                if not s.last_turn:
                    s.skipped += 1
                    out.append((i, schema.skipped_turn(s.owes)))
                s.owes = 0
                s.last_turn = False
        self.pending = 0
        return out

    def owes_last_turn(self) -> bool:
        """Whether some seat still owes the answer to its round's last tick."""
        return any(s.owes and s.last_turn for s in self.seats)

    def drop_last_turn(self) -> None:
        """Stop waiting for answers to rounds' last ticks (no skipped turn for them, as in Tank Royale)."""
        for s in self.seats:
            if s.owes and s.last_turn:
                s.owes = 0
                s.last_turn = False
                self.pending -= 1

    def left(self, seat: int) -> None:
        """The seat's bot disconnected: its tank plays on with no intent and is not waited for."""
        s = self.seats[seat]
        if s.connected:
            s.left_at = (int(self.battle.round[s.match]), int(self.battle.tick[s.match]))
        s.connected = False
        s.intent.clear()
        if s.owes:
            s.owes = 0
            s.last_turn = False
            self.pending -= 1

    def fill(self, actions: NDArray[np.floating[Any]]) -> None:
        """Write every seat's intent into ``actions`` (M, T, ACT_DIM) as our action scale; call right before step.

        Rates are clipped to the rules' limits as Tank Royale clips them: the body turn rate to
        10 - 0.75·|v| of the speed *after* this turn's acceleration (computed here the way the
        engine will), the gun's to 20, the radar's to 45, the speed to ±8. A firepower below
        0.1 holds fire; above 3 fires 3.
        """
        b = self.battle
        r = b.rules
        assert actions.shape == (b.n_matches, b.n_tanks, ACT_DIM), actions.shape
        self._stepped = ~b.round_over
        for s in self.seats:
            m, t, it = s.match, s.tank, s.intent
            target = min(max(it.target_speed, -r.max_speed), r.max_speed)
            v = float(b.velocity[m, t])
            delta = target - v
            speeding_up = v == 0.0 or (v > 0.0) == (delta >= 0.0)
            lim = r.acceleration if speeding_up else r.deceleration
            v_new = min(max(v + min(max(delta, -lim), lim), -r.max_speed), r.max_speed)
            turn_limit = r.max_turn_rate - r.turn_rate_speed_factor * abs(v_new)
            row = actions[m, t]
            row[0] = target / r.max_speed
            row[1] = min(max(it.turn_rate / turn_limit, -1.0), 1.0) if turn_limit > 0 else 0.0
            row[2] = min(max(it.gun_turn_rate / r.max_gun_turn_rate, -1.0), 1.0)
            power = min(it.firepower, r.max_bullet_power)
            if power >= r.min_bullet_power:
                row[3] = max((power - r.min_bullet_power) / (r.max_bullet_power - r.min_bullet_power), _MIN_FIRE)
            else:
                row[3] = _HOLD
            row[4] = min(max(it.radar_turn_rate / r.max_radar_turn_rate, -1.0), 1.0)
            g = float(it.adjust_gun_for_body_turn)
            rb = float(it.adjust_radar_for_body_turn)
            rg = float(it.adjust_radar_for_gun_turn)
            # Tank Royale: gun += body·(1 - g) + gun; radar += gun_total + radar - rg·gun + rg·g·body - rb·body.
            self.coupling[m, t, 0] = 1.0 - g
            self.coupling[m, t, 1] = 1.0 - g + rg * g - rb
            self.coupling[m, t, 2] = 1.0 - rg
            self.rescan[m, t] = it.take_rescan()

    # --- after a step ---------------------------------------------------------------------------

    def after_step(self, events: StepEvents | None) -> list[tuple[int, str]]:
        """Messages for the seats after ``battle.step``: tick events, then round-ended / game-ended.

        A seat gets the tick while its tank was alive at the start of the step (so a bot sees
        its own death); it then owes an intent while its tank is alive, for a round's last tick
        too (``Seat.last_turn``: Tank Royale starts the next round a turn later), but not after
        the game's last round. Afterwards ``ended & ~finished`` are the matches to reset (then
        :meth:`round_started`), best after the turn's wait.
        """
        b = self.battle
        if events is None:
            raise ValueError("after_step needs the step's events: battle.record_events must be on")
        stepped = self._stepped & ~self.finished
        self._stepped = ~b.round_over
        fired = events.fired
        if len(fired):
            for m, slot in zip(fired.match.tolist(), fired.slot.tolist(), strict=True):
                self.next_bullet[m] += 1
                self.bullet_ids[m, slot] = self.next_bullet[m]
        died = self.alive_before & ~b.alive & stepped[:, None]
        self._score(events, died)
        out: list[tuple[int, str]] = []
        matches = [m for m in np.flatnonzero(stepped).tolist() if self._by_match[m]]
        if matches:
            out = self._ticks(events, died, matches)
        self.ended = stepped & b.round_over
        for m in np.flatnonzero(self.ended).tolist():
            out.extend(self._round_end(m))
        self.alive_before = b.alive.copy()
        return out

    def _score(self, events: StepEvents, died: NDArray[np.bool_]) -> None:
        """Keep Tank Royale's score parts (the engine keeps only their sum, ``battle.scores``)."""
        b = self.battle
        if not died.any():
            return
        parts = self.round_parts
        parts[..., _SURVIVAL] += b.rules.score_survival * died.sum(axis=1, keepdims=True) * b.alive
        hits = events.bullet_hits
        bonus: set[tuple[int, int, int]] = set()  # (match, shooter, victim): one kill bonus per killer
        for m, owner, victim in zip(hits.match.tolist(), hits.owner.tolist(), hits.victim.tolist(), strict=True):
            if died[m, victim] and (m, owner, victim) not in bonus:
                bonus.add((m, owner, victim))
                parts[m, owner, _BULLET_KILL] += b.rules.bonus_bullet_kill * b.bullet_damage_dealt[m, owner, victim]
        shot = {(m, victim) for m, _, victim in bonus}
        for m, rammer, victim in zip(*np.nonzero(events.rammed & died[:, None, :]), strict=True):
            if (int(m), int(victim)) not in shot:
                parts[m, rammer, _RAM_KILL] += b.rules.bonus_ram_kill * b.ram_damage_dealt[m, rammer, victim]

    def _round_end(self, m: int) -> list[tuple[int, str]]:
        """Close match ``m``'s round: score parts into the game totals, places, round-ended (and game-ended)."""
        b = self.battle
        T = b.n_tanks
        parts = self.round_parts[m]
        parts[:, _BULLET] = b.bullet_damage_dealt[m].sum(axis=1) * b.rules.score_bullet_damage
        parts[:, _RAM] = b.ram_damage_dealt[m].sum(axis=1) * b.rules.score_ram_damage
        if b.winner[m] >= 0:
            parts[b.winner[m], _LAST] = b.rules.score_last_survivor * (T - 1)
        self.parts[m] += parts
        self.totals[m] += b.scores[m]
        order = np.argsort(-b.scores[m], kind="stable")
        for place, t in enumerate(order[:3].tolist()):
            self.places[m, t, place] += 1
        round_number, turn = int(b.round[m]), int(b.tick[m])
        game_over = self.rounds is not None and round_number >= self.rounds
        if game_over:
            self.finished[m] = True
        out = []
        ranks = self._ranks(m)
        for i in self._by_match[m]:
            s = self.seats[i]
            if s.owes and (game_over or not s.last_turn):  # an unanswered earlier turn no longer counts
                s.owes = 0
                s.last_turn = False
                self.pending -= 1
            if not s.connected:
                continue
            results = self._results(m, s.tank, ranks)
            out.append((i, schema.round_ended(round_number, turn, results)))
            if game_over:
                out.append((i, schema.game_ended(round_number, results)))
        return out

    def _ranks(self, m: int) -> NDArray[np.int64]:
        order = np.argsort(-self.totals[m], kind="stable")
        ranks = np.empty(len(order), np.int64)
        ranks[order] = np.arange(1, len(order) + 1)
        return ranks

    def _results(self, m: int, t: int, ranks: NDArray[np.int64]) -> dict[str, int]:
        """``results-for-bot``: the game's accumulated score parts of tank ``t`` (rounded as Tank Royale does)."""
        p = self.parts[m, t]
        return {
            "rank": int(ranks[t]),
            "survival": round(float(p[_SURVIVAL])),
            "lastSurvivorBonus": round(float(p[_LAST])),
            "bulletDamage": round(float(p[_BULLET])),
            "bulletKillBonus": round(float(p[_BULLET_KILL])),
            "ramDamage": round(float(p[_RAM])),
            "ramKillBonus": round(float(p[_RAM_KILL])),
            "totalScore": round(float(self.totals[m, t])),
            "firstPlaces": int(self.places[m, t, 0]),
            "secondPlaces": int(self.places[m, t, 1]),
            "thirdPlaces": int(self.places[m, t, 2]),
        }

    def results(self, m: int, t: int) -> dict[str, int]:
        """Tank ``t``'s results so far in match ``m`` (what ``game-ended-event-for-bot`` carries)."""
        return self._results(m, t, self._ranks(m))

    def _ticks(self, events: StepEvents, died: NDArray[np.bool_], matches: list[int]) -> list[tuple[int, str]]:
        """One ``tick-event-for-bot`` per seat of ``matches`` whose tank was alive when the step began."""
        now = _TankLists.of(self.battle, events)
        inbox = _Inbox(matches)
        for m in matches:
            self._tank_events(m, events, died, now, inbox)
        self._bullet_events(events, inbox.add, now.energy)
        out: list[tuple[int, str]] = []
        for m in matches:
            out += self._match_ticks(m, now, inbox)
        return out

    def _tank_events(self, m: int, events: StepEvents, died: NDArray[np.bool_], now: _TankLists, inbox: _Inbox) -> None:
        """Match ``m``'s deaths (to every bot), round win, wall hits, collisions and scans (to the bots concerned)."""
        b = self.battle
        energy, x, y = now.energy, now.x, now.y
        turn = int(b.tick[m])
        common = inbox.public.setdefault(m, [])
        for victim in np.flatnonzero(died[m]).tolist():
            common.append({"type": "BotDeathEvent", "turnNumber": turn, "victimId": victim + 1})
        if b.round_over[m] and b.winner[m] >= 0:
            inbox.add(m, int(b.winner[m]), {"type": "WonRoundEvent", "turnNumber": turn})
        for t in np.flatnonzero(events.hit_wall[m]).tolist():
            inbox.add(m, t, {"type": "BotHitWallEvent", "turnNumber": turn, "victimId": t + 1})
        for t, j in zip(*np.nonzero(events.collided[m]), strict=True):
            t, j = int(t), int(j)
            inbox.add(
                m,
                t,
                {
                    "type": "BotHitBotEvent",
                    "turnNumber": turn,
                    "botId": t + 1,
                    "victimId": j + 1,
                    "energy": energy[m][j],
                    "x": x[m][j],
                    "y": y[m][j],
                    "rammed": bool(events.rammed[m, t, j]),
                },
            )
        for t, j in zip(*np.nonzero(events.scanned[m]), strict=True):
            t, j = int(t), int(j)
            inbox.add(
                m,
                t,
                {
                    "type": "ScannedBotEvent",
                    "turnNumber": turn,
                    "scannedByBotId": t + 1,
                    "scannedBotId": j + 1,
                    "energy": energy[m][j],
                    "x": x[m][j],
                    "y": y[m][j],
                    "direction": now.heading[m][j],
                    "speed": now.speed[m][j],
                },
            )

    def _match_ticks(self, m: int, now: _TankLists, inbox: _Inbox) -> list[tuple[int, str]]:
        """The tick events of match ``m``'s seats whose tank was alive when the step began; marks who owes an intent."""
        b = self.battle
        alive = now.alive
        turn = int(b.tick[m])
        over = bool(b.round_over[m])
        game_over = over and self.rounds is not None and int(b.round[m]) >= self.rounds
        bullets = self._bullet_states(m)
        out = []
        for i in self._by_match[m]:
            s = self.seats[i]
            t = s.tank
            if not (s.connected and self.alive_before[m, t]):
                continue
            state = {
                "energy": now.energy[m][t],
                "x": now.x[m][t],
                "y": now.y[m][t],
                "direction": now.heading[m][t],
                "gunDirection": now.gun[m][t],
                "radarDirection": now.radar[m][t],
                "radarSweep": now.sweep[m][t],
                "speed": now.speed[m][t],
                "turnRate": now.body_turn[m][t],
                "gunTurnRate": now.gun_turn[m][t],
                "radarTurnRate": now.radar_turn[m][t],
                "gunHeat": now.heat[m][t],
                "enemyCount": sum(alive[m]) - int(alive[m][t]),
                "isDroid": False,
            }
            own = [bs for bs in bullets if bs["ownerId"] == t + 1]
            tick = {
                "type": "TickEventForBot",
                "roundNumber": int(b.round[m]),
                "turnNumber": turn,
                "botState": state,
                "bulletStates": own,
                "events": inbox.private.get((m, t), []) + inbox.public.get(m, []),
            }
            out.append((i, schema.dumps(tick)))
            if alive[m][t] and not game_over:  # a round's last tick too (Tank Royale: see the module docstring)
                if not s.owes:  # (a seat still owing the last turn is counted once)
                    self.pending += 1
                s.owes = turn
                s.last_turn = over
        return out

    def _bullet_states(self, m: int) -> list[dict[str, Any]]:
        b = self.battle
        slots = np.flatnonzero(b.bullet_active[m]).tolist()
        if not slots:
            return []
        return [
            {
                "bulletId": int(self.bullet_ids[m, k]),
                "ownerId": int(b.bullet_owner[m, k]) + 1,
                "power": float(b.bullet_power[m, k]),
                "x": float(b.bullet_x[m, k]),
                "y": float(b.bullet_y[m, k]),
                "direction": float(b.bullet_heading[m, k]),
            }
            for k in slots
        ]

    def _bullet_events(self, events: StepEvents, add: Any, energy: list[list[float]]) -> None:
        """Fired, bullet-hit-bot, bullet-hit-wall and bullet-hit-bullet events, each to the bots Tank Royale sends it to."""
        b = self.battle

        def state(rec: BulletEvents, k: int) -> dict[str, Any]:
            m, slot = int(rec.match[k]), int(rec.slot[k])
            return {
                "bulletId": int(self.bullet_ids[m, slot]),
                "ownerId": int(rec.owner[k]) + 1,
                "power": float(rec.power[k]),
                "x": float(rec.x[k]),
                "y": float(rec.y[k]),
                "direction": float(rec.heading[k]),
            }

        fired = events.fired
        for k in range(len(fired)):
            m = int(fired.match[k])
            add(m, int(fired.owner[k]), {"type": "BulletFiredEvent", "turnNumber": int(b.tick[m]), "bullet": state(fired, k)})
        hits = events.bullet_hits
        for k in range(len(hits)):
            m, owner, victim = int(hits.match[k]), int(hits.owner[k]), int(hits.victim[k])
            hit = {
                "type": "BulletHitBotEvent",
                "turnNumber": int(b.tick[m]),
                "victimId": victim + 1,
                "bullet": state(hits, k),
                "damage": float(hits.damage[k]),
                "energy": energy[m][victim],
            }
            add(m, owner, hit)  # Tank Royale sends the shooter and the victim the same event; the
            add(m, victim, hit)  # victim's bot API turns it into its hit-by-bullet event (victimId == myId)
        walls = events.bullet_walls
        for k in range(len(walls)):
            m = int(walls.match[k])
            add(
                m, int(walls.owner[k]), {"type": "BulletHitWallEvent", "turnNumber": int(b.tick[m]), "bullet": state(walls, k)}
            )
        first, second = events.bullet_bullets
        for k in range(len(first)):
            m = int(first.match[k])
            turn = int(b.tick[m])
            one, two = state(first, k), state(second, k)
            add(m, int(first.owner[k]), {"type": "BulletHitBulletEvent", "turnNumber": turn, "bullet": one, "hitBullet": two})
            add(m, int(second.owner[k]), {"type": "BulletHitBulletEvent", "turnNumber": turn, "bullet": two, "hitBullet": one})


@dataclass(frozen=True)
class _TankLists:
    """The battle's tanks after a step and the step's turn rates, as nested Python lists ``[match][tank]``.

    One ``tolist`` per array for the whole step: the tick events read single floats, which numpy
    would hand out one scalar object at a time.
    """

    x: list[list[float]]
    y: list[list[float]]
    heading: list[list[float]]
    energy: list[list[float]]
    speed: list[list[float]]
    alive: list[list[bool]]
    gun: list[list[float]]
    radar: list[list[float]]
    heat: list[list[float]]
    body_turn: list[list[float]]
    gun_turn: list[list[float]]
    radar_turn: list[list[float]]
    sweep: list[list[float]]

    @classmethod
    def of(cls, b: TankBattle, events: StepEvents) -> _TankLists:
        return cls(
            x=b.x.tolist(),
            y=b.y.tolist(),
            heading=b.heading.tolist(),
            energy=b.energy.tolist(),
            speed=b.velocity.tolist(),
            alive=b.alive.tolist(),
            gun=b.gun_heading.tolist(),
            radar=b.radar_heading.tolist(),
            heat=b.gun_heat.tolist(),
            body_turn=events.body_turn.tolist(),
            gun_turn=events.gun_turn.tolist(),
            radar_turn=events.radar_turn.tolist(),
            sweep=events.radar_sweep.tolist(),
        )


class _Inbox:
    """One step's events for the seats of some matches: each tank's own, and each match's for every tank."""

    def __init__(self, matches: list[int]) -> None:
        self.wanted = set(matches)
        self.private: dict[tuple[int, int], list[dict[str, Any]]] = {}
        """(match, tank) → the events only that tank's bot gets."""
        self.public: dict[int, list[dict[str, Any]]] = {}
        """match → the events every bot of the match gets (after its own)."""

    def add(self, m: int, t: int, event: dict[str, Any]) -> None:
        """Give ``event`` to tank ``t`` of match ``m``; dropped when no tick of ``m`` is sent this step."""
        if m in self.wanted:
            self.private.setdefault((m, t), []).append(event)
