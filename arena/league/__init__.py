"""A league of opponents for the tank arena: self-play, PFSP matchmaking and openskill ratings.

* :mod:`.matchmaking`: the members and the rule that draws each match's next opponent (sans-I/O).
* :mod:`.seats`: one tank slot of many matches, each match with its own controller, batched.
* :mod:`.opponents`: the league acting as tank 1 of a learning bot's matches; snapshots of the learner.
* :mod:`.store`: the league on disk (``OUT/league/``), for ``--resume`` and ``arena league``.
* :mod:`.ratings`: openskill ratings and win rates of every member, on the server side.
* :mod:`.round_robin`: every pair of bots plays, rated by one Bradley-Terry fit (Elo) on a common footing.

docs/arena.md, "The league", describes the rule and its parameters.
"""

from __future__ import annotations

from .matchmaking import SELF, League, LeagueConfig, Member, snapshot_name
from .opponents import LeagueOpponents, LeagueSpec
from .ratings import LEARNER, LeagueTable, Ratings
from .round_robin import cross_table, rate, round_robin
from .store import LeagueStore

__all__ = [
    "LEARNER",
    "SELF",
    "League",
    "LeagueConfig",
    "LeagueOpponents",
    "LeagueSpec",
    "LeagueStore",
    "LeagueTable",
    "Member",
    "Ratings",
    "cross_table",
    "rate",
    "round_robin",
    "snapshot_name",
]
