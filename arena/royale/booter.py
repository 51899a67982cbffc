"""Start and stop Tank Royale bots from their directories, the way Tank Royale's booter does.

A bot directory ``.../Name/`` holds ``Name.json`` (the bot's config) and a start script
``Name.sh``; directories of Python bots without a script run ``python Name.py``. The bot gets
``SERVER_URL``, ``SERVER_SECRET`` and ``BOT_BOOTED=true`` in its environment, runs in its own
directory, and writes stdout and stderr to a log file that :meth:`BootedBot.log_summary` reads
back for error messages (an official API prints a bot's traceback and plays on, so a traceback
is often the only sign of a bug).

Each bot runs in a session of its own, so stopping it also stops what its script started, and on
a :class:`~arena.bots.parent_watch.Lifeline`: if the process that booted it dies (``kill -9``
included), its session is killed all the same, where an official-API bot would otherwise play on
as an orphan. docs/royale.md, "Booting bots", has the details.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..bots.parent_watch import Lifeline

__all__ = ["BootedBot", "BotDirectory", "LogSummary", "boot", "exit_status", "find_bot", "read_log"]

TRACEBACK = "Traceback (most recent call last):"
"""The first line of every Python traceback (what ``traceback.print_exc`` writes)."""


@dataclass(frozen=True)
class BotDirectory:
    """A bot directory as the booter sees it: its config and the command that starts it."""

    directory: Path
    config: dict[str, object]
    command: tuple[str, ...]

    @property
    def base_name(self) -> str:
        """The directory's name: every bot file is named after it."""
        return self.directory.name

    @property
    def display_name(self) -> str:
        """The ``name`` of the bot's JSON config (what it calls itself in its handshake)."""
        return str(self.config.get("name") or self.base_name)


def find_bot(directory: Path) -> BotDirectory:
    """Locate a bot's JSON config and start command in ``directory``.

    Raises:
        FileNotFoundError: no such directory, no ``Name.json``, or neither ``Name.sh`` nor ``Name.py``.
        ValueError: ``Name.json`` is not a JSON object with ``name``, ``version`` and ``authors``.
    """
    directory = directory.expanduser().resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"no bot directory {directory}")
    base = directory.name
    config_path = directory / f"{base}.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{directory}: no {base}.json (the bot's JSON config, named after its directory)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{config_path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{config_path}: the bot's config must be a JSON object")
    missing = [key for key in ("name", "version", "authors") if not config.get(key)]
    if missing:
        raise ValueError(f"{config_path}: missing required field(s) {', '.join(missing)}")
    script, program = directory / f"{base}.sh", directory / f"{base}.py"
    if os.name != "nt" and script.is_file():
        command: tuple[str, ...] = ("sh", str(script))
    elif program.is_file():
        command = (sys.executable, str(program))
    else:
        raise FileNotFoundError(f"{directory}: no start script {base}.sh and no {base}.py")
    return BotDirectory(directory, config, command)


@dataclass(frozen=True)
class LogSummary:
    """What a bot's log says, for an error message: its last lines and its Python tracebacks."""

    tail: list[str]
    """The log's last lines."""
    tracebacks: int
    """How many tracebacks it holds (lines starting a traceback)."""
    last_traceback: list[str] = field(default_factory=list)
    """The last traceback: its first line, then its last lines (the exception's type and message last)."""


