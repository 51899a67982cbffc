"""Run a training server on an event loop of its own, in a background thread.

So any program (tests, the CLI, a notebook) can embed a server without being an asyncio
program itself: ``with ServerThread(server) as running: ... running.url ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # app.py re-exports this class: no import cycle at run time
    from .app import TrainingServer

__all__ = ["ServerThread"]


class ServerThread:
    """Run a :class:`~server.app.TrainingServer` on its own event loop in a background thread.

    ``with ServerThread(server) as s: ... s.url ...`` — on exit the server closes
    gracefully (1001 to bots, trainer joined, final checkpoint).
    """

    def __init__(self, server: TrainingServer, start_timeout: float = 30.0) -> None:
        self.server = server
        self._start_timeout = start_timeout
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="server-loop", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.server.close()

        asyncio.run(run())

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(self._start_timeout):
            raise TimeoutError("server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn`` on the server's loop thread and return its result (for consistent reads)."""
        assert self._loop is not None

        async def wrapper() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    def stop(self, timeout: float = 60.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
