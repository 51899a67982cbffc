"""Arc, written with the official Python bot API: drives in arcs (a constant turn while moving), aims by circular targeting.

Movement: a constant speed (6-8) and a constant turn rate (2-6 degrees a turn, either way), both redrawn every 25-70
turns, so it drives arcs of changing radius; near a wall it turns at full rate towards the middle of the field; hitting a
wall or a bot reverses it.
Targeting: circular: the enemy's turn rate is measured between two scans, and its path (that turn rate at its speed,
stopped by the walls) is stepped turn by turn until a bullet could meet it.
Fire power: 2.4 within 200 units, else 1.7; at most a sixth of its energy.
Families: circular
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitBotEvent, HitWallEvent, ScannedBotEvent

LOOKAHEAD = 110  # how far ahead (along its motion) a wall counts as near


class Arc(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.speed_sign = 1
        self.rate = 4.0
        self.speed_goal = 7.0
        self.redraw_at = 0
        self.last_direction = 0.0  # the enemy's heading at the last scan

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.redraw_at = 0
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.turn_number >= self.redraw_at:
                self.rate = random.choice((-1, 1)) * random.uniform(2, 6)
                self.speed_goal = random.uniform(6, 8)
                self.redraw_at = self.turn_number + random.randint(25, 70)
            self.steer()
            self.go()

    def steer(self) -> None:
        motion = self.direction if self.speed_sign > 0 else self.direction + 180
        ahead_x = self.x + LOOKAHEAD * math.cos(math.radians(motion))
        ahead_y = self.y + LOOKAHEAD * math.sin(math.radians(motion))
        margin = 30
        if not (margin < ahead_x < self.arena_width - margin and margin < ahead_y < self.arena_height - margin):
            centre = self.direction_to(self.arena_width / 2, self.arena_height / 2)
            off = self.normalize_relative_angle(centre - motion)
            self.turn_rate = 10.0 if off >= 0 else -10.0
        else:
            self.turn_rate = self.rate
        self.target_speed = self.speed_sign * self.speed_goal

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.speed_sign = -self.speed_sign

    def on_hit_bot(self, e: HitBotEvent) -> None:
        if e.rammed:
            self.speed_sign = -self.speed_sign

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        turn = self.normalize_relative_angle(e.direction - self.last_direction) / gap if 0 < gap <= 3 else 0.0
        turn = max(-10.0, min(10.0, turn))
        self.seen = self.turn_number
        self.last_direction = e.direction
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = min(2.4 if d < 200 else 1.7, self.energy / 6)
        if power < 0.1:
            return
        aim = self.circular(e, turn, power)
        gun = self.calc_gun_bearing(aim)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(16 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)

    def circular(self, e: ScannedBotEvent, turn: float, power: float) -> float:
        """The direction to fire along to meet a bot that keeps its speed and turn rate."""
        bullet = 20 - 3 * power
        px, py, heading = e.x, e.y, e.direction
        for t in range(1, 120):
            heading += turn
            nx = px + e.speed * math.cos(math.radians(heading))
            ny = py + e.speed * math.sin(math.radians(heading))
            if not (18 <= nx <= self.arena_width - 18 and 18 <= ny <= self.arena_height - 18):
                break  # it stops at the wall
            px, py = nx, ny
            if bullet * (t - 1) >= self.distance_to(px, py):  # the shot leaves next turn
                break
        return self.direction_to(px, py)


if __name__ == "__main__":
    Arc().start()
