"""Walls, written with the official Python bot API's blocking calls: follows the walls, fires at what it scans."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent


class Walls(Bot):
    def run(self) -> None:
        self.max_speed = 5
        # Face a wall (east), then go around the field counter-clockwise, gun pointing inward.
        self.turn_left(self.calc_bearing(0))
        self.forward(self.arena_width)
        self.turn_left(90)
        self.turn_gun_left(90)
        while self.running:
            self.forward(max(self.arena_width, self.arena_height))
            self.turn_left(90)

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.fire(2)


if __name__ == "__main__":
    Walls().start()
