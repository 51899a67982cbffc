"""A server on its own loop in a background thread (server/thread.py): started, called into, stopped; a failed start raised."""

from __future__ import annotations

import errno
import socket
import threading

import pytest

from agents import make_agent
from server import ListenError, ServerConfig, ServerThread, TrainingServer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def small_server(port: int = 0) -> TrainingServer:
    return TrainingServer(make_agent("ppo", 3, 2, hidden=(8,), rollout_steps=64), ServerConfig(port=port))


def test_call_runs_on_the_loop_thread_and_leaving_the_block_stops_it():
    with ServerThread(small_server()) as running:
        assert running.url.startswith("ws://127.0.0.1:") and not running.url.endswith(":0")
        loop_thread = running.call(threading.current_thread)
        assert loop_thread is not threading.current_thread() and loop_thread.name == "server-loop"
        assert running.call(lambda: 6 * 7) == 42
    assert not loop_thread.is_alive()


def test_a_server_that_cannot_start_raises_its_error_from_start():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        thread = ServerThread(small_server(busy.getsockname()[1]))
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{busy.getsockname()[1]} for bots") as refused:
            thread.start()
        assert refused.value.errno == errno.EADDRINUSE
    thread.stop()  # nothing left running: stop is harmless
