"""The league's side of a learning bot: tank 1 of every match, drawn from the league at each round start.

Runs inside the arena process that plays the learner's matches (a worker process or a bot
thread). Snapshots are frozen copies of the numpy ``Policy`` this bot already acts with
(each weights swap installs a new object, so keeping a reference freezes it), so they never
talk to the server and cost one batched forward per snapshot in play per tick.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from bot_protocol import Policy

from ..bots.play import Controller, PolicyController, ScriptedController
from ..games.tank.actions import ACT_DIM
from ..games.tank.engines import EngineName
from ..games.tank.events import StepInfo
from .matchmaking import DRAWN, SELF, League, LeagueConfig, Member
from .seats import MixedSeat
from .store import LeagueStore

if TYPE_CHECKING:
    from ..games.tank.drawn import Drawn  # its kernels import numba, which a numpy-only run never needs

__all__ = ["SAVE_EVERY", "LeagueOpponents", "LeagueSpec", "outcomes"]

SAVE_EVERY = 10.0
"""Seconds between two saves of the league's state (and at every snapshot, and at the end)."""


def outcomes(info: StepInfo, matches: NDArray[np.intp]) -> NDArray[np.float64]:
    """The learner's (tank 0's) result of each ended match: 1 won, 0.5 drawn, 0 lost."""
    winner = info.winner[matches]
    return np.where(winner == 0, 1.0, np.where(winner < 0, 0.5, 0.0))


@dataclass(frozen=True)
class LeagueSpec:
    """Everything a learning bot needs to build its league (picklable, for worker processes).

    ``files`` maps member names to policy files (``--opponent FILE``); ``directory`` (if any)
    holds the saved league (:class:`LeagueStore`), reloaded when ``resume`` is set.
    """

    config: LeagueConfig = field(default_factory=LeagueConfig)
    scripted: tuple[str, ...] = ("sitting", "spinner", "walker", "tracker")
    files: tuple[tuple[str, str], ...] = ()
    directory: Path | None = None
    resume: bool = False
    exclusive: bool = True

    def describe(self) -> str:
        """One line for the start-up message."""
        c = self.config
        ladder = ", ".join(c.ladder_of(self.scripted)) if c.scripted else "no scripted bots"
        parts = [ladder, *(name for name, _ in self.files)]
        if c.drawn:
            replay = f", {c.drawn_replay:.0%} replaying the unbeaten" if c.drawn_replay else ""
            parts.insert(1, f"{c.drawn_source} (new parts every round{replay})")
        if c.max_snapshots:
            parts.append(f"up to {c.max_snapshots} snapshots, one every {c.snapshot_every} updates")
        if c.self_share:
            parts.append(f"self-play {c.self_share:.0%}")
        return "; ".join(parts) + (", resumed" if self.resume else "")

    def build(self, n_matches: int, seed: int, worker: int = 0, engine: EngineName = "numpy") -> LeagueOpponents:
        """The league's opponents for ``n_matches`` matches (the saved league when resuming); scripted bots on ``engine``.

        Raises:
            FileNotFoundError, ValueError: a policy file or the saved state cannot be loaded.
        """
        from ..bots.policies import load_policy

        store = None if self.directory is None else LeagueStore(self.directory, worker, self.exclusive)
        loaded = store.load(self.config) if store is not None and self.resume else None
        policies: dict[str, Policy] = {}
        for name, path in self.files:
            policies[name] = load_policy(Path(path))
        if loaded is not None:
            league, snapshots = loaded
            policies |= snapshots
            for member in league.members:  # files of the saved league not given again on resume
                if member.kind == "file" and member.name not in policies:
                    policies[member.name] = load_policy(Path(member.source))
            for name, path in self.files:  # files given now that the saved league did not have
                if all(m.name != name for m in league.members):
                    league.members.insert(len(league.opponents()), Member(name, "file", path))
        else:
            league = League.start(self.config, self.scripted, dict(self.files))
        return LeagueOpponents(league, n_matches, seed, policies, store, engine)


