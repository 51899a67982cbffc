"""The policy a run hands back: the best of its evaluated checkpoints, and every command that reads a run plays it."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agents import CheckpointStore, make_agent
from arena.bots.policies import load_policy, run_policy_checkpoint
from arena.cli import main
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.outputs.selection import CANDIDATES, Candidate, CandidateEvaluator, choose
from bot_protocol import PolicyId


def evaluation(**win_rates: float) -> dict[str, Any]:
    return {"opponents": [{"opponent": name, "win_rate": rate} for name, rate in win_rates.items()]}


def save(store: CheckpointStore, version: int, seed: int) -> Path:
    agent = make_agent("ppo", OBS_DIM, ACT_DIM, hidden=(16, 16), seed=seed)
    return store.save({"agent": agent.state_dict(), "generation": 0, "version": version}, PolicyId(0, version))


def test_choose_takes_the_higher_mean_win_rate_and_a_tie_goes_to_the_newer_policy(tmp_path: Path) -> None:
    early = Candidate(tmp_path / "a.pt", 100, evaluation(sitting=0.9, tracker=0.5), 60.0)
    late = Candidate(tmp_path / "b.pt", 300, evaluation(sitting=0.2, tracker=0.3), 240.0, final=True)
    assert choose([early, late]) is early
    same = Candidate(tmp_path / "c.pt", 400, evaluation(sitting=0.5, tracker=0.9), 300.0)
    assert choose([early, same]) is same
    with pytest.raises(ValueError, match="no candidates"):
        choose([])


def test_the_run_returns_the_higher_rated_checkpoint_and_arena_match_plays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two real checkpoints, each played against every scripted bot in the evaluator's process; the one with
    the higher measured mean win rate is returned, kept on disk, and is what `arena match --bot RUN_DIR` loads."""
    run = tmp_path / "run"
    store = CheckpointStore(run / "checkpoints")
    save(store, 10, seed=1)
    evaluator = CandidateEvaluator(run, rounds=2, seed=0, ticks_per_round=100, every=0.01, engine="numba")
    time.sleep(0.02)
    evaluator.poll()  # takes v10 and evaluates it in the background
    final = save(store, 20, seed=2)
    final_evaluation = _evaluate_now(final)
    record = evaluator.finish(final, final_evaluation)

    scores = {c["version"]: c["mean_win_rate"] for c in record["candidates"]}
    assert set(scores) == {10, 20}
    assert [c.evaluation["engine"] for c in evaluator.candidates] == ["numba"]  # the run's --engine, in its process
    best = max(scores, key=lambda v: (scores[v], v))
    assert record["version"] == best
    assert record["returned"] == ("last" if best == 20 else "best")
    assert json.loads((run / "returned.json").read_text())["version"] == best
    returned = run_policy_checkpoint(run)
    assert returned.parent.name == CANDIDATES  # a copy that pruning the checkpoints never removes
    assert sorted(p.name for p in (run / CANDIDATES).glob("*.pt")) == [returned.name]  # the others are removed

    assert main(["match", "--bot", str(run), "--bot", "sitting", "--rounds", "1", "--ticks-per-round", "50", "--json"]) == 0
    played = json.loads(capsys.readouterr().out)
    assert played["bots"][0]["version"] == best
    assert load_policy(run).policy_id.version == best


def test_a_better_earlier_checkpoint_is_returned_over_the_last(tmp_path: Path) -> None:
    """The decision on evaluations that differ for sure: an earlier candidate beats a collapsed last policy."""
    run = tmp_path / "run"
    store = CheckpointStore(run / "checkpoints")
    early = save(store, 10, seed=1)
    evaluator = CandidateEvaluator(run, rounds=1, seed=0, ticks_per_round=10)
    copied = run / CANDIDATES / early.name
    copied.parent.mkdir(parents=True)
    for suffix in (".pt", ".json"):
        copied.with_suffix(suffix).write_bytes(early.with_suffix(suffix).read_bytes())
    evaluator.candidates.append(Candidate(copied, 10, evaluation(sitting=0.9, tracker=0.6), 60.0))
    final = save(store, 20, seed=2)
    record = evaluator.finish(final, evaluation(sitting=0.1, tracker=0.0))
    assert (record["version"], record["returned"]) == (10, "best")
    assert "v10 scored 75%" in record["reason"] and "the last policy (v20) 5%" in record["reason"]
    assert run_policy_checkpoint(run) == copied
    assert load_policy(run).policy_id.version == 10
    assert load_policy(final).policy_id.version == 20  # the last policy stays where it was


def test_a_run_directory_without_a_record_stands_for_its_newest_checkpoint(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints")
    save(store, 3, seed=1)
    newest = save(store, 7, seed=1)
    assert run_policy_checkpoint(tmp_path) == newest
    (tmp_path / "returned.json").write_text('{"checkpoint": "candidates/gone.pt"}')
    assert run_policy_checkpoint(tmp_path) == newest  # a record whose file is gone is not trusted


def _evaluate_now(path: Path) -> dict[str, Any]:
    from arena.outputs.report import evaluate_against_scripted

    return evaluate_against_scripted(path, rounds_per_opponent=2, seed=0, ticks_per_round=100)


def test_the_evaluation_process_ends_when_the_run_is_killed(tmp_path: Path) -> None:
    """A run killed outright (SIGKILL: no cleanup runs) leaves no evaluation process sleeping behind it."""
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from arena.outputs.selection import CandidateEvaluator\n"
        "pool = CandidateEvaluator(Path(sys.argv[1]), rounds=1, seed=0, ticks_per_round=10)._executor()\n"
        "print(pool.submit(os.getpid).result(), flush=True)\n"
        "time.sleep(60)\n"
    )
    run = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    worker = int(run.stdout.readline())
    assert os.getpriority(os.PRIO_PROCESS, worker) >= os.getpriority(os.PRIO_PROCESS, 0)  # niced where allowed
    run.send_signal(signal.SIGKILL)
    run.wait()
    run.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(worker, os.WNOHANG)
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the evaluation process outlived the killed run")
