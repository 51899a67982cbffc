"""Hopper, written with the official Python bot API: an evasive stop-and-go bot that hops when the enemy fires.

Movement: evasive stop-and-go. It stands still, turned across the line to the enemy; when the enemy's energy drops by
0.11-3 without a hit or a ram to explain it (the enemy fired), it hops 40-70 units (a random length) along its body,
the same way as its last hop until a wall is too near (never back onto a spot that was aimed at); a hit by a bullet also
makes it hop.
Targeting: linear, one step: the enemy's heading and speed for the time a bullet takes to its present distance.
Fire power: 2.2, or 1 when its energy is below 30.
Families: evasive, linear
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import BulletHitBotEvent, HitBotEvent, HitByBulletEvent, ScannedBotEvent

ROOM = 80  # how much room a hop needs before a wall


class Hopper(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.enemy_energy = 100.0
        self.explained = 0.0
        self.way = 1  # the way it hops: 1 forward, -1 back

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.enemy_energy = 100.0
        self.explained = 0.0
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.go()

    def room(self, way: int) -> bool:
        """Whether a hop ``way`` (1 forward, -1 back) stays clear of the walls."""
        x = self.x + way * ROOM * math.cos(math.radians(self.direction))
        y = self.y + way * ROOM * math.sin(math.radians(self.direction))
        return 20 < x < self.arena_width - 20 and 20 < y < self.arena_height - 20

    def hop(self) -> None:
        if not self.room(self.way):
            self.way = -self.way
        self.set_forward(self.way * random.uniform(40, 70))

    def on_bullet_hit(self, e: BulletHitBotEvent) -> None:
        self.explained += e.damage

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.explained -= 3 * e.bullet.power
        if self.distance_remaining == 0:
            self.hop()

    def on_hit_bot(self, e: HitBotEvent) -> None:
        self.explained += 0.6

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        drop = self.enemy_energy - e.energy - self.explained
        if self.turn_number - self.seen <= 2 and 0.11 <= drop <= 3.01:
            self.hop()
        self.enemy_energy = e.energy
        self.explained = 0.0
        self.seen = self.turn_number
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))
        if self.distance_remaining == 0 and self.speed == 0:  # standing: turn across the line to the enemy
            across = self.normalize_relative_angle(self.bearing_to(e.x, e.y) + 90)
            if abs(across) > 90:
                across = self.normalize_relative_angle(across + 180)
            self.set_turn_left(across)

        power = 2.2 if self.energy >= 30 else 1.0
        t = d / (20 - 3 * power) + 1
        px = min(max(e.x + e.speed * t * math.cos(math.radians(e.direction)), 18), self.arena_width - 18)
        py = min(max(e.y + e.speed * t * math.sin(math.radians(e.direction)), 18), self.arena_height - 18)
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and self.energy > power + 0.5 and abs(gun) < math.degrees(math.atan(16 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Hopper().start()
