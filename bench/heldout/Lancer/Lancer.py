"""Lancer, written with the official Python bot API: orbits its enemy at 250-400 units, aims by linear iterative intercept.

Movement: perpendicular orbit at a preferred distance drawn in 250-400 (pulled in or pushed out by up to 35 degrees),
its direction flipped at random intervals of 12-50 turns and when a wall corners it; wall smoothing.
Targeting: linear, iterative intercept (the enemy's heading and speed, the bullet's flight time, a dozen iterations).
Fire power: by distance, 1.2 + 240 / distance, in [0.6, 3].
Families: linear
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitWallEvent, ScannedBotEvent

MARGIN = 26  # how close to a wall the projected path may come
REACH = 120  # how far ahead the path is projected for wall smoothing


class Lancer(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100  # turn of the last scan
        self.ex = self.ey = 0.0  # the enemy's last known position
        self.sweep = 1  # the way the radar searches
        self.orbit = 1  # 1 counter-clockwise around the enemy, -1 clockwise
        self.flip_at = 0
        self.distance = 300.0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        self.distance = random.uniform(250, 400)
        self.flip_at = random.randint(12, 50)
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.turn_number >= self.flip_at:
                self.orbit = -self.orbit
                self.flip_at = self.turn_number + random.randint(12, 50)
                self.distance = random.uniform(250, 400)
            self.move()
            self.go()

    def move(self) -> None:
        bearing = self.direction_to(self.ex, self.ey)
        gap = self.distance_to(self.ex, self.ey) - self.distance
        pull = max(-35.0, min(35.0, gap / 4))  # > 0: too far, lean towards the enemy
        heading = bearing + self.orbit * (90 - pull)
        heading, rotated = self.smooth(heading, self.orbit)
        if rotated > 90:  # cornered: go round the other way
            self.orbit = -self.orbit
        self.drive(heading, 8)

    def smooth(self, heading: float, side: int) -> tuple[float, float]:
        """Turn ``heading`` by ``side`` until the path ``REACH`` ahead stays inside the walls; return it and the turn."""
        for step in range(72):
            h = heading + 5 * side * step
            px = self.x + REACH * math.cos(math.radians(h))
            py = self.y + REACH * math.sin(math.radians(h))
            if MARGIN < px < self.arena_width - MARGIN and MARGIN < py < self.arena_height - MARGIN:
                return h, 5 * step
        return heading, 360

    def drive(self, heading: float, speed: float) -> None:
        turn = self.calc_bearing(heading)
        if abs(turn) > 90:  # backwards is the shorter way
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed if abs(turn) < 40 else speed / 2

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.orbit = -self.orbit

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        # Radar lock: turn past the enemy by about its width, so the next sweep crosses it again.
        radar = self.radar_bearing_to(e.x, e.y)
        extra = min(math.degrees(math.atan(36 / d)), 20)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * extra)

        power = max(0.6, min(3.0, 1.2 + 240 / d))
        power = min(power, self.energy / 4)
        aim = self.intercept(e, power)
        turn = self.calc_gun_bearing(aim)
        tolerance = math.degrees(math.atan(16 / d))
        if self.gun_heat == 0 and power >= 0.1 and abs(turn) < tolerance:
            self.set_fire(power)
        self.set_turn_gun_left(turn)

    def intercept(self, e: ScannedBotEvent, power: float) -> float:
        """The direction to fire along to meet a bot that keeps its heading and speed."""
        speed = 20 - 3 * power
        vx = e.speed * math.cos(math.radians(e.direction))
        vy = e.speed * math.sin(math.radians(e.direction))
        px, py = e.x, e.y
        for _ in range(12):
            t = self.distance_to(px, py) / speed + 1  # the shot leaves next turn
            px = min(max(e.x + vx * t, 18), self.arena_width - 18)
            py = min(max(e.y + vy * t, 18), self.arena_height - 18)
        return self.direction_to(px, py)


if __name__ == "__main__":
    Lancer().start()
