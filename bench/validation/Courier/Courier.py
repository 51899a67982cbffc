"""Courier, written with the official Python bot API: drives from one random point of the field to the next.

Movement: random points. It draws a destination anywhere in the field at least 60 units from the walls and 150 from
the enemy, drives there at full speed (slowing to turn), and draws the next when it arrives or after 30-60 turns.
Targeting: circular, the enemy's turn rate averaged over its last 3 scans, iterated turn by turn.
Fire power: 2.0 within 300 units, else 1.4.
Families: random points, circular
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

WALL = 60


class Courier(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.goal = (0.0, 0.0)
        self.redraw_at = 0
        self.last_direction = 0.0
        self.turns: list[float] = []

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.redraw_at, self.turns = -100, 0, []
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        self.goal = (self.x, self.y)
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.drive()
            self.go()

    def new_goal(self) -> None:
        for _ in range(50):
            gx = random.uniform(WALL, self.arena_width - WALL)
            gy = random.uniform(WALL, self.arena_height - WALL)
            if math.hypot(gx - self.ex, gy - self.ey) >= 150 and math.hypot(gx - self.x, gy - self.y) >= 80:
                break
        self.goal = (gx, gy)
        self.redraw_at = self.turn_number + random.randint(30, 60)

    def drive(self) -> None:
        if self.distance_to(*self.goal) < 25 or self.turn_number >= self.redraw_at:
            self.new_goal()
        turn = self.bearing_to(*self.goal)
        speed = 8.0
        if abs(turn) > 90:  # back there instead of turning round
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        if abs(turn) > 40:
            speed *= 0.4
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        if 0 < gap <= 3:
            rate = max(-10.0, min(10.0, self.normalize_relative_angle(e.direction - self.last_direction) / gap))
            self.turns = [*self.turns[-2:], rate]
        else:
            self.turns = []
        self.seen = self.turn_number
        self.last_direction = e.direction
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 2.0 if d < 300 else 1.4
        if self.energy <= power + 0.1:
            return
        turn = sum(self.turns) / len(self.turns) if self.turns else 0.0
        bullet = 20 - 3 * power
        px, py, heading = e.x, e.y, e.direction
        for t in range(1, 100):
            heading += turn
            nx = px + e.speed * math.cos(math.radians(heading))
            ny = py + e.speed * math.sin(math.radians(heading))
            if not (18 <= nx <= self.arena_width - 18 and 18 <= ny <= self.arena_height - 18):
                break
            px, py = nx, ny
            if bullet * t >= self.distance_to(px, py):
                break
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Courier().start()
