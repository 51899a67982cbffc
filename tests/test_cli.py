"""The `arena` command end to end, as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import timeout


def arena(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=timeout(180))
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_train_then_resume_continues_the_policy_version(tmp_path):
    """A short `arena train` writes its outputs; `--resume` continues the version in a new generation."""
    out = tmp_path / "run"
    arena("train", "--steps", "400", "--bots", "2", "--agents-per-bot", "4", "--out", str(out))
    first = json.loads((out / "summary.json").read_text())
    assert first["updates"] >= 1 and first["transitions"] == 2 * 4 * 400
    assert (out / "metrics.jsonl").read_text().count("\n") == first["updates"]
    assert list((out / "checkpoints").glob("*.pt"))
    arena("train", "--steps", "300", "--bots", "2", "--agents-per-bot", "4", "--out", str(out), "--resume")
    second = json.loads((out / "summary.json").read_text())
    assert second["generation"] == first["generation"] + 1
    assert second["policy_version"] > first["policy_version"]


@pytest.mark.parametrize(
    "args",
    [
        ("train", "--minutes", "-1"),
        ("train", "--bogus"),
        ("serve", "--obs-dim", "4"),
        ("serve", "--obs-dim", "4", "--act-dim", "2", "--host", "0.0.0.0"),
        ("train", "--resume", "--out", "/nonexistent/arena-run"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args):
    """Each mistake is reported as one readable line on stderr with exit code 2."""
    result = arena(*args, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error" in lines[0], result.stderr


def test_serve_stops_cleanly_on_sigterm(tmp_path):
    """`arena serve` answers /healthz, and SIGTERM closes it with a final checkpoint and exit 0."""
    import re
    import signal
    import urllib.request

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena.cli",
            "serve",
            "--obs-dim",
            "4",
            "--act-dim",
            "2",
            "--port",
            "0",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        match = re.search(r"ws://([\d.]+):(\d+)", line)
        assert match, line + process.stderr.read()
        with urllib.request.urlopen(f"http://{match.group(1)}:{match.group(2)}/healthz", timeout=5) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout(15)) == 0
    finally:
        process.kill()
        process.communicate()
    assert list((tmp_path / "checkpoints").glob("ckpt-*.pt"))
