"""Pendulum, written with the official Python bot API: orbits its enemy and turns back as the enemy's bullet arrives.

Movement: evasive. It orbits at 250-350 units, perpendicular to the enemy at full speed; when the enemy's energy drops
by 0.11-3 without a hit or a ram to explain it (the enemy fired), it turns back at a drawn share (45-75%) of the
bullet's flight time, so a gun that aims where it was going misses behind it. Wall smoothing keeps it off the walls.
Targeting: linear, the enemy's velocity averaged over its last 4 scans, iterated turn by turn.
Fire power: 1.9 (1.0 below 25 energy).
Families: evasive, linear
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import BulletHitBotEvent, HitBotEvent, HitByBulletEvent, ScannedBotEvent

MARGIN = 30
HISTORY = 4


class Pendulum(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.enemy_energy = 100.0
        self.explained = 0.0
        self.side = 1
        self.turn_back_at = -1
        self.velocities: list[tuple[float, float]] = []

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen, self.turn_back_at = -100, -1
        self.enemy_energy, self.explained = 100.0, 0.0
        self.velocities = []
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.turn_number == self.turn_back_at:
                self.side = -self.side
            self.orbit()
            self.go()

    def orbit(self) -> None:
        d = self.distance_to(self.ex, self.ey)
        lean = 20 if d > 350 else -20 if d < 250 else 0
        heading = self.direction_to(self.ex, self.ey) + self.side * (90 - lean)
        for step in range(36):
            h = heading + 5 * self.side * step
            px = self.x + 120 * math.cos(math.radians(h))
            py = self.y + 120 * math.sin(math.radians(h))
            if MARGIN < px < self.arena_width - MARGIN and MARGIN < py < self.arena_height - MARGIN:
                heading = h
                break
        else:
            self.side = -self.side
        speed = 8.0
        turn = self.calc_bearing(heading)
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_bullet_hit(self, e: BulletHitBotEvent) -> None:
        self.explained += e.damage

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.explained -= 3 * e.bullet.power

    def on_hit_bot(self, e: HitBotEvent) -> None:
        self.explained += 0.6

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        drop = self.enemy_energy - e.energy - self.explained
        d = max(self.distance_to(e.x, e.y), 1.0)
        if gap <= 2 and 0.11 <= drop <= 3.01:
            flight = d / (20 - 3 * drop)
            self.turn_back_at = self.turn_number + max(1, round(flight * random.uniform(0.45, 0.75)))
        self.enemy_energy, self.explained = e.energy, 0.0
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        vx = e.speed * math.cos(math.radians(e.direction))
        vy = e.speed * math.sin(math.radians(e.direction))
        self.velocities = ([] if gap > 3 else self.velocities[-(HISTORY - 1) :]) + [(vx, vy)]
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 1.9 if self.energy >= 25 else 1.0
        if self.energy <= power + 0.1:
            return
        ax = sum(v[0] for v in self.velocities) / len(self.velocities)
        ay = sum(v[1] for v in self.velocities) / len(self.velocities)
        bullet = 20 - 3 * power
        px, py = e.x, e.y
        for t in range(1, 100):
            nx, ny = px + ax, py + ay
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
    Pendulum().start()
