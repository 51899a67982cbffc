"""numba's disk cache: where it lands, chosen before numba is first imported, and whether it really did.

Why: numba caches a ``cache=True`` kernel only in a directory it can write, trying in turn
``NUMBA_CACHE_DIR``, ``__pycache__`` next to the kernel's source, then its user-wide folder
(``$XDG_CACHE_HOME/numba``, else ``~/.cache/numba``); with none writable it refuses to define the
kernel at all. A read-only install run with no home (a container image) would compile its kernels
at every start, or fail. :func:`apply`, which ``arena/cli.py`` runs in every process of a
command (spawned bots import it again as their main module), makes the same probes as numba and,
where none would land, sets ``NUMBA_CACHE_DIR`` to a private folder in the temp directory; where
nothing at all is writable it turns caching off, so the kernels compile in memory instead of failing.
:func:`report` then reads what numba did (each kernel's cache hits, misses and path, and the index
file it writes) so a command says truthfully where the kernels were cached, or that they were not.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FALLBACK_NAME", "CacheChoice", "apply", "choose", "numba_problem", "report", "user_wide_dir"]

FALLBACK_NAME = "arena-trainer-numba-{user}"
"""The fallback folder's name in the temp directory (``{user}``: the uid), created mode 0700."""
TEMP_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")
"""Where the fallback may go after ``$TMPDIR``, ``$TEMP`` and ``$TMP`` (tempfile's list without the working directory)."""


@dataclass(frozen=True)
class CacheChoice:
    """Where numba will cache, as decided by :func:`choose`."""

    where: str | None
    """The cache's place in words (a directory, or "next to the sources"); None: nothing is writable."""
    set_dir: str | None
    """The fallback to put in ``NUMBA_CACHE_DIR`` (None: numba finds its place itself, or there is none)."""
    tried: tuple[str, ...] = ()
    """The places numba could not write, for the reason given when nothing is cached."""

    @property
    def reason(self) -> str:
        return "no directory numba can write (tried " + ", ".join(self.tried) + ")"


def choose(environ: Mapping[str, str] | None = None) -> CacheChoice:
    """Where numba's cache can land, in numba's own order, with this package's fallback last.

    ``NUMBA_CACHE_DIR`` when it is set and writable; else numba's default when it lands (every kernel
    folder's ``__pycache__``, or the user-wide folder); else, unless the user set ``NUMBA_CACHE_DIR``
    (numba ignores it, and so does this), a private folder in the first writable temp directory.
    """
    env = os.environ if environ is None else environ
    tried: list[str] = []
    user_set = env.get("NUMBA_CACHE_DIR", "")
    if user_set:
        if _writable(user_set):
            return CacheChoice(os.path.abspath(user_set), None)
        tried.append(f"NUMBA_CACHE_DIR={user_set}")
    in_tree = [folder / "__pycache__" for folder in kernel_folders()]
    missing = [str(p) for p in in_tree if not _writable(p)]
    if not missing:
        return CacheChoice("next to the sources (" + ", ".join(map(str, in_tree)) + ")", None)
    tried += missing
    wide = user_wide_dir(env)
    if wide.startswith("~"):  # no home: numba would write "~/.cache" under the working directory
        tried.append(f"{wide} (no home directory)")
    elif _writable(wide):
        return CacheChoice(os.path.abspath(wide), None)
    else:
        tried.append(wide)
    if user_set:
        return CacheChoice(None, None, tuple(tried))
    fallback, refused = _private_temp_dir(env)
    if fallback is not None:
        return CacheChoice(fallback, fallback)
    return CacheChoice(None, None, (*tried, *refused))


_CHOICE: CacheChoice | None = None


def apply() -> CacheChoice:
    """Choose once per process, then set ``NUMBA_CACHE_DIR`` to the fallback, or turn numba's caching off.

    Must run before numba is first imported: numba reads ``NUMBA_CACHE_DIR`` then. With nothing writable,
    numba's ``cache=True`` raises at the kernel's definition; caching off instead costs a compile per start.
    """
    global _CHOICE
    if _CHOICE is None:
        _CHOICE = choose()
        if _CHOICE.set_dir is not None:
            os.environ["NUMBA_CACHE_DIR"] = _CHOICE.set_dir
        elif _CHOICE.where is None:
            _caching_off()
    return _CHOICE


def kernel_folders() -> list[Path]:
    """The folders of the modules that define ``cache=True`` kernels (``agents/``, ``arena/games/tank/``), unimported."""
    agents = importlib.util.find_spec("agents")
    folders = [Path(os.path.abspath(__file__)).parent / "games" / "tank"]
    if agents is not None and agents.submodule_search_locations:
        folders.insert(0, Path(next(iter(agents.submodule_search_locations))))
    return folders


def user_wide_dir(environ: Mapping[str, str]) -> str:
    """numba's user-wide cache folder, as ``numba.misc.appdirs`` computes it (importing that would import numba)."""
    if sys.platform == "win32":
        local = environ.get("LOCALAPPDATA", os.path.expanduser("~\\AppData\\Local"))
        return os.path.join(local, "numba", "Cache")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), "numba")
    return os.path.join(environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "numba")


