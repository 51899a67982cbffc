"""Bull, written with the official Python bot API: rams its enemy, heading for where it will be, and fires point-blank.

Movement: ramming: at full speed towards the enemy's predicted position (its heading and speed for the time Bull needs
to get there at speed 8), and on into it; after a ram it backs off for 5 turns when its own energy is the lower.
Targeting: head-on, the gun kept on the enemy all the time.
Fire power: 3 within 150 units (with more than 3.5 energy); 1 at 150-300 units when the gun is right on (with more than
10 energy); none further.
Families:
"""

import math

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitBotEvent, ScannedBotEvent


class Bull(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.backing = 0  # turns left to back off

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.backing = 0
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            if self.backing > 0:
                self.backing -= 1
                self.target_speed = -8.0
            else:
                self.set_turn_left(self.bearing_to(self.ex, self.ey))
                self.target_speed = 8.0 if abs(self.bearing_to(self.ex, self.ey)) < 45 else 2.0
            self.go()

    def on_hit_bot(self, e: HitBotEvent) -> None:
        if e.rammed and self.energy < e.energy:
            self.backing = 5

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.seen = self.turn_number
        d = max(self.distance_to(e.x, e.y), 1.0)
        t = d / 8  # turns to get there
        self.ex = min(max(e.x + e.speed * t * math.cos(math.radians(e.direction)), 18), self.arena_width - 18)
        self.ey = min(max(e.y + e.speed * t * math.sin(math.radians(e.direction)), 18), self.arena_height - 18)
        radar = self.radar_bearing_to(e.x, e.y)
        self.sweep = 1 if radar >= 0 else -1
        self.set_turn_radar_left(radar + self.sweep * min(math.degrees(math.atan(36 / d)), 20))
        gun = self.gun_bearing_to(e.x, e.y)
        if self.gun_heat == 0 and d < 150 and self.energy > 3.5 and abs(gun) < 10:
            self.set_fire(3)
        elif self.gun_heat == 0 and d < 300 and self.energy > 10 and abs(gun) < 2:
            self.set_fire(1)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Bull().start()
