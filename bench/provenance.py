"""Where a benchmark's figures come from: the commit, whether the tree was clean, the command, the versions.

A figure is only worth what its source is known to be. With the README's editable install, the
``arena`` on the PATH runs whatever the working tree holds, uncommitted edits included, so a
benchmark that simply calls it cannot say which code it measured. :func:`prepare_source` instead
exports a named commit with ``git archive`` into a fresh directory and :func:`arena_command` runs the
CLI from there (``PYTHONPATH`` first, the installed dependencies after); a dirty tree is refused
unless the caller asks to measure it as it is, and then the record says so (with a hash of the diff).
:func:`versions` asks the very interpreter and import path the runs use.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DirtyTree", "Source", "arena_command", "command_line", "git", "prepare_source", "versions"]

PACKAGES = ("arena", "agents", "server", "bot_protocol")
"""The project's top-level packages: all must import from the measured source."""


class DirtyTree(RuntimeError):
    """The working tree has uncommitted changes and the caller did not allow measuring them."""


@dataclass(frozen=True)
class Source:
    """The code a benchmark runs: a directory to put first on ``PYTHONPATH`` and what it is."""

    root: Path
    """The directory holding ``arena/``, ``agents/``, ``server/``, ``bot_protocol/`` (an export, or the tree)."""
    record: dict[str, Any] = field(default_factory=dict)
    """``commit``, ``dirty``, ``exported`` and, for a dirty tree, ``changed`` and ``diff_sha256``."""

    def env(self) -> dict[str, str]:
        """The environment for a subprocess that runs this source."""
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "PYTHONPATH": str(self.root) + (os.pathsep + path if path else "")}


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``; its stdout. RuntimeError with git's message when it fails."""
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {result.stderr.strip() or 'exit ' + str(result.returncode)}")
    return result.stdout


def _changed(repo: Path) -> dict[str, str]:
    """Path -> git's two-letter status, for tracked files with uncommitted changes and untracked files git does
    not ignore (``??``)."""
    lines = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    return {line[3:]: line[:2] for line in lines if line.strip()}


def prepare_source(repo: Path, commit: str | None, allow_dirty: bool, into: Path | None = None) -> Source:
    """The source to measure.

    ``commit`` given: that commit exported (``git archive``) into ``into`` (a new temporary directory
    when None); the working tree's state does not matter and is recorded for information.
    ``commit`` None: ``HEAD`` exported the same way when the tree is clean; with uncommitted changes,
    :class:`DirtyTree` unless ``allow_dirty``, which measures the working tree itself, edits included.
    """
    changed = _changed(repo)
    if commit is None and changed and not allow_dirty:
        names = sorted(changed)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise DirtyTree(
            f"the working tree has uncommitted changes ({shown}): commit them, name a commit with --commit, "
            "or pass --allow-dirty to measure the tree as it is"
        )
    head = git(repo, "rev-parse", "HEAD").strip()
    if commit is None and changed:
        diff = git(repo, "diff", "HEAD", "--binary").encode()
        for name, status in sorted(changed.items()):  # untracked files are part of what runs
            if status == "??" and (repo / name).is_file():
                diff += name.encode() + b"\0" + (repo / name).read_bytes()
        record = {"commit": head, "dirty": True, "exported": False, "changed": sorted(changed),
                  "diff_sha256": hashlib.sha256(diff).hexdigest()}  # fmt: skip
        return Source(repo, record)
    rev = commit or "HEAD"
    sha = git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    target = into or Path(tempfile.mkdtemp(prefix=f"arena-src-{sha[:10]}-"))
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha], capture_output=True, check=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(target, filter="data")
    except tarfile.TarError as exc:  # e.g. a committed link out of the tree, which the data filter refuses
        raise RuntimeError(f"commit {sha[:12]} cannot be exported: {exc}") from None
    record = {"commit": sha, "dirty": False, "exported": True, "export_dir": str(target),
              "working_tree": {"head": head, "uncommitted_changes": len(changed)}}  # fmt: skip
    if commit is not None:
        record["requested"] = commit
    return Source(target, record)


def arena_command(source: Source) -> list[str]:
    """The ``arena`` CLI run by this interpreter from ``source`` (with :meth:`Source.env`): the console
    script's own two lines, so usage lines still say ``arena``. ``-P``: the current directory (often a
    checkout with edits) is not put ahead of the source on the import path."""
    code = "import sys; sys.argv[0] = 'arena'; from arena.cli import main; sys.exit(main())"
    return [sys.executable, "-P", "-c", code]


def versions(source: Source) -> dict[str, Any]:
    """Python, torch, numpy and numba as the runs import them, and where each project package comes from.

    Raises RuntimeError when a project package would not come from ``source`` (a stray install ahead of it).
    """
    code = (
        "import json, sys, importlib\n"
        "out = {'python': sys.version.split()[0], 'executable': sys.executable}\n"
        "for name in ('torch', 'numpy', 'numba'):\n"
        "    try:\n"
        "        out[name] = importlib.import_module(name).__version__\n"
        "    except Exception as exc:\n"
        "        out[name] = None\n"
        f"out['packages'] = {{n: importlib.import_module(n).__file__ for n in {PACKAGES!r}}}\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=source.env())
    if result.returncode != 0:
        raise RuntimeError(f"cannot import the measured source: {result.stderr.strip()[-400:]}")
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    root = source.root.resolve()
    stray = {n: f for n, f in found.pop("packages").items() if root not in Path(f).resolve().parents}
    if stray:
        raise RuntimeError(f"these packages would not come from {root}: {stray}")
    found["platform"] = platform.platform()
    return found


def command_line() -> str:
    """This process's command line, as a user would type it again."""
    return shlex.join([Path(sys.executable).name, *sys.argv])
