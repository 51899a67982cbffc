"""Weaver, written with the official Python bot API: oscillates across the enemy's line, aims with average velocity.

Movement: oscillating: its body kept across the line to the enemy (leaning in beyond 350 units, out within 200), its
speed follows a sine, 8 * sin(2 pi t / P), P drawn in 28-44 turns each round, so it weaves back and forth; wall
smoothing bends its way along a wall, and a wall it cannot bend away from moves its phase on by half a wave.
Targeting: average velocity: the enemy's velocity (x and y) averaged over its last 16 scans, led by iterative
intercept.
Fire power: 2.2 within 300 units, else 1.6.
Families: linear
"""

import math
import random
from collections import deque

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent


class Weaver(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.period = 36
        self.phase = 0.0
        self.velocities: deque[tuple[float, float]] = deque(maxlen=16)

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        self.period = random.randint(28, 44)
        self.phase = float(random.randrange(self.period))
        self.velocities.clear()
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.weave()
            self.go()

    def weave(self) -> None:
        self.phase += 1
        wave = 8 * math.sin(2 * math.pi * self.phase / self.period)
        side = 1 if wave >= 0 else -1  # which way across the line it is going
        d = self.distance_to(self.ex, self.ey)
        lean = 20 if d > 350 else -20 if d < 200 else 0
        heading = self.direction_to(self.ex, self.ey) + side * (90 - lean)
        for step in range(25):  # wall smoothing: bend the way away from the enemy until it stays inside
            h = heading + 5 * side * step
            x = self.x + 90 * math.cos(math.radians(h))
            y = self.y + 90 * math.sin(math.radians(h))
            if 25 < x < self.arena_width - 25 and 25 < y < self.arena_height - 25:
                heading = h
                break
        else:  # no way on along this side: half a wave on, the same speed the other way
            self.phase += self.period / 2
            side = -side
            heading = self.direction_to(self.ex, self.ey) + side * (90 - lean)
        turn = self.calc_bearing(heading)
        speed = abs(wave)
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        if self.turn_number - self.seen > 5:
            self.velocities.clear()
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        self.velocities.append((e.speed * math.cos(math.radians(e.direction)), e.speed * math.sin(math.radians(e.direction))))
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 2.2 if d < 300 else 1.6
        if self.energy <= power + 1:
            power = 0.5
        if self.energy <= power + 0.1:
            return
        vx = sum(v[0] for v in self.velocities) / len(self.velocities)
        vy = sum(v[1] for v in self.velocities) / len(self.velocities)
        px, py = e.x, e.y
        for _ in range(10):
            t = self.distance_to(px, py) / (20 - 3 * power) + 1
            px = min(max(e.x + vx * t, 18), self.arena_width - 18)
            py = min(max(e.y + vy * t, 18), self.arena_height - 18)
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(16 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Weaver().start()
