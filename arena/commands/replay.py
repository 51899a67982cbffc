"""``arena replay``: watch, render or verify a match recorded with ``arena match --record``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .options import positive_float, positive_int


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena replay`` to the subcommands of ``arena``."""
    replay = commands.add_parser(
        "replay",
        help="watch, render or verify a match recorded with 'arena match --record'",
        description=(
            "Show a recording. --to OUT.gif renders an animated GIF (OUT.mp4 an H.264 video, with the video extra: "
            "pip install -e '.[video]'); --verify re-simulates the match from its seed and recorded actions and "
            "checks every frame; with neither, a viewer page is served on 127.0.0.1 until Ctrl-C."
        ),
        epilog="example: arena replay match.replay --to match.gif --round 1 --stride 3",
    )
    replay.add_argument("file", type=Path, help="a recording from 'arena match --record FILE'")
    replay.add_argument(
        "--to",
        type=Path,
        default=None,
        metavar="OUT",
        help="write an animation: OUT.gif, or OUT.mp4 with the video extra (pip install -e '.[video]')",
    )
    replay.add_argument(
        "--verify", action="store_true", help="re-simulate the match and compare every frame (exit 1 if any differs)"
    )
    replay.add_argument(
        "--round",
        type=positive_int,
        action="append",
        default=None,
        metavar="N",
        help="only this round (repeatable; default: all)",
    )
    replay.add_argument(
        "--stride",
        type=positive_int,
        default=2,
        metavar="K",
        help="animation: draw every K-th tick (default: 2; 3-4 for long rounds)",
    )
    replay.add_argument("--fps", type=positive_float, default=25.0, help="animation frames per second, <= 50 (default: 25)")
    replay.add_argument(
        "--width", type=positive_int, default=480, metavar="PX", help="animation width in pixels (default: 480)"
    )
    replay.add_argument("--port", type=int, default=0, help="viewer port on 127.0.0.1, 0 = any free (default: 0)")


def run(args: argparse.Namespace) -> int:
    """``arena replay``: a recording watched, rendered or verified; the exit code."""
    from ..replay import Recording, RenderConfig, make_viewer, render, serve_viewer, verify

    recording = Recording.load(args.file)
    rounds = tuple(args.round or ())
    for rnd in rounds:
        recording.round_frames(rnd)  # a ValueError naming the recorded rounds
    config = RenderConfig(width=args.width, stride=args.stride, fps=args.fps, rounds=rounds)  # checked before any work
    what = f"{' vs '.join(recording.names)}, {len(recording.rounds)} round(s), {recording.n_frames:,} frames"
    if args.verify:
        checked = verify(recording)
        if checked.mismatch is not None:
            print(
                f"arena replay: error: {args.file}: the re-simulation departs at {checked.mismatch.describe()}",
                file=sys.stderr,
            )
            return 1
        print(f"arena replay: {args.file}: {what}: re-simulated, every frame identical", flush=True)
    if args.to is not None:
        frames = render(recording, args.to, config)
        print(f"arena replay: wrote {args.to} ({frames:,} frames, {args.to.stat().st_size:,} bytes)", flush=True)
    if args.verify or args.to is not None:
        return 0
    try:
        from server.dashboard import static_asset  # the CLI wires the dashboard's drawFrame into the viewer

        server = make_viewer(recording, static_asset("match.js"), args.port, rounds)
    except OSError as exc:
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"arena replay: {what}; viewer at http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)", flush=True)
    serve_viewer(server, stop)
    return 0
