"""End a run's child processes when the run dies, however it dies (``kill -9`` included).

Why: worker processes and Tank Royale bots play until they are told to stop. A run killed with
SIGKILL tells them nothing, and an orphan that keeps reconnecting holds a core until reboot. So
every child of a run watches for the run's death itself:

* :func:`die_with_parent`, called first thing in a Python child of ours (a worker process): on
  Linux the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), else a thread
  that notices its parent pid change (an orphan is handed to another process);
* :class:`Lifeline`, for a program we do not write (a Tank Royale bot): it starts through a small
  guard whose watcher SIGKILLs the program's process group once a pipe held only by its starter
  closes.

Nothing needs cleaning up on the way out: a child's own children hold lifelines of their own, and
its websocket peer and report queue died with the parent.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EXIT_ORPHANED", "POLL_EVERY", "Lifeline", "Parent", "die_with_parent", "set_parent_death_signal"]

POLL_EVERY = 0.5
"""Seconds between a child's looks at its parent's pid where the kernel does not signal it."""
EXIT_ORPHANED = 3
"""A child's exit code when it ends because its parent is gone (nobody reads it: for ``strace`` and logs)."""
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class Parent:
    """What a child needs to know to end with the process that starts it; made in that process, by :meth:`here`."""

    pid: int
    main_thread: bool
    """Started from the parent's main thread. Linux sends the parent-death signal when the *thread* that
    started the child ends, so it means "the parent died" only when that thread is the main one (which
    lives as long as its process)."""

    @classmethod
    def here(cls) -> Parent:
        """This process, as the parent of a child started from the current thread."""
        return cls(os.getpid(), threading.current_thread() is threading.main_thread())


def die_with_parent(parent: Parent, every: float = POLL_EVERY) -> None:
    """In the child, first thing: end this process (at once, no cleanup) when ``parent`` ends.

    Started from the parent's main thread on Linux, the kernel does it; otherwise a daemon thread
    polls ``os.getppid()`` every ``every`` seconds (a dead parent's children get another one). Ends
    the process now if the parent died before the watch was set.
    """
    if not (parent.main_thread and set_parent_death_signal(signal.SIGKILL)):
        threading.Thread(target=_watch, args=(parent.pid, every), name="watch-parent", daemon=True).start()
    if os.getppid() != parent.pid:
        os._exit(EXIT_ORPHANED)


def set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when the thread that started it ends; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int, every: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(every)
    os._exit(EXIT_ORPHANED)


_GUARD = """\
import os, signal, sys
fd = int(sys.argv[1])
if os.fork() == 0:
    if os.fork() == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        os.killpg(0, signal.SIGKILL)
    os._exit(0)
os.wait()
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
"""
"""``python -c`` it with the lifeline's read end and a command: it becomes the command, leaving a watcher in its
process group (forked twice: never a child of the program) that ignores polite signals and reads the pipe until
every writer is gone, then SIGKILLs the group."""


class Lifeline:
    """A pipe whose write end only this process holds, for a program started through it (:meth:`wrap`).

    The program must be started in a process group of its own (``start_new_session=True``) with
    :attr:`pass_fds`. It keeps its pid (the guard becomes it), and when the pipe closes (this
    process died, or :meth:`close` was called) its whole process group is SIGKILLed. Call
    :meth:`started` once it has started, and :meth:`close` once it was stopped.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()  # neither end is inherited unless passed

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._read,)

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` as started through the guard (same program, same pid, tied to this process)."""
        return [sys.executable, "-I", "-S", "-c", _GUARD, str(self._read), *command]

    def started(self) -> None:
        """The program has its copy of the read end: drop ours."""
        self._close("_read")

    def close(self) -> None:
        """Cut the line: the program's process group is killed if anything of it is left."""
        self._close("_read")
        self._close("_write")

    def _close(self, end: str) -> None:
        fd = getattr(self, end)
        if fd >= 0:
            setattr(self, end, -1)
            os.close(fd)
