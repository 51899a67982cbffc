"""Crazy, written with the official Python bot API: drives in swerving arcs, backs off walls and rams, fires at scans."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitBotEvent, HitWallEvent, ScannedBotEvent

FAR = 40000  # further than any round lets a bot drive


class Crazy(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.ahead = True

    def run(self) -> None:
        self.ahead = True
        self.set_forward(FAR)
        while self.running:
            # Each turn call blocks until the turn is done while the drive set above goes on: a zigzag of arcs.
            self.turn_left(90)
            self.turn_right(180)
            self.turn_left(180)

    def reverse(self) -> None:
        self.ahead = not self.ahead
        if self.ahead:
            self.set_forward(FAR)
        else:
            self.set_back(FAR)

    def on_hit_wall(self, e: HitWallEvent) -> None:
        self.reverse()

    def on_hit_bot(self, e: HitBotEvent) -> None:
        if e.rammed:  # we drove into it: back away
            self.reverse()

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.set_fire(1)


if __name__ == "__main__":
    Crazy().start()
