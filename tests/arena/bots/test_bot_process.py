"""arena.bots.bot_process: ``arena gym``'s bot in a spawned child, against a real server on port 0."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

from agents import make_agent
from arena.bots.bot_process import BotJob, BotProcess, BotProcessError
from tests.arena.bots.test_workers import RUN_TAG, connected, kill_9_and_watch, reap, run_processes
from tests.conftest import ROOT, running_server, timeout


def test_the_child_plays_its_steps_and_reports_every_chunk():
    agent = make_agent("ppo", 4, 0, branches=(2,), rollout_steps=256, hidden=(16, 16))
    with running_server(agent=agent) as server:
        job = BotJob(server.url, "CartPole-v1", n_envs=2, seed=3, name="child", steps=600, chunk=200)
        with BotProcess(job) as bot:
            reports = list(bot)
        assert [r.steps for r in reports] == [200, 200, 200]
        assert sum(len(r.returns) for r in reports) >= 2  # CartPole's random start ends episodes within 600 steps
        deadline = time.monotonic() + 30
        while server.trainer.version < 1 and time.monotonic() < deadline:  # the rows reach the learner
            time.sleep(0.05)
        assert server.trainer.version >= 1


def test_a_turn_based_game_reports_games_and_illegal_moves():
    pytest.importorskip("pettingzoo")
    agent = make_agent("ppo", 5, 0, branches=(2,), rollout_steps=128, hidden=(16, 16))
    with running_server(agent=agent) as server:
        job = BotJob(server.url, "tests.arena.bots.tiny_nim", 2, 0, "nim", steps=300, chunk=100, turns=True)
        with BotProcess(job) as bot:
            reports = list(bot)
    assert sum(r.steps for r in reports) >= 300 and reports[-1].games > 0 and reports[-1].illegal_moves == 0


def test_two_children_share_the_games_and_the_steps_and_their_totals_add_up():
    pytest.importorskip("pettingzoo")
    agent = make_agent("ppo", 5, 0, branches=(2,), rollout_steps=128, hidden=(16, 16))
    with running_server(agent=agent) as server:
        job = BotJob(server.url, "tests.arena.bots.tiny_nim", 4, 0, "nim", steps=400, chunk=100, turns=True)
        with BotProcess(job, processes=2) as bot:
            reports = list(bot)
            names = sorted(p.name for p in bot._processes)
    assert names == ["arena-gym-bot", "arena-gym-bot-1"]
    assert sum(r.steps for r in reports) >= 400 and reports[-1].illegal_moves == 0
    games = [r.games for r in reports]
    assert games == sorted(games) and games[-1] > 0  # running totals of both children


def test_a_job_splits_into_shares_that_add_up_to_it():
    job = BotJob("ws://127.0.0.1:9", "CartPole-v1", n_envs=8, seed=5, name="gym", steps=1001, chunk=10)
    assert job.split(1) == [job]
    shares = job.split(3)
    assert [s.n_envs for s in shares] == [3, 3, 2] and sum(s.steps for s in shares) == 1001
    assert (shares[0].seed, shares[0].name) == (5, "gym") and len({s.seed for s in shares}) == 3
    assert [s.name for s in shares[1:]] == ["gym1", "gym2"]
    for processes in (0, 9):
        with pytest.raises(ValueError, match=f"{processes} bot processes for 8 game"):
            job.split(processes)


def test_an_error_in_the_child_comes_back_as_one_line():
    job = BotJob("ws://127.0.0.1:9", "CartPole-v1", 1, 0, "nobody", steps=10, chunk=10)
    with BotProcess(job) as bot, pytest.raises(BotProcessError, match=r"the bot process failed: .*Error") as caught:
        list(bot)
    assert "\n" not in str(caught.value)


def test_a_child_that_dies_without_a_word_is_an_error_with_its_exit_code():
    job = BotJob("ws://127.0.0.1:9", "tests.arena.bots.dying_env:Dying-v0", 1, 0, "dying", steps=10, chunk=10)
    with BotProcess(job) as bot, pytest.raises(BotProcessError, match=r"the bot process died \(exit code 7\)"):
        list(bot)


@pytest.mark.parametrize("field", [{"steps": -1}, {"chunk": 0}, {"n_envs": 0}])
def test_a_job_is_checked_when_made(field: dict[str, int]):
    given = {"steps": 10, "chunk": 10, "n_envs": 1, **field}
    with pytest.raises(ValueError, match="a bot job needs"):
        BotJob("ws://127.0.0.1:9", "CartPole-v1", seed=0, name="x", **given)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes in /proc (Linux)")
def test_kill_9_of_arena_gym_with_two_workers_leaves_none_of_its_bots_alive(tmp_path: Path) -> None:
    """Both bot processes of ``arena gym --workers 2`` end within 15 s of a SIGKILL of the command."""
    pytest.importorskip("pettingzoo")
    command = [sys.executable, "-m", "arena.cli", "gym", "tests.arena.bots.tiny_nim", "--steps", "100000000",
               "--n-envs", "4", "--workers", "2", "--eval-episodes", "0", "--out", str(tmp_path / "run")]  # fmt: skip
    tag = uuid.uuid4().hex
    gym = subprocess.Popen(command, cwd=ROOT, env={**os.environ, RUN_TAG: tag}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    left: dict[int, str] = {}
    try:
        deadline = time.monotonic() + timeout(60)
        while True:  # both bots connected: playing, where an orphan would go on
            bots = [pid for pid, line in run_processes(tag).items() if "spawn_main" in line and connected(pid)]
            if len(bots) == 2:
                break
            assert gym.poll() is None and time.monotonic() < deadline, f"two bots never played: {run_processes(tag)}"
            time.sleep(0.2)
        left, _ = kill_9_and_watch(gym, tag)
    finally:
        reap(gym, tag)
    assert not left, f"alive 15 s after kill -9 of arena gym: {left}"
