"""Start and stop Tank Royale bots from their directories, the way Tank Royale's booter does.

A bot directory ``.../Name/`` holds ``Name.json`` (the bot's JSON config: name, version,
authors, …) and a start script ``Name.sh`` (macOS/Linux); files are found by the directory's
name (Tank Royale's "base filename" convention). Directories of Python bots without a script
are run as ``python Name.py``. The bot gets ``SERVER_URL`` and ``SERVER_SECRET`` in its
environment (read by every official bot API) and ``BOT_BOOTED=true``, runs with the bot
directory as its working directory (where the Python API looks for ``Name.json``), and its
output goes to a log file that is shown when it fails to connect.

Each bot runs in a session of its own, so stopping it also stops what its script started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["BootedBot", "BotDirectory", "boot", "find_bot"]


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


@dataclass
class BootedBot:
    """A bot process started by :func:`boot`."""

    bot: BotDirectory
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float | None:
        """CPU time the bot's process used so far (Linux ``/proc``; None elsewhere or once it is gone)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the bot printed (for error messages)."""
        try:
            self._log.flush()
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, grace: float = 5.0) -> int | None:
        """Give the bot ``grace`` seconds to exit by itself, then end it, as Tank Royale's booter stops bots.

        SIGTERM goes to the bot's whole session (a start script and the program it started),
        then SIGKILL after another ``grace``. Returns the exit code (negative: the signal).
        """
        try:
            return self._end(grace)
        finally:
            self._log.close()

    def _end(self, grace: float) -> int | None:
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
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
    bot: BotDirectory, server_url: str, secret: str | None, log_dir: Path, extra_env: dict[str, str] | None = None
) -> BootedBot:
    """Start ``bot`` against ``server_url`` with ``secret``; its output goes to ``log_dir/NAME-<time>.log``.

    ``PATH`` starts with this interpreter's directory, so a start script's ``python3`` is the
    Python running the arena (the one with the bot API installed).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
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
    log = log_path.open("wb")
    process = subprocess.Popen(
        list(bot.command),
        cwd=bot.directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return BootedBot(bot, process, log_path, log)


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
