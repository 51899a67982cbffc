"""Worker processes (arena/bots/workers.py): a spawned bot plays its spec, reports rounds and CPU, stops on the event."""

from __future__ import annotations

import time

from arena.bots.play import MatchLog
from arena.bots.spec import LearningBotSpec
from arena.bots.workers import WorkerPool
from arena.games.tank.engine import ACT_DIM, OBS_DIM
from arena.games.tank.rewards import TANK_REWARD
from tests.conftest import running_server, timeout


def test_a_worker_process_plays_its_nth_spec_and_reports_to_the_parent():
    log = MatchLog()
    with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD) as server:
        pool = WorkerPool(LearningBotSpec(server.url, ("sitting",), n_matches=4, max_ticks=30, seed=2), 1)
        pool.start()
        deadline = time.monotonic() + timeout(60)
        while log.rounds < 8 and time.monotonic() < deadline and pool.alive():
            pool.collect(log)
            time.sleep(0.1)
        names = [session.hello.name for session in server.sessions.values()]
        pool.close(log)
    assert log.rounds >= 8 and log.ticks >= 8 * 30 // 2
    assert names == ["tank0"] and not pool.alive() and pool.errors() == []
    assert pool.cpu_seconds[0] > 0.0
