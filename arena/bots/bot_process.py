"""``arena gym``'s own bot in a child process: the game's Python and the policy off the trainer's GIL.

Why a process: ``arena gym ENV`` without ``--url`` runs its server, its trainer and its bot on one
machine. In one interpreter they share one GIL, so the run used one core of two: LunarLander-v3
trained at 1,900 environment steps/s in one process and at about 8,400 with the bot in its own
(1 M steps, 2 cores; the game alone steps at 17,500 a second). The child is an ordinary websocket bot of the server
(spawned, so it inherits nothing), plays ``steps`` environment steps (or learner rows, for a
turn-based game) and reports what it played every ``chunk`` through a queue; it ends by itself
when the parent dies (:func:`~arena.bots.parent_watch.die_with_parent`), and an error in it comes
back to the parent as one line.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .parent_watch import Parent, die_with_parent

__all__ = ["BotJob", "BotProcess", "BotProcessError", "Played"]

POLL = 0.5
"""Seconds between the parent's looks at whether a silent child is still alive."""


@dataclass(frozen=True)
class BotJob:
    """What the child plays: a gymnasium id (``turns=False``) or a PettingZoo module path, against the server at ``url``."""

    url: str
    env: str
    n_envs: int
    seed: int
    name: str
    steps: int
    """Environment steps (a gymnasium game) or learner rows (a turn-based game) in all."""
    chunk: int
    """Steps between two reports."""
    turns: bool = False
    opponent: str = "self"
    """Turn-based games: ``self``, ``random``, ``past`` or a policy's file."""
    opening: int = 0
    """Turn-based games: each game opens with up to this many random moves (:class:`~.turn_bot.TurnGameBot`)."""

    def __post_init__(self) -> None:
        if self.steps < 0 or self.chunk < 1 or self.n_envs < 1 or self.opening < 0:
            raise ValueError(f"a bot job needs steps >= 0, chunk >= 1, n_envs >= 1 and opening >= 0: {self}")


@dataclass
class Played:
    """One report of the child: what it played since the previous one."""

    steps: int
    returns: list[float] = field(default_factory=list)
    """Undiscounted returns of the episodes that ended (gymnasium games)."""
    games: int = 0
    """Games played so far (turn-based games)."""
    illegal_moves: int = 0
    """Illegal moves so far (turn-based games)."""


class BotProcessError(RuntimeError):
    """The child failed; the message is its error in one line."""


def _play(job: BotJob, reports: Any) -> None:
    """The child's work: build the bot, play ``job.steps`` in chunks, report each."""
    if job.turns:
        from .policies import load_policy
        from .turn_bot import PAST, RANDOM, SELF, TurnGameBot, load_turn_game

        opponent: Any = job.opponent if job.opponent in (SELF, RANDOM, PAST) else load_policy(Path(job.opponent))
        turn_bot = TurnGameBot(job.url, load_turn_game(job.env), n_games=job.n_envs, opponent=opponent,
                               seed=job.seed, name=job.name, opening=job.opening)  # fmt: skip
        with turn_bot:
            done = 0
            while done < job.steps:
                rows = turn_bot.run(min(job.chunk, job.steps - done))
                done += rows
                reports.put(("played", Played(rows, [], turn_bot.games_played, turn_bot.illegal_moves)))
        return
    from .gym_bot import GymBot, make_env

    bot = GymBot(job.url, make_env(job.env, job.n_envs), seed=job.seed, name=job.name)
    with bot:
        done = 0
        while done < job.steps:
            result = bot.run(min(job.chunk, job.steps - done))
            done += result.steps
            reports.put(("played", Played(result.steps, list(result.episode_returns))))


def _child_main(job: BotJob, reports: Any, parent: Parent) -> None:
    die_with_parent(parent)
    try:
        _play(job, reports)
    except KeyboardInterrupt:
        reports.put(("error", "interrupted"))
    except BaseException as exc:  # every failure goes back to the parent as one line
        reports.put(("error", f"{type(exc).__name__}: {exc}"))
    else:
        reports.put(("end", None))


class BotProcess:
    """One bot playing ``job`` in a spawned child; iterate over it for its reports, in order, until it ends.

    Use as a context manager: leaving it (normally, on an error or Ctrl-C) ends the child.
    """

    def __init__(self, job: BotJob) -> None:
        self.job = job
        self._context = mp.get_context("spawn")
        self._reports: Any = self._context.Queue()
        self._process: Any = None

    def __enter__(self) -> BotProcess:
        self._process = self._context.Process(
            target=_child_main, args=(self.job, self._reports, Parent.here()), name="arena-gym-bot", daemon=True
        )
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        process = self._process
        if process is None:
            return
        process.join(5.0 if exc[0] is None else 0.5)
        if process.is_alive():
            process.terminate()
            process.join(5.0)
        with contextlib.suppress(Exception):
            self._reports.close()
            self._reports.join_thread()

    def __iter__(self) -> Iterator[Played]:
        """The child's reports until it has played its steps.

        Raises:
            BotProcessError: the child failed (its error in one line) or died without a word.
        """
        while True:
            try:
                kind, payload = self._reports.get(timeout=POLL)
            except queue.Empty:
                if self._process.is_alive():
                    continue
                try:  # it may have said its last word just before it ended
                    kind, payload = self._reports.get(timeout=POLL)
                except queue.Empty:
                    raise BotProcessError(f"the bot process died (exit code {self._process.exitcode})") from None
            if kind == "played":
                yield payload
            elif kind == "end":
                return
            else:
                raise BotProcessError(f"the bot process failed: {payload}")
