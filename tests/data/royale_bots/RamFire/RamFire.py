"""RamFire, written with the official Python bot API: spins until it scans a bot, then drives into it, firing on contact."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitBotEvent, ScannedBotEvent


class RamFire(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.spin = 1  # the way the last target lay: 1 left (counter-clockwise), -1 right

    def run(self) -> None:
        while self.running:
            self.turn_left(5 * self.spin)  # gun and radar turn with the body: a slow search

    def face(self, x: float, y: float) -> None:
        bearing = self.bearing_to(x, y)
        self.spin = 1 if bearing >= 0 else -1
        self.turn_left(bearing)

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.face(e.x, e.y)
        self.set_forward(self.distance_to(e.x, e.y) + 5)  # a little past its centre: into it (driving on meanwhile)
        self.rescan()  # still straight ahead? then this handler aims again next turn

    def on_hit_bot(self, e: HitBotEvent) -> None:
        self.face(e.x, e.y)
        # Fire, but leave it alive: the kill should be a ram's, for the ram bonus.
        for energy, power in ((16, 3), (10, 2), (4, 1), (2, 0.5), (0.4, 0.1)):
            if e.energy > energy:
                self.fire(power)
                break
        self.forward(40)


if __name__ == "__main__":
    RamFire().start()
