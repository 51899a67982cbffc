"""Mirror, written with the official Python bot API: stands where the enemy would be in a mirror through the centre.

Movement: mirror. It drives toward the point opposite the enemy through the field's centre, shifted 40-90 units to
one side of the line between them (side and shift redrawn every 10-20 turns), at full speed when far, slower near
it, backing instead of turning round: it moves whenever the enemy moves, the other way, and never sits still long.
Targeting: linear, one step (the enemy's heading and speed held for the bullet's flight to where it is now).
Fire power: 3 within 200 units, 1.5 beyond.
Families: mirror, linear
"""

import math
import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent

WALL = 40


class Mirror(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.seen = -100
        self.sweep = 1
        self.ex = self.ey = 0.0
        self.shift = 60.0
        self.redraw_at = 0

    def run(self) -> None:
        self.adjust_gun_for_body_turn = True
        self.adjust_radar_for_gun_turn = True
        self.adjust_radar_for_body_turn = True
        self.seen = -100
        self.ex, self.ey = self.arena_width / 2, self.arena_height / 2
        while self.running:
            if self.turn_number - self.seen > 2:
                self.set_turn_radar_left(45 * self.sweep)
            self.mirror()
            self.go()

    def mirror(self) -> None:
        if self.turn_number >= self.redraw_at:
            self.shift = random.choice((-1, 1)) * random.uniform(40, 90)
            self.redraw_at = self.turn_number + random.randint(10, 20)
        mx, my = self.arena_width - self.ex, self.arena_height - self.ey
        line = math.atan2(my - self.ey, mx - self.ex) + math.pi / 2
        gx = min(max(mx + self.shift * math.cos(line), WALL), self.arena_width - WALL)
        gy = min(max(my + self.shift * math.sin(line), WALL), self.arena_height - WALL)
        far = self.distance_to(gx, gy)
        if far < 8:
            self.target_speed = 0.0
            return
        turn = self.bearing_to(gx, gy)
        speed = min(8.0, far / 4)
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
        power = 3.0 if d < 200 else 1.5
        flight = d / (20 - 3 * power)
        px = min(max(e.x + e.speed * math.cos(math.radians(e.direction)) * flight, 18), self.arena_width - 18)
        py = min(max(e.y + e.speed * math.sin(math.radians(e.direction)) * flight, 18), self.arena_height - 18)
        gun = self.gun_bearing_to(px, py)
        if self.gun_heat == 0 and self.energy > power + 0.1 and abs(gun) < math.degrees(math.atan(18 / d)):
            self.set_fire(power)
        self.set_turn_gun_left(gun)


if __name__ == "__main__":
    Mirror().start()
