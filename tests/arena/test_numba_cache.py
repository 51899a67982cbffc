"""numba's cache: where it lands (arena/numba_cache.py) and what `arena train` says about it.

The choice is checked in this process against a fake of numba's writability probe (as root, mode
bits make nothing read-only). The issue's cases run for real: `arena train` in a mount namespace
where the package (the source tree of the editable install, its venv) and the home directory are
read-only bind mounts, with HOME, XDG_CACHE_HOME and NUMBA_CACHE_DIR unset. One cold compile of
every kernel in all: the first run compiles into the temp fallback, and that folder is then used as a
baked-in NUMBA_CACHE_DIR, as docker/Dockerfile's `arena compile` leaves one.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import agents
import arena
from arena import numba_cache
from arena.numba_cache import CacheChoice, choose, report
from tests.conftest import ROOT, tier_2, timeout

UID = os.getuid()
FALLBACK = numba_cache.FALLBACK_NAME.format(user=UID)
QUICK = ["--eval-rounds", "0", "--no-report"]
"""No evaluation and no report: the runs below check the compile line, not the learning."""


# ── the choice, against a fake probe ─────────────────────────────────────────


@pytest.fixture
def writable(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The folders the fake probe finds writable (with everything under them); add to it."""
    allowed: set[str] = set()
    monkeypatch.setattr(numba_cache, "_writable", lambda p: any(Path(p).is_relative_to(a) for a in allowed))
    monkeypatch.setattr(numba_cache, "TEMP_DIRS", ())  # never the real /tmp
    return allowed


