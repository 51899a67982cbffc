"""Children that end with the process that started them (arena/bots/parent_watch.py), ``kill -9`` included.

Each test runs a small parent script in a subprocess, the parent starts a child, and the test
SIGKILLs the parent. The child (and everything a lifeline's program started) holds the test's
pipe: end of file on it means every one of them is gone (zombies included: they hold no files).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO

import pytest

from arena.bots.parent_watch import EXIT_ORPHANED, POLL_EVERY, Lifeline
from tests.conftest import ROOT, timeout

CHILD = """
import ctypes, os, sys, time
from arena.bots.parent_watch import Parent, die_with_parent
die_with_parent(Parent(int(sys.argv[1]), sys.argv[2] == "main"))
signal = ctypes.c_int(0)
if sys.platform.startswith("linux"):  # PR_GET_PDEATHSIG: which signal the kernel sends when the parent dies
    ctypes.CDLL(None).prctl(2, ctypes.byref(signal), 0, 0, 0)
print(signal.value, file=sys.stderr, flush=True)
time.sleep(60)
"""

PARENT = """
import os, subprocess, sys, threading, time
children = []

def start():  # the child's stdout is ours (the test's pipe); it says it is ready on its stderr
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(os.getpid()), sys.argv[1]], stderr=subprocess.PIPE)
    children.append((child, int(child.stderr.readline())))

if sys.argv[1] == "main":
    start()
else:  # the starting thread ends after the child set its watch: Linux's parent-death signal would fire now
    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
time.sleep(0.2)  # long enough for a signal sent when the thread ended to land
child, death_signal = children[0]
print(child.pid, death_signal, child.poll(), flush=True)
time.sleep(60)
"""

LIFELINE = """
import subprocess, sys, time
from arena.bots.parent_watch import Lifeline
line = Lifeline()
program = subprocess.Popen(line.wrap(["sh", "-c", "sleep 60 & sleep 60"]), start_new_session=True, pass_fds=line.pass_fds)
line.started()
print(program.pid, flush=True)
time.sleep(60)
"""


def read_line(stream: IO[str], seconds: float) -> str:
    ready, _, _ = select.select([stream], [], [], seconds)
    assert ready, f"nothing within {seconds:g} s"
    return stream.readline()


def seconds_to_end_of_file(stream: IO[str], seconds: float) -> float:
    """Seconds until every writer of ``stream`` is gone (fails after ``seconds``)."""
    started = time.monotonic()
    while (left := started + seconds - time.monotonic()) > 0:
        ready, _, _ = select.select([stream], [], [], left)
        if ready and not stream.readline():
            return time.monotonic() - started
    raise AssertionError(f"a writer is still alive {seconds:g} s after the parent was killed")


def kill_quietly(pid: int, group: bool = False) -> None:
    with contextlib.suppress(OSError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_a_child_ends_when_its_parent_is_killed_with_sigkill(started_from: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", f"CHILD = {CHILD!r}\n{PARENT}", started_from], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert parent.stdout is not None
    child = 0
    try:
        child_pid, death_signal, status = read_line(parent.stdout, timeout(30)).split()
        child = int(child_pid)
        assert status == "None", f"the child ended when the thread that started it did (exit {status})"
        parent.kill()
        parent.wait()
        seconds_to_end_of_file(parent.stdout, timeout(2 + 2 * POLL_EVERY))
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if child:
            kill_quietly(child)
    if sys.platform.startswith("linux"):  # the kernel's signal from the main thread only; from another, the watch thread
        assert int(death_signal) == (signal.SIGKILL if started_from == "main" else 0)


def test_a_child_whose_parent_died_before_its_watch_was_set_ends_at_once() -> None:
    code = "from arena.bots.parent_watch import Parent, die_with_parent; die_with_parent(Parent(0, True)); print('on')"
    ended = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout(30))
    assert ended.returncode == EXIT_ORPHANED and ended.stdout == ""


def test_a_lifeline_kills_its_programs_whole_group_when_the_process_holding_it_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", LIFELINE], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    program = 0
    try:
        program = int(read_line(parent.stdout, timeout(30)))
        parent.kill()
        parent.wait()
        seconds_to_end_of_file(parent.stdout, timeout(3))  # sh, both sleeps and the watcher
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if program:
            kill_quietly(program, group=True)


def test_a_program_on_a_lifeline_keeps_its_pid_and_exit_code_and_closing_the_line_ends_what_it_left() -> None:
    line = Lifeline()
    program = subprocess.Popen(line.wrap(["sh", "-c", "echo $$; sleep 60 & exit 7"]), stdout=subprocess.PIPE, text=True,
                               start_new_session=True, pass_fds=line.pass_fds)  # fmt: skip
    assert program.stdout is not None
    try:
        line.started()
        assert int(read_line(program.stdout, timeout(30))) == program.pid
        assert program.wait(timeout(30)) == 7
        line.close()
        seconds_to_end_of_file(program.stdout, timeout(3))  # the sleep it left behind, and the watcher
    finally:
        line.close()
        kill_quietly(program.pid, group=True)
        program.wait()
        program.stdout.close()
