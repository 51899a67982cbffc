"""Ratings with uncertainty for the learner and every league member (openskill), and win rates over time.

openskill's Plackett-Luce model (a Bayesian rating, TrueSkill's family, MIT-licensed and
pure Python, cheap enough to rate every round) rates 1v1 rounds and free-for-alls alike, handles
draws, and carries each player's uncertainty ``sigma`` beside its skill ``mu``. Its
per-update ``tau`` keeps the learner's sigma from collapsing while the learner keeps
changing. Tables rank by the conservative ``ordinal`` (mu - 3 sigma), as openskill advises:
a member that played few rounds is not ranked above one known to be strong.

Members other than the learner only ever meet the learner during training, so their
training ratings say how they fared against the learner of their time; ``arena league
RUN_DIR`` plays a round-robin among all of them for ratings on a common footing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openskill.models import PlackettLuce

from .matchmaking import SELF, SNAPSHOT_PREFIX

__all__ = ["LEARNER", "LeagueTable", "Ratings", "RoundOutcome"]

LEARNER = "learner"
"""The name the learner (the policy in training) is rated under."""

RoundOutcome = tuple[str, str, float]
"""(player a, player b, a's outcome: 1 won, 0.5 drawn, 0 lost)."""


class Ratings:
    """openskill ratings of named players, updated one finished round at a time."""

    def __init__(self) -> None:
        self.model = PlackettLuce()
        self._players: dict[str, Any] = {}
        self.rounds: dict[str, int] = {}

    def _player(self, name: str) -> Any:
        if name not in self._players:
            self._players[name] = self.model.rating(name=name)
            self.rounds[name] = 0
        return self._players[name]

    def record(self, a: str, b: str, outcome: float) -> None:
        """One round between ``a`` and ``b``; ``outcome`` is a's (1 won, 0.5 drawn, 0 lost)."""
        if a == b:
            raise ValueError(f"a player cannot be rated against itself ({a!r})")
        ranks = [0.0, 0.0] if outcome == 0.5 else ([0.0, 1.0] if outcome > 0.5 else [1.0, 0.0])
        [[ra], [rb]] = self.model.rate([[self._player(a)], [self._player(b)]], ranks=ranks)
        self._players[a], self._players[b] = ra, rb
        self.rounds[a] += 1
        self.rounds[b] += 1

    def record_all(self, outcomes: Iterable[RoundOutcome]) -> None:
        for a, b, outcome in outcomes:
            self.record(a, b, outcome)

    def table(self) -> list[dict[str, Any]]:
        """Every player, best first by ordinal (mu - 3 sigma)."""
        rows = [
            {"name": name, "mu": round(r.mu, 2), "sigma": round(r.sigma, 2), "ordinal": round(r.ordinal(), 2),
             "rounds": self.rounds[name]}
            for name, r in self._players.items()
        ]  # fmt: skip
        return sorted(rows, key=lambda row: -row["ordinal"])

    def state_dict(self) -> dict[str, Any]:
        return {name: {"mu": r.mu, "sigma": r.sigma, "rounds": self.rounds[name]} for name, r in self._players.items()}

    @classmethod
    def from_state(cls, state: Mapping[str, Mapping[str, float]]) -> Ratings:
        ratings = cls()
        for name, saved in state.items():
            ratings._players[name] = ratings.model.rating(mu=float(saved["mu"]), sigma=float(saved["sigma"]), name=name)
            ratings.rounds[name] = int(saved.get("rounds", 0))
        return ratings


BEATEN = 0.7
"""A recent win rate at which an opponent counts as beaten (after :data:`SETTLED` rounds)."""
COLLAPSED = 0.5
"""A recent win rate below which a beaten opponent counts as lost again: the learner collapsed against it."""
SETTLED = 30
"""Rounds against an opponent before its recent win rate is trusted (it starts at 0.5, worth two rounds)."""


@dataclass
class _Record:
    rounds: int = 0
    wins: int = 0
    draws: int = 0
    recent: float = 0.5
    """Moving average of the learner's wins against this opponent (window ~100 rounds; a draw is no win)."""
    beaten: bool = False
    """The learner beat this opponent (recent >= BEATEN) and has not lost it since."""
    best: float = 0.0
    """The highest settled recent win rate (what the learner had reached against it)."""

    def add(self, won: bool, drawn: bool) -> bool:
        """Count one round; True when it makes a beaten opponent lost again (a collapse)."""
        self.rounds += 1
        self.wins += bool(won)
        self.draws += bool(drawn)
        self.recent += (float(won) - self.recent) / min(self.rounds + 2, 100)
        if self.rounds < SETTLED:
            return False
        self.best = max(self.best, self.recent)
        if self.recent >= BEATEN:
            self.beaten = True
        elif self.beaten and self.recent < COLLAPSED:
            self.beaten = False
            return True
        return False

    def summary(self) -> dict[str, Any]:
        win_rate = round(self.wins / self.rounds, 4) if self.rounds else None
        return {"rounds": self.rounds, "wins": self.wins, "draws": self.draws, "win_rate": win_rate,
                "recent_win_rate": round(self.recent, 4)}  # fmt: skip


@dataclass
class LeagueTable:
    """The training server side of a league: ratings and win rates from every finished round.

    Fed with the rounds the learning bots report (``MatchLog``'s listener), from whichever
    thread reports them; read by the progress line, the metrics rows and the summary.
    """

    ratings: Ratings = field(default_factory=Ratings)
    records: dict[str, _Record] = field(default_factory=dict)
    snapshots: _Record = field(default_factory=lambda: _Record())
    """All rounds against snapshots, together."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    _saved_at: float = field(default_factory=time.monotonic)
    collapses: int = 0
    """Times the learner lost an opponent it had beaten (scripted and file members; snapshots move on)."""
    _warnings: list[str] = field(default_factory=list)

    def add(self, results: Sequence[tuple[bool, float, str, bool]]) -> None:
        """Rounds (won, score, opponent, drawn) of the learner; ``self`` rounds are not rated."""
        with self.lock:
            for won, _, opponent, drawn in results:
                outcome = 0.5 if drawn else float(won)
                record = self.records.setdefault(opponent, _Record())
                collapsed = record.add(won, drawn)
                if opponent.startswith(SNAPSHOT_PREFIX):  # and all snapshots together, for the charts
                    self.snapshots.add(won, drawn)
                elif collapsed and opponent != SELF:
                    self.collapses += 1
                    self._warnings.append(
                        f"warning: the learner no longer beats {opponent} (recent win rate {record.recent:.0%}, "
                        f"it had reached {record.best:.0%}); the league plays it more until it does again"
                    )
                if opponent != SELF:
                    self.ratings.record(LEARNER, opponent, outcome)

    def warnings(self) -> list[str]:
        """Collapse warnings since the last call (one line each), for the run's output."""
        with self.lock:
            found, self._warnings = self._warnings, []
        return found

    def lost(self) -> list[str]:
        """Opponents the learner had beaten and lost since, and not beaten again yet."""
        with self.lock:
            return sorted(n for n, r in self.records.items() if r.best >= BEATEN and not r.beaten
                          and not n.startswith(SNAPSHOT_PREFIX) and n != SELF)  # fmt: skip

    def metrics(self) -> dict[str, float]:
        """``league/rating/NAME`` (ordinal) and ``league/win_rate/NAME`` (recent) for a metrics row.

        Snapshots come and go (dozens in a long run), so they appear together, as
        ``league/win_rate/snapshots``: a row keeps a bounded number of keys.
        """
        with self.lock:
            rows = [r for r in self.ratings.table() if not r["name"].startswith(SNAPSHOT_PREFIX)]
            row = {f"league/rating/{r['name']}": r["ordinal"] for r in rows}
            records = [(n, r) for n, r in self.records.items() if not n.startswith(SNAPSHOT_PREFIX)]
            if self.snapshots.rounds:
                records.append(("snapshots", self.snapshots))
            row |= {f"league/win_rate/{name}": round(r.recent, 4) for name, r in records}
            row["league/collapses"] = self.collapses
        return row

    def leader_line(self, top: int = 3) -> str:
        """The progress line's part: the learner's rating and rank, and the top of the table."""
        with self.lock:
            table = self.ratings.table()
        if not table:
            return "league: no rounds yet"
        rank = next((i for i, r in enumerate(table) if r["name"] == LEARNER), None)
        best = ", ".join(f"{r['name']} {r['mu']:.1f}±{r['sigma']:.1f}" for r in table[:top])
        where = f"learner #{rank + 1}/{len(table)}" if rank is not None else "learner unrated"
        return f"{where}; top: {best}"

    def summary(self) -> dict[str, Any]:
        with self.lock:
            return {
                "ratings": self.ratings.table(),
                "opponents": {name: r.summary() for name, r in sorted(self.records.items())},
                "collapses": self.collapses,
            }

    def save(self, path: Path) -> None:
        """Write the table to ``path`` atomically (``OUT/league/table.json``; ``--resume`` reads it)."""
        from .store import atomic_write

        atomic_write(path, (json.dumps(self.state_dict()) + "\n").encode())
        self._saved_at = time.monotonic()

    def save_every(self, path: Path, seconds: float) -> None:
        """:meth:`save` if the last save is at least ``seconds`` old."""
        if time.monotonic() - self._saved_at >= seconds:
            self.save(path)

    def state_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"ratings": self.ratings.state_dict(), "snapshots": vars(self.snapshots).copy(),
                    "records": {n: vars(r).copy() for n, r in self.records.items()}}  # fmt: skip

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LeagueTable:
        try:
            records = {n: _Record(**r) for n, r in state["records"].items()}
            return cls(Ratings.from_state(state["ratings"]), records, _Record(**state.get("snapshots", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a league table: {exc}") from None
