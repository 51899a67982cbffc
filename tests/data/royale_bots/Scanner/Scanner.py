"""Scanner, written with the official Python bot API: it only turns its radar (never moves, never fires)."""

from robocode_tank_royale.bot_api import Bot


class Scanner(Bot):
    def run(self) -> None:
        while self.running:
            self.radar_turn_rate = 45
            self.go()


if __name__ == "__main__":
    Scanner().start()
