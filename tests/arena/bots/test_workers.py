"""Worker processes (arena/bots/workers.py): a spawned bot plays its spec, reports rounds and CPU, stops on the event,
and nothing of a run outlives it when it is killed with SIGKILL."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from arena.bots.play import MatchLog
from arena.bots.spec import LearningBotSpec
from arena.bots.workers import WorkerPool
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rewards import TANK_REWARD
from tests.conftest import DATA, running_server, timeout


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


RUN_TAG = "ARENA_TEST_RUN"
"""The environment variable that marks every process of a run under test."""


def run_processes(tag: str) -> dict[int, str]:
    """The live processes whose environment holds ``tag`` (every process of a run inherits it): pid → command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{RUN_TAG}={tag}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":  # ended, not yet reaped
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):  # ended while we looked, or not ours to read
            continue
    return found


def kill_9_and_watch(run: subprocess.Popen[bytes], tag: str, within: float = 15.0) -> tuple[dict[int, str], float]:
    """SIGKILL ``run``, then wait up to ``within`` s for every process tagged ``tag`` to end: (those left, seconds waited)."""
    run.kill()
    run.wait()
    killed = time.monotonic()
    while (left := run_processes(tag)) and time.monotonic() < killed + within:
        time.sleep(0.2)
    return left, time.monotonic() - killed


def reap(run: subprocess.Popen[bytes], tag: str) -> None:
    """Whatever a test left behind, ended: ``run`` and every process tagged ``tag``."""
    run.kill()
    run.wait()
    for pid in run_processes(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def connected(pid: int) -> bool:
    """Whether process ``pid`` holds an established TCP connection."""
    try:
        sockets = {os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        tables = [Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:] for name in ("tcp", "tcp6")]
    except OSError:  # ended while we looked
        return False
    established = {f"socket:[{row.split()[9]}]" for table in tables for row in table if row.split()[3] == "01"}
    return bool(sockets & established)


@pytest.mark.expensive
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes in /proc (Linux)")
def test_kill_9_of_arena_train_leaves_no_process_of_the_run_alive(tmp_path: Path) -> None:
    """Its worker processes, the league's Tank Royale share and its bot, the resource tracker: all gone within 15 s."""
    royale = importlib.util.find_spec("robocode_tank_royale") is not None
    share = ["--opponent", f"royale:{DATA / 'royale_bots' / 'Walls'}", "--royale-matches", "1"] if royale else []
    command = [sys.executable, "-m", "arena.cli", "train", "--workers", "1", "--opponent", "league", *share, "--minutes", "1",
               "--no-report", "--out", str(tmp_path / "run")]  # fmt: skip
    tag = uuid.uuid4().hex
    errors = tmp_path / "stderr.txt"

    def playing(seen: dict[int, str]) -> bool:  # connected: where an orphan used to keep playing or reconnecting
        workers = [pid for pid, c in seen.items() if "spawn_main" in c]  # the learning bot and the Tank Royale share
        bots = [pid for pid, c in seen.items() if "Walls.py" in c]
        return len(workers) == 1 + royale and all(map(connected, workers)) and (not royale or any(map(connected, bots)))

    with errors.open("wb") as stderr:
        train = subprocess.Popen(command, env={**os.environ, RUN_TAG: tag}, stdout=subprocess.DEVNULL, stderr=stderr)
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + timeout(60)
        while not playing(seen):
            assert train.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, f"the run's processes were not all playing within a minute: {seen}"
            time.sleep(0.2)
            seen.update(run_processes(tag))
        left, took = kill_9_and_watch(train, tag)
    finally:
        reap(train, tag)
    assert not left, f"alive {took:.0f} s after kill -9 of arena train: {left}"
    print(f"the run's {len(seen)} processes were gone {took:.1f} s after kill -9")