class LeagueOpponents:
    """Tank 1 of ``n_matches`` matches, each match's opponent drawn from ``league`` per round.

    The interface :func:`arena.bots.play.play_learning_bot` drives: ``names`` (each match's current
    opponent), :meth:`act`, :meth:`rounds_ended`, :meth:`learner` and :meth:`close`.
    """

    def __init__(
        self,
        league: League,
        n_matches: int,
        seed: int,
        policies: dict[str, Policy],
        store: LeagueStore | None = None,
        engine: EngineName = "numpy",
    ) -> None:
        self.league = league
        self.engine: EngineName = engine
        self.n_matches = n_matches
        self.seed = seed
        self.rng = np.random.default_rng(seed + 104_729)
        self.store = store
        self._policies = dict(policies)
        self._learner: Policy | None = None
        self._self: PolicyController | None = None
        self._replaying: Drawn | None = None
        """``drawn``'s bot when the league asks it to replay the draws the learner did not beat (``drawn_replay``)."""
        self._saved_at = time.monotonic()
        self.seat = MixedSeat(1, league.draw(self.rng, n_matches), self._make)
        if store is not None:
            store.save(league)

    @property
    def names(self) -> list[str]:
        return self.seat.names

    def _make(self, name: str) -> Controller:
        seed = self.seed + 7919 * (1 + sum(map(ord, name)))
        member = self.league.member(name)
        if member.kind == "scripted":  # the source: the ladder bot's name, or the population's with its families
            scripted = ScriptedController(member.source or name, self.n_matches, seed, self.engine)
            if name == DRAWN and self.league.config.drawn_replay:
                from ..games.tank.drawn import Drawn  # already imported by the population's bot (numba's kernels)

                assert isinstance(scripted.bot, Drawn)
                scripted.bot.replay_unbeaten(self.league.config.drawn_replay)
                self._replaying = scripted.bot
            return scripted
        if member.kind == "self":
            self._self = _LiveSelf(seed)
            if self._learner is not None:
                self._self.policy = self._learner
            return self._self
        return PolicyController(name, self._policies[name], seed=seed)

    def learner(self, policy: Policy) -> None:
        """The policy the learner acts with now: ``self`` plays it; a snapshot freezes it when due."""
        if policy is self._learner:
            return
        self._learner = policy
        if self._self is not None:
            self._self.policy = policy
        if not self.league.wants_snapshot(policy.version):
            return
        member, evicted = self.league.add_snapshot(policy.version)
        self._policies[member.name] = policy
        if self.store is not None:
            self.store.save_snapshot(member, policy)
        if evicted is not None:  # matches playing it finish their round (their controller holds it)
            self._policies.pop(evicted.name, None)
            if self.store is not None:
                self.store.forget_snapshot(evicted)
        self.save()

    def act(self, obs: NDArray[np.float32], out: NDArray[np.float32]) -> None:
        self.seat.act(obs, out)

    def rounds_ended(self, info: StepInfo) -> None:
        """Record the ended rounds in the league, draw their matches' next opponents, reset them."""
        ended = np.flatnonzero(info.round_over)
        results = outcomes(info, ended)
        for m, outcome in zip(ended.tolist(), results.tolist(), strict=True):
            self.league.record(self.names[m], outcome)
        if self._replaying is not None:  # its replay keeps the draws the learner did not beat
            against = np.array([self.names[m] == DRAWN for m in ended.tolist()], bool)
            self._replaying.record(ended[against], results[against] == 1.0)
        self.seat.assign(ended, self.league.draw(self.rng, len(ended)))
        self.seat.drop_unused(lambda name: any(m.name == name for m in self.league.members))
        self.seat.reset(info.round_over)
        if self.store is not None and time.monotonic() - self._saved_at >= SAVE_EVERY:
            self.save()

    def save(self) -> None:
        if self.store is not None:
            self.store.save(self.league)
            self._saved_at = time.monotonic()

    def close(self) -> None:
        self.save()


class _LiveSelf(PolicyController):
    """The learner's own live policy as an opponent (self-play); swapped with every new version."""

    def __init__(self, seed: int) -> None:
        self.name = SELF
        self.policy: Policy | None = None  # type: ignore[assignment]
        self.stochastic = True
        self.rng = np.random.default_rng(seed)
        self.observation = "full"  # memoryless and full-observation learners only (arena train refuses the others)

    def act(self, obs: NDArray[np.float32], rows: NDArray[np.intp] | None = None) -> NDArray[np.float32]:
        if self.policy is None:  # before the first act of the learner: stand still
            return np.zeros((len(obs), ACT_DIM), np.float32)
        return self.policy.sample(obs, self.rng, deterministic=not self.stochastic)

    def reset(self, mask: NDArray[np.bool_]) -> None:
        """Nothing to reset: the live self is memoryless (a recurrent learner gets no self-play)."""
