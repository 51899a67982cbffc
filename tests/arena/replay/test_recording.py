"""Recordings (`arena match --record`), their re-simulation, GIF rendering and the viewer (`arena replay`)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from arena.bots.play import PolicyController, ScriptedController, play_match
from arena.games.tank.engine import ACT_DIM, OBS_DIM, TankBattle, TankRules
from arena.games.tank.snapshot import frame
from arena.replay import (
    Recorder,
    Recording,
    RenderConfig,
    ReplayError,
    frame_indices,
    make_viewer,
    render,
    resimulate,
    verify,
)
from bot_protocol import Architecture, Policy
from tests.conftest import ROOT, timeout

RULES = TankRules(max_ticks=200)


def random_policy(seed: int) -> Policy:
    """A small untrained Gaussian MLP: noisy float32 actions, the hardest case for an exact replay."""
    rng = np.random.default_rng(seed)
    arch = Architecture("gaussian_mlp", (OBS_DIM, 16, ACT_DIM), "tanh", log_std_min=-5.0, log_std_max=2.0)
    tensors = {
        "l0.weight": rng.normal(0, 0.5, (16, OBS_DIM)).astype(np.float32),
        "l0.bias": np.zeros(16, np.float32),
        "l1.weight": rng.normal(0, 0.5, (ACT_DIM, 16)).astype(np.float32),
        "l1.bias": np.full(ACT_DIM, 0.3, np.float32),
        "log_std": np.full(ACT_DIM, -0.5, np.float32),
    }
    return Policy(arch, tensors, generation=1, version=7)


class FrameLog:
    """A second observer: the frames exactly as ``snapshot.frame`` returned them during play."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        self.frames.append(frame(battle, 0))

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        self.frames.append(frame(battle, 0))


class Both:
    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        for o in self.observers:
            o.round_started(battle, matches)

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        for o in self.observers:
            o.ticked(battle, actions)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """Two 200-tick rounds of tracker, spinner and a sampling policy (free-for-all), saved to a file."""
    players: list[Any] = [
        ScriptedController("tracker", 1, seed=1),
        ScriptedController("spinner", 1, seed=2),
        PolicyController("policy", random_policy(0), seed=3),
    ]
    names = [p.name for p in players]
    recorder = Recorder(names, seed=5, rules=RULES, bots=[{"name": n} for n in names])
    played = FrameLog()
    result = play_match(players, 2, seed=5, n_matches=1, rules=RULES, observer=Both(recorder, played))
    path = tmp_path_factory.mktemp("replay") / "match.replay"
    recorder.recording(result).save(path)
    return path, played.frames, result


def test_recording_round_trips_the_frames_exactly(recorded):
    """Loading a saved recording gives back every frame `snapshot.frame` produced during play, equal as dicts."""
    path, played, result = recorded
    recording = Recording.load(path)
    assert list(recording.frames()) == played
    assert recording.rounds == [1, 2] and recording.names == ["tracker", "spinner", "policy"]
    assert recording.meta["result"] == result and recording.seed == 5 and recording.rules == RULES
    assert [f["tick"] for f in played].count(0) == 2 and played[-1]["over"]
    assert any(f["bullets"] for f in played)  # the interesting part of the format is exercised


def test_replay_reproduces_the_match_tick_for_tick(recorded):
    """Re-simulating from the seed and the recorded actions yields every recorded frame, in order."""
    recording = Recording.load(recorded[0])
    assert list(resimulate(recording)) == list(recording.frames())
    checked = verify(recording)
    assert checked.ok and checked.frames == recording.n_frames and checked.rounds == 2


def test_verify_finds_a_changed_action(recorded):
    """One altered action (a tank turning instead of what it did) is caught at or after its tick."""
    recording = Recording.load(recorded[0])
    actions = recording.actions.copy()
    actions[30, 0] = [1.0, 1.0, 1.0, -1.0, -1.0]
    checked = verify(dataclasses.replace(recording, actions=actions))
    assert checked.mismatch is not None and checked.mismatch.index >= 30
    assert "round 1" in checked.mismatch.describe()


