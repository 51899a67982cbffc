"""Sniper, written with the official Python bot API: holds the corner furthest from its enemy and fires heavy linear shots.

Movement: once it has seen the enemy, it drives (blocking turn_left / forward calls) to the corner furthest from it, 40
units in from both walls, and sits there; after two bullet hits in that corner it moves to the corner then furthest from
the enemy.
Targeting: linear, exact: the intercept time solved from the quadratic |D + v t| = s t (D the enemy's offset, v its
velocity, s the bullet's speed), from where the enemy will be when the shot leaves.
Fire power: high: 3 while its energy is above 30, 2 above 15, else 1.
Families: linear
"""

import math

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitByBulletEvent, ScannedBotEvent

INSET = 40


class Sniper(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.corner: tuple[float, float] | None = None
        self.hits_here = 0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.corner = None
        self.hits_here = 0
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.seen >= 0 and (self.corner is None or self.hits_here >= 2):
                self.relocate()
            else:
                self.go()

    def relocate(self) -> None:
        w, h = self.arena_width, self.arena_height
        corners = [(INSET, INSET), (w - INSET, INSET), (w - INSET, h - INSET), (INSET, h - INSET)]
        if self.corner is not None:
            corners.remove(self.corner)
        self.corner = max(corners, key=lambda c: math.hypot(c[0] - self.ex, c[1] - self.ey))
        self.hits_here = 0
        x, y = self.corner
        turn = self.bearing_to(x, y)
        if abs(turn) > 90:  # back into it
            self.turn_left(self.normalize_relative_angle(turn + 180))
            self.back(self.distance_to(x, y))
        else:
            self.turn_left(turn)
            self.forward(self.distance_to(x, y))

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.hits_here += 1

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 3.0 if self.energy > 30 else 2.0 if self.energy > 15 else 1.0
        if self.energy <= power + 0.5:
            return
        s = 20 - 3 * power
        vx = e.speed * math.cos(math.radians(e.direction))
        vy = e.speed * math.sin(math.radians(e.direction))
        dx, dy = e.x + vx - self.x, e.y + vy - self.y  # where it is when the shot leaves
        a = vx * vx + vy * vy - s * s  # < 0: a bullet outruns any bot
        b = 2 * (dx * vx + dy * vy)
        c = dx * dx + dy * dy
        t = (-b - math.sqrt(b * b - 4 * a * c)) / (2 * a)
        px = min(max(self.x + dx + vx * t, 18), self.arena_width - 18)
        py = min(max(self.y + dy + vy * t, 18), self.arena_height - 18)
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(12 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Sniper().start()
