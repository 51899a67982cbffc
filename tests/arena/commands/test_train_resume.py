"""A crash costs at most one checkpoint interval: ``arena train`` killed with SIGKILL, then ``--resume``.

The real command in a subprocess (the reach test game: it learns in seconds), killed at a random
moment after its first checkpoint: the newest checkpoint on disk is at most one interval (2 s
here; 30 s by default, docs/architecture.md) older than the run's last metrics row, and the
resumed run's policy version keeps rising from it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import timeout

INTERVAL = 2.0


def checkpoints(out: Path) -> list[dict[str, float]]:
    manifests = []
    for path in sorted((out / "checkpoints").glob("ckpt-*.json")):
        try:
            manifests.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # being written: its .json lands last, atomically, so this is rare
            continue
    return manifests


def test_a_run_killed_at_a_random_moment_resumes_from_a_checkpoint_at_most_one_interval_old(tmp_path: Path) -> None:
    out = tmp_path / "run"
    train = [sys.executable, "-m", "arena.cli", "train", "--game", "reach", "--no-report", "--out", str(out),
             "--checkpoint-interval", str(INTERVAL)]  # fmt: skip
    run = subprocess.Popen([*train, "--minutes", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + timeout(60)
        while not checkpoints(out):
            assert run.poll() is None, run.stderr.read().decode() if run.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint within a minute"
            time.sleep(0.05)
        time.sleep(random.Random().uniform(0.5, 3 * INTERVAL))  # a random moment after the first checkpoint
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout(30))
        if run.stderr is not None:
            run.stderr.close()
    newest = checkpoints(out)[-1]
    last_row = (out / "metrics.jsonl").stat().st_mtime  # the last metrics row written before the kill
    assert last_row - newest["created_unix"] <= INTERVAL + 1.0, (last_row - newest["created_unix"], newest)
    resumed = subprocess.run([*train, "--resume", "--minutes", "0.1", "--json"], capture_output=True, text=True,
                             timeout=timeout(120))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(next(line for line in resumed.stdout.splitlines() if line.startswith("{")))
    assert summary["generation"] == newest["generation"] + 1
    assert summary["policy_version"] > newest["version"]
