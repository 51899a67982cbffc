"""The recording format: one tank match, tick by tick, in memory (:class:`Recording`) and on disk.

A recording holds, for every tick of every round of one arena, the frame of
:func:`arena.games.tank.frames.frame` (the format the live dashboard shows) and the actions
every tank applied that tick, plus what re-simulation needs: the seed and the rules. The
engine is deterministic, so ``TankBattle(1, T, rules, seed)`` stepped with the recorded actions
must give back every recorded frame exactly (:func:`~arena.replay.verification.verify`); the bots
are not needed to replay.

File format (version 1): an ``.npz`` archive (zip, deflate; read with ``allow_pickle=False``,
so a file cannot run code) of these arrays, ``N`` frames of ``T`` tanks:

=================  ===================  =====================================================
name               dtype, shape         content
=================  ===================  =====================================================
``meta``           uint8 (bytes,)       UTF-8 JSON: ``format`` = "arena-replay", ``version``,
                                        ``header`` (:func:`~arena.games.tank.frames.header`),
                                        ``seed``, ``rules`` (every ``TankRules`` field),
                                        ``bots`` (name, spec, kind), ``result`` (the match table)
``round``          int32 (N,)           frame's ``round``
``tick``           int32 (N,)           frame's ``tick`` (0 = a round's start)
``over``           bool (N,)            frame's ``over``
``winner``         int8 (N,)            frame's ``winner``
``tanks``          int32 (N, T, 7)      frame's ``tanks`` in hundredths (``alive`` as 0/1),
                                        delta-coded along the frames (row i − row i−1)
``bullet_count``   uint16 (N,)          active bullets in each frame
``bullets``        int32 (sum, 5)       all frames' ``bullets`` in order, hundredths (owner as is)
``actions``        float32 (N, T, 5)    the actions that produced frame i (zeros at tick 0)
=================  ===================  =====================================================

Frames carry values rounded to 2 decimals, so integer hundredths store them exactly, and
delta-coded positions compress well (sizes: docs/arena.md, "Recording and replaying matches").
This module is the format alone, so the recorder, the verifier, the renderers and the viewer
share one definition of it and a format change touches one file.
"""

from __future__ import annotations

import functools
import io
import json
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..games.tank.actions import ACT_DIM
from ..games.tank.rules import TankRules
from .atomic import write_atomic

__all__ = [
    "BULLET_FIELDS",
    "COLUMNS",
    "FORMAT",
    "MAX_UNPACKED_BYTES",
    "TANK_FIELDS",
    "VERSION",
    "Recording",
    "ReplayError",
]

FORMAT = "arena-replay"
"""``meta["format"]`` of every recording; anything else is a foreign file."""
VERSION = 1
"""The file format version written; files of a newer version are refused."""
MAX_UNPACKED_BYTES = 4 << 30
"""Default limit on a file's uncompressed size (a zip bomb is refused before it is unpacked)."""

COLUMNS = ("meta", "round", "tick", "over", "winner", "tanks", "bullet_count", "bullets", "actions")
"""The arrays of a file, all required (the table above)."""
TANK_FIELDS = 7
"""Per tank and frame: x, y, heading, gun_heading, radar_heading, energy, alive."""
BULLET_FIELDS = 5
"""Per bullet: x, y, heading, power, owner."""


class ReplayError(ValueError):
    """A file that is not a readable recording: foreign, truncated, corrupt or too new."""


