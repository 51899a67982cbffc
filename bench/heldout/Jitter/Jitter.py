"""Jitter, written with the official Python bot API: sits nearly still, jittering a little now and then, fires heavy shots.

Movement: mostly still: it waits 15-35 turns, then makes a small jitter with the blocking calls (a turn of up to 25
degrees, then 15-35 units forward or back), turning back into the field when a wall is within 60 units ahead.
Targeting: head-on, the gun turned onto the enemy's present position.
Fire power: 3 (2 below 30 energy, 1 below 10).
Families:
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent


class Jitter(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        while self.running:
            for _ in range(random.randint(15, 35)):
                self.search()
                self.go()
            self.search()
            self.jitter()

    def search(self) -> None:
        if self.turn_number - self.seen > 2:
            self.set_turn_radar_left(45 * self.sweep)

    def jitter(self) -> None:
        step = random.choice((-1, 1)) * random.uniform(15, 35)
        way = self.direction if step > 0 else self.direction + 180
        x = self.x + 60 * math.cos(math.radians(way))
        y = self.y + 60 * math.sin(math.radians(way))
        if not (20 < x < self.arena_width - 20 and 20 < y < self.arena_height - 20):
            step = -step
        self.turn_left(random.uniform(-25, 25))
        self.forward(step)

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))
        power = 3.0 if self.energy >= 30 else 2.0 if self.energy >= 10 else 1.0
        gun = self.gun_bearing_to(e.x, e.y)
        if self.gun_heat == 0 and self.energy > power + 0.5 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Jitter().start()
