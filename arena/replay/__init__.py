"""Record a tank match tick by tick, check it by re-simulation, and show it (GIF/MP4, browser viewer).

One module per job, so that each can change (or be imported) without the others:

- :mod:`~arena.replay.recording`: the format (version 1, described there), :class:`Recording`
  in memory, its reader and writer, :class:`ReplayError` for files that are not recordings;
- :mod:`~arena.replay.recorder`: :class:`Recorder`, the ``play_match`` observer that
  ``arena match --record`` runs during the match;
- :mod:`~arena.replay.verification`: :func:`resimulate` and :func:`verify`, the exact
  re-simulation check;
- :mod:`~arena.replay.drawing` and :mod:`~arena.replay.rendering`: one frame as an image, and
  :func:`render` to GIF or MP4 (:class:`RenderConfig`);
- :mod:`~arena.replay.viewer`: the browser viewer (:func:`make_viewer`, :func:`serve_viewer`);
- :mod:`~arena.replay.atomic`: the all-or-nothing file write the recording and the GIF share.

The names below are the package's public interface (``from arena.replay import ...``); import
from here rather than from the modules, which may be rearranged.
"""

from __future__ import annotations

from .recorder import Recorder
from .recording import FORMAT, MAX_UNPACKED_BYTES, VERSION, Recording, ReplayError
from .rendering import RenderConfig, frame_indices, render
from .verification import Mismatch, Verification, resimulate, verify
from .viewer import make_viewer, serve_viewer, viewer_page

__all__ = [
    "FORMAT",
    "MAX_UNPACKED_BYTES",
    "VERSION",
    "Mismatch",
    "Recorder",
    "Recording",
    "RenderConfig",
    "ReplayError",
    "Verification",
    "frame_indices",
    "make_viewer",
    "render",
    "resimulate",
    "serve_viewer",
    "verify",
    "viewer_page",
]
