"""The browser viewer (`arena replay` without --to): the page, the dashboard's drawFrame and the frames on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from arena.replay import Recording, make_viewer, viewer_page
from tests.conftest import timeout


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


def test_viewer_page_is_package_data():
    """The page ships inside the package (arena/replay/static/), so an installed arena finds it too."""
    import importlib.resources

    assert importlib.resources.files("arena.replay").joinpath("static/replay.html").is_file()
    page = viewer_page().decode()
    assert page.lstrip().lower().startswith("<!doctype html") and '<script src="match.js"></script>' in page
