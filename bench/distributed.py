"""Learner ranks benchmark: trained steps/s with 1 and 2 ranks, the all-reduce cost per update, the loop lag.

``arena serve --distributed`` runs N learner ranks under torchrun (gloo on the CPU): each
rank serves its own bots on ``--port`` + its local rank, trains on its own rollout, and
averages every minibatch's gradients with the other ranks (one flat all-reduce per gradient
step, :class:`agents.distributed.GradientAverager`). This bench measures what that costs.

Run ``python bench/distributed.py`` (about 2 minutes: 5 s warm-up + 20 s measured per case,
plus each server's start and stop) or ``python bench/distributed.py --quick`` (about a minute).
Progress goes to stderr, then a table; the last stdout line is one JSON object with every
figure, the workload that produced it, and the baseline it is beside.

Cases (run one after the other, same bots, same PPO options, same torch threads per rank)
================================================================================================

* ``plain_serve`` (the **baseline**): ``arena serve`` without ``--distributed``: one learner,
  no collectives at all.
* ``torchrun_1``: ``torchrun --nproc-per-node 1 -m arena.cli serve --distributed``: a world of
  one, which still runs the distributed path (the per-step agreement all-reduce and the
  per-minibatch gradient all-reduce, both against itself): the path's fixed overhead.
* ``torchrun_2``: two ranks under torchrun, the bots split evenly over the two ports.
* ``torchrun_2_cuda``: ``torchrun_2`` with ``--device cuda`` (each rank on ``cuda:LOCAL_RANK``, NCCL), only when
  ``torch.cuda.is_available()`` (else listed as skipped). Not run here (no GPU).

Workload: ``--bots`` reach bots (default 4) of ``--agents-per-bot`` agents each (default 2:
8 agents in all), all in ONE separate bot process (threads, :func:`arena.games.reach.play_reach`),
assigned round-robin to the case's ports. The reach game (obs 4, act 2) is cheap, so the bots
produce steps faster than a 2-core machine trains them and credit backpressure decides the
feed. PPO options, the same for every case: ``rollout_steps=2048``, ``minibatch_size=256``
(PPO's other defaults: 4 epochs, so 32 gradient steps, 32 gradient all-reduces, per update),
``--torch-threads 1`` per rank and ``OMP_NUM_THREADS=1`` in every case (torchrun sets it for 2+ ranks
only), checkpoints pushed out of the window (``--checkpoint-interval 3600``; the server still
writes one shortly after its first update, in the warm-up).

What is measured, per case, over the window that follows a fixed warm-up
=========================================================================

Each rank's ``/metrics`` (Prometheus text; every series has ``rank="r"`` when distributed) is
scraped at the start and the end of the window:

* ``trained_steps_per_s``: ``arena_transitions_trained`` deltas summed over ranks / window
  (the figure a learner group exists to raise); ``received_steps_per_s`` likewise from
  ``arena_transitions_received`` (what the bots got accepted: above ``trained`` means the
  trainer is the bottleneck, and credit is slowing the bots).
* ``updates_per_s``: rank 0's ``arena_updates`` delta / window (the ranks update in lock-step,
  each update trains ``rollout_steps`` on every rank: ``steps_per_update`` sums over ranks).

Rank 0's ``OUT/metrics.jsonl`` rows written during the window (one per update):

* ``update_ms``: mean ``time/update_seconds`` (the agent's update, all-reduces included).
* ``allreduce_ms_per_update``: mean ``distributed/allreduce_seconds``, and ``allreduce_share``
  = their sum / the update time's sum; ``allreduce_us_per_minibatch`` divides by the gradient
  steps taken. It includes waiting for the slower rank (the all-reduce is where ranks meet).
* ``trainer_busy``: update time / window: near 1 means the trainer never waits for data.

Loop lag: each rank's ``arena_loop_lag_seconds`` gauges, sampled every second during the
window: ``loop_lag_p99_ms`` is the p99 at the window's end, ``loop_lag_p99_ms_max_sampled``
the largest p99 seen, ``loop_lag_max_ms`` the largest single wake-up lateness. The server's
lag window is its last 3,000 wake-ups (20 ms each: 60 s), so it also covers the warm-up.

Each case also records the machine's 1-minute load average at its end (``load_average_1m``:
others' work on a shared machine shows there) and ``shutdown_errors``, the error lines of the
server's log once it was stopped (SIGTERM; torchrun's launcher then exits 1 whatever its ranks did).

How to read it: on a 2-core machine two ranks plus the bots share two cores, so no speed-up
is expected: ``torchrun_2`` vs ``plain_serve`` mostly shows the cores being split. The figures
that carry over to a bigger machine are ``allreduce_ms_per_update`` / ``allreduce_share``
(what averaging gradients costs each update) and the loop lag (whether the bots' event loop
stays responsive while a rank waits on the others). ``torchrun_1`` vs ``plain_serve`` is the
distributed path's fixed cost with nobody to wait for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
"""The checkout this file lives in: servers run from it (``-m arena.cli``), bots import from it."""
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

OBS_DIM, ACT_DIM = 4, 2  # the reach game's sizes (arena.games.reach), spelled here so the bench process never imports torch
PPO_OPTIONS = ("rollout_steps=2048", "minibatch_size=256")
"""The same for every case: updates every 2,048 steps per rank, 4 epochs x 8 minibatches = 32 all-reduces each."""
HOST = "127.0.0.1"
NOTES = "2 cores: no speed-up expected here; the figure that matters is the all-reduce cost per update and the loop lag"


@dataclass(frozen=True)
class Case:
    """One server layout to measure."""

    name: str
    ranks: int
    """0: plain ``arena serve`` (no torchrun, no collectives); N >= 1: N ranks under torchrun."""
    cuda: bool = False


@dataclass
class Running:
    """Every process group this bench started, so that any exit (Ctrl-C included) can stop them."""

    groups: list[subprocess.Popen[bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with self.lock, log.open("ab") as out:
            process = subprocess.Popen(
                command, cwd=_ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,  # its own process group: torchrun's ranks and the bot process die with it
            )  # fmt: skip
            self.groups.append(process)
        return process

    def stop(self, process: subprocess.Popen[bytes], grace: float = 30.0) -> int | None:
        """SIGTERM the process group (servers write a final checkpoint and leave), SIGKILL after ``grace``."""
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        with contextlib.suppress(ProcessLookupError):  # stragglers in the group (a rank whose launcher died first)
            os.killpg(process.pid, signal.SIGKILL)
        with self.lock:
            if process in self.groups:
                self.groups.remove(process)
        return process.returncode

    def stop_all(self) -> None:
        for process in list(self.groups):
            self.stop(process, grace=10.0)


# ── ports and scraping ───────────────────────────────────────────────────────


def free_ports(count: int, avoid: AbstractSet[int] = frozenset()) -> int:
    """A base port with ``count`` consecutive free ports on 127.0.0.1 (the ranks' bot ports), none in ``avoid``."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            base = int(probe.getsockname()[1])
        ports = range(base, base + count)
        if base + count > 65535 or not avoid.isdisjoint(ports):
            continue
        sockets: list[socket.socket] = []
        try:
            for port in ports:
                s = socket.socket()
                sockets.append(s)
                s.bind((HOST, port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no run of free ports on 127.0.0.1")


def fetch(port: int, path: str, timeout: float = 5.0) -> bytes | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=timeout) as response:
            body: bytes = response.read()
            return body
    except OSError:
        return None


_SERIES = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text → {(name, labels without ``rank``): value}."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        match = _SERIES.match(line.strip())
        if match is None or line.startswith("#"):
            continue
        name, labels, value = match.groups()
        pairs = frozenset((k, v) for k, v in _LABEL.findall(labels or "") if k != "rank")
        with contextlib.suppress(ValueError):
            out[name, pairs] = float(value)
    return out


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    body = fetch(port, "/metrics")
    if body is None:
        raise RuntimeError(f"no /metrics on port {port}")
    return parse_metrics(body.decode())


def series(metrics: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return metrics.get((name, frozenset(labels.items())), math.nan)


def update_rows(path: Path) -> list[dict[str, Any]]:
    """Rank 0's complete ``metrics.jsonl`` rows that record an update (a half-written last line is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            row = json.loads(line)
            if isinstance(row, dict) and "time/update_seconds" in row:
                rows.append(row)
    return rows


# ── one case ─────────────────────────────────────────────────────────────────


def server_command(case: Case, base: int, master: int, out: Path, torch_threads: int) -> list[str]:
    serve = ["-m", "arena.cli", "serve", "--obs-dim", str(OBS_DIM), "--act-dim", str(ACT_DIM), "--host", HOST,
             "--port", str(base), "--out", str(out), "--checkpoint-interval", "3600", "--torch-threads", str(torch_threads),
             *(("--device", "cuda") if case.cuda else ()),
             *(arg for option in PPO_OPTIONS for arg in ("--agent-option", option))]  # fmt: skip
    if case.ranks == 0:
        return [sys.executable, *serve]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(case.ranks),
                "--master-addr", HOST, "--master-port", str(master)]  # fmt: skip
    return [*torchrun, *serve, "--distributed"]


def wait_until_serving(process: subprocess.Popen[bytes], ports: list[int], log: Path, seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}) before serving:\n{tail(log)}")
        if all(fetch(port, "/healthz", timeout=2) is not None for port in ports):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the server did not serve on {ports} within {seconds:g} s:\n{tail(log)}")


_ERROR_LINE = re.compile(r"^(?:\[rank\d+\]: )?(?:\w+(?:Error|Exception)\b.*|arena serve: error: .*)$")


def shutdown_errors(log: Path) -> list[str]:
    """The error lines of the server's log (an exception's last line, ``arena serve: error: ...``), each once.

    Its exit code alone says little: torchrun's launcher, stopped by SIGTERM, always exits 1
    (``SignalException``), however its ranks left.
    """
    found: list[str] = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if _ERROR_LINE.match(line) and "SignalException" not in line and line not in found:
            found.append(line)
    return found


def tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


def sleep_watching(seconds: float, processes: list[subprocess.Popen[bytes]], log: Path) -> None:
    """Sleep, but fail at once if a server or the bot process dies."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"a process of the case exited ({process.returncode}) mid-run:\n{tail(log)}")
        time.sleep(min(0.25, left))


def run_case(case: Case, args: argparse.Namespace, running: Running, workdir: Path) -> dict[str, Any]:
    count = max(case.ranks, 1)
    base = free_ports(count)
    master = free_ports(1, avoid=set(range(base, base + count)))
    ports = [base + r for r in range(count)]
    out = workdir / case.name
    log = workdir / f"{case.name}.log"
    print(f"[{case.name}] starting: {' '.join(server_command(case, base, master, out, args.torch_threads))}", file=sys.stderr)
    started = time.monotonic()
    # OMP_NUM_THREADS as torchrun sets it for 2+ ranks (it leaves it alone for 1), so every case runs alike.
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(args.torch_threads))
    server = running.start(server_command(case, base, master, out, args.torch_threads), log, env)
    bots: subprocess.Popen[bytes] | None = None
    try:
        wait_until_serving(server, ports, log)
        ready_s = time.monotonic() - started
        bot_command = [sys.executable, str(Path(__file__).resolve()), "--run-bots", ",".join(map(str, ports)),
                       "--bots", str(args.bots), "--agents-per-bot", str(args.agents_per_bot)]  # fmt: skip
        bots = running.start(bot_command, workdir / f"{case.name}.bots.log")
        print(f"[{case.name}] serving on {ports} after {ready_s:.1f} s; {args.warmup:g} s warm-up", file=sys.stderr)
        watched = [server, bots]
        sleep_watching(args.warmup, watched, log)

        first = [scrape(port) for port in ports]
        rows_before = len(update_rows(out / "metrics.jsonl"))
        t0 = time.monotonic()
        lag_p99: list[list[float]] = [[] for _ in ports]
        while (left := t0 + args.seconds - time.monotonic()) > 0:
            sleep_watching(min(1.0, left), watched, log)
            for r, port in enumerate(ports):
                lag_p99[r].append(series(scrape(port), "arena_loop_lag_seconds", stat="p99"))
        last = [scrape(port) for port in ports]
        window = time.monotonic() - t0
        rows = update_rows(out / "metrics.jsonl")[rows_before:]
    finally:
        if bots is not None:
            running.stop(bots, grace=10.0)
        code = running.stop(server)
    errors = shutdown_errors(log)
    for line in errors:
        print(f"[{case.name}] note: the server's log says: {line}", file=sys.stderr)

    def delta(name: str, r: int) -> float:
        return series(last[r], name) - series(first[r], name)

    trained = sum(delta("arena_transitions_trained", r) for r in range(count))
    received = sum(delta("arena_transitions_received", r) for r in range(count))
    updates = delta("arena_updates", 0)
    update_s = [float(row["time/update_seconds"]) for row in rows]
    allreduce_s = [float(row["distributed/allreduce_seconds"]) for row in rows if "distributed/allreduce_seconds" in row]
    gradient_steps = sum(float(row.get("train/applied_steps", 0)) + float(row.get("train/skipped_steps", 0)) for row in rows)
    figures: dict[str, Any] = {
        "ranks": count,
        "launcher": "arena serve" if case.ranks == 0 else f"torchrun --nproc-per-node {case.ranks} ... serve --distributed",
        "device": "cuda" if case.cuda else "cpu",
        "ports": ports,
        "window_s": round(window, 2),
        "ready_s": round(ready_s, 1),
        "trained_steps_per_s": round(trained / window, 1),
        "received_steps_per_s": round(received / window, 1),
        "updates": int(updates),
        "updates_per_s": round(updates / window, 3),
        "steps_per_update": round(trained / updates) if updates else None,
        "update_rows": len(rows),
        "update_ms": round(1000 * sum(update_s) / len(update_s), 1) if update_s else None,
        "trainer_busy": round(sum(update_s) / window, 3) if update_s else None,
        "allreduce_ms_per_update": None,
        "allreduce_share": None,
        "allreduce_us_per_minibatch": None,
        "loop_lag_p99_ms": [round(1000 * series(m, "arena_loop_lag_seconds", stat="p99"), 2) for m in last],
        "loop_lag_p99_ms_max_sampled": [round(1000 * max(s), 2) if s else None for s in lag_p99],
        "loop_lag_max_ms": [round(1000 * series(m, "arena_loop_lag_seconds", stat="max"), 2) for m in last],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "exit_code": code,
        "shutdown_errors": errors,
    }
    if allreduce_s:
        figures["allreduce_ms_per_update"] = round(1000 * sum(allreduce_s) / len(allreduce_s), 2)
        figures["allreduce_share"] = round(sum(allreduce_s) / sum(update_s), 3) if sum(update_s) else None
        if gradient_steps:
            figures["allreduce_us_per_minibatch"] = round(1e6 * sum(allreduce_s) / gradient_steps, 1)
    if not rows:
        figures["warning"] = "no update finished in the window: raise --seconds"
    print(
        f"[{case.name}] {figures['trained_steps_per_s']:,.0f} trained steps/s, {figures['updates']} updates", file=sys.stderr
    )
    return figures


# ── the bot process ──────────────────────────────────────────────────────────


def run_bots(ports: list[int], bots: int, agents_per_bot: int) -> int:
    """``--run-bots``: reach bots on ``ports`` (round-robin), one thread each, until SIGTERM/SIGINT."""
    from arena.games.reach import play_reach

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def play(port: int, seed: int) -> None:
        while not stop.is_set():
            try:
                play_reach(
                    f"ws://{HOST}:{port}", n_agents=agents_per_bot, steps=10**9, seed=seed, name=f"bench{seed}", stop=stop
                )
            except Exception as exc:  # the server went away under it (its end): retry until told to stop
                if not stop.is_set():
                    print(f"bot {seed} on {port}: {exc!r}; reconnecting", file=sys.stderr, flush=True)
                    stop.wait(0.5)

    threads = [threading.Thread(target=play, args=(ports[i % len(ports)], i), daemon=True) for i in range(bots)]
    for thread in threads:
        thread.start()
    while not stop.wait(0.5):
        pass
    for thread in threads:
        thread.join(5)
    return 0


# ── report ───────────────────────────────────────────────────────────────────


def table(cases: dict[str, dict[str, Any]]) -> str:
    def cell(value: Any, spec: str = "") -> str:
        if value is None:
            return "-"
        if isinstance(value, list):
            return "/".join(cell(v, spec) for v in value)
        return format(value, spec)

    head = ("case", "ranks", "trained st/s", "recv st/s", "upd/s", "update ms", "busy", "allreduce ms/upd",
            "share", "us/minibatch", "lag p99 ms", "lag max ms")  # fmt: skip
    lines = [head]
    for name, f in cases.items():
        if "skipped" in f:
            lines.append((name, "-", f"skipped: {f['skipped']}", *("",) * (len(head) - 3)))
            continue
        lines.append((
            name, str(f["ranks"]), cell(f["trained_steps_per_s"], ",.0f"), cell(f["received_steps_per_s"], ",.0f"),
            cell(f["updates_per_s"], ".2f"), cell(f["update_ms"], ".0f"), cell(f["trainer_busy"], ".2f"),
            cell(f["allreduce_ms_per_update"], ".1f"), cell(f["allreduce_share"], ".1%"),
            cell(f["allreduce_us_per_minibatch"], ".0f"), cell(f["loop_lag_p99_ms"], ".1f"), cell(f["loop_lag_max_ms"], ".0f"),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in lines if len(row) > i and not row[2].startswith("skipped")) for i in range(len(head))]
    rendered = []
    for row in lines:
        if row[2].startswith("skipped"):
            rendered.append(f"{row[0]:<{widths[0]}}  {row[2]}")
        else:
            rendered.append(
                "  ".join(f"{v:<{w}}" if i == 0 else f"{v:>{w}}" for i, (v, w) in enumerate(zip(row, widths, strict=True)))
            )
    return "\n".join(rendered)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window per case (default 20)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of bot load before the window (default 5)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run: 3 s warm-up, 8 s window")
    parser.add_argument("--bots", type=int, default=4, help="reach bots in all, split over the ranks' ports (default 4)")
    parser.add_argument("--agents-per-bot", type=int, default=2, help="agents each bot drives (default 2: 8 in all)")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads per rank, every case (default 1)")
    parser.add_argument(
        "--cases",
        default="plain_serve,torchrun_1,torchrun_2",
        help="comma-separated, of plain_serve, torchrun_1, torchrun_2 (default: all; torchrun_2_cuda joins given CUDA)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (servers' logs and outputs)")
    parser.add_argument("--run-bots", metavar="PORTS", default=None, help=argparse.SUPPRESS)  # the bot process
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup = 8.0, 3.0
    if args.seconds <= 0 or args.warmup < 0 or args.bots < 1 or args.agents_per_bot < 1 or args.torch_threads < 1:
        parser.error("--seconds must be > 0, --warmup >= 0, --bots, --agents-per-bot and --torch-threads >= 1")
    return args


def probe_torch() -> tuple[bool, str]:
    """(CUDA available, torch's version), asked in a child: this process never holds torch (or a CUDA context)."""
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available(), torch.__version__)"],
                           capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    available, version = probe.stdout.split()
    return available == "True", version


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def interruptible(running: Running) -> Iterator[None]:
    """Stop every process group on any exit: normal, exception, Ctrl-C or SIGTERM."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        running.stop_all()
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_bots is not None:
        return run_bots([int(p) for p in args.run_bots.split(",")], args.bots, args.agents_per_bot)

    known = {"plain_serve": Case("plain_serve", 0), "torchrun_1": Case("torchrun_1", 1), "torchrun_2": Case("torchrun_2", 2)}
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        print(f"error: unknown --cases {unknown}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    cases = [known[n] for n in names]
    has_cuda, torch_version = probe_torch()
    if has_cuda:
        cases.append(Case("torchrun_2_cuda", 2, cuda=True))

    running = Running()
    workdir = Path(tempfile.mkdtemp(prefix="arena-bench-distributed-"))
    results: dict[str, dict[str, Any]] = {}
    try:
        with interruptible(running):
            for case in cases:
                results[case.name] = run_case(case, args, running, workdir)
    finally:
        if args.keep:
            print(f"scratch folder kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if not has_cuda:
        results["torchrun_2_cuda"] = {"skipped": "no CUDA"}

    baseline = "plain_serve" if "plain_serve" in results else names[0]
    base_rate = results[baseline]["trained_steps_per_s"]
    ratios = {
        f"{name}_vs_{baseline}_trained_steps": round(f["trained_steps_per_s"] / base_rate, 3)
        for name, f in results.items()
        if name != baseline and "skipped" not in f and base_rate
    }
    print(table(results))
    summary = {
        "bench": "distributed",
        "unit": "trained steps/s summed over ranks; ms per update; ms of event-loop lag",
        "workload": {
            "game": "reach (obs 4, act 2)",
            "bots": args.bots,
            "agents_per_bot": args.agents_per_bot,
            "agents_total": args.bots * args.agents_per_bot,
            "ppo_options": list(PPO_OPTIONS),
            "torch_threads_per_rank": args.torch_threads,
            "warmup_s": args.warmup,
            "window_s": args.seconds,
            "process_group": "gloo (nccl for the cuda case)",
        },
        "cases": results,
        "baseline": baseline,
        "ratios": ratios,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch_version,
        "notes": NOTES,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
