"""Duelist, written with the official Python bot API: three guns, and it fires the one that would have hit most.

Movement: orbits at 200-300 units; every 8-20 turns it draws a new speed (2-8) and, one time in three, turns back;
wall smoothing keeps it off the walls.
Targeting: virtual guns. At every scan it aims head-on, linear and circular (turn rate from two scans), and sends a
virtual bullet along each aim; a virtual bullet that passes within 20 units of the enemy scores for its gun. It
fires the real bullet along the gun with the best score so far (circular on ties).
Fire power: 2.4 within 250 units, else 1.6.
Families: virtual guns, linear, circular
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitWallEvent, ScannedBotEvent

MARGIN = 30
GUNS = ("circular", "linear", "head-on")


class Duelist(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.side = 1
        self.speed_now = 8.0
        self.redraw_at = 0
        self.last_direction = 0.0
        self.scores = {gun: 0 for gun in GUNS}
        self.virtual: list[tuple[str, float, float, float, float, int]] = []  # gun, x, y, angle, speed, turn

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.redraw_at, self.virtual = -100, 0, []
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.orbit()
            self.go()

    def orbit(self) -> None:
        if self.turn_number >= self.redraw_at:
            self.speed_now = random.uniform(2.0, 8.0)
            self.redraw_at = self.turn_number + random.randint(8, 20)
            if random.random() < 1 / 3:
                self.side = -self.side
        d = self.distance_to(self.ex, self.ey)
        lean = 25 if d > 300 else -25 if d < 200 else 0
        heading = self.direction_to(self.ex, self.ey) + self.side * (90 - lean)
        for step in range(36):
            h = heading + 5 * self.side * step
            px = self.x + 110 * math.cos(math.radians(h))
            py = self.y + 110 * math.sin(math.radians(h))
            if MARGIN < px < self.arena_width - MARGIN and MARGIN < py < self.arena_height - MARGIN:
                heading = h
                break
        else:
            self.side = -self.side
        speed = self.speed_now
        turn = self.calc_bearing(heading)
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.side = -self.side

    def aim(self, e: ScannedBotEvent, turn: float, speed: float, bullet: float) -> float:
        """The absolute direction to where the enemy is when the bullet gets there, if it keeps turn rate and speed."""
        px, py, heading = e.x, e.y, e.direction
        for t in range(1, 100):
            heading += turn
            nx = px + speed * math.cos(math.radians(heading))
            ny = py + speed * math.sin(math.radians(heading))
            if not (18 <= nx <= self.arena_width - 18 and 18 <= ny <= self.arena_height - 18):
                break
            px, py = nx, ny
            if bullet * t >= self.distance_to(px, py):
                break
        return self.direction_to(px, py)

    def score_virtual(self, e: ScannedBotEvent) -> None:
        alive = []
        for gun, x, y, angle, speed, turn in self.virtual:
            travelled = speed * (self.turn_number - turn)
            bx = x + travelled * math.cos(math.radians(angle))
            by = y + travelled * math.sin(math.radians(angle))
            if math.hypot(bx - e.x, by - e.y) < 20:
                self.scores[gun] += 1
            elif travelled < math.hypot(e.x - x, e.y - y) + 40:
                alive.append((gun, x, y, angle, speed, turn))
        self.virtual = alive[-300:]

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        turn = self.normalize_relative_angle(e.direction - self.last_direction) / gap if 0 < gap <= 3 else 0.0
        turn = max(-10.0, min(10.0, turn))
        self.seen = self.turn_number
        self.last_direction = e.direction
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        self.score_virtual(e)
        power = 2.4 if d < 250 else 1.6
        bullet = 20 - 3 * power
        aims = {
            "circular": self.aim(e, turn, e.speed, bullet),
            "linear": self.aim(e, 0.0, e.speed, bullet),
            "head-on": self.direction_to(e.x, e.y),
        }
        for gun, angle in aims.items():
            self.virtual.append((gun, self.x, self.y, angle, bullet, self.turn_number))
        best = max(GUNS, key=lambda g: self.scores[g])
        gun = self.normalize_relative_angle(aims[best] - self.gun_direction)
        if self.gun_heat == 0 and self.energy > power + 0.1 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Duelist().start()
