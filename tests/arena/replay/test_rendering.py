"""GIF and MP4 rendering (`arena replay --to`): the chosen frames, the size, and refusals of bad requests."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from PIL import Image

from arena.replay import Recording, RenderConfig, frame_indices, render
from tests.conftest import timeout


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
    data = out.read_bytes()
    assert data[4:8] == b"ftyp"  # an MP4 (ISO base media) file starts with its ftyp box
    assert b"avc1" in data  # its sample entry names an H.264 stream (the container's field, not ffmpeg's log)
    assert [p.name for p in tmp_path.iterdir()] == ["round2.mp4"]  # no partial file left beside it
    # Decoded by the bundled ffmpeg itself (imageio-ffmpeg 0.8's frame reader leaves its pipes open).
    decoded = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "info", "-i", str(out), "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"],
        capture_output=True,
        timeout=timeout(60),
    )
    info = decoded.stderr.decode(errors="replace")
    assert decoded.returncode == 0, info
    w, h = size
    assert len(decoded.stdout) % (w * h * 3) == 0, info  # padded to the size asked for, never rescaled
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
