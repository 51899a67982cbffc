"""An Arena Trainer policy playing Robocode Tank Royale, on the official Python bot API.

``arena export CHECKPOINT --royale -o DIR`` copies this file into the bot directory as
``DIR/<NAME>.py`` (see :mod:`arena.royale.export`). It needs numpy, msgpack and
robocode-tank-royale, nothing of Arena Trainer.

Each turn it rebuilds the arena's observation from its own state and the enemy's last scan, runs
the policy (sampling, as it trained; ``ARENA_POLICY_MEAN=1`` uses the mean action) and sends the
action as a ``bot-intent``. A policy of the full observation (25 columns) was trained on perfect
information, so its radar column is not used and the bot keeps its radar locked on the enemy
instead. A policy of the radar observation (28 columns: the radar's direction and the scan's age
follow) was trained on what its own radar saw, so it turns its own radar, and a recurrent one
carries its state from turn to turn (zeros at each round's start). ``ARENA_BOT_LOG=FILE`` writes one
JSON line per turn for checking the bot against the arena.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if (HERE / "bot_protocol").is_dir():
    sys.path.insert(0, str(HERE))  # the bot_protocol copy next to this file (the exported bot directory)

from robocode_tank_royale.bot_api.bot import Bot  # noqa: E402
from robocode_tank_royale.bot_api.bot_info import BotInfo  # noqa: E402
from robocode_tank_royale.bot_api.events.bot_death_event import BotDeathEvent  # noqa: E402
from robocode_tank_royale.bot_api.events.round_started_event import RoundStartedEvent  # noqa: E402
from robocode_tank_royale.bot_api.events.scanned_bot_event import ScannedBotEvent  # noqa: E402

from bot_protocol import Policy, Weights, decode_from_server  # noqa: E402

OBS_DIM, RADAR_OBS_DIM, ACT_DIM = 25, 28, 5
LEAD_POWER = 2.0
SCAN_AGE_TICKS = 100.0


def _rules() -> dict[str, float]:
    """The constants the policy was trained with (``policy.json``, written by the export)."""
    path = HERE / "policy.json"
    return dict(json.loads(path.read_text())["rules"]) if path.is_file() else {}


def observe(
    me: dict[str, float],
    enemy: dict[str, float] | None,
    enemies_alive: int,
    width: float,
    height: float,
    rules: dict[str, float],
) -> np.ndarray:
    """The arena's observation of one tank (see ``arena.games.tank.engine.TankBattle.observe``), from Tank Royale state.

    ``me``: x, y, direction, speed, energy, gun_direction, gun_heat; ``enemy``: the nearest
    enemy's last scan (x, y, direction, speed, energy) or None.
    """
    rad, vmax = rules.get("tank_radius", 18.0), rules.get("max_speed", 8.0)
    e0, heat0 = rules.get("start_energy", 100.0), rules.get("start_gun_heat", 3.0)
    diag = math.hypot(width, height)
    deg = math.pi / 180.0
    x, y = me["x"], me["y"]
    h, g = me["direction"] * deg, me["gun_direction"] * deg
    sh, ch, sg, cg = math.sin(h), math.cos(h), math.sin(g), math.cos(g)
    o = np.zeros(OBS_DIM)
    o[0], o[1] = x * (2.0 / width) - 1.0, y * (2.0 / height) - 1.0
    o[2], o[3] = sh, ch
    o[4], o[5] = me["speed"] * (1.0 / vmax), me["energy"] * (1.0 / e0)
    o[6], o[7] = sg * ch - cg * sh, cg * ch + sg * sh
    o[8] = me["gun_heat"] * (1.0 / heat0)
    if enemy is not None:
        dx, dy = enemy["x"] - x, enemy["y"] - y
        dist = math.sqrt(dx * dx + dy * dy)
        inv_d = 1.0 / max(dist, 1e-12)  # the same operations as the engine, so the floats agree
        ux, uy = dx * inv_d, dy * inv_d
        o[9], o[10] = uy * ch - ux * sh, ux * ch + uy * sh
        o[11] = dist * (1.0 / diag)
        o[12] = enemy["energy"] * (1.0 / e0)
        eh = enemy["direction"] * deg
        seh, ceh = math.sin(eh), math.cos(eh)
        o[13], o[14] = seh * ch - ceh * sh, ceh * ch + seh * sh
        o[15] = enemy["speed"] * (1.0 / vmax)
        o[16], o[17] = uy * cg - ux * sg, ux * cg + uy * sg
        # Linear targeting: where a power-2 bullet meets the enemy if it keeps its heading and speed.
        speed = rules.get("bullet_speed_base", 20.0) - rules.get("bullet_speed_factor", 3.0) * LEAD_POWER
        vx, vy = enemy["speed"] * ceh, enemy["speed"] * seh
        px, py = enemy["x"], enemy["y"]
        for _ in range(3):
            t = math.hypot(px - x, py - y) / speed + 1.0
            px = min(max(enemy["x"] + vx * t, rad), width - rad)
            py = min(max(enemy["y"] + vy * t, rad), height - rad)
        lx, ly = px - x, py - y
        inv_l = 1.0 / max(math.hypot(lx, ly), 1e-12)
        lux, luy = lx * inv_l, ly * inv_l
        o[23], o[24] = luy * cg - lux * sg, lux * cg + luy * sg
    east, west, north, south = width - rad - x, x - rad, height - rad - y, y - rad
    inv_c, inv_s = 1.0 / max(abs(ch), 1e-9), 1.0 / max(abs(sh), 1e-9)
    pc, ps = ch >= 0.0, sh >= 0.0
    ec, wc = (east if pc else west) * inv_c, (west if pc else east) * inv_c
    ns, ss = (north if ps else south) * inv_s, (south if ps else north) * inv_s
    es, ws = (west if ps else east) * inv_s, (east if ps else west) * inv_s
    nc, sc = (north if pc else south) * inv_c, (south if pc else north) * inv_c
    inv = 1.0 / diag
    o[18] = min(min(ec, ns) * inv, 1.0)
    o[19] = min(min(es, nc) * inv, 1.0)
    o[20] = min(min(wc, ss) * inv, 1.0)
    o[21] = min(min(ws, sc) * inv, 1.0)
    o[22] = enemies_alive * (1.0 / 7.0)
    return o.astype(np.float32)


def observe_radar(
    me: dict[str, float],
    enemy: dict[str, float] | None,
    enemies_alive: int,
    width: float,
    height: float,
    rules: dict[str, float],
    age: float,
) -> np.ndarray:
    """The arena's radar observation (``arena.games.tank.radar``): :func:`observe`, then the radar's direction
    relative to the body and the scan's age in turns (``age``; inf before the first scan)."""
    radar = (me["radar_direction"] - me["direction"]) * (math.pi / 180.0)
    extra = [math.sin(radar), math.cos(radar), min(age / SCAN_AGE_TICKS, 1.0)]
    return np.concatenate([observe(me, enemy, enemies_alive, width, height, rules), np.array(extra, np.float32)])


