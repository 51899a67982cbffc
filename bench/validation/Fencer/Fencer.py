"""Fencer, written with the official Python bot API: keeps its distance, moves in starts and stops, fires fast.

Movement: stop-and-go at long range. It runs across the line to the enemy at full speed for 10-25 turns, then
stands for 4-15 turns, and picks a random side for each run; it leans out below 450 units and in beyond 600, and
wall smoothing keeps it off the walls.
Targeting: linear, exact (the quadratic intercept of a straight line at constant speed), clipped to the field.
Fire power: 0.8, fast bullets, whenever the gun is cold.
Families: linear
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

MARGIN = 30


class Fencer(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.side = 1
        self.running_until = 0
        self.standing_until = 0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.running_until, self.standing_until = -100, 0, 0
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.move()
            self.go()

    def move(self) -> None:
        now = self.turn_number
        if now >= self.running_until and now >= self.standing_until:
            self.side = random.choice((-1, 1))
            self.running_until = now + random.randint(10, 25)
            self.standing_until = self.running_until + random.randint(4, 15)
        d = self.distance_to(self.ex, self.ey)
        lean = 30 if d > 600 else -30 if d < 450 else 0
        heading = self.direction_to(self.ex, self.ey) + self.side * (90 - lean)
        for step in range(36):
            h = heading + 5 * self.side * step
            px = self.x + 100 * math.cos(math.radians(h))
            py = self.y + 100 * math.sin(math.radians(h))
            if MARGIN < px < self.arena_width - MARGIN and MARGIN < py < self.arena_height - MARGIN:
                heading = h
                break
        else:
            self.side = -self.side
        speed = 8.0 if now < self.running_until else 0.0
        turn = self.calc_bearing(heading)
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 0.8
        if self.energy <= power + 0.1:
            return
        bullet = 20 - 3 * power
        vx = e.speed * math.cos(math.radians(e.direction))
        vy = e.speed * math.sin(math.radians(e.direction))
        rx, ry = e.x - self.x, e.y - self.y
        a = vx * vx + vy * vy - bullet * bullet
        b = 2 * (rx * vx + ry * vy)
        c = rx * rx + ry * ry
        disc = b * b - 4 * a * c
        t = (-b - math.sqrt(disc)) / (2 * a) if disc >= 0 and a < 0 else 0.0
        px = min(max(e.x + vx * t, 18), self.arena_width - 18)
        py = min(max(e.y + vy * t, 18), self.arena_height - 18)
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Fencer().start()
