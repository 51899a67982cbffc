"""The `arena` command end to end, as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, default_sigint, self_signed_certificate, tier_2, timeout


def arena(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=timeout(180))
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.mark.t2
@tier_2  # resume is covered by test_train_resume.py (a kill at a random moment) and the chaos suite's C3 and C8
def test_train_then_resume_continues_the_policy_version(tmp_path, capsys):
    """`arena train` on the tank arena writes its outputs; `--resume` continues the version in a new generation."""
    out = tmp_path / "run"
    # The league, with its snapshots and self-play (off by default) turned on.
    options = ["--league-option", "snapshot_every=2", "--league-option", "max_snapshots=2"]
    options += ["--league-option", "self_share=0.1"]
    common = ["train", "--ticks-per-round", "150", "--matches", "4", "--out", str(out), *options]
    arena(*common, "--rounds", "400", "--eval-rounds", "10", "--agent-option", "final_lr_fraction=0.5")
    first = json.loads((out / "summary.json").read_text())
    # The run reports its budget's progress to PPO: the learning rate falls with it, from 3e-4 toward 1.5e-4.
    rates = [json.loads(line)["train/learning_rate"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rates == sorted(rates, reverse=True) and 1.5e-4 <= rates[-1] < 3e-4, rates
    assert first["rounds"] >= 400 and first["updates"] >= 1 and first["opponents"] == ["league"]
    assert {"agent", "policy_version", "updates", "rounds", "transitions", "wall_seconds", "win_rate_last_100"} <= set(first)
    # The layout the run chose, and why (2+ cores: the learning bot in a worker process), and where its time went.
    layout = first["layout"]
    assert layout["bots_in"] == ("processes" if layout["cores"] >= 2 else "threads") and layout["reason"]
    assert first["throughput"]["trained_steps_per_s"] > 0 and 0 < first["throughput"]["update_time_share"] <= 1
    assert (out / "metrics.jsonl").read_text().count("\n") == first["updates"]
    assert list((out / "checkpoints").glob("*.pt")) and (out / "learning_curve.png").is_file()
    assert (out / "report.html").is_file() and (out / "report.png").is_file()
    evaluated = {row["opponent"] for row in first["evaluation"]["opponents"]}
    assert evaluated == {"sitting", "spinner", "walker", "tracker", "drawn"}
    # The figures shown are the returned policy's on fresh rounds, not the rounds it was selected on (kept, labelled).
    fresh, chosen_on = first["evaluation"], first["selection_evaluation"]
    assert (fresh["rounds_of"], chosen_on["rounds_of"]) == ("fresh", "selection") and fresh["seed"] != chosen_on["seed"]
    assert fresh["policy"] == chosen_on["policy"]
    returned = json.loads((out / "returned.json").read_text())
    assert {"selection_mean_win_rate", "fresh_mean_win_rate", "evaluation"} <= set(returned)
    assert returned["fresh_mean_win_rate"] == first["returned_policy"]["fresh_mean_win_rate"]
    assert "Fresh rounds, not those it was selected on" in (out / "report.html").read_text()
    # The default opponents are the league: its members, ratings and snapshots are in the summary and on disk.
    league = first["league"]
    kinds = {m["kind"] for m in league["members"]}
    assert {"scripted", "snapshot", "self"} <= kinds and league["config"]["snapshot_every"] == 2
    assert "learner" in {r["name"] for r in league["ratings"]}
    assert (out / "league" / "state.json").is_file() and (out / "league" / "table.json").is_file()
    assert any(key.startswith("league/rating/") for key in json.loads((out / "metrics.jsonl").read_text().splitlines()[-1]))
    arena(*common, "--rounds", "10", "--resume", "--eval-rounds", "0", "--no-report")  # the first run checked those
    second = json.loads((out / "summary.json").read_text())
    assert second["generation"] == first["generation"] + 1
    assert second["policy_version"] > first["policy_version"]
    # --resume continued the league: its rounds, ratings and snapshots carried over.
    rounds = {name: r["rounds"] for name, r in second["league"]["opponents"].items()}
    assert sum(rounds.values()) >= sum(r["rounds"] for r in league["opponents"].values()) + 10
    kept = {m["name"] for m in league["members"] if m["kind"] == "snapshot"}
    newest = max(m["version"] for m in second["league"]["members"] if m["kind"] == "snapshot")
    assert newest > max(m["version"] for m in league["members"] if m["kind"] == "snapshot")
    assert kept & {m["name"] for m in second["league"]["members"]} or len(kept) == 8
    # arena league: the training ratings and a round-robin of the final policy and every member.
    report = json.loads(arena("league", str(out), "--rounds", "2", "--ticks-per-round", "100", "--json").stdout)
    robin = {r["name"] for r in report["round_robin"]["ratings"]}
    assert {"returned", "sitting", "spinner", "walker", "tracker"} <= robin and any(n.startswith("self@v") for n in robin)
    assert report["training"]["ratings"] and report["round_robin"]["scores"]["returned"]
    from arena.cli import main  # the same command's tables, through its entry point in this process

    capsys.readouterr()
    panel = tmp_path / "panel"  # --panel: the returned policy against Tank Royale bots of the user's choosing
    shutil.copytree(ROOT / "tests" / "data" / "royale_bots" / "Walls", panel / "Walls")
    league = ["league", str(out), "--rounds", "2", "--ticks-per-round", "100"]
    assert main([*league, "--panel", str(panel), "--panel-rounds", "1"]) == 0
    table = capsys.readouterr().out
    assert "round-robin ratings" in table and "ratings in training" in table
    assert "against the panel" in table and "Walls" in table
    (tmp_path / "empty").mkdir()
    assert main([*league, "--panel", str(tmp_path / "empty")]) == 2
    assert "no Tank Royale bot directory" in capsys.readouterr().err


def test_train_a_recurrent_policy_on_the_radar_observation_then_match_and_export_it(tmp_path, capsys):
    """`--observation radar --agent-option recurrent=gru`: the learner sees its enemy through its own radar and
    carries a state; `arena match` plays it (as the run's evaluations do: PolicyController in play_match) and
    `arena export --royale` takes it (those two in this process: a second interpreter would only import torch)."""
    from arena.cli import main
    from bot_protocol import Policy, Weights, decode_from_server

    out = tmp_path / "radar"
    arena("train", "--observation", "radar", "--agent-option", "recurrent=gru", "--agent-option", "recurrent_size=8",
          "--opponent", "sitting", "--matches", "4", "--rounds", "4", "--ticks-per-round", "100", "--eval-rounds", "2",
          "--no-report", "--out", str(out))  # fmt: skip
    assert json.loads((out / "summary.json").read_text())["rounds"] >= 4
    assert main(["export", str(out), "-o", str(tmp_path / "w.weights")]) == 0
    weights = decode_from_server((tmp_path / "w.weights").read_bytes())
    assert isinstance(weights, Weights) and weights.arch.obs_dim == 28 and weights.arch.recurrent is not None
    assert Policy.from_weights(weights).state_size == 8
    capsys.readouterr()
    assert main(["match", "--bot", str(out), "--bot", "sitting", "--rounds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == 2
    assert main(["export", str(out), "--royale", "-o", str(tmp_path / "RadarBot")]) == 0
    assert (tmp_path / "RadarBot" / "policy.weights").is_file()


def test_train_reach_game(tmp_path):
    """The small reach game still trains through the same command."""
    out = tmp_path / "reach"
    arena("train", "--game", "reach", "--steps", "300", "--bots", "2", "--matches", "4", "--out", str(out))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["transitions"] == 2 * 4 * 300 and summary["episodes"] > 0


def test_match_json_and_export_round_trip(tmp_path, tiny_run, capsys):
    """`arena match --json` prints one JSON object; an exported policy plays like its checkpoint.

    The checkpoint plays through the real command; the export and the exported file's match go through
    the same entry point in this process (a second interpreter would only import torch again)."""
    from arena.cli import main

    checkpoint = tiny_run.checkpoint
    exported = tmp_path / "policy.weights"
    assert main(["export", str(checkpoint), "-o", str(exported)]) == 0 and "wrote" in capsys.readouterr().out
    match = ["match", "--bot", "BOT", "--bot", "spinner", "--rounds", "6", "--ticks-per-round", "200", "--json"]
    outputs = [arena(*[str(checkpoint) if a == "BOT" else a for a in match]).stdout]
    assert main([str(exported) if a == "BOT" else a for a in match]) == 0
    outputs.append(capsys.readouterr().out)
    results = []
    for printed in outputs:
        lines = printed.strip().splitlines()
        assert len(lines) == 1
        results.append(json.loads(lines[0]))
    assert results[0]["rounds"] == 6 and [b["name"] for b in results[0]["bots"]] == [checkpoint.name, "spinner"]
    assert [b["wins"] for b in results[0]["bots"]] == [b["wins"] for b in results[1]["bots"]]
    assert results[0]["bots"][0]["mean_score"] == results[1]["bots"][0]["mean_score"]


@pytest.mark.parametrize(
    "args",
    [
        ("train", "--minutes", "-1"),
        ("train", "--bogus"),
        ("serve", "--obs-dim", "0"),
        ("serve", "--obs-dim", "4", "--act-dim", "2", "--host", "0.0.0.0"),
        ("train", "--resume", "--out", "/nonexistent/arena-run"),
        ("train", "--opponent", "terminator"),
        ("match", "--bot", "sitting"),
        ("match", "--bot", "sitting", "--bot", "/nonexistent/policy.pt"),
        ("export", "/nonexistent/ckpt.pt", "-o", "/tmp/x.weights"),
        ("train", "--agent-option", "entropy_coef=lots"),
        ("train", "--agent-option", "no_such_field=1"),
        ("train", "--agent-option", "clip_epsilon=2"),
        ("train", "--agent", "td3", "--agent-option", "entropy_coef=0"),
        ("train", "--agent-option", "recurrent=gru", "--league-option", "self_share=0.2"),
        ("train", "--observation", "sonar"),
        ("train", "--league-option", "exponent=-1"),
        ("train", "--league-option", "snapshot_every"),
        ("train", "--league-option", "no_such_option=1"),
        ("train", "--league-option", "ladder=sniper"),
        ("train", "--opponent", "sitting", "--league-option", "exponent=1"),
        ("train", "--royale-matches", "2"),
        ("train", "--opponent", "royale:/nonexistent/Bot"),
        ("match", "--bot", "sniper", "--bot", "sitting"),
        ("match", "--rate", "--bot", "sitting", "--bot", "royale:/nonexistent"),
        ("league", "/nonexistent/run"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args, capsys):
    """Each mistake is reported as one readable line on stderr with exit code 2.

    In this process (``main(argv)``, the console script's entry point): every case fails before anything
    starts, and a subprocess would spend its time importing torch. The installed command itself is
    checked by the test below."""
    from arena.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own refusals exit from inside parse_args
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "error" in lines[0], err


@pytest.mark.parametrize(
    "args",
    [("train", "--bogus"), ("train", "--agent-option", "entropy_coef=lots"), ("match", "--bot", "sniper", "--bot", "sitting")],
)
def test_bad_arguments_to_the_real_command_give_one_line_and_exit_2(args):
    """The same through a real `python -m arena.cli` process: nothing else reaches stderr (no warning, no traceback)."""
    result = arena(*args, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error" in lines[0], result.stderr


def test_opponent_files_that_do_not_fit_are_refused_in_one_line(tmp_path, capsys):
    """An unreadable opponent file, or a policy of other sizes, is one line and exit 2 before anything starts
    (the first case through the real command, the others through its entry point in this process)."""
    import numpy as np

    from arena.cli import main
    from bot_protocol import Weights, encode

    garbage = tmp_path / "garbage.weights"
    garbage.write_bytes(b"not msgpack at all")
    small = tmp_path / "small.weights"
    arch = {"kind": "gaussian_mlp", "layers": [3, 4, 1], "activation": "tanh"}
    tensors = {"l0.weight": np.zeros((4, 3), np.float32), "l0.bias": np.zeros(4, np.float32),
               "l1.weight": np.zeros((1, 4), np.float32), "l1.bias": np.zeros(1, np.float32),
               "log_std": np.zeros(1, np.float32)}  # fmt: skip
    small.write_bytes(encode(Weights.pack(0, 1, arch, tensors)))
    for i, opponents in enumerate((["league", str(garbage)], [str(small)], ["league", str(small)])):
        args = ["train", *(f"--opponent={o}" for o in opponents), "--out", str(tmp_path / "run")]
        if i == 0:
            result = arena(*args, check=False)
            code, err = result.returncode, result.stderr
        else:
            capsys.readouterr()
            code, err = main(args), capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert ("sizes" in lines[0]) == (small.name in lines[0])
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_match_rate_prints_ratings(tmp_path):
    """`arena match --rate`: a round-robin of the given bots, rated by a Bradley-Terry fit (Elo)."""
    result = arena("match", "--rate", "--bot", "sitting", "--bot", "tracker", "--bot", "spinner", "--rounds", "4",
                   "--ticks-per-round", "400", "--json")  # fmt: skip
    report = json.loads(result.stdout.strip().splitlines()[-1])
    order = [row["name"] for row in report["ratings"]]
    assert set(order) == {"sitting", "tracker", "spinner"} and order.index("tracker") < order.index("sitting")
    assert report["scores"]["tracker"]["sitting"] > 0.5


def test_serve_stops_cleanly_on_sigterm(tmp_path):
    """`arena serve` answers /healthz, serves its dashboard page, and SIGTERM closes it with a final checkpoint and exit 0."""
    import re
    import signal
    import urllib.request

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena.cli",
            "serve",
            "--obs-dim",
            "4",
            "--act-dim",
            "2",
            "--port",
            "0",
            "--out",
            str(tmp_path),
            "--dashboard-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        match = re.search(r"ws://([\d.]+):(\d+)", line)
        assert match, line + process.stderr.read()
        with urllib.request.urlopen(f"http://{match.group(1)}:{match.group(2)}/healthz", timeout=5) as response:
            assert response.status == 200
        dashboard = process.stdout.readline()
        assert dashboard.startswith("dashboard: http://127.0.0.1:"), dashboard
        with urllib.request.urlopen(dashboard.split()[1], timeout=5) as response:
            assert response.status == 200 and b"Arena Trainer" in response.read()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout(15)) == 0
    finally:
        process.kill()
        process.communicate()
    assert list((tmp_path / "checkpoints").glob("ckpt-*.pt"))


def test_train_stops_cleanly_on_ctrl_c(tmp_path):
    """Ctrl-C (SIGINT) during `arena train` ends it with exit 130, a summary and a loadable checkpoint."""
    import signal
    import time

    out = tmp_path / "run"
    # Small rollouts: the first update, which the test waits for, comes sooner.
    command = [sys.executable, "-m", "arena.cli", "train", "--matches", "4", "--minutes", "5", "--out", str(out),
               "--agent-option", "rollout_steps=256"]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert "arena train:" in process.stdout.readline()
        deadline = time.monotonic() + timeout(60)
        while not (out / "metrics.jsonl").exists() and time.monotonic() < deadline:  # at least one update ran
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout(30)) == 130
    finally:
        process.kill()
        process.communicate()
    assert json.loads((out / "summary.json").read_text())["updates"] >= 1
    checkpoint = sorted((out / "checkpoints").glob("ckpt-*.pt"))[-1]
    assert arena("export", str(checkpoint), "-o", str(tmp_path / "p.weights")).returncode == 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Lines:
    """A subprocess's stdout lines, read in a thread so a test can wait for one with a timeout."""

    def __init__(self, stream) -> None:
        import queue
        import threading

        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self._queue.put(line) for line in stream], daemon=True).start()

    def wait_for(self, text: str, seconds: float) -> str:
        import queue
        import time

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} in {seconds} s; got: {''.join(self.seen)}")


