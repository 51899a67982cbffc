"""Shared fixtures: a real server on a loopback port (port 0) in a background thread."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
import torch

from agents import make_agent
from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

TIMEOUT_FACTOR = float(os.environ.get("ARENA_TIMEOUT_FACTOR", "1"))
"""Scale every test timeout on slow machines (websockets' tests do the same)."""


def timeout(seconds: float) -> float:
    return seconds * TIMEOUT_FACTOR


@contextmanager
def running_server(
    obs_dim: int = 4, act_dim: int = 2, agent: Any = None, trainer: TrainerConfig | None = None, **server_options: Any
) -> Iterator[TrainingServer]:
    """A TrainingServer with a PPO agent, serving on 127.0.0.1 with a free port; closed on exit."""
    server_options.setdefault("port", 0)
    server = TrainingServer(
        agent or make_agent("ppo", obs_dim, act_dim, rollout_steps=512, hidden=(32, 32)),
        ServerConfig(**server_options),
        trainer,
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
