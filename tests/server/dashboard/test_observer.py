"""The live dashboard: page and asset serving, auth, the read-only observer websocket, and a real browser.

Every test runs a real :class:`TrainingServer` and :class:`Dashboard` on one event loop in a
background thread, on loopback ports picked by the OS; clients are real websockets, urllib
and (last test) headless Chromium driven by Playwright with the system's binary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from agents import make_agent
from arena.games.reach import ACT_DIM as REACH_ACT
from arena.games.reach import OBS_DIM as REACH_OBS
from arena.games.tank import frames as tank_frames
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.roster import make_scripted
from arena.games.tank.rules import TankRules
from bot_protocol import SUBPROTOCOL as BOT_SUBPROTOCOL
from bot_protocol import Hello, Welcome, decode_from_server, encode
from server import ServerConfig, TrainingServer
from server.dashboard import SUBPROTOCOL, Dashboard, DashboardConfig
from tests.conftest import ROOT, default_sigint, timeout

ROOT = ROOT
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "dashboard-s3cret"


# ── harness ──────────────────────────────────────────────────────────────────


@dataclass
class Running:
    server: TrainingServer
    dashboard: Dashboard

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.dashboard.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.dashboard.port}/observe"


@contextmanager
def running_dashboard(
    obs_dim: int = REACH_OBS,
    act_dim: int = REACH_ACT,
    token: str | None = None,
    agent_options: dict[str, Any] | None = None,
    update_hook: Callable[[Dashboard, dict[str, float]], None] | None = None,
    **dashboard_options: Any,
) -> Iterator[Running]:
    """A TrainingServer and its Dashboard on one event loop in a thread (as ``arena train`` will run them)."""
    options = {"rollout_steps": 512, "hidden": (32, 32), **(agent_options or {})}
    holder: list[Dashboard] = []
    server = TrainingServer(
        make_agent("ppo", obs_dim, act_dim, **options),
        ServerConfig(port=0, token=token),
        update_hook=(lambda stats: update_hook(holder[0], stats)) if update_hook is not None else None,
    )
    dashboard_options.setdefault("push_interval", 0.1)
    dashboard = Dashboard(server, DashboardConfig(port=0, **dashboard_options))
    holder.append(dashboard)
    ready = threading.Event()
    errors: list[BaseException] = []
    loop_box: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop_box.append((asyncio.get_running_loop(), stop))
        try:
            await server.start()
            await dashboard.start()
        except BaseException as exc:
            errors.append(exc)
            ready.set()
            await server.close()
            return
        ready.set()
        await stop.wait()
        await dashboard.close()  # observers get 1001 while the server's state is still readable
        await server.close()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="dashboard-loop", daemon=True)
    thread.start()
    assert ready.wait(timeout(30)), "server + dashboard did not start"
    if errors:
        raise errors[0]
    try:
        yield Running(server, dashboard)
    finally:
        loop, stop = loop_box[0]
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout(60))


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[Running]:
    """:func:`running_dashboard` for async tests, started and stopped off the test's loop."""
    manager = running_dashboard(**options)
    running = await asyncio.to_thread(manager.__enter__)
    try:
        yield running
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET without any proxy; (status, headers, body), errors included."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=timeout(5)) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