def _worker(port: int, *extra: str) -> subprocess.Popen[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "ARENA_TOKEN"}
    return subprocess.Popen(
        [sys.executable, "-m", "arena.cli", "worker", "--url", f"ws://127.0.0.1:{port}", "--opponent", "sitting",
         "--matches", "2", "--seed", "3", "--ticks-per-round", "100", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _wait_for_transitions(server, seconds: float) -> None:
    import time

    deadline = time.monotonic() + seconds
    while server.metrics.counter("transitions_received") == 0:
        assert time.monotonic() < deadline, "no transitions reached the server"
        time.sleep(0.05)


def test_worker_waits_for_its_server_survives_a_restart_and_stops_on_sigterm():
    """`arena worker` started before its server retries, trains, reconnects after a restart, and exits 0 on SIGTERM."""
    import signal

    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM
    from arena.games.tank.rewards import TANK_REWARD  # arena workers are terms-mode tank bots
    from tests.conftest import running_server

    port = _free_port()
    process = _worker(port, "--name", "w")
    try:
        lines = _Lines(process.stdout)
        lines.wait_for("retrying", timeout(20))  # no server yet
        with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD, port=port) as first:
            lines.wait_for("connected to", timeout(20))
            _wait_for_transitions(first, timeout(20))
        lines.wait_for("lost the server", timeout(10))  # said at once, not "playing" with frozen counters
        with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD, port=port) as second:  # the trainer restarted
            _wait_for_transitions(second, timeout(30))
            lines.wait_for("reconnected to", timeout(10))
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout(20)) == 0, process.stderr.read()
            assert "stopped:" in lines.wait_for("arena worker: stopped", timeout(5))
    finally:
        process.kill()
        process.communicate()