@dataclass(frozen=True, eq=False)
class Recording:
    """A recorded match in memory: metadata plus one row per frame (the columns of the table above).

    ``tanks`` here holds absolute hundredths (the file holds them delta-coded).
    """

    meta: dict[str, Any]
    round: NDArray[np.int32]
    tick: NDArray[np.int32]
    over: NDArray[np.bool_]
    winner: NDArray[np.int8]
    tanks: NDArray[np.int32]
    bullet_count: NDArray[np.uint16]
    bullets: NDArray[np.int32]
    actions: NDArray[np.float32]

    def __post_init__(self) -> None:
        """Check the columns agree in shape: a damaged file fails here, in one line, not deep in a renderer."""
        n = len(self.tick)
        t = len(self.names)
        if not 2 <= t <= 8:
            raise ReplayError(f"a recording has 2 to 8 tanks, this one {t}")
        shapes = {
            "round": (self.round.shape, (n,)),
            "over": (self.over.shape, (n,)),
            "winner": (self.winner.shape, (n,)),
            "tanks": (self.tanks.shape, (n, t, TANK_FIELDS)),
            "bullet_count": (self.bullet_count.shape, (n,)),
            "bullets": (self.bullets.shape, (int(self.bullet_count.sum()), BULLET_FIELDS)),
            "actions": (self.actions.shape, (n, t, ACT_DIM)),
        }
        for name, (got, want) in shapes.items():
            if got != want:
                raise ReplayError(f"column {name!r} has shape {got}, expected {want}")
        if n == 0 or self.tick[0] != 0:
            raise ReplayError("the first frame is not a round's start (tick 0)")

    @functools.cached_property
    def _bullet_start(self) -> NDArray[np.int64]:
        """Offset of each frame's bullets in ``bullets`` (plus the end)."""
        return np.concatenate([[0], np.cumsum(self.bullet_count, dtype=np.int64)])

    # --- metadata ------------------------------------------------------------------------------

    @property
    def header(self) -> dict[str, Any]:
        """The snapshot header (field size, tank radius, names): what a viewer draws with."""
        value: dict[str, Any] = self.meta["header"]
        return value

    @property
    def names(self) -> list[str]:
        """The tanks' names, in tank order (``header["names"]``)."""
        return [str(n) for n in self.meta["header"]["names"]]

    @property
    def seed(self) -> int:
        """The engine's seed: with the rules and the actions, all that re-simulation needs."""
        return int(self.meta["seed"])

    @property
    def rules(self) -> TankRules:
        """The recorded rules (validated by ``TankRules`` itself)."""
        try:
            return TankRules(**self.meta["rules"])
        except (TypeError, ValueError) as exc:
            raise ReplayError(f"bad rules in the recording: {exc}") from None

    @property
    def n_frames(self) -> int:
        """Frames recorded, over all rounds."""
        return len(self.tick)

    @property
    def rounds(self) -> list[int]:
        """The round numbers recorded, in order."""
        return [int(r) for r in self.round[self.tick == 0]]

    def round_frames(self, rnd: int) -> range:
        """Frame indices of round ``rnd``."""
        starts = np.flatnonzero(self.tick == 0)
        where = np.flatnonzero(self.round[starts] == rnd)
        if len(where) == 0:
            raise ValueError(f"round {rnd} is not in this recording (it has rounds {_span(self.rounds)})")
        start = int(starts[where[0]])
        later = starts[starts > start]
        return range(start, int(later[0]) if len(later) else self.n_frames)

    # --- frames --------------------------------------------------------------------------------

    def frame(self, i: int) -> dict[str, Any]:
        """Frame ``i``, equal (``==``) to what :func:`arena.games.tank.frames.frame` returned when recorded."""
        start = self._bullet_start
        tanks = self.tanks[i]
        bullets = self.bullets[start[i] : start[i + 1]]
        # n / 100 is the double nearest to the 2-decimal number, exactly what round(x, 2) returned.
        return {
            "round": int(self.round[i]),
            "tick": int(self.tick[i]),
            "tanks": [[v / 100 for v in row[:6]] + [row[6]] for row in tanks.tolist()],
            "bullets": [[v / 100 for v in row[:4]] + [row[4]] for row in bullets.tolist()],
            "over": bool(self.over[i]),
            "winner": int(self.winner[i]),
        }

    def frames(self, rounds: Sequence[int] = ()) -> Iterator[dict[str, Any]]:
        """Every frame in order, or those of the given rounds."""
        for i in self.indices(rounds):
            yield self.frame(i)

    def indices(self, rounds: Sequence[int] = ()) -> list[int]:
        """Frame indices of the given rounds (all when empty), in recording order."""
        if not rounds:
            return list(range(self.n_frames))
        return [i for rnd in sorted(set(rounds)) for i in self.round_frames(rnd)]

    # --- files ---------------------------------------------------------------------------------

    def save(self, path: Path) -> int:
        """Write atomically (temp file, fsync, rename): a reader never sees half a file. Returns its size."""
        delta = self.tanks.astype(np.int32, copy=True)
        delta[1:] -= self.tanks[:-1]
        columns: dict[str, Any] = {
            "meta": np.frombuffer(json.dumps(self.meta).encode(), np.uint8),
            "round": self.round.astype(np.int32),
            "tick": self.tick.astype(np.int32),
            "over": self.over.astype(bool),
            "winner": self.winner.astype(np.int8),
            "tanks": delta,
            "bullet_count": self.bullet_count.astype(np.uint16),
            "bullets": self.bullets.astype(np.int32),
            "actions": self.actions.astype(np.float32),
        }
        write_atomic(Path(path), lambda f: np.savez_compressed(f, **columns))
        return Path(path).stat().st_size

    @classmethod
    def load(cls, path: Path, max_bytes: int | None = MAX_UNPACKED_BYTES) -> Recording:
        """Read a recording written by :meth:`save`.

        Args:
            max_bytes: largest uncompressed size accepted; ``None`` disables the check.

        Raises:
            FileNotFoundError: no such file.
            ReplayError: a foreign, truncated, corrupt or too new file (one readable line).
        """
        path = Path(path)
        with path.open("rb") as f:
            data = f.read()
        if not data.startswith(b"PK\x03\x04"):
            raise ReplayError(f"{path}: not an arena replay file (no .npz archive)")
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = {n.removesuffix(".npy") for n in archive.namelist()}
                unpacked = sum(info.file_size for info in archive.infolist())
            if "meta" not in names:
                raise ReplayError(f"{path}: not an arena replay file (an .npz without 'meta')")
            if max_bytes is not None and unpacked > max_bytes:
                raise ReplayError(f"{path}: unpacks to {unpacked:,} bytes, over the {max_bytes:,}-byte limit")
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                meta = _parse_meta(npz["meta"], path)
                missing = sorted(set(COLUMNS) - names)
                if missing:
                    raise ReplayError(f"{path}: corrupt arena replay: missing {', '.join(missing)}")
                arrays = {name: npz[name] for name in COLUMNS[1:]}
        except ReplayError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
            raise ReplayError(f"{path}: truncated or corrupt arena replay ({_reason(exc)})") from None
        if any(a.dtype.kind not in "iub" for a in arrays.values() if a is not arrays["actions"]):
            raise ReplayError(f"{path}: corrupt arena replay: a column is not integer")
        if arrays["actions"].dtype != np.float32:
            raise ReplayError(f"{path}: corrupt arena replay: actions are {arrays['actions'].dtype}, not float32")
        tanks = arrays["tanks"]
        if tanks.ndim >= 1:  # stored delta-coded along the frames
            tanks = tanks.astype(np.int64).cumsum(axis=0).astype(np.int32)
        try:
            return cls(
                meta=meta,
                round=arrays["round"].astype(np.int32),
                tick=arrays["tick"].astype(np.int32),
                over=arrays["over"].astype(bool),
                winner=arrays["winner"].astype(np.int8),
                tanks=tanks,
                bullet_count=arrays["bullet_count"].astype(np.uint16),
                bullets=arrays["bullets"].astype(np.int32),
                actions=arrays["actions"],
            )
        except ReplayError as exc:
            raise ReplayError(f"{path}: corrupt arena replay: {exc}") from None