def next_speed(speed: float, target: float, rules: dict[str, float]) -> float:
    """The speed after one turn of driving toward ``target`` (Tank Royale's calcNewBotSpeed, as the arena)."""
    vmax = rules.get("max_speed", 8.0)
    target = min(max(target, -vmax), vmax)
    delta = target - speed
    up = speed == 0.0 or (speed > 0.0) == (delta >= 0.0)
    limit = rules.get("acceleration", 1.0) if up else rules.get("deceleration", 2.0)
    return min(max(speed + min(max(delta, -limit), limit), -vmax), vmax)


class ArenaPolicyBot(Bot):
    """The exported policy (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(bot_info=BotInfo.from_file(str(Path(__file__).with_suffix(".json"))))
        message = decode_from_server((HERE / "policy.weights").read_bytes())
        assert isinstance(message, Weights), "policy.weights holds no weights message"
        self.policy = Policy.from_weights(message)
        self.rules = _rules()
        self.stochastic = os.environ.get("ARENA_POLICY_MEAN", "") in ("", "0")
        self.rng = np.random.default_rng(int(os.environ.get("ARENA_POLICY_SEED", "0")))
        self.enemy: dict[str, float] | None = None
        self.enemy_id: int | None = None
        self.seen_turn = -1
        self.on_radar = self.policy.obs_dim == RADAR_OBS_DIM
        """A radar-observation policy turns its own radar; a full-observation one has it locked on the enemy."""
        self.state = self.policy.initial_state(1)
        log = os.environ.get("ARENA_BOT_LOG")
        self.log = open(log, "a", encoding="utf-8") if log else None  # noqa: SIM115

    def on_round_started(self, round_started_event: RoundStartedEvent) -> None:
        self.enemy, self.enemy_id, self.seen_turn = None, None, -1
        self.state = self.policy.initial_state(1)

    def on_scanned_bot(self, scanned_bot_event: ScannedBotEvent) -> None:
        e = scanned_bot_event
        if self.enemy is None or e.scanned_bot_id == self.enemy_id or self._closer(e):
            self.enemy = {"x": e.x, "y": e.y, "direction": e.direction, "speed": e.speed, "energy": e.energy}
            self.enemy_id, self.seen_turn = e.scanned_bot_id, e.turn_number

    def _closer(self, e: ScannedBotEvent) -> bool:
        assert self.enemy is not None
        return math.hypot(e.x - self.x, e.y - self.y) < math.hypot(self.enemy["x"] - self.x, self.enemy["y"] - self.y)

    def on_bot_death(self, bot_death_event: BotDeathEvent) -> None:
        if bot_death_event.victim_id == self.enemy_id:
            self.enemy, self.enemy_id = None, None

    def run(self) -> None:
        # The lock below is absolute, so its radar turns on its own; a radar policy's rides on the gun, as in the arena.
        self.adjust_radar_for_body_turn = not self.on_radar
        self.adjust_radar_for_gun_turn = not self.on_radar
        while self.running:
            me = {
                "x": self.x,
                "y": self.y,
                "direction": self.direction,
                "speed": self.speed,
                "energy": self.energy,
                "gun_direction": self.gun_direction,
                "gun_heat": self.gun_heat,
                "radar_direction": self.radar_direction,
            }
            world = (me, self.enemy, self.enemy_count, self.arena_width, self.arena_height, self.rules)
            if self.on_radar:
                age = math.inf if self.enemy is None else float(self.turn_number - self.seen_turn)
                obs = observe_radar(*world, age)
            else:
                obs = observe(*world)
            if self.policy.state_size:
                (actions, _), self.state = self.policy.step(obs[None], self.state, self.rng, not self.stochastic)
            else:
                actions, _ = self.policy.act(obs[None], self.rng, deterministic=not self.stochastic)
            action = np.clip(np.nan_to_num(actions[0].astype(np.float64)), -1.0, 1.0)
            self._intend(action)
            if self.on_radar:
                self.radar_turn_rate = float(action[4]) * self.rules.get("max_radar_turn_rate", 45.0)
            else:
                self._radar()
            if self.log is not None:
                self.log.write(
                    json.dumps(
                        {
                            "round": self.round_number,
                            "turn": self.turn_number,
                            "fresh": self.seen_turn == self.turn_number,
                            "obs": obs.tolist(),
                            "action": action.tolist(),
                        }
                    )
                    + "\n"
                )
            self.go()

    def _intend(self, action: Any) -> None:
        """Our action scale → Tank Royale's intent (the inverse of the arena's Tank Royale seat)."""
        r = self.rules
        vmax = r.get("max_speed", 8.0)
        target = float(action[0]) * vmax
        limit = r.get("max_turn_rate", 10.0) - r.get("turn_rate_speed_factor", 0.75) * abs(next_speed(self.speed, target, r))
        self.target_speed = target
        self.turn_rate = float(action[1]) * limit
        self.gun_turn_rate = float(action[2]) * r.get("max_gun_turn_rate", 20.0)
        if action[3] > 0.0:
            lo, hi = r.get("min_bullet_power", 0.1), r.get("max_bullet_power", 3.0)
            power = lo + float(action[3]) * (hi - lo)
            if self.energy > power:
                self.set_fire(power)

    def _radar(self) -> None:
        """Keep the radar on the enemy: turn past its bearing (the sweep then covers it next turn); spin while searching."""
        if self.enemy is None or self.turn_number - self.seen_turn > 2:
            self.radar_turn_rate = 45.0
            return
        bearing = math.degrees(math.atan2(self.enemy["y"] - self.y, self.enemy["x"] - self.x))
        turn = (bearing - self.radar_direction + 180.0) % 360.0 - 180.0
        self.radar_turn_rate = max(-45.0, min(45.0, 2.0 * turn))


if __name__ == "__main__":
    ArenaPolicyBot().start()
