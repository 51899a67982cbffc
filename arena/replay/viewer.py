"""A browser viewer for a recording: a small HTTP server on 127.0.0.1 and a self-contained page.

The page (``static/replay.html``, package data) plays the frames with the live dashboard's own
``drawFrame`` (``match.js``), so a replay looks exactly like a live match and there is one
drawing routine in JavaScript. The arena does not import the server package for it: the caller
(``arena replay``) hands the script over.
"""

from __future__ import annotations

import http.server
import json
import logging
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any

from .recording import Recording

__all__ = ["make_viewer", "serve_viewer", "viewer_page"]

logger = logging.getLogger(__name__)


def viewer_page() -> bytes:
    """The viewer page (``arena/replay/static/replay.html``): a player around the dashboard's ``drawFrame``.

    Read as package data (``importlib.resources``), not by a path beside this file, so it is
    found in an installed wheel or a zip as well as in a source checkout.
    """
    return resources.files("arena.replay").joinpath("static/replay.html").read_bytes()


def make_viewer(
    recording: Recording, draw_script: bytes, port: int = 0, rounds: Sequence[int] = ()
) -> http.server.ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 serving the viewer page (``/``), the frames (``/replay.json``)
    and ``draw_script`` (``/match.js``: the live dashboard's ``drawFrame``, which the CLI hands
    over, so the arena needs nothing from the server package).

    Loopback only: a recording is the user's data and the page has no authentication.
    Call ``serve_forever()`` (blocking) and ``shutdown()`` from another thread.
    """
    payload = json.dumps(
        {
            "header": recording.header,
            "meta": {k: recording.meta.get(k) for k in ("seed", "bots", "result")},
            "frames": list(recording.frames(rounds)),
        },
        separators=(",", ":"),
    ).encode()
    page = viewer_page()

    class Handler(http.server.BaseHTTPRequestHandler):
        """Three fixed resources, prepared above; anything else is a 404 (no file system access)."""

        def do_GET(self) -> None:
            """Answer ``/``, ``/replay.json`` or ``/match.js``."""
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(page, "text/html; charset=utf-8")
            elif path == "/replay.json":
                self._send(payload, "application/json")
            elif path == "/match.js":
                self._send(draw_script, "text/javascript; charset=utf-8")
            else:
                self.send_error(404)

        def _send(self, body: bytes, kind: str) -> None:
            """A 200 with ``body``, never cached: the same port may serve another recording on the next run."""
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Requests go to the debug log, not stderr: the terminal shows the URL line only."""
            logger.debug("viewer: " + format, *args)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def serve_viewer(server: http.server.ThreadingHTTPServer, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (signal handlers set it), then close the socket."""
    thread = threading.Thread(target=server.serve_forever, name="replay-viewer", daemon=True)
    thread.start()
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