async def aget(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(http_get, url, headers)


async def observe(running: Running, path: str = "", **kwargs: Any) -> ClientConnection:
    """An observer connection that has received its ``hello``."""
    ws = await connect(running.ws + path, subprotocols=[SUBPROTOCOL], compression=None, **kwargs)
    hello = json.loads(await asyncio.wait_for(ws.recv(), timeout(5)))
    assert hello["type"] == "hello" and hello["protocol"] == SUBPROTOCOL
    return ws


async def next_message(ws: ClientConnection, kind: str, until: Callable[[dict[str, Any]], bool] = lambda m: True) -> Any:
    """The next message of type ``kind`` for which ``until`` holds (others are skipped)."""
    async with asyncio.timeout(timeout(10)):
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == kind and until(message):
                return message


def match_frames(n: int, seed: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A header and ``n`` consecutive frames of a real 1v1 match between scripted bots."""
    battle = TankBattle(1, 2, TankRules(), seed=seed)
    bots = [make_scripted("tracker", 1, seed), make_scripted("spinner", 1, seed + 1)]
    header = tank_frames.header(battle, ["tracker", "spinner"])
    frames = []
    actions = np.zeros((1, 2, ACT_DIM), np.float32)
    for _ in range(n):
        obs = battle.observe()
        for t, bot in enumerate(bots):
            actions[:, t] = bot.act(obs[:, t])
        info = battle.step(actions)
        frames.append(tank_frames.frame(battle))
        if info.round_over.any():
            battle.reset(info.round_over)
            for bot in bots:
                bot.reset(info.round_over)
    return header, frames


# ── config ───────────────────────────────────────────────────────────────────


def test_non_loopback_dashboard_needs_a_token() -> None:
    """Binding beyond loopback without a token (here or inherited from the server) is refused."""
    server = TrainingServer(make_agent("ppo", REACH_OBS, REACH_ACT, hidden=(8,)), ServerConfig(port=0))
    with pytest.raises(ValueError, match="requires a token"):
        Dashboard(server, DashboardConfig(host="0.0.0.0"))
    Dashboard(server, DashboardConfig(host="0.0.0.0", token=TOKEN))  # accepted


# ── HTTP ─────────────────────────────────────────────────────────────────────


async def test_page_assets_and_health_are_served() -> None:
    """GET / is the page (strict CSP, no-store), its JS/CSS come from the package, /healthz is JSON."""
    async with serving() as running:
        status, headers, body = await aget(running.base + "/")
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        page = body.decode()
        assert 'id="match"' in page and 'src="dashboard.js"' in page and 'src="match.js"' in page
        assert "http" not in page.replace("http-equiv", ""), "the page must not load anything from elsewhere"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["Cache-Control"] == "no-store" and headers["Referrer-Policy"] == "no-referrer"
        for path, kind, needle in [
            ("/dashboard.js", "text/javascript", "arena.observe.v1"),
            ("/match.js", "text/javascript", "function drawFrame(ctx, header, frame)"),
            ("/dashboard.css", "text/css", ".charts"),
        ]:
            status, headers, body = await aget(running.base + path)
            assert status == 200 and headers["Content-Type"].startswith(kind) and needle in body.decode()
        status, _, body = await aget(running.base + "/healthz")
        health = json.loads(body)
        assert status == 200 and health["status"] == "ok" and health["observers"] == 0
        assert (await aget(running.base + "/nope"))[0] == 404
        assert (await aget(running.base + "/../server/app.py"))[0] == 404


async def test_token_rules_for_page_and_observers() -> None:
    """With a token (inherited from the server): 401 without or with a wrong one; header or ?token= let in."""
    async with serving(token=TOKEN) as running:
        base = running.base
        assert (await aget(base + "/"))[0] == 401
        assert (await aget(base + "/?token=wrong-token-1"))[0] == 401
        assert (await aget(base + "/", {"Authorization": "Bearer wrong-token-1"}))[0] == 401
        assert (await aget(base + "/", {"Authorization": f"Basic {TOKEN}"}))[0] == 401
        assert (await aget(base + "/", {"Authorization": f"Bearer {TOKEN}"}))[0] == 200
        assert (await aget(base + f"/?token={TOKEN}"))[0] == 200
        assert (await aget(base + "/dashboard.js"))[0] == 200, "static code is public: it holds no data"
        assert (await aget(base + "/healthz"))[0] == 200

        for path, headers in [("", {}), ("?token=wrong-token-1", {}), ("", {"Authorization": "Bearer wrong-token-1"})]:
            with pytest.raises(InvalidStatus) as info:
                await connect(running.ws + path, subprotocols=[SUBPROTOCOL], additional_headers=headers)
            assert info.value.response.status_code == 401
        by_query = await observe(running, f"?token={TOKEN}")
        by_header = await observe(running, additional_headers={"Authorization": f"Bearer {TOKEN}"})
        await by_query.close()
        await by_header.close()
        assert running.server.metrics.counter("observers_rejected", reason="unauthorized") == 7


async def test_cross_origin_and_foreign_host_are_refused() -> None:
    """A browser websocket from another origin gets 403; without a token a non-loopback Host
    (DNS rebinding) gets 403 too; a websocket without the observer subprotocol gets 400."""
    async with serving() as running:
        with pytest.raises(InvalidStatus) as info:
            await connect(running.ws, subprotocols=[SUBPROTOCOL], origin="http://evil.example")  # type: ignore[arg-type]
        assert info.value.response.status_code == 403
        assert (await aget(running.base + "/", {"Host": f"evil.example:{running.dashboard.port}"}))[0] == 403
        with pytest.raises(InvalidStatus) as info:
            await connect(running.ws)
        assert info.value.response.status_code == 400
        same_origin = await observe(running, origin=f"http://127.0.0.1:{running.dashboard.port}")  # type: ignore[arg-type]
        await same_origin.close()


# ── observer websocket ───────────────────────────────────────────────────────


async def test_observer_gets_stats_bot_table_updates_and_frames() -> None:
    """Stats carry samples, the connected bot and published update rows; frames arrive with their header once."""
    async with serving() as running:
        bot = await connect(f"{running.server.url}", subprotocols=[BOT_SUBPROTOCOL], compression=None)
        await bot.send(encode(Hello("table-bot", REACH_OBS, REACH_ACT, n_agents=3)))
        assert isinstance(decode_from_server(await bot.recv()), Welcome)
        ws = await observe(running)
        try:
            first = await next_message(ws, "stats")
            assert first["samples"] and first["samples"][0]["i"] == 0, "the first stats replay the whole history"
            assert {"transitions_per_s", "policy_version", "loop_lag_p99_ms", "policy_lag_avg"} <= set(first["samples"][0])
            stats = await next_message(ws, "stats", lambda m: any(b["name"] == "table-bot" for b in m["bots"]))
            (row,) = [b for b in stats["bots"] if b["name"] == "table-bot"]
            assert row["agents"] == 3 and row["version"] == 0 and row["steps"] == 0
            assert stats["health"]["connected_bots"] == 1
            seen = first["samples"][-1]["i"]
            later = await next_message(ws, "stats", lambda m: bool(m["samples"]))
            assert later["samples"][0]["i"] == seen + 1 or later["samples"][0]["i"] > seen, "only new samples"

            await asyncio.to_thread(
                running.dashboard.publish_stats, {"train/policy_loss": 0.25, "rollout/ep_rew_mean": math.nan, "note": "x"}
            )
            stats = await next_message(ws, "stats", lambda m: bool(m["updates"]))
            (update,) = stats["updates"]
            assert update["train/policy_loss"] == 0.25 and update["rollout/ep_rew_mean"] is None and "note" not in update

            header, frames = match_frames(2)
            await asyncio.to_thread(running.dashboard.publish_frame, header, frames[0])
            message = await next_message(ws, "frame")
            assert message["header"] == header and message["frame"] == frames[0]
            await asyncio.to_thread(running.dashboard.publish_frame, header, frames[1])
            message = await next_message(ws, "frame")
            assert "header" not in message and message["frame"] == frames[1], "the header travels once"
        finally:
            await ws.close()
            await bot.close()


async def test_late_observer_gets_the_whole_history_in_chunks() -> None:
    """An observer joining later receives every kept update row once, in order, in messages of at most 200 rows."""
    async with serving(update_history=1000) as running:

        def publish_many() -> None:
            for k in range(450):
                running.dashboard.publish_stats({"train/policy_loss": k / 1000, "updates": k + 1})

        await asyncio.to_thread(publish_many)
        await asyncio.sleep(0.3)  # a few samples: the rows are history now (rows still in the inbox would come the same way)
        ws = await observe(running)
        rows: list[dict[str, Any]] = []
        sizes: list[int] = []
        async with asyncio.timeout(timeout(10)):
            while len(rows) < 450:
                message = json.loads(await ws.recv())
                if message["type"] == "stats" and message["updates"]:
                    sizes.append(len(message["updates"]))
                    rows.extend(message["updates"])
        await ws.close()
        assert [r["i"] for r in rows] == list(range(450)), "each row once, in order"
        assert [r["train/policy_loss"] for r in rows[:3]] == [0.0, 0.001, 0.002]
        assert max(sizes) <= 200 and len(sizes) >= 3


async def test_observers_are_read_only() -> None:
    """Anything an observer sends closes it with 1008; other observers keep streaming."""
    async with serving() as running:
        talker, listener = await observe(running), await observe(running)
        await talker.send("please train faster")
        with pytest.raises(ConnectionClosed) as info:
            async with asyncio.timeout(timeout(5)):
                while True:
                    await talker.recv()
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008
        await next_message(listener, "stats")
        await listener.close()
        assert running.server.metrics.counter("observers_rejected", reason="sent_data") == 1


async def test_observer_cap() -> None:
    """Beyond max_observers the handshake gets 503; a freed place is usable again."""
    async with serving(max_observers=2) as running:
        a, b = await observe(running), await observe(running)
        with pytest.raises(InvalidStatus) as info:
            await connect(running.ws, subprotocols=[SUBPROTOCOL])
        assert info.value.response.status_code == 503
        await a.close()
        deadline = time.monotonic() + timeout(5)
        while running.dashboard.observers > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        c = await observe(running)
        await b.close()
        await c.close()


async def test_frames_are_latest_wins_and_publishing_never_waits() -> None:
    """A burst of frames from a game thread costs it microseconds each; observers get fewer frames,
    ending with the newest, at no more than about frame_fps."""
    async with serving(frame_fps=20) as running:
        assert not running.dashboard.frame_wanted(), "no observer: nobody wants frames"
        ws = await observe(running)
        header, frames = match_frames(50)
        deadline = time.monotonic() + timeout(5)
        while not running.dashboard.frame_wanted() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

        def burst() -> float:
            start = time.perf_counter()
            for _ in range(40):
                for frame in frames:
                    running.dashboard.publish_frame(header, frame)
            return time.perf_counter() - start

        elapsed = await asyncio.to_thread(burst)
        assert elapsed < timeout(1.0), f"2000 publish_frame calls took {elapsed:.3f} s"
        received: list[dict[str, Any]] = []
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout(1.0)):
                while True:
                    message = json.loads(await ws.recv())
                    if message["type"] == "frame":
                        received.append(message)
        took = time.monotonic() - started
        assert received and received[-1]["frame"] == frames[-1] and received[-1]["seq"] == 1999
        assert len(received) <= 20 * took + 3, f"{len(received)} frames in {took:.2f} s exceeds frame_fps"
        await ws.close()


# ── a real browser ───────────────────────────────────────────────────────────


def _start_arena_train(out: Path) -> tuple[subprocess.Popen[str], str, threading.Thread]:
    """A real ``arena train`` (two bot threads, short rounds, small rollouts) and its dashboard URL."""
    command = [
        sys.executable, "-m", "arena.cli", "train", "--opponent", "spinner", "--bots", "2", "--matches", "2",
        "--ticks-per-round", "120", "--minutes", "3", "--agent-option", "rollout_steps=256",
        "--token", TOKEN, "--dashboard-port", "0", "--out", str(out),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, preexec_fn=default_sigint
    )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout(60)
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("dashboard: "):
            drain = threading.Thread(target=process.stdout.read, daemon=True)  # keep the pipe from filling up
            drain.start()
            return process, line.split()[1].split("?")[0].rstrip("/"), drain
    process.kill()
    process.communicate()
    raise AssertionError("arena train printed no dashboard URL:\n" + "".join(seen[-20:]))


@pytest.mark.expensive
def test_dashboard_in_headless_chromium(tmp_path: Path) -> None:
    """Chromium loads the page with ?token= against a live ``arena train`` (two learning bot threads):
    the charts grow, the bot table lists both bots, the match canvas draws frames; no page errors."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright's python package (pip install playwright)")

    artifacts = Path(os.environ.get("ARENA_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    process, base, drain = _start_arena_train(tmp_path / "run")
    page_errors: list[str] = []
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                headless=True,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                ],
            )
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.on("pageerror", lambda exc: page_errors.append(str(exc)))
                page.on("console", lambda msg: page_errors.append(msg.text) if msg.type == "error" else None)
                page.goto(f"{base}/?token={TOKEN}", wait_until="load", timeout=timeout(10) * 1000)
                wait_ms = timeout(20) * 1000

                # Charts: sample points accumulate, and trainer updates reach the update charts.
                page.wait_for_function("() => window.arenaDashboard && arenaDashboard.samples >= 3", timeout=wait_ms)
                points = int(page.get_attribute("#chart-transitions", "data-points") or 0)
                page.wait_for_function(
                    f"() => Number(document.querySelector('#chart-transitions').dataset.points) > {points}",
                    timeout=wait_ms,
                )
                for chart in ("policy-loss", "value-loss", "win-rate", "policy-version"):
                    page.wait_for_function(
                        f"() => Number(document.querySelector('#chart-{chart}').dataset.points) >= 1", timeout=wait_ms
                    )
                # Bot table: both learning bots, with their agent counts.
                page.wait_for_function("() => document.querySelectorAll('#bots tbody tr').length >= 2", timeout=wait_ms)
                table = page.inner_text("#bots tbody")
                assert "tank0-" in table and "tank1-" in table, table
                # Match canvas: frames keep being drawn, and they are not blank.
                page.wait_for_function("() => arenaDashboard.framesDrawn >= 5", timeout=wait_ms)
                drawn = page.evaluate("() => arenaDashboard.framesDrawn")
                page.wait_for_function(f"() => arenaDashboard.framesDrawn > {drawn}", timeout=wait_ms)
                colors = page.evaluate(
                    """() => {
                        const c = document.getElementById('match');
                        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                        const seen = new Set();
                        for (let i = 0; i < d.length; i += 4 * 97) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                        return seen.size;
                    }"""
                )
                assert colors >= 6, f"the match canvas looks blank ({colors} colours)"
                assert page.inner_text("#conn") == "live"
                shot = artifacts / "dashboard.png"
                for_docs = os.environ.get("ARENA_DOCS_SCREENSHOT") == "1"  # refresh docs/dashboard.png
                if for_docs:
                    page.wait_for_timeout(25_000)  # longer curves for the picture
                page.screenshot(path=str(shot), full_page=True)
                if for_docs:
                    shutil.copyfile(shot, ROOT / "docs" / "dashboard.png")
            finally:
                browser.close()
    finally:
        process.send_signal(signal.SIGINT)  # as Ctrl-C: bots stop, final checkpoint, exit 130
        try:
            code = process.wait(timeout(60))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        finally:
            drain.join(timeout(10))  # EOF once the process is gone
            assert process.stdout is not None
            process.stdout.close()
    assert code == 130, f"arena train exited {code}"
    assert not page_errors, f"the page reported errors: {page_errors}"
    assert shot.stat().st_size > 10_000
