"""``arena serve --distributed``: two learner ranks on loopback (gloo), real bots on each, torchrun.

The reach test game learns in seconds. What is checked is what the ranks promise (docs/deploy.md):
both publish the same policy bit for bit, the run learns, a rank that is killed ends the group and
torchrun's restart resumes it from rank 0's checkpoint under a new generation, and a rank that
hangs makes the other stop with one line within the collective timeout.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.sync.client import connect

from arena.games.reach import ACT_DIM, OBS_DIM, ReachGame, play_steps
from bot_protocol import SUBPROTOCOL, Hello, Welcome, decode_from_server, encode
from bot_protocol.client import BlockingBotClient, ClientConfig
from tests.conftest import timeout

pytestmark = pytest.mark.expensive

SERVE = ["-m", "arena.cli", "serve", "--distributed", "--obs-dim", str(OBS_DIM), "--act-dim", str(ACT_DIM),
         "--agent-option", "rollout_steps=512", "--agent-option", "minibatch_size=128"]  # fmt: skip


def free_ports(count: int) -> int:
    """A base port with ``count`` consecutive free ports above it (the ranks' bot ports)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            sockets = []
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no run of free ports")


def health(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            body: dict[str, Any] = json.loads(response.read())
            return body
    except OSError:
        return None


def wait_for(condition: Callable[[], Any], seconds: float, what: str, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout(seconds)
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def ports_for_two_ranks() -> tuple[int, int]:
    """(base bot port, rendezvous port): three distinct free ports."""
    base = free_ports(2)
    master = free_ports(1)
    while base <= master <= base + 1:
        master = free_ports(1)
    return base, master


def published_weights(port: int) -> tuple[tuple[int, int], bytes]:
    """((generation, version), the weights message's bytes) that a new bot gets in its welcome."""
    with connect(f"ws://127.0.0.1:{port}", subprotocols=[SUBPROTOCOL], compression=None) as ws:  # type: ignore[list-item]
        ws.send(encode(Hello("probe", OBS_DIM, ACT_DIM, n_agents=1)))
        welcome = decode_from_server(ws.recv(timeout=10))
    assert isinstance(welcome, Welcome)
    return (welcome.weights.generation, welcome.weights.version), encode(welcome.weights)


@contextmanager
def bots(ports: list[int], per_rank: int = 2) -> Iterator[list[ReachGame]]:
    """Reach bots on every rank's port until the block ends (they retry while a rank restarts)."""
    stop = threading.Event()
    games: list[ReachGame] = []

    def play(port: int, seed: int) -> None:
        # Its own reconnect loop, not the client's: a client that retries by itself would outlive the
        # test (its backoff draws from `random` while later tests run) once the servers are gone.
        while not stop.is_set():
            game = ReachGame(8, seed=seed)
            games.append(game)
            config = ClientConfig(f"ws://127.0.0.1:{port}", "reach", OBS_DIM, ACT_DIM, n_agents=8, reconnect=False)
            try:
                with BlockingBotClient(config, seed=seed) as bot:
                    play_steps(bot, game, 10**6, stop)
            except Exception:  # a rank went down under it: connect again once it is back
                time.sleep(0.5)

    threads = [threading.Thread(target=play, args=(port, 10 * i + j), daemon=True)
               for i, port in enumerate(ports) for j in range(per_rank)]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        yield games
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout(5))


def dashboard_bot_ids(port: int, wanted: Callable[[list[str]], bool], seconds: float = 30) -> list[str]:
    """Bot ids in rank 0's dashboard (an observer's ``stats`` messages) once ``wanted`` holds for them."""
    deadline = time.monotonic() + timeout(seconds)
    ids: list[str] = []
    with connect(f"ws://127.0.0.1:{port}/observe", subprotocols=["arena.observe.v1"], compression=None) as ws:  # type: ignore[list-item]
        while time.monotonic() < deadline:
            message = json.loads(ws.recv(timeout=10))
            if message["type"] == "stats":
                ids = [bot["id"] for bot in message["bots"]]
                if wanted(ids):
                    return ids
    raise AssertionError(f"the dashboard listed {ids}")


def rank_pids(launcher: int) -> dict[int, int]:
    """rank → pid of the ranks torchrun started (read from /proc: their RANK variable)."""
    found = {}
    for task in Path(f"/proc/{launcher}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                env = dict(
                    item.split("=", 1) for item in Path(f"/proc/{child}/environ").read_text().split("\0") if "=" in item
                )
            except OSError:
                continue
            if "RANK" in env:
                found[int(env["RANK"])] = int(child)
    return found


def stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout(30))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_two_ranks_learn_one_policy_and_a_killed_rank_resumes_under_a_new_generation(tmp_path: Path) -> None:
    base, master = ports_for_two_ranks()
    ports = [base, base + 1]
    dashboard = free_ports(1)
    output = tmp_path / "torchrun.log"
    log = output.open("wb")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1",
         "--master-addr", "127.0.0.1", "--master-port", str(master), "--monitor-interval", "0.5",
         *SERVE, "--port", str(base), "--out", str(tmp_path / "run"), "--checkpoint-interval", "1",
         "--dashboard-port", str(dashboard)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: all(health(p) for p in ports), 90, "both ranks to serve", output)
        assert [health(p)["rank"] for p in ports] == [0, 1]  # type: ignore[index]
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/metrics", timeout=5) as response:
            exported = response.read().decode()
        assert 'arena_policy_generation{rank="1"} 0' in exported, "every series carries the rank"
        with bots(ports) as games:
            # Rank 0's dashboard shows every rank's bots: its own, and rank 1's as posted (ids r1/...).
            ids = dashboard_bot_ids(dashboard, lambda ids: len(ids) == 4 and sum(i.startswith("r1/") for i in ids) == 2)
            assert len(set(ids)) == 4, ids
            wait_for(lambda: all((health(p) or {}).get("policy_version", 0) >= 8 for p in ports), 120, "8 updates", output)
        # Bots gone: the ranks hold less than a rollout, so they stop at the same version.
        time.sleep(1.0)
        (first, weights0), (other, weights1) = published_weights(ports[0]), published_weights(ports[1])
        assert first == other and first[0] == 0
        assert weights0 == weights1, "the ranks publish different weights for the same version"
        early = np.mean([np.mean(g.finished[:8]) for g in games if len(g.finished) >= 16])
        late = np.mean([np.mean(g.finished[-8:]) for g in games if len(g.finished) >= 16])
        assert late > early, f"the shared policy did not learn: {early:.2f} -> {late:.2f}"
        saved = sorted(json.loads(p.read_text())["version"] for p in (tmp_path / "run" / "checkpoints").glob("*.json"))
        assert saved and saved[-1] >= first[1] - 1, "rank 0 checkpoints within the interval"

        # Kill rank 1: rank 0 fails at its next collective, torchrun restarts the pair, rank 0 resumes.
        os.kill(rank_pids(launcher.pid)[1], signal.SIGKILL)
        wait_for(lambda: all((health(p) or {}).get("generation") == 1 for p in ports), 120, "the restarted group", output)
        resumed = [health(p)["policy_version"] for p in ports]  # type: ignore[index]
        assert resumed[0] == resumed[1] >= saved[-1] - 1
        with bots(ports):
            wait_for(
                lambda: all((health(p) or {}).get("policy_version", 0) >= resumed[0] + 3 for p in ports),
                120,
                "training to go on after the restart",
                output,
            )
        time.sleep(1.0)
        (after0, weights0), (after1, weights1) = published_weights(ports[0]), published_weights(ports[1])
        assert after0 == after1 and after0[0] == 1 and weights0 == weights1
        # A half-written file of the first generation (rank 0 may die mid-write) is gone since the restart. One of
        # generation 1 may be there: rank 0 writes every second, and this glob can land inside a write.
        left = list((tmp_path / "run" / "checkpoints").glob("ckpt-0000-*.tmp"))
        assert not left, f"a half-written checkpoint of the killed generation was left: {left}"
        rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        assert len(rows) >= after0[1], "rank 0 logs every update (rank 1 writes nothing)"
    finally:
        stop_group(launcher)
        log.close()
    text = output.read_text(errors="replace")
    # Rank 0 noticed rank 1's death itself, in one line, before torchrun restarted the pair.
    assert "arena serve: error: rank 0 of 2: a collective failed" in text, text[-3000:]


