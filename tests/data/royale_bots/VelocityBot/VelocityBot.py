"""VelocityBot, written with the official Python bot API: drives by target speed and turn rate, fires at scans."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import HitByBulletEvent, HitWallEvent, ScannedBotEvent

PERIOD = 64  # turns of one forward-then-back cycle


class VelocityBot(Bot):
    def run(self) -> None:
        self.gun_turn_rate = 15  # the gun (and the radar on it) turns all the time
        turn = 0
        while self.running:
            if turn % PERIOD == 0:
                self.turn_rate = 0  # straight again after a hit's swerve
                self.target_speed = 4
            elif turn % PERIOD == PERIOD // 2:
                self.target_speed = -6  # back, faster
            turn += 1
            self.go()

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.set_fire(1)

    def on_hit_by_bullet(self, e: HitByBulletEvent) -> None:
        self.turn_rate = 5  # swerve, to be harder to hit

    def on_hit_wall(self, e: HitWallEvent) -> None:
        # Stopped by the wall: drive the other way.
        self.target_speed = -self.target_speed if self.target_speed else -4


if __name__ == "__main__":
    VelocityBot().start()
