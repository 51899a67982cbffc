"""Shared fixtures: a real server on a loopback port (port 0) in a background thread."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agents import make_agent
from arena.games.reach import ACT_DIM as REACH_ACT
from arena.games.reach import OBS_DIM as REACH_OBS
from bot_protocol import TransitionBatch
from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root (tests sit at any depth below ``tests/``)."""
DATA = ROOT / "tests" / "data"
"""Recorded data and sample bots shared by the tests."""

TIMEOUT_FACTOR = float(os.environ.get("ARENA_TIMEOUT_FACTOR", "1"))
"""Scale every test timeout on slow machines (websockets' tests do the same)."""


def timeout(seconds: float) -> float:
    return seconds * TIMEOUT_FACTOR


TIER_2 = os.environ.get("ARENA_T2") == "1"
tier_2 = pytest.mark.skipif(not TIER_2, reason="tier 2 (long): set ARENA_T2=1 to run")
"""A long test whose case other tests cover in part: run with ``ARENA_T2=1`` (with the reliability suite's T2)."""


@contextmanager
def running_server(
    obs_dim: int = 4,
    act_dim: int = 2,
    agent: Any = None,
    trainer: TrainerConfig | None = None,
    reward: Any = None,
    **server_options: Any,
) -> Iterator[TrainingServer]:
    """A TrainingServer with a PPO agent, serving on 127.0.0.1 with a free port; closed on exit.

    ``reward``: the game's reward function for terms-mode bots (None: scalar-reward bots only).
    """
    server_options.setdefault("port", 0)
    server = TrainingServer(
        agent or make_agent("ppo", obs_dim, act_dim, rollout_steps=512, hidden=(32, 32)),
        ServerConfig(**server_options),
        trainer,
        reward=reward,
    )
    thread = ServerThread(server).start()
    try:
        yield server
    finally:
        thread.stop()


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny networks: a second intra-op thread only adds contention on a 2-core runner."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def server() -> Iterator[TrainingServer]:
    with running_server() as s:
        yield s


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[TrainingServer]:
    """:func:`running_server` for async tests: start and stop off the test's loop, so the
    test's own clients can still answer the server's closing handshake."""
    manager = running_server(**options)
    server = await asyncio.to_thread(manager.__enter__)
    try:
        yield server
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


@pytest.fixture
async def aserver() -> AsyncIterator[TrainingServer]:
    async with serving() as s:
        yield s


def self_signed_certificate(directory: Path) -> tuple[str, str]:
    """A certificate for localhost and 127.0.0.1 and its key, as PEM files in ``directory``."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)


def default_sigint() -> None:
    """``preexec_fn`` for a child that must see Ctrl-C: a shell starts background jobs with SIGINT
    ignored, the ignore is inherited by everything below (pytest included), and Python then never
    installs its KeyboardInterrupt handler, so a test's SIGINT would be silently dropped."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def reach_batch(n: int = 4, seq: int = 0, version: int = 0, flags: list[int] | None = None) -> TransitionBatch:
    """A scalar-reward batch of the reach game's shapes for two agents (rows alternate between them)."""
    rng = np.random.default_rng(seq)
    return TransitionBatch(
        seq=seq,
        generation=0,
        version=version,
        agent=(np.arange(n) % 2).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, REACH_OBS)).astype(np.float32),
        act=rng.standard_normal((n, REACH_ACT)).astype(np.float32),
        logp=np.full(n, -2.0, np.float32),
        flags=np.array(flags or [0] * n, np.uint8),
        rew=np.ones(n, np.float32),
        next_obs=np.zeros((0, REACH_OBS), np.float32),
    )


@dataclass(frozen=True)
class TinyRun:
    """One short `arena train` run, made once per test session and only read by the tests that use it."""

    out: Path
    """Its --out directory: checkpoints/, summary.json, metrics.jsonl (no report, no evaluation)."""
    stdout: str
    """What the command printed: its start line, progress and the closing table."""

    @property
    def checkpoint(self) -> Path:
        return sorted((self.out / "checkpoints").glob("ckpt-*.pt"))[-1]

    def copy(self, destination: Path) -> Path:
        """A private copy of the run directory, for a test that writes into it (``--resume``)."""
        shutil.copytree(self.out, destination)
        return destination


TINY_RUN_ARGS = ("train", "--opponent", "sitting", "--matches", "4", "--rounds", "48", "--ticks-per-round", "100",
                 "--eval-rounds", "0", "--no-report")  # fmt: skip


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> TinyRun:
    """A tank run against `sitting` (4 matches, 48 rounds of 100 ticks: some 18 updates): the checkpoint that export, match and
    resume tests read. Under pytest-xdist the workers share one run: the first makes it under a file lock, the
    others wait for it and read it (the base temp directory's parent is the run's, one per session)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # pytest-of-USER/pytest-N/: this session's, shared by its workers
    out, printed = shared / "tiny-run", shared / "tiny-run.stdout"
    with open(shared / "tiny-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not printed.exists():
            result = subprocess.run([sys.executable, "-m", "arena.cli", *TINY_RUN_ARGS, "--out", str(out)],
                                    capture_output=True, text=True, timeout=timeout(180))  # fmt: skip
            assert result.returncode == 0, result.stderr
            printed.write_text(result.stdout)
    return TinyRun(out, printed.read_text())
