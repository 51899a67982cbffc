"""``arena worker``'s plan: every flag checked once, into the learning bot it plays and its budget.

:meth:`WorkerPlan.from_flags` is the only reader of the parsed flags: a bad URL is one line and exit 2
before anything starts, and what the command line leaves open (the bot's name, its seed, its
opponents) is decided here. The run (:mod:`arena.commands.worker_run`) reads the plan only.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..bots.spec import LearningBotSpec
from .options import check_scripted_name

__all__ = ["WorkerPlan"]


@dataclass(frozen=True)
class WorkerPlan:
    """One ``arena worker``, decided: the learning bot it plays and when it stops."""

    spec: LearningBotSpec
    """The bot: the server's URL and token, its name, opponents, matches, seed, engine and ``--rounds``."""
    minutes: float | None
    """``--minutes``: stop after this long (None: at ``--rounds``, or never)."""

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def budget(self) -> str:
        """When the worker stops, in words."""
        if self.minutes is not None:
            return f"{self.minutes:g} min"
        return f"{self.spec.rounds} rounds" if self.spec.rounds is not None else "until stopped"

    def describe(self) -> str:
        """The worker's first line: who it is, whom it plays, how many matches on which engine, its seed and budget."""
        spec = self.spec
        return (
            f"arena worker: {spec.name!r} vs {', '.join(spec.opponents)}, {spec.n_matches} matches ({spec.engine} engine), "
            f"seed {spec.seed}, {self.budget}; server {spec.url}"
        )

    @classmethod
    def from_flags(cls, flags: argparse.Namespace) -> WorkerPlan:
        """The plan of ``arena worker``'s parsed ``flags`` (read, never written).

        Raises:
            ValueError: the URL or another value the bot cannot use (one line for the user).
        """
        import random
        import socket

        from bot_protocol.client import ClientConfig

        from ..games.tank.actions import ACT_DIM
        from ..games.tank.observation import OBS_DIM

        for opponent in flags.opponent or ():
            check_scripted_name(opponent)
        name = flags.name or f"worker-{socket.gethostname()}"
        ClientConfig(flags.url, name, OBS_DIM, ACT_DIM, n_agents=flags.matches, token=flags.token)  # bad URL: one line now
        seed = flags.seed if flags.seed is not None else random.SystemRandom().randrange(2**31)
        spec = LearningBotSpec(
            flags.url, tuple(flags.opponent or ["sitting"]), flags.matches, flags.ticks_per_round, flags.token, seed, name,
            rounds=flags.rounds, engine=flags.engine,  # numba importable: checked by the command line (arena/cli.py)
        )  # fmt: skip
        return cls(spec, flags.minutes)
