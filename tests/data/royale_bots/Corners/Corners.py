"""Corners, written with the official Python bot API: holds a corner, sweeps its gun over the field, fires by distance."""

import random

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import DeathEvent, ScannedBotEvent

MARGIN = 30  # how far from both walls the corner spot is


class Corners(Bot):
    # One process plays every round of a game, so a class attribute carries the corner from round to round.
    # 0 = south-west, then counter-clockwise: 1 = south-east, 2 = north-east, 3 = north-west.
    corner = random.randrange(4)

    def __init__(self) -> None:
        super().__init__()
        self.enemies_at_start = 0

    def run(self) -> None:
        self.enemies_at_start = self.enemy_count
        self.max_gun_turn_rate = 20
        spot_x, spot_y = self.corner_spot()
        for _ in range(5):  # a bot in the way stops the drive: try again from where we are
            if not self.running or self.distance_to(spot_x, spot_y) < 5:
                break
            self.turn_left(self.bearing_to(spot_x, spot_y))
            self.forward(self.distance_to(spot_x, spot_y))
        # From this corner the whole field lies between two wall directions, 90 degrees apart: sweep between them.
        first = 90 * Corners.corner
        self.turn_gun_left(self.calc_gun_bearing(first))
        self.max_gun_turn_rate = 3  # slowly, so that the gun points at what the radar (on the gun) just swept
        while self.running:
            self.turn_gun_left(self.calc_gun_bearing(first + 90))
            self.turn_gun_left(self.calc_gun_bearing(first))

    def corner_spot(self) -> tuple[float, float]:
        east = Corners.corner in (1, 2)
        north = Corners.corner in (2, 3)
        return (
            self.arena_width - MARGIN if east else MARGIN,
            self.arena_height - MARGIN if north else MARGIN,
        )

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        distance = self.distance_to(e.x, e.y)
        if distance > 200 or self.energy < 15:
            self.set_fire(1)
        elif distance > 50:
            self.set_fire(2)
        else:
            self.set_fire(3)

    def on_death(self, e: DeathEvent) -> None:
        # Dying while most enemies still live means this corner went badly: take the next one next round.
        if self.enemies_at_start and self.enemy_count / self.enemies_at_start >= 0.75:
            Corners.corner = (Corners.corner + 1) % 4


if __name__ == "__main__":
    Corners().start()