def _writable(path: str | Path) -> bool:
    """numba's own test of a cache folder: create it, then a temporary file in it (root ignores mode bits)."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _private_temp_dir(environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """This user's fallback folder in the first temp directory that takes it, and the places that did not.

    Only a real folder owned by this user and closed to others is used: numba's cache files are
    code it loads, and a predictable name in a shared /tmp could be planted by another user.
    """
    uid = os.getuid() if hasattr(os, "getuid") else None
    name = FALLBACK_NAME.format(user=uid if uid is not None else os.environ.get("USERNAME", "user"))
    refused = []
    for base in dict.fromkeys([*(environ.get(v, "") for v in ("TMPDIR", "TEMP", "TMP")), *TEMP_DIRS]):
        if not base or not os.path.isdir(base):
            continue
        path = os.path.join(os.path.abspath(base), name)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            refused.append(path)
            continue
        info = os.lstat(path)
        private = stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o077 and (uid is None or info.st_uid == uid)
        if private and _writable(path):
            return path, refused
        refused.append(path if private else f"{path} (not a private folder of this user)")
    return None, refused


def _caching_off() -> None:
    """Make numba's ``cache=True`` a no-op in this process, so kernels compile in memory (nothing is writable)."""
    try:
        from numba.core.dispatcher import Dispatcher
    except Exception:  # numba missing or broken: the command that needs it says so (numba_problem)
        return

    def enable_caching(self: Any) -> None:
        """Keep numba's NullCache: there is no directory to cache in."""

    Dispatcher.enable_caching = enable_caching  # type: ignore[method-assign]


def numba_problem(why: str, alternative: str = "") -> str | None:
    """None when numba imports; else one line: what failed, ``why`` the command needs numba, and how to fix it."""
    try:
        import numba  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("numba", "llvmlite"):
            return f"numba is not installed, and {why}: pip install numba (a dependency of arena-trainer){alternative}"
        return _broken(exc, why, alternative)
    except Exception as exc:  # e.g. llvmlite's library fails to load, or a numpy numba does not support
        return _broken(exc, why, alternative)
    return None


def _broken(exc: BaseException, why: str, alternative: str) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return (
        f"numba is installed but cannot be loaded ({type(exc).__name__}: {first}), and {why}: "
        f"reinstall it (pip install --force-reinstall numba llvmlite){alternative}"
    )


def report(what: str, dispatchers: Iterable[Any], since: float, seconds: float) -> tuple[str, bool]:
    """What numba did with ``dispatchers`` (kernels called since the wall-clock time ``since``), and whether it cached.

    A kernel that missed the cache counts as cached only if its index file (``*.nbi``) was written in
    its cache folder since ``since``; with caching off numba gives it no folder at all.
    """
    compiled, loaded_from, written, unwritten = 0, [], [], 0
    for dispatcher in dispatchers:
        stats = dispatcher.stats
        path = stats.cache_path
        if not sum(stats.cache_misses.values()):
            loaded_from.append(_shown(path))
            continue
        compiled += 1
        func = dispatcher.py_func
        pattern = f"{Path(func.__code__.co_filename).stem}.{func.__qualname__.replace('<', '').replace('>', '')}-*.nbi"
        # 2 s of slack: some filesystems keep modification times that coarse
        if path is not None and any(p.stat().st_mtime >= since - 2.0 for p in Path(path).glob(pattern)):
            written.append(_shown(path))
        else:
            unwritten += 1
    if not compiled:
        where = ", ".join(dict.fromkeys(loaded_from))
        return f"loaded {what} from numba's cache ({where}) in {seconds:.1f} s; nothing to compile", True
    head = f"compiled {what} in {seconds:.0f} s"
    if not unwritten:
        return f"{head} (numba; cached in {', '.join(dict.fromkeys(written))} for later runs)", True
    choice = _CHOICE or choose()
    why = choice.reason if choice.where is None else f"its cache files did not appear in {choice.where}"
    fix = "set NUMBA_CACHE_DIR to a writable directory so later runs load them instead of compiling"
    if not written:
        return f"{head} (numba), but nothing could be cached: {why}; {fix}", False
    cached = f"cached in {', '.join(dict.fromkeys(written))}"
    return f"{head} (numba; {cached}), but {unwritten} of {compiled} kernels could not be cached: {why}; {fix}", False


def _shown(path: str | None) -> str:
    """A kernel's cache folder as the user set or knows it: ``NUMBA_CACHE_DIR`` or numba's user-wide folder, else itself."""
    if path is None:
        return "memory"
    for root in (os.environ.get("NUMBA_CACHE_DIR", ""), user_wide_dir(os.environ)):
        if root and Path(path).is_relative_to(os.path.abspath(root)):
            return os.path.abspath(root)
    return path
