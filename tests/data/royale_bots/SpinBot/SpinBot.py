"""SpinBot, written with the official Python bot API: drives in circles, spins its gun and radar, fires at scans."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent


class SpinBot(Bot):
    def run(self) -> None:
        while self.running:
            self.target_speed = 5
            self.turn_rate = 10
            self.gun_turn_rate = 20
            self.radar_turn_rate = 45
            self.go()

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        self.set_fire(3)


if __name__ == "__main__":
    SpinBot().start()
