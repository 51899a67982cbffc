"""arena/bots/learning_bot.py: the pacer that holds the league's Tank Royale share to its turns per second."""

from __future__ import annotations

import time

from arena.bots.learning_bot import pacer


def test_the_pacer_holds_a_loop_to_its_pace_and_does_not_catch_up_after_a_stall() -> None:
    watch = pacer(200.0)  # 5 ms a turn
    started = time.monotonic()
    for _ in range(20):
        watch(None)
    assert time.monotonic() - started >= 19 * 0.005  # never faster than the pace
    time.sleep(0.1)  # a stall (a slow turn of the bots) is not made up for by a burst afterwards
    resumed = time.monotonic()
    for _ in range(4):
        watch(None)
    assert time.monotonic() - resumed >= 2 * 0.005
