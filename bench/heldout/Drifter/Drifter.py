"""Drifter, written with the official Python bot API: wanders at random, aims by circular targeting on averaged motion.

Movement: random: every 15-45 turns a new random heading and a new random speed (3-8); when the path 120 units ahead
leaves the field, a new heading towards the middle of the field (give or take 60 degrees).
Targeting: circular, from the enemy's turn rate and speed averaged over its last 6 scans (smoothed, not the last step).
Fire power: 3 within 120 units, 1.8 while its energy is above 40, else 1.
Families: circular
"""

import math
import random
from collections import deque

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitWallEvent, ScannedBotEvent

MARGIN = 30


class Drifter(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.heading = 0.0
        self.speed_goal = 5.0
        self.change_at = 0
        self.last_direction = 0.0
        self.turns: deque[float] = deque(maxlen=6)  # the enemy's recent turn rates
        self.speeds: deque[float] = deque(maxlen=6)  # and speeds

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.change_at = 0
        self.turns.clear()
        self.speeds.clear()
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.turn_number >= self.change_at:
                self.heading = random.uniform(0, 360)
                self.speed_goal = random.uniform(3, 8)
                self.change_at = self.turn_number + random.randint(15, 45)
            if not self.clear(self.heading):
                self.to_middle()
            turn = self.calc_bearing(self.heading)
            speed = self.speed_goal
            if abs(turn) > 90:
                turn = self.normalize_relative_angle(turn + 180)
                speed = -speed
            self.set_turn_left(turn)
            self.target_speed = speed
            self.go()

    def clear(self, heading: float) -> bool:
        x = self.x + 120 * math.cos(math.radians(heading))
        y = self.y + 120 * math.sin(math.radians(heading))
        return MARGIN < x < self.arena_width - MARGIN and MARGIN < y < self.arena_height - MARGIN

    def to_middle(self) -> None:
        self.heading = self.direction_to(self.arena_width / 2, self.arena_height / 2) + random.uniform(-60, 60)
        self.change_at = self.turn_number + random.randint(15, 45)

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.to_middle()

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        if 0 < gap <= 3:
            self.turns.append(max(-10.0, min(10.0, self.normalize_relative_angle(e.direction - self.last_direction) / gap)))
        else:
            self.turns.clear()
            self.speeds.clear()
        self.speeds.append(e.speed)
        self.seen = self.turn_number
        self.last_direction = e.direction
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 3.0 if d < 120 else 1.8 if self.energy > 40 else 1.0
        if self.energy <= power + 0.2:
            power = self.energy / 5
        if power < 0.1:
            return
        turn = sum(self.turns) / len(self.turns) if self.turns else 0.0
        speed = sum(self.speeds) / len(self.speeds)
        bullet = 20 - 3 * power
        px, py, heading = e.x, e.y, e.direction
        for t in range(1, 120):
            heading += turn
            nx = px + speed * math.cos(math.radians(heading))
            ny = py + speed * math.sin(math.radians(heading))
            if not (18 <= nx <= self.arena_width - 18 and 18 <= ny <= self.arena_height - 18):
                break
            px, py = nx, ny
            if bullet * (t - 1) >= self.distance_to(px, py):
                break
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(16 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Drifter().start()
