"""Skirter, written with the official Python bot API: skirts the walls with wall smoothing, aims head-on.

Movement: circles the field close to the walls: it heads 70 degrees off the direction from the field's middle (so it
drifts outwards) and wall smoothing bends its path along the wall about 50 units in, rounding the corners; 1.5% of
turns (and when hit by a bullet) it reverses its way round.
Targeting: head-on, with the gun turned onto the enemy's present position.
Fire power: by distance: 3 within 200 units, 2 within 450, else 1; none below 2 energy.
Families:
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitByBulletEvent, HitWallEvent, ScannedBotEvent

INSET = 50  # how far in from the walls its path runs
REACH = 90


class Skirter(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.way = 1  # 1 counter-clockwise round the field, -1 clockwise

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if random.random() < 0.015:
                self.way = -self.way
            self.skirt()
            self.go()

    def skirt(self) -> None:
        out = self.direction_to(self.arena_width / 2, self.arena_height / 2) + 180  # from the middle to us
        heading = out + self.way * 70
        for step in range(72):  # wall smoothing: bend the path inwards until it keeps INSET from the walls
            h = heading + 5 * self.way * step
            px = self.x + REACH * math.cos(math.radians(h))
            py = self.y + REACH * math.sin(math.radians(h))
            if INSET < px < self.arena_width - INSET and INSET < py < self.arena_height - INSET:
                heading = h
                break
        turn = self.calc_bearing(heading)
        speed = 8.0
        if abs(turn) > 90:
            turn = self.normalize_relative_angle(turn + 180)
            speed = -speed
        self.set_turn_left(turn)
        self.target_speed = speed if abs(turn) < 35 else speed / 2

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.way = -self.way

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.way = -self.way

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))
        power = 3.0 if d < 200 else 2.0 if d < 450 else 1.0
        gun = self.gun_bearing_to(e.x, e.y)
        if self.gun_heat == 0 and self.energy >= 2 and abs(gun) < 3:
            self.set_fire(min(power, self.energy / 3))
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Skirter().start()