def exit_status(code: int) -> str:
    """``exited with code 1``, or ``was killed by SIGKILL`` for a negative code (Popen's signal number)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def read_log(path: Path, lines: int = 15) -> LogSummary:
    """A log's last ``lines`` non-blank lines and its Python tracebacks, read in one pass (a log may be long).

    A traceback runs from its ``Traceback (most recent call last):`` line to the first line after
    it that is not indented (the exception's type and message); the last one is kept, cut to its
    first line and its last ``lines - 1``. A missing or unreadable log reads as empty.
    """
    tail: deque[str] = deque(maxlen=lines)
    count = 0
    current: tuple[str, deque[str]] | None = None  # the traceback being read, until its exception line
    last: tuple[str, deque[str]] | None = None
    try:
        with path.open(encoding="utf-8", errors="replace") as log:
            for raw in log:
                line = raw.rstrip("\r\n")
                if line.startswith(TRACEBACK):
                    count += 1
                    current = (line, deque(maxlen=max(lines - 1, 1)))
                elif current is not None:
                    current[1].append(line)
                    if line and not line[0].isspace():  # the exception line ends the traceback
                        last, current = current, None
                if line.strip():
                    tail.append(line)
    except OSError:
        pass
    last = current or last  # a traceback cut off by the end of the log counts too
    return LogSummary(list(tail), count, [last[0], *last[1]] if last else [])


@dataclass
class BootedBot:
    """A bot process started by :func:`boot`."""

    bot: BotDirectory
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]
    _lifeline: Lifeline | None = None
    """Kills what is left of its session when closed, or when this process dies."""
    log_kept: bool = False
    """The log stays after the game (a name was given): error messages then say where it is."""
    exit_code: int | None = None
    """Set by :meth:`stop`: the exit code (negative: the signal), None if it could not be ended."""
    signalled: bool = False
    """Set by :meth:`stop`: it had to be signalled to end (its exit code is then ours, not the bot's)."""

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def log_note(self) -> str:
        """`` (full log: PATH)`` when the log is kept, else nothing: for error messages."""
        return f" (full log: {self.log_path})" if self.log_kept else ""

    def cpu_seconds(self) -> float | None:
        """CPU time the bot's process used so far (Linux ``/proc``; None elsewhere or once it is gone)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the bot printed (for error messages)."""
        return "\n".join(self.log_summary(lines).tail)

    def log_report(self, lines: int = 15) -> str:
        """``--- NAME log (full log: PATH):`` and its last lines, or what became of its process: for error messages."""
        head = f"\n--- {self.bot.base_name} log{self.log_note}"
        code = self.process.poll()
        if code is not None:
            head += f" (it {exit_status(code)})"
        return f"{head}:\n{self.log_tail(lines)}"

    def log_summary(self, lines: int = 15) -> LogSummary:
        """Its log's last lines and tracebacks (:func:`read_log`)."""
        return read_log(self.log_path, lines)

    def stop(self, grace: float = 5.0) -> int | None:
        """Give the bot ``grace`` seconds to exit by itself, then end it, as Tank Royale's booter stops bots.

        SIGTERM goes to the bot's whole session (a start script and the program it started),
        then SIGKILL after another ``grace``. Returns the exit code (negative: the signal), also
        kept in :attr:`exit_code` (and :attr:`signalled` says whether it was ours).
        """
        try:
            self.exit_code = self._end(grace)
            return self.exit_code
        finally:
            self._log.close()
            if self._lifeline is not None:
                self._lifeline.close()

    def _end(self, grace: float) -> int | None:
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            self.signalled = True
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                return self.process.wait(grace)
            except subprocess.TimeoutExpired:
                continue
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            return None


def boot(
    bot: BotDirectory,
    server_url: str,
    secret: str | None,
    log_dir: Path,
    extra_env: dict[str, str] | None = None,
    log_name: str | None = None,
) -> BootedBot:
    """Start ``bot`` against ``server_url`` with ``secret``; its output goes to ``log_dir/NAME-<pid>-<time>.log``.

    With ``log_name`` the log is ``log_dir/log_name`` instead (replaced if it exists), and it is
    kept: error messages then say where it is (``BootedBot.log_kept``).

    ``PATH`` starts with this interpreter's directory, so a start script's ``python3`` is the
    Python running the arena (the one with the bot API installed).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    if log_name is not None:
        log_path = log_dir / log_name
    else:
        log_path = log_dir / f"{bot.base_name}-{os.getpid()}-{time.monotonic_ns()}.log"
    env = dict(os.environ)
    env.update(_bot_info_env(bot.config))
    env.update(extra_env or {})
    env.update(
        SERVER_URL=server_url,
        BOT_BOOTED="true",
        PYTHONUNBUFFERED="1",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    if secret is not None:
        env["SERVER_SECRET"] = secret
    else:
        env.pop("SERVER_SECRET", None)
    lifeline = Lifeline()
    log = log_path.open("wb")
    try:
        process = subprocess.Popen(
            lifeline.wrap(bot.command),
            cwd=bot.directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=lifeline.pass_fds,
        )
    except BaseException:
        log.close()
        lifeline.close()
        raise
    lifeline.started()
    return BootedBot(bot, process, log_path, log, lifeline, log_kept=log_name is not None)


_INFO_ENV = {
    "name": "BOT_NAME",
    "version": "BOT_VERSION",
    "authors": "BOT_AUTHORS",
    "description": "BOT_DESCRIPTION",
    "homepage": "BOT_HOMEPAGE",
    "countryCodes": "BOT_COUNTRY_CODES",
    "gameTypes": "BOT_GAME_TYPES",
    "platform": "BOT_PLATFORM",
    "programmingLang": "BOT_PROG_LANG",
    "initialPosition": "BOT_INITIAL_POS",
}
"""JSON config field → the environment variable the official bot APIs read it from when they get no config file."""


def _bot_info_env(config: dict[str, object]) -> dict[str, str]:
    """The bot's JSON config as the booter's environment variables (lists comma-separated)."""
    env = {}
    for key, var in _INFO_ENV.items():
        value = config.get(key)
        if isinstance(value, list):
            env[var] = ",".join(str(v) for v in value)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            env[var] = str(value)
    return env
