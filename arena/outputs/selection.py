"""Which policy a run hands back: the best of its checkpoints by one evaluation, not simply the last.

Why: against the league the learner's policy moves in both directions, and a run's last policy
can be worse than an earlier one (docs/arena.md, "What the run hands back"). So while the run
trains, a copy of its newest checkpoint is taken every ``every`` seconds (a *candidate*) and
played against every scripted bot in a separate, low-priority process; at the end the final
checkpoint is played the same way (same rounds and battle seed: common random numbers, so two
candidates differ by their policies, not by their draws) and the one with the highest mean win
rate is returned. Both the returned and the last policy stay on disk.

Files under the run directory: ``candidates/ckpt-*.pt`` (+ manifests), copies of the checkpoints
under evaluation, of which only the returned one is kept at the end; ``returned.json``, read by
``arena.bots.policies.run_policy_checkpoint`` (``arena match --bot RUN_DIR``, ``arena export``,
``arena league``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bots.policies import RETURNED, newest_checkpoint

if TYPE_CHECKING:
    from ..games.tank.engines import EngineName

__all__ = ["CANDIDATES", "Candidate", "CandidateEvaluator", "choose", "score"]

CANDIDATES = "candidates"
"""The run directory's folder of candidate checkpoints."""
EVERY = 60.0
"""Seconds of training between two candidates: 4 in a 5-minute run besides the final policy. An
evaluation runs niced and costs a few seconds of one core, a small share of the run's CPU
(docs/arena.md, "What the run hands back")."""


def score(evaluation: dict[str, Any]) -> float:
    """A candidate's score: its mean win rate over the scripted bots (each weighs the same)."""
    rates = [float(row["win_rate"]) for row in evaluation["opponents"]]
    return sum(rates) / len(rates) if rates else 0.0


@dataclass(frozen=True)
class Candidate:
    """One evaluated checkpoint of the run."""

    checkpoint: Path
    version: int
    evaluation: dict[str, Any]
    seconds: float
    """Seconds into the run when it was taken."""
    final: bool = False

    @property
    def score(self) -> float:
        return score(self.evaluation)

    def as_dict(self, run: Path) -> dict[str, Any]:
        return {
            "version": self.version,
            "taken_at_s": round(self.seconds, 1),
            "final": self.final,
            "mean_win_rate": round(self.score, 4),
            "win_rates": {row["opponent"]: row["win_rate"] for row in self.evaluation["opponents"]},
            "checkpoint": _relative(self.checkpoint, run),
        }


def choose(candidates: Sequence[Candidate]) -> Candidate:
    """The highest mean win rate; a tie goes to the newer policy (it trained longer)."""
    if not candidates:
        raise ValueError("no candidates to choose from")
    return max(candidates, key=lambda c: (round(c.score, 6), c.version))


def _relative(path: Path, run: Path) -> str:
    try:
        return str(path.relative_to(run))
    except ValueError:
        return str(path)


def _init_worker() -> None:
    """Worker initializer: the evaluation takes what the learner and the bots leave, and ends with the run.

    Why the watch: a pool's worker waits on a queue whose writing end it holds itself, so when the
    run is killed (SIGKILL, a SIGTERM with no handler) nothing would ever wake it; it would sleep on
    as an orphan. A daemon thread waits on the parent's sentinel and exits with it.
    """
    with contextlib.suppress(OSError):  # not permitted: run at the same priority
        os.nice(10)
    parent = mp.parent_process()
    if parent is not None:

        def watch() -> None:
            parent.join()
            os._exit(0)

        threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _evaluate(
    path: Path, rounds: int, seed: int, ticks_per_round: int, opponents: Sequence[str], engine: EngineName
) -> dict[str, Any]:
    from .report import evaluate_against_scripted

    return evaluate_against_scripted(
        path, rounds_per_opponent=rounds, seed=seed, ticks_per_round=ticks_per_round, opponents=opponents, engine=engine
    )


def _copy_checkpoint(source: Path, directory: Path) -> Path:
    """Copy a checkpoint and its manifest (manifest last, each through a temporary name)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / source.name
    for src, dst in ((source, target), (source.with_suffix(".json"), target.with_suffix(".json"))):
        tmp = dst.with_name(f".{dst.name}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
    return target


def _version(checkpoint: Path) -> int:
    """The policy version in a checkpoint's name (``ckpt-<generation>-<version>.pt``)."""
    return int(checkpoint.stem.rsplit("-", 1)[1])


