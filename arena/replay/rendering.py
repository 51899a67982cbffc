"""Turn a recording into an animation: an animated GIF (Pillow) or an MP4 video (imageio-ffmpeg).

Which frames to show and for how long (:class:`RenderConfig`, :func:`frame_indices`) is decided
here, the pixels of each frame in :mod:`arena.replay.drawing`. GIF needs nothing beyond Pillow;
MP4 needs the optional ``video`` extra, imported only when an ``.mp4`` is asked for, so a
missing extra is a one-line error rather than an import failure of the whole command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .atomic import write_atomic
from .drawing import PALETTE, draw_frame
from .recording import Recording

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["RenderConfig", "frame_indices", "render"]


@dataclass(frozen=True)
class RenderConfig:
    """How a recording becomes an animation. The defaults keep a 2000-tick round near 1 MB of GIF (~1.1 kB a frame)."""

    width: int = 480
    """Image width in pixels; the height follows the field's aspect ratio (360 for 800 x 600)."""
    stride: int = 2
    """Draw every ``stride``-th tick (each round's last frame is always drawn)."""
    fps: float = 25.0
    """Frames per second of the animation; at most 50 (browsers slow down faster GIFs)."""
    rounds: tuple[int, ...] = ()
    """Rounds to draw; empty = all."""
    hold: float = 1.0
    """Seconds each round's last frame stays on screen."""
    max_frames: int | None = 10_000
    """Refuse to draw more frames than this (raise the stride); ``None`` disables."""

    def __post_init__(self) -> None:
        """Refuse bad settings at once: the CLI builds the config before any re-simulation or drawing."""
        if not 64 <= self.width <= 4096:
            raise ValueError(f"width must be in [64, 4096] pixels, got {self.width}")
        if self.stride < 1:
            raise ValueError(f"stride must be >= 1, got {self.stride}")
        if not 0 < self.fps <= 50:
            raise ValueError(f"fps must be in (0, 50], got {self.fps}")
        if self.hold < 0:
            raise ValueError(f"hold must be >= 0 seconds, got {self.hold}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames must be >= 1 or None, got {self.max_frames}")


def frame_indices(recording: Recording, config: RenderConfig) -> list[int]:
    """The frames an animation shows: every ``stride``-th tick of the chosen rounds, plus each round's end."""
    chosen = [i for i in recording.indices(config.rounds) if recording.tick[i] % config.stride == 0 or recording.over[i]]
    if config.max_frames is not None and len(chosen) > config.max_frames:
        raise ValueError(
            f"{len(chosen):,} frames to draw, over the limit of {config.max_frames:,}: raise --stride or pick --round"
        )
    return chosen


def render(recording: Recording, out: Path, config: RenderConfig = RenderConfig()) -> int:
    """Draw the recording as an animated GIF (``.gif``) or an MP4 video (``.mp4``); returns the frame count.

    Raises:
        ValueError: another suffix, a round not recorded, too many frames, or MP4 without imageio-ffmpeg.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"{out}: can write .gif or .mp4, not {out.suffix or 'a file without a suffix'}")
    writer: Any = None
    if suffix == ".mp4":
        try:
            import imageio.v2 as imageio  # optional: the `video` extra (pip install -e '.[video]')
            import imageio_ffmpeg  # noqa: F401  (imageio needs it for .mp4)
        except ImportError:
            raise ValueError(
                "writing .mp4 needs imageio and imageio-ffmpeg: the video extra (pip install -e '.[video]', or "
                "pip install imageio imageio-ffmpeg); .gif needs nothing"
            ) from None
        writer = imageio
    indices = frame_indices(recording, config)
    images: list[Image.Image] = [draw_frame(recording, i, config.width) for i in indices]
    step = 1000.0 / config.fps
    durations = [round(config.hold * 1000) if recording.over[i] and config.hold > 0 else round(step) for i in indices]
    if writer is not None:
        # ffmpeg writes to a path, not a file object: a temp file beside ``out``, then the same
        # fsync + rename as every other write, so a failed render never leaves half a video.
        partial = out.with_name(f".{out.name}.{os.getpid()}.partial.mp4")
        try:
            options = {"format": "FFMPEG", "mode": "I", "fps": config.fps, "codec": "libx264", "macro_block_size": 2}
            with writer.get_writer(str(partial), **options) as video:
                for image, duration in zip(images, durations, strict=True):
                    pixels = _even_rgb(image)
                    for _ in range(max(1, round(duration / step))):
                        video.append_data(pixels)
            with partial.open("rb") as f:
                os.fsync(f.fileno())
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    else:
        write_atomic(
            out,
            lambda f: images[0].save(
                f, format="GIF", save_all=True, append_images=images[1:], duration=durations, loop=0, optimize=False
            ),
        )
    return len(images)


def _even_rgb(image: Image.Image) -> NDArray[np.uint8]:
    """The frame as RGB pixels, padded with the background to even width and height.

    H.264 in yuv420p needs even sizes; without this, imageio rescales odd ones (``--width 301``,
    or a height of 225 from ``--width 300``) by a pixel and logs a warning; padding keeps every
    pixel as drawn.
    """
    pixels = np.asarray(image.convert("RGB"))
    h, w = pixels.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return pixels
    padded = np.empty((h + h % 2, w + w % 2, 3), np.uint8)
    padded[:] = PALETTE[0]
    padded[:h, :w] = pixels
    return padded