def test_a_hung_rank_makes_the_other_stop_with_one_line_within_the_timeout(tmp_path: Path) -> None:
    """SIGSTOP rank 1 (a hang, not a death: its sockets stay open): rank 0 gives up after the timeout."""
    base, master = ports_for_two_ranks()
    ranks = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(master))  # fmt: skip
        with (tmp_path / f"rank{rank}.out").open("wb") as out, (tmp_path / f"rank{rank}.err").open("wb") as err:
            ranks.append(subprocess.Popen(
                [sys.executable, *SERVE, "--port", str(base), "--out", str(tmp_path / "run"), "--collective-timeout", "3"],
                env=env, stdout=out, stderr=err, start_new_session=True,
            ))  # fmt: skip
    try:
        wait_for(lambda: all(health(base + r) for r in range(2)), 90, "both ranks to serve", tmp_path / "rank0.err")
        with bots([base, base + 1], per_rank=1):
            wait_for(lambda: (health(base) or {}).get("policy_version", 0) >= 2, 60, "two updates")
            ranks[1].send_signal(signal.SIGSTOP)
            hung_at = time.monotonic()
            code = ranks[0].wait(timeout(60))
            waited = time.monotonic() - hung_at
        assert code == 1
        assert waited < timeout(3 + 20), f"rank 0 took {waited:.1f} s to give up"
        stderr = (tmp_path / "rank0.err").read_text(errors="replace")
        errors = [line for line in stderr.splitlines() if line.startswith("arena serve: error")]
        assert len(errors) == 1 and "rank 0 of 2: a collective failed" in errors[0] and "3 s" in errors[0], errors
    finally:
        for process in ranks:
            with_signal = process.poll() is None
            if with_signal:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _serve_in_process(*args: str) -> int:
    """``arena serve --distributed ...`` through the command's entry point in this process: both refusals
    below come before a server, a port or a process group exists."""
    from arena.cli import main

    return main([*SERVE[2:], *args])


def test_distributed_outside_torchrun_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert _serve_in_process("--port", "0", "--out", str(tmp_path)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena serve: error: --distributed runs under torchrun"), lines


def test_distributed_refuses_off_policy_agents(tmp_path: Path, capsys) -> None:
    assert _serve_in_process("--agent", "td3", "--port", "0", "--out", str(tmp_path)) == 2
    assert "--distributed trains ppo" in capsys.readouterr().err
