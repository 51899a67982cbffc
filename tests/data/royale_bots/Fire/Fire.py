"""Fire, written with the official Python bot API: sits still turning its gun, fires at scans, sidesteps when hit."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitBotEvent, HitByBulletEvent, ScannedBotEvent


class Fire(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.step = 50  # the sidestep when hit, forward and back in turn

    def run(self) -> None:
        while self.running:
            self.turn_gun_right(5)

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        # Hard only when the enemy is close and we can afford it.
        self.fire(3 if self.distance_to(e.x, e.y) < 50 and self.energy > 50 else 1)
        self.rescan()  # still in the gun's line? then this handler runs again at once

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        # Turn across the bullet's path and step out of it.
        self.turn_left(self.normalize_relative_angle(self.calc_bearing(e.bullet.direction) + 90))
        self.forward(self.step)
        self.step = -self.step
        self.rescan()

    def on_hit_bot(self, e: HitBotEvent) -> None:
        self.turn_gun_left(self.gun_bearing_to(e.x, e.y))
        self.fire(3)


if __name__ == "__main__":
    Fire().start()