def test_worker_budget_and_refusal():
    """`--rounds N` ends the worker with exit 0; a server that refuses its token ends it with one line and exit 2."""
    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM
    from arena.games.tank.rewards import TANK_REWARD  # arena workers are terms-mode tank bots
    from tests.conftest import running_server

    with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD, token="a-long-secret") as server:
        port = server.port
        refused = _worker(port)
        budget = _worker(port, "--rounds", "4", "--token", "a-long-secret")
        try:
            out, err = budget.communicate(timeout=timeout(60))
            assert budget.returncode == 0, err
            assert "stopped:" in out.splitlines()[-1]
            _, err = refused.communicate(timeout=timeout(30))
            lines = [line for line in err.splitlines() if line.strip()]
            assert refused.returncode == 2 and len(lines) == 1 and "401" in lines[0], err
        finally:
            for process in (refused, budget):
                process.kill()
                process.communicate()


def test_worker_that_never_reached_its_server_exits_non_zero():
    """A budget spent without ever reaching the server is a failure (exit 1, one error line), not a success."""
    worker = _worker(_free_port(), "--minutes", "0.05")
    out, err = worker.communicate(timeout=timeout(60))
    assert worker.returncode == 1 and "never reached" in err, (out, err)
    assert "waiting for the server" not in out.splitlines()[-1] and "stopped:" in out.splitlines()[-1]


