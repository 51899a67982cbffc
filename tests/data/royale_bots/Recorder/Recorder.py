"""A SpinBot that records what the official bot API hands it: every event, and its state each tick.

The test reads the JSON lines written to $ROYALE_RECORD to check the events of a whole match.
"""

import json
import os

from robocode_tank_royale.bot_api import Bot


class Recorder(Bot):
    def __init__(self) -> None:
        super().__init__()
        self.out = open(os.environ["ROYALE_RECORD"], "a", encoding="utf-8")  # noqa: SIM115

    def write(self, kind: str, **fields: object) -> None:
        self.out.write(json.dumps({"kind": kind, **fields}) + "\n")
        self.out.flush()

    def run(self) -> None:
        while self.running:
            self.target_speed = 6
            self.turn_rate = 7
            self.gun_turn_rate = 15
            self.radar_turn_rate = 45
            self.go()

    def on_game_started(self, e) -> None:
        self.write("game_started", my_id=e.my_id, rounds=e.game_setup.number_of_rounds, width=e.game_setup.arena_width)

    def on_round_started(self, e) -> None:
        self.write("round_started", round=e.round_number)

    def on_tick(self, e) -> None:
        s = e.bot_state
        self.write("tick", turn=e.turn_number, round=e.round_number, x=s.x, y=s.y, energy=s.energy, enemies=s.enemy_count)

    def on_scanned_bot(self, e) -> None:
        self.write("scanned", turn=e.turn_number, by=e.scanned_by_bot_id, bot=e.scanned_bot_id, x=e.x, y=e.y, energy=e.energy)
        self.set_fire(2)

    def on_bullet_fired(self, e) -> None:
        self.write("fired", turn=e.turn_number, bullet=e.bullet.bullet_id, power=e.bullet.power)

    def on_bullet_hit(self, e) -> None:
        self.write("bullet_hit", turn=e.turn_number, victim=e.victim_id, damage=e.damage, bullet=e.bullet.bullet_id)

    def on_hit_by_bullet(self, e) -> None:
        self.write("hit_by_bullet", turn=e.turn_number, damage=e.damage, energy=e.energy)

    def on_bullet_hit_wall(self, e) -> None:
        self.write("bullet_hit_wall", turn=e.turn_number, bullet=e.bullet.bullet_id)

    def on_bullet_hit_bullet(self, e) -> None:
        self.write("bullet_hit_bullet", turn=e.turn_number, bullet=e.bullet.bullet_id, hit=e.hit_bullet.bullet_id)

    def on_hit_wall(self, e) -> None:
        self.write("hit_wall", turn=e.turn_number)

    def on_hit_bot(self, e) -> None:
        self.write("hit_bot", turn=e.turn_number, victim=e.victim_id, rammed=e.rammed)

    def on_bot_death(self, e) -> None:
        self.write("bot_death", turn=e.turn_number, victim=e.victim_id)

    def on_death(self, e) -> None:
        self.write("death", turn=e.turn_number)

    def on_won_round(self, e) -> None:
        self.write("won_round", turn=e.turn_number)

    def on_skipped_turn(self, e) -> None:
        self.write("skipped_turn", turn=e.turn_number)

    def on_round_ended(self, e) -> None:
        self.write("round_ended", round=e.round_number, turn=e.turn_number, total=e.results.total_score, rank=e.results.rank)

    def on_game_ended(self, e) -> None:
        r = e.results
        self.write("game_ended", rounds=e.number_of_rounds, total=r.total_score, rank=r.rank, firsts=r.first_places)


if __name__ == "__main__":
    Recorder().start()
