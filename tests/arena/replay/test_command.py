"""The command line: `arena match --record`, then `arena replay` (arena/commands/replay.py) on the file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from PIL import Image

from arena.replay import Recording, RenderConfig, frame_indices
from tests.conftest import timeout


def arena(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``arena`` command line in a fresh interpreter, as a user would."""
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=timeout(120))


def test_match_record_then_replay_verify_and_gif(tmp_path):
    """`arena match --record` writes a file that `arena replay --verify --to` re-simulates and renders."""
    file, gif = tmp_path / "m.replay", tmp_path / "m.gif"
    result = arena(
        "match", "--bot", "tracker", "--bot", "walker", "--rounds", "2", "--ticks-per-round", "150", "--json",
        "--record", str(file),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rounds"] == 2 and "recorded 2 round(s)" in result.stderr
    result = arena("replay", str(file), "--verify", "--to", str(gif), "--stride", "5", "--width", "320")
    assert result.returncode == 0, result.stderr
    assert "every frame identical" in result.stdout
    recording = Recording.load(file)
    with Image.open(gif) as image:
        assert image.size == (320, 240)
        assert image.n_frames == len(frame_indices(recording, RenderConfig(stride=5)))


@pytest.mark.parametrize(
    "args",
    [
        ("replay", "{bad}", "--verify"),
        ("replay", "{missing}"),
        ("replay", "{good}", "--to", "{tmp}/x.png"),
        ("replay", "{good}", "--round", "7", "--to", "{tmp}/x.gif"),
        ("match", "--bot", "sitting", "--bot", "sitting", "--record", "/nonexistent/dir/m.replay"),
    ],
)
def test_replay_cli_errors_are_one_line(tmp_path, recorded, args):
    """Bad recordings and bad requests: one readable line on stderr and exit code 2."""
    (tmp_path / "bad.replay").write_bytes(recorded[0].read_bytes()[:500])
    paths = {"bad": tmp_path / "bad.replay", "missing": tmp_path / "nope.replay", "good": recorded[0], "tmp": tmp_path}
    result = arena(*(a.format(**paths) for a in args))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "error" in lines[0], result.stderr


def test_sample_replay_verifies_from_the_command_line(sample):
    result = arena("replay", str(sample), "--verify")
    assert result.returncode == 0, result.stderr
    assert "L1 vs tracker, 1 round(s), 1,331 frames: re-simulated, every frame identical" in result.stdout
