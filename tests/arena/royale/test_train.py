"""Tank Royale bots as training opponents (arena/royale/train.py): in the league's share, and bots that fail to boot.

Real runs of ``arena train`` with bots written with the official Python bot API
(tests/data/royale_bots), and a bot directory whose bot dies at start.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, timeout

BOTS = DATA / "royale_bots"
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("robocode_tank_royale") is None,
    reason="the official Tank Royale bot API (pip install -e '.[royale]')",
)


def broken_bot(directory: Path) -> Path:
    """A Tank Royale bot directory whose bot exits before it connects."""
    directory.mkdir()
    (directory / f"{directory.name}.json").write_text('{"name": "Broken", "version": "1", "authors": ["t"]}')
    (directory / f"{directory.name}.py").write_text("raise SystemExit('no API here')\n")
    return directory


def train(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "arena.cli", "train", "--workers", "0", "--bots", "1", "--matches", "8"]
    return subprocess.run(
        [*command, "--ticks-per-round", "120", "--eval-rounds", "0", "--no-report", *args],
        capture_output=True,
        text=True,
        timeout=timeout(240),
    )


@pytest.mark.expensive
def test_the_league_plays_its_tank_royale_share_and_goes_on_without_a_bot_that_fails_to_boot(tmp_path: Path) -> None:
    """SpinBot plays the league's share (rated beside the scripted bots); Broken is dropped in one line."""
    broken = broken_bot(tmp_path / "Broken")
    out = tmp_path / "run"
    result = train(
        "--opponent", "league", "--opponent", f"royale:{BOTS / 'SpinBot'}", "--opponent", f"royale:{broken}",
        "--royale-matches", "1", "--royale-turns-per-s", "100", "--minutes", "0.2", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "Broken" in line]
    assert len(said) == 1 and "failed to boot" in said[0] and "goes on without it" in said[0], result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    share = "Tank Royale share (royale:SpinBot, royale:Broken: 1 match(es) each at 100 turns/s, 1 worker process)"
    assert share in result.stdout
    league = json.loads((out / "summary.json").read_text())["league"]
    rated = {r["name"]: r for r in league["ratings"]}
    assert rated["royale:SpinBot"]["rounds"] >= 1 and "royale:Broken" not in rated
    assert league["opponents"]["royale:SpinBot"]["rounds"] == rated["royale:SpinBot"]["rounds"]
    assert {"sitting", "tracker", "learner"} <= set(rated)


def test_a_run_whose_only_opponent_fails_to_boot_exits_2_in_one_line(tmp_path: Path) -> None:
    broken = broken_bot(tmp_path / "Broken")
    result = train("--opponent", f"royale:{broken}", "--rounds", "4", "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert lines == [lines[0]] and "Broken failed to boot" in lines[0] and "no opponent left" in lines[0], result.stderr
