"""Ghost, written with the official Python bot API: an evasive mover that dodges when it sees the enemy fire.

Movement: evasive. It creeps sideways (speed 2) across the line to the enemy at 300-450 units; when the enemy's energy
drops by 0.11-3 without a hit or a ram to explain it (the enemy fired), it sprints 60-150 units to a random side,
perpendicular to the enemy; wall smoothing keeps it off the walls, and when cornered it goes the other way round.
Targeting: head-on with a small random offset (up to 4 degrees either way, redrawn for each shot).
Fire power: 2.5 within 250 units, else 1.5.
Families: evasive
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import BulletHitBotEvent, HitBotEvent, HitByBulletEvent, ScannedBotEvent

MARGIN = 30


class Ghost(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.enemy_energy = 100.0
        self.explained = 0.0  # energy the enemy lost (+) or won (-) since the last scan, not by firing
        self.side = 1  # which way round the enemy it moves
        self.dodge = 0.0  # distance left to sprint
        self.offset = 0.0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.enemy_energy = 100.0
        self.explained = 0.0
        self.dodge = 0.0
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.move()
            self.go()

    def move(self) -> None:
        d = self.distance_to(self.ex, self.ey)
        pull = 25 if d > 450 else -25 if d < 300 else 0  # lean in when far, out when close
        heading = self.direction_to(self.ex, self.ey) + self.side * (90 - pull)
        for step in range(36):  # wall smoothing: turn the path away from the enemy until it stays inside
            h = heading + 5 * self.side * step
            px = self.x + 110 * math.cos(math.radians(h))
            py = self.y + 110 * math.sin(math.radians(h))
            if MARGIN < px < self.arena_width - MARGIN and MARGIN < py < self.arena_height - MARGIN:
                heading = h
                break
        else:
            self.side = -self.side  # cornered: the other way round
        speed = 8.0 if self.dodge > 0 else 2.0
        self.dodge = max(0.0, self.dodge - abs(self.speed))
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
        drop = self.enemy_energy - e.energy - self.explained
        if self.turn_number - self.seen <= 2 and 0.11 <= drop <= 3.01:
            self.side = random.choice((-1, 1))  # it fired: dodge to a random side
            self.dodge = random.uniform(60, 150)
        self.enemy_energy = e.energy
        self.explained = 0.0
        self.seen = self.turn_number
        self.ex, self.ey = e.x, e.y
        d = max(self.distance_to(e.x, e.y), 1.0)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))

        power = 2.5 if d < 250 else 1.5
        gun = self.calc_gun_bearing(self.direction_to(e.x, e.y) + self.offset)
        if self.gun_heat == 0 and self.energy > power + 0.5 and abs(gun) < 2 and self.set_fire(power):
            self.offset = random.uniform(-4, 4)  # the next shot's offset
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Ghost().start()
