"""Spiral, written with the official Python bot API: drives figure-eights of changing size, fires into a random fan.

Movement: figure-eights: a full loop turning left, then a full loop turning right, its speed swinging between 4 and 8
within each loop (so each loop spirals in and out); when the path 100 units ahead leaves the field it drives back to
the middle of the field and starts a new figure there.
Targeting: random offset ("guess") targeting: head-on plus one of five offsets in a fan over 70% of the enemy's
escape angle (asin(8 / bullet speed)), drawn at random for each shot.
Fire power: 2.5 within 150 units, else 1.5.
Families:
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

FAN = (-1.0, -0.5, 0.0, 0.5, 1.0)


class Spiral(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.loop = 1  # 1 turning left, -1 turning right
        self.turned = 0.0  # how far this loop has turned
        self.last_heading = 0.0
        self.guess = 0.0
        self.centring = False  # heading back to the middle

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.turned = 0.0
        self.centring = False
        self.last_heading = self.direction
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.figure()
            self.go()

    def figure(self) -> None:
        mx, my = self.arena_width / 2, self.arena_height / 2
        if self.centring:  # back to the middle before the next figure
            self.set_turn_left(self.bearing_to(mx, my))
            self.target_speed = 8.0 if abs(self.bearing_to(mx, my)) < 30 else 3.0
            if self.distance_to(mx, my) < 120:
                self.centring = False
                self.turned = 0.0
                self.last_heading = self.direction
            return
        self.turned += abs(self.normalize_relative_angle(self.direction - self.last_heading))
        self.last_heading = self.direction
        if self.turned >= 360:
            self.loop = -self.loop
            self.turned = 0.0
        x = self.x + 100 * math.cos(math.radians(self.direction))
        y = self.y + 100 * math.sin(math.radians(self.direction))
        if not (25 < x < self.arena_width - 25 and 25 < y < self.arena_height - 25):
            self.centring = True
        self.target_speed = 6 + 2 * math.cos(math.radians(self.turned))
        self.turn_rate = 10.0 * self.loop

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))
        power = 2.5 if d < 150 else 1.5
        escape = math.degrees(math.asin(8 / (20 - 3 * power)))
        gun = self.calc_gun_bearing(self.direction_to(e.x, e.y) + self.guess * 0.7 * escape)
        if self.gun_heat == 0 and self.energy > power + 0.5 and abs(gun) < 2 and self.set_fire(power):
            self.guess = random.choice(FAN)  # the next shot's offset
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Spiral().start()