def _parse_meta(raw: NDArray[Any], path: Path) -> dict[str, Any]:
    """The ``meta`` column as a dict, checked before any other column is trusted (one-line errors)."""
    try:
        meta = json.loads(raw.astype(np.uint8).tobytes())
    except (ValueError, UnicodeDecodeError):
        raise ReplayError(f"{path}: not an arena replay file (unreadable 'meta')") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ReplayError(
            f"{path}: not an arena replay file (format {meta.get('format') if isinstance(meta, dict) else None!r})"
        )
    version = meta.get("version")
    if not isinstance(version, int) or version < 1:
        raise ReplayError(f"{path}: corrupt arena replay: bad format version {version!r}")
    if version > VERSION:
        raise ReplayError(f"{path}: written by a newer arena (format version {version}; this one reads up to {VERSION})")
    header_ = meta.get("header")
    if not isinstance(header_, dict) or not isinstance(header_.get("names"), list) or not isinstance(meta.get("rules"), dict):
        raise ReplayError(f"{path}: corrupt arena replay: 'meta' lacks the header or the rules")
    if not isinstance(meta.get("seed"), int):
        raise ReplayError(f"{path}: corrupt arena replay: 'meta' lacks the seed")
    return meta


def _reason(exc: BaseException) -> str:
    """An exception as a short phrase for a one-line error (its first line, not a traceback)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _span(rounds: Sequence[int]) -> str:
    """Round numbers as ``1-3`` when consecutive, else ``1, 4``: for an error that lists them."""
    if not rounds:
        return "none"
    return (
        f"{rounds[0]}-{rounds[-1]}" if list(rounds) == list(range(rounds[0], rounds[-1] + 1)) else ", ".join(map(str, rounds))
    )
