"""Launching a run's bots (arena/bots/launch.py): threads from one spec against a real server."""

from __future__ import annotations

import time

from arena.bots.launch import BotThreads, launch_bots
from arena.bots.play import MatchLog
from arena.bots.spec import LearningBotSpec
from arena.defaults import Layout
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rewards import TANK_REWARD
from tests.conftest import running_server, timeout


def test_bot_threads_each_play_their_nth_spec_until_stopped_and_log_their_rounds():
    """Two threads, 4 matches each, short rounds: both connect as tank0/tank1 and their rounds reach one log."""
    lines: list[str] = []
    with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD) as server:
        spec = LearningBotSpec(server.url, ("sitting",), n_matches=4, max_ticks=30, seed=5)
        log = MatchLog()
        bots = launch_bots(spec, Layout(workers=0, bots=2, cores=2, reason="test"), log, lines.append)
        assert isinstance(bots, BotThreads) and bots.cpu_seconds is None
        deadline = time.monotonic() + timeout(30)
        while log.rounds < 16 and time.monotonic() < deadline and bots.alive():
            time.sleep(0.05)
        names = sorted(session.hello.name for session in server.sessions.values())
        bots.close(log)
    assert log.rounds >= 16 and not bots.alive()
    assert names == ["tank0", "tank1"]
    assert bots.errors() == [] and lines == []


def test_a_bot_that_cannot_connect_is_an_error_of_the_handle_not_a_crash():
    log = MatchLog()
    spec = LearningBotSpec("ws://127.0.0.1:9", ("sitting",), n_matches=2)  # nothing listens on port 9
    bots = launch_bots(spec, Layout(workers=0, bots=1, cores=2, reason="test"), log, print)
    deadline = time.monotonic() + timeout(30)
    while bots.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    bots.close(log)
    assert len(bots.errors()) == 1 and isinstance(bots.errors()[0], OSError)


def test_bot_threads_keep_what_each_bot_returned_and_the_first_error_stops_the_others():
    """One thread handle for any game's bots (the tank's, the reach game's): results by index, errors stop every bot."""
    import threading

    def play(i: int, stop: threading.Event) -> str:
        if i == 1:
            raise RuntimeError("bot 1 failed")
        assert stop.wait(timeout(10)), "bot 1's failure did not stop the others"
        return f"bot {i} stopped"

    bots = BotThreads(3, play).start()
    deadline = time.monotonic() + timeout(10)
    while bots.alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    bots.close(MatchLog())
    assert bots.results == {0: "bot 0 stopped", 2: "bot 2 stopped"}
    assert [str(e) for e in bots.errors()] == ["bot 1 failed"] and bots.stop.is_set()
