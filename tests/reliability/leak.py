"""A memory-leak detector over tracemalloc snapshots, with Ray RLlib's rule (cases L2 and L3).

Method (RLlib ``rllib/utils/debug/memory.py``, ``_test_some_code_for_memory_leaks`` and
``_find_memory_leaks_in_table``; its self-test is ``rllib/algorithms/tests/test_memory_leaks.py``):

1. ``tracemalloc.start(20)``; run one unit of work, take a snapshot, repeat ``repeats`` times.
2. Group each snapshot's live blocks by allocation traceback (``statistics("traceback")``)
   and append each group's total size to that traceback's history: always for the 100
   largest groups, and for the next 900 only in the first trial or if already suspect.
3. A traceback is a **suspect** when its size grew over the trial
   (``increase = hist[-1] - hist[0]``) by more than 1000 bytes **and** the least-squares
   line through ``hist`` (x = sample index) has

   - slope > 10 bytes per sample, or
   - slope > 6 and Pearson r > 0.8, or
   - slope > 4 and r > 0.6.

   Tracebacks whose innermost frame is in ``tracemalloc`` or in this module are ignored.
4. If a trial found suspects, tracemalloc is restarted and another trial runs with
   ``repeats * (trial + 1)`` samples (at most ``max_trials``); only the suspects of the
   last trial count. A clean trial ends the check at once.

Additions for a live server (each one kept a clean server from tripping the rule here):

- ``gc.collect()`` before every snapshot. Besides cycles, a full collection empties
  CPython's free lists (dict, float, list, ...), whose parked blocks otherwise stay
  traced at whichever site first allocated them and drift from site to site.
- ``warmup`` steps after each ``tracemalloc.start``, before the first sample, so bounded
  structures being refilled with traced objects (a ``deque(maxlen=100)``) are full.
- ``ignore``: more innermost-file fragments to skip, for the caller's known caches (the
  load tests pass numpy's: it keeps freed small buffers cached and still traced).

RLlib calls one deterministic piece of code per sample. A live server is not
deterministic, so the load harness makes each unit of work end in the same state
(every bot has sent the same whole number of frame cycles and the server has consumed
all of it) before each snapshot; see ``Quiescer`` in ``test_load.py``.
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["LeakDetector", "Suspect", "check_for_leaks", "find_suspects", "is_suspect", "linear_fit"]

MIN_INCREASE = 1000
"""Bytes a traceback must have grown by over a trial (RLlib: ``memory_increase > 1000``)."""
TOP = 100
"""Groups always recorded per snapshot."""
MORE = 1000
"""Groups recorded in the first trial, or when already suspect."""
FRAMES = 20
"""Stack depth tracemalloc records (RLlib: ``tracemalloc.start(20)``)."""

_IGNORED = ("tracemalloc", __file__.rsplit("/", 2)[-2] + "/leak.py")


@dataclass(frozen=True)
class Suspect:
    """One allocation site flagged by the rule."""

    traceback: tracemalloc.Traceback
    increase: int
    slope: float
    rvalue: float
    hist: tuple[int, ...]

    def describe(self) -> str:
        where = self.traceback[-1] if len(self.traceback) else "?"
        return (
            f"{where}: +{self.increase} B, slope {self.slope:.1f} B/sample, r {self.rvalue:.2f} over {len(self.hist)} samples"
        )


def linear_fit(values: Iterable[float]) -> tuple[float, float]:
    """(slope, Pearson r) of the least-squares line through ``values`` at x = 0, 1, 2, … (scipy's linregress)."""
    ys = [float(v) for v in values]
    n = len(ys)
    if n < 2:
        return 0.0, 0.0
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in range(n))
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys))
    syy = sum((y - mean_y) ** 2 for y in ys)
    slope = sxy / sxx
    r = sxy / math.sqrt(sxx * syy) if syy > 0 else 0.0
    return slope, r


