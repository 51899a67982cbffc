"""Keeper, written with the official Python bot API: keeps 150-250 units from its enemy, fires fast light bullets.

Movement: keeps its distance: it strafes across the line to the enemy, leaning in or out by 0.9 degrees per unit off
200 (up to 45), at speed 6 within 150-250 units and 8 outside; it changes its way round when hit by a bullet or
cornered (wall smoothing).
Targeting: circular, the enemy's turn rate measured between two scans, iterated turn by turn.
Fire power: low, for fast bullets: 1.1, 0.6 below 20 energy.
Families: circular
"""

import math

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitByBulletEvent, HitWallEvent, ScannedBotEvent

NEAR, FAR = 150, 250
MARGIN = 28


class Keeper(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.side = 1
        self.last_direction = 0.0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.keep()
            self.go()

    def keep(self) -> None:
        d = self.distance_to(self.ex, self.ey)
        lean = max(-45.0, min(45.0, (d - (NEAR + FAR) / 2) * 0.9))  # in when far, out when near
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
        turn = self.calc_bearing(heading)
        speed = 6.0 if NEAR < d < FAR else 8.0
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.side = -self.side

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.side = -self.side

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        gap = self.turn_number - self.seen
        turn = self.normalize_relative_angle(e.direction - self.last_direction) / gap if 0 < gap <= 3 else 0.0
        turn = max(-10.0, min(10.0, turn))
        self.seen = self.turn_number
        self.last_direction = e.direction
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 1.1 if self.energy >= 20 else 0.6
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
            if bullet * (t - 1) >= self.distance_to(px, py):
                break
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and abs(gun) < math.degrees(math.atan(16 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Keeper().start()