def test_a_busy_port_is_one_line_and_exit_2(tmp_path, capsys):
    """`arena train --port P` and `--dashboard-port P` with P held: one line naming that port, exit 2, no empty dirs.

    The real command for the bot port; the dashboard's cases through the same entry point in this process
    (each fails when it binds, before a bot or a thread starts)."""
    import socket

    from arena.cli import main

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        for flag, what in (("--port", "for bots"), ("--dashboard-port", "for the dashboard")):
            out = tmp_path / flag.strip("-")
            args = ("train", flag, port, "--out", str(out), "--minutes", "0.1")
            if flag == "--port":
                result = arena(*args, check=False)
                code, err = result.returncode, result.stderr
            else:
                capsys.readouterr()
                code, err = main(list(args)), capsys.readouterr().err
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and len(lines) == 1, err
            assert f"127.0.0.1:{port} {what}" in lines[0]
            assert not out.exists()  # no empty OUT/checkpoints left behind
        code = main(["serve", "--port", "0", "--dashboard-port", port, "--out", str(tmp_path / "s")])
        err = capsys.readouterr().err
        assert code == 2 and f"127.0.0.1:{port} for the dashboard" in err, err


def test_serve_resume_says_what_it_resumed_and_metrics_are_strict_json(tmp_path, tiny_run):
    """`arena serve --resume` names the checkpoint, generation and version; metrics.jsonl has no NaN."""
    import signal

    out = tiny_run.copy(tmp_path / "run")  # serve writes its own checkpoints into it
    for line in (out / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda name, row=line: pytest.fail(f"{name} in metrics.jsonl: {row}"))
    first = json.loads((out / "summary.json").read_text())
    process = subprocess.Popen(
        [sys.executable, "-m", "arena.cli", "serve", "--resume", "--out", str(out), "--port", "0", "--dashboard-port", "-1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = _Lines(process.stdout)
        line = lines.wait_for("resumed from", timeout(30))
        assert "ckpt-" in line and f"generation {first['generation'] + 1}" in line
        assert f"version {first['policy_version']}" in line
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout(20)) == 0
    finally:
        process.kill()
        process.communicate()


def test_train_ends_with_a_table_and_json_on_request(tmp_path, tiny_run):
    """The end of `arena train` is a short table; `--json` prints summary.json's object instead."""
    common = ["train", "--opponent", "sitting", "--matches", "2", "--rounds", "2", "--ticks-per-round", "50", "--no-report"]
    table = tiny_run.stdout  # the shared run printed its table
    assert "arena train: done" in table and "fewer than 100" in table and "{" not in table.splitlines()[-2]
    summary = json.loads((tiny_run.out / "summary.json").read_text())
    assert summary["win_rate_first_100"] is None and summary["gradient_steps"] >= summary["updates"]
    lines = arena(*common, "--json", "--out", str(tmp_path / "b")).stdout.splitlines()
    # The object is the last line; the bots stop at the budget (a round more per match ending on the same tick at most),
    # not when the watch loop next looks (it had played 48 rounds when asked for 4).
    assert 2 <= json.loads(lines[-1])["rounds"] <= 2 + 1


def test_worker_over_wss_verifies_the_certificate(tmp_path):
    """`arena worker --url wss://` plays against a TLS server whose certificate it trusts (SSL_CERT_FILE)."""
    import os

    pytest.importorskip("cryptography")
    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM
    from arena.games.tank.rewards import TANK_REWARD  # arena workers are terms-mode tank bots
    from tests.conftest import running_server

    cert, key = self_signed_certificate(tmp_path)
    with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD, tls_cert=cert, tls_key=key) as server:
        assert server.url.startswith("wss://")
        command = [sys.executable, "-m", "arena.cli", "worker", "--url", server.url, "--matches", "2", "--rounds", "2",
                   "--ticks-per-round", "50", "--seed", "1"]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "ARENA_TOKEN"}
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout(60), env={**env, "SSL_CERT_FILE": cert}
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "connected to wss://" in result.stdout and server.metrics.counter("transitions_received") > 0


def test_credit_window_flag_refuses_zero_in_one_line():
    result = arena("serve", "--credit-window", "0", check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--credit-window" in lines[0] and "must be >= 1, got 0" in lines[0], result.stderr


def test_no_command_writes_onto_its_parsed_flags():
    """``args`` is read, never written, after parsing: a command's decisions go into a plan (arena/commands/*_plan.py).

    It used to carry values between modules (``args.tank_agents`` read back with ``getattr`` three modules
    away); an assignment, augmented assignment, ``del`` or ``setattr`` on ``args``/``flags`` anywhere in
    arena/ fails here.
    """
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "arena"
    names = {"args", "flags"}
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign | ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
                targets = [ast.Attribute(value=node.args[0], attr="?", ctx=ast.Store())]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id in names:
                        found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert found == []