def is_suspect(hist: Iterable[int]) -> tuple[bool, int, float, float]:
    """RLlib's rule on one size history: (suspect?, increase, slope, r)."""
    values = list(hist)
    if len(values) < 2:
        return False, 0, 0.0, 0.0
    increase = values[-1] - values[0]
    if increase <= 0:
        return False, increase, 0.0, 0.0
    slope, r = linear_fit(values)
    flagged = increase > MIN_INCREASE and (slope > 10.0 or (slope > 6.0 and r > 0.8) or (slope > 4.0 and r > 0.6))
    return flagged, increase, slope, r


def find_suspects(table: dict[tracemalloc.Traceback, list[int]], ignore: tuple[str, ...] = ()) -> list[Suspect]:
    """Every traceback in ``table`` the rule flags, largest increase first.

    A traceback whose innermost frame's file name contains one of ``_IGNORED`` (tracemalloc,
    this module) or of ``ignore`` is skipped, as RLlib skips its own module.
    """
    found = []
    for traceback, hist in table.items():
        if len(traceback) and any(part in traceback[-1].filename for part in (*_IGNORED, *ignore)):
            continue
        flagged, increase, slope, r = is_suspect(hist)
        if flagged:
            found.append(Suspect(traceback, increase, slope, r, tuple(hist)))
    return sorted(found, key=lambda s: s.increase, reverse=True)


class LeakDetector:
    """Collects per-traceback size histories from tracemalloc snapshots (one trial at a time)."""

    def __init__(self, frames: int = FRAMES, ignore: tuple[str, ...] = ()) -> None:
        self.frames = frames
        self.ignore = ignore
        self.table: dict[tracemalloc.Traceback, list[int]] = defaultdict(list)
        self.samples = 0
        self.trial = 0
        self.suspicious: set[tracemalloc.Traceback] = set()
        self.snapshot_seconds: list[float] = []
        """Wall time of each ``take_snapshot`` + grouping (the process is stalled meanwhile)."""

    def start_trial(self) -> None:
        """Start tracing afresh and begin a new table."""
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        tracemalloc.start(self.frames)
        self.new_table()

    def new_table(self) -> None:
        self.table = defaultdict(list)
        self.samples = 0

    def sample(self) -> None:
        """Take one snapshot and append each recorded group's size."""
        started = time.perf_counter()
        gc.collect()  # a full collection also empties CPython's free lists (see the module docstring)
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("traceback")
        for stat in stats[:TOP]:
            self.table[stat.traceback].append(stat.size)
        for stat in stats[TOP:MORE]:
            if self.trial == 0 or stat.traceback in self.suspicious:
                self.table[stat.traceback].append(stat.size)
        self.samples += 1
        self.snapshot_seconds.append(time.perf_counter() - started)

    def end_trial(self) -> list[Suspect]:
        """The suspects of the table so far; they are also kept beyond the top 100 in the next table."""
        suspects = find_suspects(self.table, self.ignore)
        self.suspicious = {s.traceback for s in suspects}
        self.trial += 1
        return suspects

    def stop(self) -> None:
        if tracemalloc.is_tracing():
            tracemalloc.stop()


def check_for_leaks(
    step: Callable[[], None],
    repeats: int,
    max_trials: int = 3,
    warmup: int = 0,
    frames: int = FRAMES,
    ignore: tuple[str, ...] = (),
) -> tuple[list[Suspect], LeakDetector]:
    """RLlib's ``_test_some_code_for_memory_leaks``: run ``step`` and snapshot, in up to ``max_trials`` trials.

    Each trial restarts tracemalloc (as RLlib does), runs ``warmup`` extra steps (each followed
    by a full collection) and then ``repeats * (trial + 1)`` steps, each followed by a sample.
    A clean trial ends the check. Returns the last trial's suspects (empty: no leak) and the
    detector (for its figures).
    """
    detector = LeakDetector(frames, ignore)
    suspects: list[Suspect] = []
    try:
        for trial in range(max_trials):
            detector.start_trial()
            for _ in range(warmup):
                step()
                gc.collect()
            for _ in range(repeats * (trial + 1)):
                step()
                detector.sample()
            suspects = detector.end_trial()
            if not suspects:
                break
    finally:
        detector.stop()
    return suspects, detector