def test_save_is_atomic(tmp_path, recorded):
    """A failed save leaves the previous file intact and no temporary file behind."""
    recording = Recording.load(recorded[0])
    path = tmp_path / "m.replay"
    recording.save(path)
    before = path.read_bytes()
    broken = dataclasses.replace(recording, meta={**recording.meta, "seed": object()})  # not JSON-serializable
    with pytest.raises(TypeError):
        broken.save(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.replay"]


def _rewrite(path: Path, out: Path, **changes: Any) -> None:
    with np.load(path) as npz:
        columns = {name: npz[name] for name in npz.files}
    columns.update(changes)
    np.savez_compressed(out, **columns)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", "truncated or corrupt"),
        ("flip", "truncated or corrupt"),
        ("text", "not an arena replay file"),
        ("foreign_npz", "not an arena replay file"),
        ("newer", "newer arena"),
        ("short_column", "corrupt arena replay"),
    ],
)
def test_bad_files_are_refused_with_one_line(tmp_path, recorded, damage, message):
    """Foreign, truncated, corrupt or too-new files raise ReplayError with a one-line message."""
    path, bad = recorded[0], tmp_path / "bad.npz"
    data = path.read_bytes()
    if damage == "truncate":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        flipped = bytearray(data)
        flipped[len(data) // 3] ^= 0xFF
        bad.write_bytes(bytes(flipped))
    elif damage == "text":
        bad.write_text("hello\n")
    elif damage == "foreign_npz":
        np.savez(bad, a=np.zeros(3))
    elif damage == "newer":
        meta = Recording.load(path).meta
        _rewrite(path, bad, meta=np.frombuffer(json.dumps({**meta, "version": 99}).encode(), np.uint8))
    else:
        with np.load(path) as npz:
            _rewrite(path, bad, tick=npz["tick"][:-1])
    with pytest.raises(ReplayError, match=message) as caught:
        Recording.load(bad)
    assert "\n" not in str(caught.value)


def test_gif_has_the_chosen_frames_and_size(tmp_path, recorded):
    """A GIF of round 2 at stride 4 has one image per 4th tick plus the round's end, at the asked width."""
    recording = Recording.load(recorded[0])
    config = RenderConfig(width=200, stride=4, rounds=(2,))
    out = tmp_path / "round2.gif"
    n = render(recording, out, config)
    expected = [i for i in recording.round_frames(2) if recording.tick[i] % 4 == 0 or recording.over[i]]
    assert frame_indices(recording, config) == expected and n == len(expected)
    with Image.open(out) as gif:
        assert gif.size == (200, 150) and gif.n_frames == n


@pytest.mark.parametrize("width, size", [(200, (200, 150)), (201, (202, 152))])
def test_mp4_has_the_chosen_frames_and_size(tmp_path, recorded, caplog, width, size):
    """An MP4 (the `video` extra) of round 2 at stride 4: an ISO container whose H.264 stream decodes to one
    frame per drawn image plus the held last frame, showing what the GIF shows; odd sizes are padded, never rescaled."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="needs the video extra (pip install -e '.[video]')")
    pytest.importorskip("imageio", reason="needs the video extra (pip install -e '.[video]')")
    recording = Recording.load(recorded[0])
    config = RenderConfig(width=width, stride=4, rounds=(2,), fps=25.0, hold=1.0)
    out = tmp_path / "round2.mp4"
    n = render(recording, out, config)
    assert n == len(frame_indices(recording, config))
    assert out.read_bytes()[4:8] == b"ftyp"  # an MP4 (ISO base media) file starts with its ftyp box
    assert not [r for r in caplog.records if "resizing" in r.getMessage()]
    assert [p.name for p in tmp_path.iterdir()] == ["round2.mp4"]  # no partial file left beside it
    # Decoded by the bundled ffmpeg itself (imageio-ffmpeg 0.8's frame reader leaves its pipes open).
    decoded = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "info", "-i", str(out), "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"],
        capture_output=True,
        timeout=timeout(60),
    )
    info = decoded.stderr.decode(errors="replace")
    assert decoded.returncode == 0, info
    assert "Video: h264" in info and f"{size[0]}x{size[1]}" in info and "25 fps" in info, info
    w, h = size
    frames = np.frombuffer(decoded.stdout, np.uint8).reshape(-1, h, w, 3)
    assert len(frames) == (n - 1) + 25  # every image once at 25 fps, the round's end held 1 s
    gif = tmp_path.parent / f"{tmp_path.name}.gif"
    render(recording, gif, config)
    with Image.open(gif) as image:
        first = np.asarray(image.convert("RGB"), dtype=np.int16)
        image.seek(n - 1)
        last = np.asarray(image.convert("RGB"), dtype=np.int16)
    gif.unlink()
    video_last = frames[-1, : last.shape[0], : last.shape[1]].astype(np.int16)
    same, other = np.abs(video_last - last).mean(), np.abs(video_last - first).mean()
    assert same < 3.5 and other > 2 * same, (same, other)  # lossy (~2 of 255 here), but the same picture (~6.4)


def test_render_refuses_bad_requests(tmp_path, recorded):
    recording = Recording.load(recorded[0])
    with pytest.raises(ValueError, match=r"can write \.gif or \.mp4"):
        render(recording, tmp_path / "x.png")
    with pytest.raises(ValueError, match="round 9 is not in this recording"):
        render(recording, tmp_path / "x.gif", RenderConfig(rounds=(9,)))
    with pytest.raises(ValueError, match="raise --stride"):
        render(recording, tmp_path / "x.gif", RenderConfig(stride=1, max_frames=10))
    with pytest.raises(ValueError, match="fps"):
        RenderConfig(fps=100)
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="imageio-ffmpeg"):
            render(recording, tmp_path / "x.mp4")
    assert not list(tmp_path.iterdir())


def test_viewer_serves_the_page_and_the_frames(recorded):
    """The viewer page, the dashboard's drawFrame (/match.js) and /replay.json (header + frames) come from 127.0.0.1."""
    from server.dashboard import static_asset

    recording = Recording.load(recorded[0])
    server = make_viewer(recording, static_asset("match.js"), port=0, rounds=(1,))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        with urllib.request.urlopen(base + "/", timeout=timeout(5)) as response:
            assert '<script src="match.js"></script>' in response.read().decode()
        with urllib.request.urlopen(base + "/match.js", timeout=timeout(5)) as response:
            assert "function drawFrame(ctx, header, frame)" in response.read().decode()
        with urllib.request.urlopen(base + "/replay.json", timeout=timeout(5)) as response:
            data = json.loads(response.read())
        assert data["header"] == recording.header
        assert data["frames"] == list(recording.frames((1,)))
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/secret", timeout=timeout(5))
    finally:
        server.shutdown()
        server.server_close()


def arena(*args: str) -> subprocess.CompletedProcess[str]:
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


SAMPLE = ROOT / "docs" / "replay_tracker.replay"


def test_sample_replay_in_docs_verifies():
    """docs/replay_tracker.replay (the match docs/replay_tracker.gif shows) still re-simulates frame for frame.

    An engine change that alters any rule's outcome breaks this: then re-record the sample (docs/arena.md says how)
    or find out why the engine departs from what it did."""
    recording = Recording.load(SAMPLE)
    assert recording.names[1] == "tracker" and recording.n_frames == 1331 and recording.rounds == [1]
    checked = verify(recording)
    assert checked.ok, checked.mismatch.describe() if checked.mismatch else ""
    assert checked.frames == 1331
    with Image.open(SAMPLE.with_suffix(".gif")) as gif:  # the GIF is this recording at stride 3
        assert gif.n_frames == len(frame_indices(recording, RenderConfig(stride=3)))


def test_sample_replay_verifies_from_the_command_line():
    result = arena("replay", str(SAMPLE), "--verify")
    assert result.returncode == 0, result.stderr
    assert "L1 vs tracker, 1 round(s), 1,331 frames: re-simulated, every frame identical" in result.stdout