def test_numba_cache_dir_set_and_writable_is_used_as_is(writable: set[str], tmp_path: Path) -> None:
    writable.add(str(tmp_path))
    choice = choose({"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert choice == CacheChoice(str(tmp_path / "cache"), None)


def test_numba_default_next_to_the_sources_then_its_user_wide_folder(writable: set[str], tmp_path: Path) -> None:
    """numba's own order: ``__pycache__`` beside every kernel's source, else ``$XDG_CACHE_HOME/numba``; nothing set."""
    writable.update(str(folder) for folder in numba_cache.kernel_folders())
    choice = choose({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert choice.set_dir is None and choice.where is not None and choice.where.startswith("next to the sources")
    writable.clear()
    writable.add(str(tmp_path / "xdg"))
    assert choose({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == CacheChoice(str(tmp_path / "xdg" / "numba"), None)


def test_fallback_is_a_private_folder_in_the_temp_directory(writable: set[str], tmp_path: Path) -> None:
    """Sources and user-wide folder read-only: NUMBA_CACHE_DIR goes to $TMPDIR/arena-trainer-numba-UID, mode 0700."""
    writable.add(str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    choice = choose({"TMPDIR": str(tmp_path / "tmp"), "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    expected = str(tmp_path / "tmp" / FALLBACK)
    assert choice == CacheChoice(expected, expected)
    assert (os.stat(expected).st_mode & 0o777) == 0o700


def test_fallback_refuses_a_folder_others_could_write(writable: set[str], tmp_path: Path) -> None:
    """A planted fallback (open to others) is not used: numba's cache files are code it loads."""
    writable.add(str(tmp_path))
    planted = tmp_path / FALLBACK
    planted.mkdir()
    planted.chmod(0o777)
    choice = choose({"TMPDIR": str(tmp_path), "XDG_CACHE_HOME": "/ro/xdg"})
    assert choice.where is None and f"{planted} (not a private folder of this user)" in choice.reason


def test_nothing_writable_names_what_was_tried_and_keeps_the_users_setting(writable: set[str], tmp_path: Path) -> None:
    choice = choose({"NUMBA_CACHE_DIR": "/ro/cache", "XDG_CACHE_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path)})
    assert choice.where is None and choice.set_dir is None  # the user's NUMBA_CACHE_DIR is not replaced
    assert "NUMBA_CACHE_DIR=/ro/cache" in choice.reason and str(tmp_path / "xdg" / "numba") in choice.reason
    assert not (tmp_path / FALLBACK).exists()


# ── the report, from numba's statistics ──────────────────────────────────────


def kernel(path: Path | None, misses: int, name: str = "step") -> Any:
    """A stand-in for a numba dispatcher: what :func:`report` reads of one."""

    def step() -> None:
        pass

    step.__qualname__ = name
    stats = SimpleNamespace(cache_path=None if path is None else str(path), cache_hits={}, cache_misses={"sig": misses})
    return SimpleNamespace(stats=stats, py_func=step)


def test_report_says_where_it_cached_only_when_the_index_file_was_written(tmp_path: Path) -> None:
    (tmp_path / "test_numba_cache.step-1.py311.nbi").write_text("")
    line, cached = report("the kernels", [kernel(tmp_path, 1)], since=0.0, seconds=12.3)
    assert cached and line == f"compiled the kernels in 12 s (numba; cached in {tmp_path} for later runs)"
    line, cached = report("the kernels", [kernel(tmp_path, 1, "other")], since=0.0, seconds=12.3)
    assert not cached and "but nothing could be cached" in line and "NUMBA_CACHE_DIR" in line
    line, cached = report("the kernels", [kernel(tmp_path, 1), kernel(None, 1, "other")], since=0.0, seconds=1.0)
    assert not cached and "1 of 2 kernels could not be cached" in line
    line, cached = report("the kernels", [kernel(tmp_path, 0)], since=0.0, seconds=0.31)
    assert cached and line == f"loaded the kernels from numba's cache ({tmp_path}) in 0.3 s; nothing to compile"


# ── the CLI without numba ────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("args", "advice"),
    [
        (["train", "--engine", "numpy"], False),  # PPO needs numba whichever engine: no --engine numpy advice
        (["train", "--agent", "td3"], True),  # only the engine needs it
        (["serve"], False),
        (["compile"], False),
        (["match", "--bot", "sitting", "--bot", "spinner"], True),  # the engine, default numba as for train
        (["worker", "--url", "ws://127.0.0.1:9"], True),
    ],
)
def test_without_numba_a_command_that_needs_it_says_so_in_one_line(
    args: list[str], advice: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from arena.cli import main

    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` fails as if not installed
    assert main([*args, "--out", str(tmp_path)] if args[0] in ("train", "serve") else args) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"arena {args[0]}: error: numba is not installed"), lines
    assert "pip install numba" in lines[0] and ("--engine numpy" in lines[0]) == advice


def test_a_numba_that_fails_to_load_is_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from arena.cli import main

    class Broken:
        """A finder that fails as a broken llvmlite does, at numba's import."""

        def find_spec(self, name: str, *args: Any) -> None:
            if name == "numba":
                raise OSError("libllvmlite.so: bad ELF header")

    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    assert main(["train", "--out", str(tmp_path)]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert "numba is installed but cannot be loaded (OSError: libllvmlite.so: bad ELF header)" in line


@pytest.mark.parametrize("command", ["train", "match", "worker"])
def test_engine_help_offers_the_choices_only(command: str) -> None:
    from arena.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = commands.choices[command]
    (engine,) = [action for action in parser._actions if "--engine" in action.option_strings]
    assert engine.choices == ("numpy", "numba") and "compiled," not in engine.help


# ── for real: a read-only install with no home ───────────────────────────────


def read_only_run(command: list[str], env: dict[str, str], *, temp_read_only: bool, cwd: Path) -> str:
    """``arena COMMAND`` in a private mount namespace with the package, its venv and the home read-only; its stdout.

    ``temp_read_only``: /tmp and /var/tmp too, with ``cwd`` bound writable again (torch needs a temp directory:
    tempfile falls back to the working directory, which the cache fallback does not).
    """
    read_only = {Path(agents.__file__).parents[1], Path(arena.__file__).parents[1], Path(sys.prefix)}
    home = Path(pwd.getpwuid(UID).pw_dir)
    read_only |= {home} if home.is_dir() else set()
    if temp_read_only:
        read_only |= {Path(p) for p in ("/tmp", "/var/tmp", "/usr/tmp") if Path(p).is_dir()}
    mounts = [bind(folder, "ro") for folder in sorted(read_only)]  # a parent before the folders in it
    if temp_read_only:
        mounts.append(bind(cwd, "rw"))
    run = shlex.join([sys.executable, "-m", "arena.cli", *command])
    script = " && ".join([*mounts, f"cd {shlex.quote(str(cwd))}", f"exec {run}"])
    done = subprocess.run([*namespace(), "sh", "-c", script], env=env, capture_output=True, text=True, timeout=timeout(300))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def bind(folder: Path, mode: str) -> str:
    """The shell command that bind-mounts ``folder`` onto itself, ``ro`` or ``rw``."""
    quoted = shlex.quote(str(folder))
    return f"mount --bind {quoted} {quoted} && mount -o remount,{mode},bind {quoted} {quoted}"


def namespace() -> list[str]:
    """``unshare`` for a private mount namespace (mapped to root when not root), or skip where that is not permitted."""
    command = ["unshare", "-m"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = subprocess.run([*command, "sh", "-c", "mount --bind / / && mount -o remount,ro,bind / /"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("needs a private mount namespace for read-only bind mounts (unshare -m; mount): not permitted here")
    return command


def bare_env(**extra: str) -> dict[str, str]:
    """This environment without a home or any cache setting, as a container user with no home has it."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    return env | extra


def compile_line(stdout: str, command: str = "train") -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith(f"arena {command}: ") and "numba" in line]
    return line


def cache_files(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if p.is_file()}


@pytest.mark.t2
@tier_2  # a cold compile of every kernel (a minute on 2 cores); the fake-probe tests and the next one cover the choice
def test_read_only_install_without_home_caches_in_the_temp_fallback_then_starts_warm(tmp_path: Path) -> None:
    """The issue's case, then the image's: the first run caches in $TMPDIR/arena-trainer-numba-UID, and says so;
    with that folder as NUMBA_CACHE_DIR (as the image bakes one), `arena compile` and `arena train` compile nothing,
    in any of their processes (the bot's worker process included: no cache file changes)."""
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "run"
    # Every kernel the run plays compiles before the first tick; the four-bot league leaves the population's to compile.
    train = ["train", "--steps", "100", *QUICK, "--league-option", "drawn=false", "--out", str(out)]
    stdout = read_only_run(train, bare_env(TMPDIR=str(tmp_path / "tmp")), temp_read_only=False, cwd=ROOT)
    fallback = tmp_path / "tmp" / FALLBACK
    assert compile_line(stdout).startswith("arena train: compiled PPO's step kernels, the tank engine and the scripted bots")
    assert f"(numba; cached in {fallback} for later runs)" in compile_line(stdout), stdout
    assert len(list(fallback.rglob("*.nbi"))) >= 12 and (fallback.stat().st_mode & 0o777) == 0o700
    assert (out / "summary.json").is_file()

    warm = bare_env(NUMBA_CACHE_DIR=str(fallback))
    # The image's build step: arena compile adds only what that run did not play (the drawn population's kernel).
    done = subprocess.run([sys.executable, "-m", "arena.cli", "compile"], env=warm, capture_output=True, text=True,
                          timeout=timeout(120), cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"(numba; cached in {fallback} for later runs)" in compile_line(done.stdout, "compile"), done.stdout
    before = cache_files(fallback)
    done = subprocess.run([sys.executable, "-m", "arena.cli", "compile"], env=warm, capture_output=True, text=True,
                          timeout=timeout(120), cwd=ROOT)  # fmt: skip
    assert done.returncode == 0 and compile_line(done.stdout, "compile").endswith("; nothing to compile"), done.stdout
    train = ["train", "--steps", "100", *QUICK, "--out", str(tmp_path / "warm")]  # a few PPO updates and bot ticks
    done = subprocess.run([sys.executable, "-m", "arena.cli", *train], env=warm, capture_output=True, text=True,
                          timeout=timeout(180), cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = compile_line(done.stdout)
    assert line.startswith("arena train: loaded PPO's step kernels, the tank engine and the scripted bots from numba's cache")
    assert f"({fallback})" in line and line.endswith("; nothing to compile")
    assert cache_files(fallback) == before, "a process of the warm run compiled a kernel"


@pytest.mark.expensive
def test_with_nothing_writable_the_run_says_nothing_could_be_cached(tmp_path: Path) -> None:
    """Package, home, /tmp and /var/tmp read-only, $TMPDIR missing: the run compiles in memory and says so (PPO's
    kernels alone, --engine numpy, the cheap compile; the engine's kernels take the same path)."""
    work = tmp_path / "work"
    work.mkdir()
    train = ["train", "--steps", "100", "--engine", "numpy", *QUICK, "--out", str(work / "run")]
    stdout = read_only_run(train, bare_env(TMPDIR=str(tmp_path / "missing")), temp_read_only=True, cwd=work)
    line = compile_line(stdout)
    assert line.startswith("arena train: compiled PPO's step kernels in "), stdout
    assert "(numba), but nothing could be cached: no directory numba can write (tried " in line
    assert f"/tmp/{FALLBACK}" in line and "set NUMBA_CACHE_DIR to a writable directory" in line
    assert (work / "run" / "summary.json").is_file()
    assert not list(work.rglob("*.nbi"))
