"""``arena gym``'s own bots in child processes: the game's Python and the policy off the trainer's GIL.

Why a process: ``arena gym ENV`` without ``--url`` runs its server, its trainer and its bot on one
machine. In one interpreter they share one GIL, so the run used one core of two: LunarLander-v3
trained at 1,900 environment steps/s in one process and at about 8,400 with the bot in its own
(1 M steps, 2 cores; the game alone steps at 17,500 a second). The child is an ordinary websocket bot of the server
(spawned, so it inherits nothing), plays ``steps`` environment steps (or learner rows, for a
turn-based game) and reports what it played every ``chunk`` through a queue; it ends by itself
when the parent dies (:func:`~arena.bots.parent_watch.die_with_parent`), and an error in it comes
back to the parent as one line.

With the learner's step written out (``agents.ppo.fused``), one bot no longer keeps the learner busy:
connect four trained 8,500 moves a second with the learner's thread at about 13% of a core, the
bot's process at 100% of the other. :meth:`BotJob.split` shares a job's games and steps among
several children, which play side by side against the same server (``arena gym --workers``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
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
    mirror: bool = False
    """Turn-based board games: every row is also sent mirrored (:class:`~.turn_bot.TurnGameBot`)."""

    def __post_init__(self) -> None:
        if self.steps < 0 or self.chunk < 1 or self.n_envs < 1 or self.opening < 0:
            raise ValueError(f"a bot job needs steps >= 0, chunk >= 1, n_envs >= 1 and opening >= 0: {self}")

    def split(self, processes: int) -> list[BotJob]:
        """This job shared among ``processes`` children: the games (``n_envs``) and the steps in proportion, each
        child its own seed and name. The first child keeps this job's seed and name, so one process plays
        exactly this job.

        Raises:
            ValueError: fewer than one process, or more processes than games.
        """
        if not 1 <= processes <= self.n_envs:
            raise ValueError(f"{processes} bot processes for {self.n_envs} game(s): need 1 to {self.n_envs}")
        games = [self.n_envs // processes + (i < self.n_envs % processes) for i in range(processes)]
        steps = [self.steps * g // self.n_envs for g in games]
        steps[0] += self.steps - sum(steps)  # the rounding's remainder, so the children play exactly ``steps``
        return [
            replace(self, n_envs=g, steps=s, seed=self.seed + 1_000_003 * i, name=self.name if i == 0 else f"{self.name}{i}")
            for i, (g, s) in enumerate(zip(games, steps, strict=True))
        ]


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


def _play(job: BotJob, reports: Any, index: int) -> None:
    """The child's work: build the bot, play ``job.steps`` in chunks, report each (tagged with its ``index``)."""
    if job.turns:
        from .policies import load_policy
        from .turn_bot import PAST, RANDOM, SELF, TurnGameBot, TurnPlay, load_turn_game

        opponent: Any = job.opponent if job.opponent in (SELF, RANDOM, PAST) else load_policy(Path(job.opponent))
        play = TurnPlay(opponent, job.opening, job.mirror)
        turn_bot = TurnGameBot(job.url, load_turn_game(job.env), n_games=job.n_envs, seed=job.seed, name=job.name, play=play)
        with turn_bot:
            done = 0
            while done < job.steps:
                rows = turn_bot.run(min(job.chunk, job.steps - done))
                done += rows
                reports.put(("played", index, Played(rows, [], turn_bot.games_played, turn_bot.illegal_moves)))
        return
    from .gym_bot import GymBot, make_env

    bot = GymBot(job.url, make_env(job.env, job.n_envs), seed=job.seed, name=job.name)
    with bot:
        done = 0
        while done < job.steps:
            result = bot.run(min(job.chunk, job.steps - done))
            done += result.steps
            reports.put(("played", index, Played(result.steps, list(result.episode_returns))))


def _child_main(job: BotJob, reports: Any, parent: Parent, index: int) -> None:
    die_with_parent(parent)
    try:
        _play(job, reports, index)
    except KeyboardInterrupt:
        reports.put(("error", index, "interrupted"))
    except BaseException as exc:  # every failure goes back to the parent as one line
        reports.put(("error", index, f"{type(exc).__name__}: {exc}"))
    else:
        reports.put(("end", index, None))


class BotProcess:
    """``job`` played by ``processes`` spawned children (:meth:`BotJob.split`); iterate over it for their
    reports, in the order they arrive, until every child has played its steps. A report's ``games`` and
    ``illegal_moves`` are the totals of all children so far.

    Use as a context manager: leaving it (normally, on an error or Ctrl-C) ends the children.
    """

    def __init__(self, job: BotJob, processes: int = 1) -> None:
        self.jobs = job.split(processes)
        self._context = mp.get_context("spawn")
        self._reports: Any = self._context.Queue()
        self._processes: list[Any] = []

    def __enter__(self) -> BotProcess:
        parent = Parent.here()
        for index, job in enumerate(self.jobs):
            name = "arena-gym-bot" if index == 0 else f"arena-gym-bot-{index}"
            process = self._context.Process(
                target=_child_main, args=(job, self._reports, parent, index), name=name, daemon=True
            )
            process.start()
            self._processes.append(process)
        return self

    def __exit__(self, *exc: object) -> None:
        wait = 5.0 if exc[0] is None else 0.5
        for process in self._processes:
            process.join(wait)
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(5.0)
        with contextlib.suppress(Exception):
            self._reports.close()
            self._reports.join_thread()

    def __iter__(self) -> Iterator[Played]:
        """The children's reports until each has played its steps.

        Raises:
            BotProcessError: a child failed (its error in one line) or died without a word.
        """
        running = set(range(len(self._processes)))
        totals = {index: (0, 0) for index in running}  # (games, illegal moves) of each child so far
        while running:
            try:
                kind, index, payload = self._reports.get(timeout=POLL)
            except queue.Empty:
                dead = [i for i in running if not self._processes[i].is_alive()]
                if not dead:
                    continue
                try:  # it may have said its last word just before it ended
                    kind, index, payload = self._reports.get(timeout=POLL)
                except queue.Empty:
                    code = self._processes[dead[0]].exitcode
                    raise BotProcessError(f"the bot process died (exit code {code})") from None
            if kind == "played":
                totals[index] = (payload.games, payload.illegal_moves)
                payload.games = sum(games for games, _ in totals.values())
                payload.illegal_moves = sum(illegal for _, illegal in totals.values())
                yield payload
            elif kind == "end":
                running.discard(index)
            else:
                raise BotProcessError(f"the bot process failed: {payload}")
