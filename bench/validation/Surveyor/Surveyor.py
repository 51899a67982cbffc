"""Surveyor, written with the official Python bot API: learns where its enemy tends to go and shoots there.

Movement: creeps perpendicular to the enemy at speed 3 and every 30-50 turns dashes at full speed for 8-14 turns,
to a random side; it keeps 250-400 units and wall smoothing keeps it off the walls.
Targeting: guess factors. At every scan it sends a wave from where it stands; when a wave reaches the enemy it
records which part of the escape angle (from -1, all the way back, to +1, all the way on in the enemy's sideways
direction) the enemy had moved to, in 31 bins, and it aims at the bin seen most.
Fire power: 1.9 (1.2 below 30 energy).
Families: guess factor
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

MARGIN = 30
BINS = 31


class Surveyor(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.side = 1
        self.dash_at = 40
        self.dash_until = 0
        self.stats = [0.0] * BINS
        self.waves: list[tuple[float, float, int, float, float, int]] = []  # x, y, turn, speed, bearing, sideways

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.dash_at, self.dash_until, self.waves = -100, 40, 0, []
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.move()
            self.go()

    def move(self) -> None:
        if self.turn_number >= self.dash_at:
            self.side = random.choice((-1, 1))
            self.dash_until = self.turn_number + random.randint(8, 14)
            self.dash_at = self.dash_until + random.randint(30, 50)
        d = self.distance_to(self.ex, self.ey)
        lean = 25 if d > 400 else -25 if d < 250 else 0
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
        speed = 8.0 if self.turn_number < self.dash_until else 3.0
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

        waiting = []
        for x, y, turn, speed, bearing, sideways in self.waves:
            if speed * (self.turn_number - turn) >= math.hypot(e.x - x, e.y - y):
                offset = self.normalize_relative_angle(math.degrees(math.atan2(e.y - y, e.x - x)) - bearing)
                escape = math.degrees(math.asin(8 / speed))
                factor = max(-1.0, min(1.0, sideways * offset / escape))
                self.stats[round((factor + 1) / 2 * (BINS - 1))] += 1
            else:
                waiting.append((x, y, turn, speed, bearing, sideways))
        self.waves = waiting[-200:]

        power = 1.9 if self.energy >= 30 else 1.2
        bullet = 20 - 3 * power
        bearing = self.direction_to(e.x, e.y)
        lateral = e.speed * math.sin(math.radians(e.direction - bearing))
        sideways = 1 if lateral >= 0 else -1
        self.waves.append((self.x, self.y, self.turn_number, bullet, bearing, sideways))
        best = max(range(BINS), key=lambda b: self.stats[b] - abs(b - BINS // 2) * 1e-6)
        factor = best / (BINS - 1) * 2 - 1
        aim = bearing + sideways * factor * math.degrees(math.asin(8 / bullet))
        gun = self.normalize_relative_angle(aim - self.gun_direction)
        if self.gun_heat == 0 and self.energy > power + 0.1 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Surveyor().start()
