"""Bully, written with the official Python bot API: orbits while the fight is even and rams a weaker enemy.

Movement: while its energy is no more than 15 above the enemy's it orbits at 180-260 units, turning back every
25-60 turns (wall smoothing keeps it off the walls); once it is 15 ahead, or the enemy is below 15 energy, it rams:
full speed at where the enemy will be in a few turns.
Targeting: circular, the enemy's turn rate from two scans, iterated turn by turn.
Fire power: 3 within 150 units, 2 within 350, else 1.3.
Families: ramming, circular
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

MARGIN = 30


class Bully(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.evx = self.evy = 0.0
        self.enemy_energy = 100.0
        self.side = 1
        self.turn_back_at = 0
        self.last_direction = 0.0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.turn_back_at, self.enemy_energy = -100, 0, 100.0
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.move()
            self.go()

    def move(self) -> None:
        if self.energy > self.enemy_energy + 15 or self.enemy_energy < 15:
            d = self.distance_to(self.ex, self.ey)
            ahead = min(d / 8, 10)
            turn = self.bearing_to(self.ex + self.evx * ahead, self.ey + self.evy * ahead)
            self.set_turn_left(turn)
            self.target_speed = 8.0 if abs(turn) < 60 else 3.0
            return
        if self.turn_number >= self.turn_back_at:
            self.side = -self.side
            self.turn_back_at = self.turn_number + random.randint(25, 60)
        d = self.distance_to(self.ex, self.ey)
        lean = 25 if d > 260 else -25 if d < 180 else 0
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
        speed = 7.0
        turn = self.calc_bearing(heading)
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        turn = self.normalize_relative_angle(e.direction - self.last_direction) / gap if 0 < gap <= 3 else 0.0
        turn = max(-10.0, min(10.0, turn))
        self.seen = self.turn_number
        self.last_direction = e.direction
        self.ex, self.ey, self.enemy_energy = e.x, e.y, e.energy
        self.evx = e.speed * math.cos(math.radians(e.direction))
        self.evy = e.speed * math.sin(math.radians(e.direction))
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 3.0 if d < 150 else 2.0 if d < 350 else 1.3
        if self.energy <= power + 0.1:
            return
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
    Bully().start()
