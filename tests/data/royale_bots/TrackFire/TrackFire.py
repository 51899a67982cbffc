"""TrackFire, written with the official Python bot API: sits still, keeps its gun on the bot it scans, fires when aimed."""

from robocode_tank_royale.bot_api import Bot
from robocode_tank_royale.bot_api.events import ScannedBotEvent


class TrackFire(Bot):
    def run(self) -> None:
        while self.running:
            self.turn_gun_right(10)  # the radar rides on the gun: search

    def on_scanned_bot(self, e: ScannedBotEvent) -> None:
        off = self.gun_bearing_to(e.x, e.y)
        self.turn_gun_left(off)
        # Aimed now; the further it had drifted off the gun, the less sure the aim, the lighter the shot.
        if self.gun_heat == 0:
            power = min(3 - min(abs(off), 20) / 10, self.energy - 0.1)
            if power >= 0.1:
                self.fire(power)
        self.rescan()  # look along the gun again: keeps the target while it is in the line


if __name__ == "__main__":
    TrackFire().start()