class CandidateEvaluator:
    """Takes and evaluates candidates while a run trains; picks the returned policy at its end.

    ``poll()`` is called from the run's watch loop (cheap: a clock check, a directory listing
    every ``every`` seconds); one evaluation is in flight at a time, in a spawned process at a
    lower priority, so the learner and the bots keep their cores.
    """

    def __init__(
        self,
        run: Path,
        rounds: int,
        seed: int,
        ticks_per_round: int,
        every: float = EVERY,
        opponents: Sequence[str] = ("sitting", "spinner", "walker", "tracker"),
        engine: EngineName = "numpy",
    ) -> None:
        """``opponents``: the scripted bots each candidate plays ``rounds`` rounds against (the score is the mean);
        ``engine``: the tank engine those rounds run on (the run's ``--engine``)."""
        if rounds < 1 or every <= 0 or not opponents:
            raise ValueError(f"rounds must be >= 1, every > 0 and opponents given, got {rounds}, {every}, {opponents}")
        self.run = run
        self.rounds = rounds
        self.opponents = tuple(opponents)
        self.seed = seed
        self.ticks_per_round = ticks_per_round
        self.engine: EngineName = engine
        self.every = every
        self.started = time.monotonic()
        self._next = self.started + every
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._in_flight: tuple[concurrent.futures.Future[dict[str, Any]], Path, float] | None = None
        self.candidates: list[Candidate] = []
        self.failures: list[str] = []

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=mp.get_context("spawn"), initializer=_init_worker
            )
        return self._pool

    def _collect(self, wait: bool) -> None:
        if self._in_flight is None:
            return
        future, path, taken = self._in_flight
        if not wait and not future.done():
            return
        self._in_flight = None
        try:
            evaluation = future.result()
        except Exception as exc:  # a broken candidate is left out, said once in the summary; the run goes on
            self.failures.append(f"{path.name}: {exc}")
            for file in (path, path.with_suffix(".json")):
                file.unlink(missing_ok=True)
            return
        self.candidates.append(Candidate(path, _version(path), evaluation, taken - self.started))

    def poll(self) -> None:
        """Collect a finished evaluation; take the next candidate when one is due and none is in flight."""
        self._collect(wait=False)
        now = time.monotonic()
        if now < self._next or self._in_flight is not None:
            return
        self._next = now + self.every
        try:
            newest = newest_checkpoint(self.run)
        except FileNotFoundError:  # no checkpoint yet
            return
        if any(c.checkpoint.name == newest.name for c in self.candidates):
            return
        try:
            path = _copy_checkpoint(newest, self.run / CANDIDATES)
        except OSError:  # pruned under us, or a full disk: the next poll tries again
            return
        future = self._executor().submit(
            _evaluate, path, self.rounds, self.seed, self.ticks_per_round, self.opponents, self.engine
        )
        self._in_flight = (future, path, now)

    def finish(self, final_checkpoint: Path | None, final_evaluation: dict[str, Any] | None) -> dict[str, Any]:
        """Wait for the evaluation in flight, choose, keep only the returned candidate, write ``returned.json``.

        ``final_evaluation``: the final checkpoint's evaluation, played with the same rounds and
        seed (``None``: not evaluated; the last policy is then returned only if nothing else was).
        Returns the record written (also ``summary.json``'s ``returned_policy``).
        """
        self._collect(wait=True)
        self.close()
        candidates = list(self.candidates)
        final = None
        if final_checkpoint is not None and final_evaluation is not None:
            final = Candidate(final_checkpoint, _version(final_checkpoint), final_evaluation,
                              time.monotonic() - self.started, final=True)  # fmt: skip
            candidates = [c for c in candidates if c.version != final.version] + [final]
        record = _record(self.run, candidates, final, final_checkpoint)
        keep = {Path(self.run / record["checkpoint"]).name} if record.get("checkpoint") else set()
        for candidate in self.candidates:
            if candidate.checkpoint.name not in keep:
                for path in (candidate.checkpoint, candidate.checkpoint.with_suffix(".json")):
                    path.unlink(missing_ok=True)
        if self.failures:
            record["evaluation_failures"] = self.failures
        write_record(self.run, record)
        return record

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _record(run: Path, candidates: list[Candidate], final: Candidate | None, final_checkpoint: Path | None) -> dict[str, Any]:
    if not candidates:
        if final_checkpoint is None:
            return {"checkpoint": None, "reason": "no checkpoint was written"}
        return {"checkpoint": _relative(final_checkpoint, run), "version": _version(final_checkpoint), "returned": "last",
                "reason": "the last policy: nothing was evaluated"}  # fmt: skip
    best = choose(candidates)
    returned = "last" if best is final else "best"
    checkpoint = best.checkpoint
    if best.final:  # a copy beside the others, so pruning the checkpoints (a --resume) never takes it away
        checkpoint = _copy_checkpoint(best.checkpoint, run / CANDIDATES)
    if final is None:
        reason = f"the best of {len(candidates)} candidates; the last policy was not evaluated"
    elif best is final:
        reason = f"the last policy scored highest of {len(candidates)} evaluated"
    else:
        reason = (f"v{best.version} scored {best.score:.0%} mean win rate against the scripted bots, "
                  f"the last policy (v{final.version}) {final.score:.0%}")  # fmt: skip
    return {
        "checkpoint": _relative(checkpoint, run),
        "version": best.version,
        "returned": returned,
        "reason": reason,
        "selection_mean_win_rate": round(best.score, 4),
        "evaluation": best.evaluation,
        "candidates": [c.as_dict(run) for c in sorted(candidates, key=lambda c: c.version)],
    }


def write_record(run: Path, record: dict[str, Any]) -> None:
    """Write ``returned.json`` atomically."""
    from ..league.store import atomic_write

    atomic_write(run / RETURNED, (json.dumps(record, indent=1) + "\n").encode())
