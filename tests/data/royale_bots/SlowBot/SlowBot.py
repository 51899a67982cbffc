"""A bot that, every 10th turn, takes longer than the turn timeout to send its intent."""

import time

from robocode_tank_royale.bot_api import Bot


class SlowBot(Bot):
    def run(self) -> None:
        while self.running:
            self.target_speed = 3
            self.turn_rate = 5
            if self.turn_number % 10 == 0:
                time.sleep(0.3)
            self.go()


if __name__ == "__main__":
    SlowBot().start()
