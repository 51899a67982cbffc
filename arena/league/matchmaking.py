"""Who the learner plays next: the league's members and prioritized fictitious self-play (sans-I/O).

A policy trained against one fixed opponent learns to beat that opponent and little else, so a
league keeps every kind of opponent in play and spends the rounds where the learner is weakest
(docs/arena.md, "The league"). Members are the scripted ladder, fixed policies from files,
frozen snapshots of the learner and ``self`` (its live policy). At each round start a match
plays ``self`` with probability ``self_share``, else member *i* with probability

    p_i = (1 - floor_share) * f_i / sum_j f_j  +  floor_share / n,   f_i = (1 - w_i) ** exponent

AlphaStar's "hard" PFSP weighting on the learner's recent win rate ``w_i``, plus a floor so a
beaten opponent keeps being played and is not forgotten. ``w_i`` starts at 0.5 (worth two
rounds) for a new member. When snapshots exceed ``max_snapshots`` the one the learner beats
most leaves (never the newest); scripted and file members never leave.

This module holds no policies and does no I/O (:mod:`arena.league.opponents` acts for the members,
:mod:`arena.league.store` saves the state), so the rule is testable on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["DRAWN", "SELF", "SNAPSHOT_PREFIX", "League", "LeagueConfig", "Member", "MemberKind", "snapshot_name"]

SELF = "self"
"""The member that is the learner's own live policy (self-play)."""
DRAWN = "drawn"
"""The scripted member built from parts drawn anew every round (``arena.games.tank.drawn``), with ``drawn=true``."""

MemberKind = Literal["scripted", "file", "snapshot", "self"]

SNAPSHOT_PREFIX = "self@v"


def snapshot_name(version: int) -> str:
    """The league name of the learner's snapshot at ``version``."""
    return f"{SNAPSHOT_PREFIX}{version}"


@dataclass(frozen=True)
class LeagueConfig:
    """The league's parameters (``arena train --league-option KEY=VALUE``); validated here.

    The defaults were chosen on the tank arena by the learning evaluation (docs/agents.md, "What
    the main job learns"): the learner plays the scripted ladder by PFSP with a floor; snapshots of
    itself and self-play are there to turn on (``max_snapshots``, ``self_share``), off by default.
    """

    snapshot_every: int = 200
    """Learner updates (policy versions) between two snapshots; the first is taken at this version (docs/arena.md
    gives what that is in seconds at the tank's defaults)."""
    max_snapshots: int = 0
    """Snapshots kept in the league; 0 (the default) disables snapshots. Off because rounds against the
    learner's own past and present crowded out the scripted bots, and the returned policy did worse against
    them with snapshots than without (docs/agents.md, "What the main job learns")."""
    self_share: float = 0.0
    """Share of rounds against the learner's live policy (``self``); 0 (the default) disables self-play (see
    ``max_snapshots``)."""
    floor_share: float = 0.5
    """Share of the other rounds spread evenly over all members, whatever the win rates: what keeps a
    beaten opponent in play, so it is not forgotten. With the four scripted bots each gets at least 12.5%
    of the rounds."""
    exponent: float = 2.0
    """PFSP weight (1 - win rate) ** exponent: 0 is uniform, larger focuses on the hardest."""
    win_rate_memory: int = 100
    """Rounds the moving-average win rate remembers (its weight per round is 1 / memory)."""
    snapshots_as_one: bool = False
    """Whether the snapshots count as one member in the draw: the group gets the PFSP share of
    their mean win rate (and one floor share), then one of them is drawn by its own PFSP weight.
    Counted one by one (the default), eight snapshots the learner beats half the time outweigh a
    scripted bot it never beats two to one. Off because, as one, the rounds it buys go to an opponent
    the learner cannot learn from yet (docs/arena.md, "The league")."""
    draw_value: float = 0.0
    """What a draw counts in the matchmaking win rate. 0: a draw is not a win, because a learner that
    mostly draws against the idle ``sitting`` must not look half beaten and lose its rounds against it
    (docs/arena.md, "The league"). Ratings count draws as draws whatever this says."""

    scripted: bool = True
    """Whether the scripted ladder plays in the league. ``false`` with self-play and snapshots is the scheme
    ML-Agents' self-play trainer runs (the learner meets only its own past and present; with
    ``self_share=0.5``, ``max_snapshots=10`` and ``exponent=0``, its defaults ``play_against_latest_model_ratio``,
    ``window`` and a uniform draw): the baseline ``bench/learning.py --case selfplay`` measures."""
    ladder: str = ""
    """The scripted ladder's bots that play, ``+``-joined (``tracker``, ``walker+tracker``); empty (the default): all
    of them (the tank's four). Applies with ``scripted=true``. A league's composition, like the ``drawn_*`` options:
    the population already draws still, circling and wall-following movements, and the ladder's strongest gun is
    ``tracker``'s, so an ablation keeps only part of the ladder (docs/agents.md). The run's evaluations still play
    the whole ladder."""
    drawn: bool = True
    """Whether ``drawn`` joins the league: one scripted member whose every match draws a new movement, targeting
    and fire-power rule at each round start (``arena.games.tank.drawn``), so its win rate is the learner's against
    that population. Independent of ``scripted``. On by default since three five-seed runs beside the four-bot
    league met the main job's targets against the scripted bots more often, with a far better worst seed
    (docs/agents.md, "The population becomes the default"); ``drawn=false`` is the four-bot league."""
    drawn_movements: str = ""
    """The movement families ``drawn`` draws from, ``+``-joined (``orbiting+random``); empty (the default): all
    nine (``arena.games.tank.drawn.MOVEMENTS``). With ``drawn_targetings`` and ``drawn_power_rules``, the
    population's composition: what an ablation leaves out (docs/arena.md). The run's evaluations play the same
    narrowed population."""
    drawn_targetings: str = ""
    """The targeting families ``drawn`` draws from (``none+head_on+linear+circular+random_offset``); empty: all."""
    drawn_power_rules: str = ""
    """The fire-power rules ``drawn`` draws from (``fixed+distance+energy``); empty: all."""
    drawn_replay: float = 0.0
    """Share of ``drawn``'s rounds that replay the parts of an earlier round the learner did not win (a loss or
    a draw), each until the learner beats it (``arena.games.tank.drawn.Drawn.replay_unbeaten``): the population's
    hard draws come back, as prioritized level replay brings back the levels an agent learns most from.
    0 (the default): every round is a fresh draw. The run's evaluations play fresh draws only."""

    def __post_init__(self) -> None:
        for name in ("snapshot_every", "win_rate_memory"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"league {name} must be an integer >= 1, got {value!r}")
        if (
            not isinstance(self.max_snapshots, int)
            or isinstance(self.max_snapshots, bool)
            or not 0 <= self.max_snapshots <= 64
        ):
            raise ValueError(f"league max_snapshots must be an integer in [0, 64], got {self.max_snapshots!r}")
        for name in ("self_share", "floor_share", "draw_value"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"league {name} must be a number in [0, 1], got {value!r}")
        if self.self_share >= 1.0:
            raise ValueError("league self_share must be below 1: the learner must meet other opponents")
        for name in ("snapshots_as_one", "scripted", "drawn"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"league {name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.ladder, str):
            raise ValueError(f"league ladder must be names joined by '+', got {self.ladder!r}")
        if self.ladder:
            names = self.ladder_names
            if not all(names) or len(set(names)) != len(names):
                raise ValueError(f"league ladder must be distinct names joined by '+', got {self.ladder!r}")
            if not self.scripted:
                raise ValueError("league ladder applies with scripted=true")
        parts = {"movements": self.drawn_movements, "targetings": self.drawn_targetings, "power_rules": self.drawn_power_rules}
        if not all(isinstance(value, str) for value in parts.values()):
            raise ValueError(f"league drawn_* options must be strings of names joined by '+', got {parts!r}")
        if any(parts.values()):
            if not self.drawn:
                raise ValueError("league drawn_movements, drawn_targetings and drawn_power_rules apply with drawn=true")
            self.drawn_source  # noqa: B018  # checks the names (one line naming the unknown one)
        if not (isinstance(self.drawn_replay, (int, float)) and 0.0 <= self.drawn_replay < 1.0):
            raise ValueError(f"league drawn_replay must be a number in [0, 1), got {self.drawn_replay!r}")
        if self.drawn_replay and not self.drawn:
            raise ValueError("league drawn_replay applies with drawn=true")
        if not (isinstance(self.exponent, (int, float)) and math.isfinite(self.exponent) and 0.0 <= self.exponent <= 10.0):
            raise ValueError(f"league exponent must be a number in [0, 10], got {self.exponent!r}")

    @property
    def ladder_names(self) -> tuple[str, ...]:
        """The names ``ladder`` gives (none when it is empty: the whole ladder plays)."""
        return tuple(self.ladder.split("+")) if self.ladder else ()

    def ladder_of(self, scripted: Iterable[str]) -> list[str]:
        """The bots of the game's ladder ``scripted`` that play: those ``ladder`` names (all when it is empty).

        Raises:
            ValueError: ``ladder`` names a bot the ladder does not have (one line naming it and the ladder).
        """
        ladder = list(scripted)
        if not self.ladder:
            return ladder
        chosen = self.ladder_names
        unknown = [name for name in chosen if name not in ladder]
        if unknown:
            raise ValueError(f"league ladder: {', '.join(unknown)} is not on the ladder (choose from {'+'.join(ladder)})")
        return [name for name in ladder if name in chosen]

    @property
    def drawn_source(self) -> str:
        """The population's bot name: ``drawn``, or ``drawn:movements=...`` narrowed by the ``drawn_*`` options.

        Raises:
            ValueError: a family those options name is unknown.
        """
        parts = {"movements": self.drawn_movements, "targetings": self.drawn_targetings, "power_rules": self.drawn_power_rules}
        if not any(parts.values()):
            return DRAWN
        from ..games.tank.drawn import population_name  # the tank's families (and numba) only when narrowed

        try:
            return population_name(**parts)
        except ValueError as exc:
            raise ValueError(f"league drawn_* options: {exc}") from None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> LeagueConfig:
        """Parse ``KEY=VALUE`` strings (CLI); unknown keys and bad values raise ValueError."""
        types = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, text in options.items():
            if key not in types:
                raise ValueError(f"unknown league option {key!r} (choose from {', '.join(types)})")
            if types[key] in (str, "str"):
                values[key] = text.strip()
                continue
            if types[key] in (bool, "bool"):
                flag = {"true": True, "1": True, "false": False, "0": False}.get(text.strip().lower())
                if flag is None:
                    raise ValueError(f"league option {key}={text!r} must be true or false")
                values[key] = flag
                continue
            try:
                values[key] = int(text) if types[key] in (int, "int") else float(text)
            except ValueError:
                raise ValueError(f"league option {key}={text!r} is not a number") from None
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Member:
    """One opponent of the learner and the learner's record against it."""

    name: str
    kind: MemberKind
    source: str = ""
    """Where it comes from: the scripted name, the file given, or the snapshot's file name."""
    version: int = 0
    """Snapshots: the learner's policy version it froze."""
    win_rate: float = 0.5
    rounds: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class League:
    """The members and the matchmaking rule (see the module docstring)."""

    config: LeagueConfig
    members: list[Member] = field(default_factory=list)
    last_snapshot_version: int = 0

    @classmethod
    def start(cls, config: LeagueConfig, scripted: Iterable[str], files: Mapping[str, str] = {}) -> League:
        """A fresh league: the scripted bots (unless ``config.scripted`` is off), ``drawn`` if ``config.drawn``,
        the file policies (name → path) and ``self`` if self-play is on.

        With no opponent besides ``self`` the learner plays only itself until its first snapshot, which
        needs both self-play and snapshots on.
        """
        members = [Member(name, "scripted", name) for name in config.ladder_of(scripted)] if config.scripted else []
        if config.drawn and all(m.name != DRAWN for m in members):
            members.append(Member(DRAWN, "scripted", config.drawn_source))
        members += [Member(name, "file", path) for name, path in files.items()]
        if config.self_share > 0:
            members.append(Member(SELF, "self"))
        league = cls(config, members)
        if not league.opponents() and not (config.self_share > 0 and config.max_snapshots > 0):
            raise ValueError(
                "a league needs at least one opponent besides the learner's live self, or self-play and snapshots"
            )
        return league

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)

    def opponents(self) -> list[Member]:
        """Every member but ``self``: the ones PFSP weighs."""
        return [m for m in self.members if m.kind != "self"]

    def snapshots(self) -> list[Member]:
        return [m for m in self.members if m.kind == "snapshot"]

    def probabilities(self) -> dict[str, float]:
        """Each member's chance to be drawn for a match's next round (they sum to 1)."""
        config = self.config
        others = self.opponents()
        snapshots = [m for m in others if m.kind == "snapshot"] if config.snapshots_as_one else []
        # The draw's slots: each member, or the snapshots together as one (their mean win rate).
        slots: list[list[Member]] = [[m] for m in others if m.kind != "snapshot" or not snapshots]
        if snapshots:
            slots.append(snapshots)
        if not slots:  # self-play alone, before the first snapshot
            return {SELF: 1.0}
        slot_rates = [sum(m.win_rate for m in slot) / len(slot) for slot in slots]
        shares = self._pfsp(slot_rates, config.floor_share)
        has_self = any(m.kind == "self" for m in self.members)
        scale = 1.0 - config.self_share if has_self else 1.0
        probabilities: dict[str, float] = {}
        for slot, share in zip(slots, shares, strict=True):
            within = (1.0,) if len(slot) == 1 else self._pfsp([m.win_rate for m in slot], 0.0)  # one member: exactly 1
            probabilities |= {m.name: float(scale * share * p) for m, p in zip(slot, within, strict=True)}
        probabilities = {m.name: probabilities[m.name] for m in others}  # in member order
        if has_self:
            probabilities[SELF] = config.self_share
        return probabilities

    def _pfsp(self, win_rates: list[float], floor: float) -> NDArray[np.float64]:
        """``(1 - floor) * f_i / sum f + floor / n`` with ``f_i = (1 - w_i) ** exponent`` (uniform when all f are 0)."""
        weights = np.array([(1.0 - w) ** self.config.exponent for w in win_rates])
        total = float(weights.sum())
        pfsp = weights / total if total > 0 else np.full(len(weights), 1.0 / len(weights))
        return (1.0 - floor) * pfsp + floor / len(weights)

    def draw(self, rng: np.random.Generator, k: int) -> list[str]:
        """Opponents for ``k`` matches starting a round, drawn independently by :meth:`probabilities`."""
        probabilities = self.probabilities()
        names = list(probabilities)
        p = np.fromiter(probabilities.values(), float, len(names))
        # What rng.choice(len(names), size=k, p=p / p.sum()) computes, the same draws from rng, without its
        # checks of p (costly next to this, at every tick where a round ends): the normalized CDF, then uniforms.
        cdf = (p / p.sum()).cumsum()
        cdf /= cdf[-1]
        return [names[i] for i in cdf.searchsorted(rng.random(k), side="right").tolist()]

    def record(self, name: str, outcome: float) -> None:
        """A round against ``name`` ended: ``outcome`` 1 won, 0.5 drawn, 0 lost (by the learner).

        A draw moves the win rate by ``config.draw_value``. Rounds against a member that left
        meanwhile (evicted) are ignored.
        """
        if not 0.0 <= outcome <= 1.0:
            raise ValueError(f"outcome must be in [0, 1], got {outcome}")
        if outcome == 0.5:
            outcome = self.config.draw_value
        try:
            member = self.member(name)
        except KeyError:
            return
        member.rounds += 1
        # The 0.5 start counts as two rounds, so one early loss does not read as "never wins".
        member.win_rate += (outcome - member.win_rate) / min(member.rounds + 2, self.config.win_rate_memory)

    def wants_snapshot(self, version: int) -> bool:
        """Whether the learner's policy at ``version`` should be frozen into the league."""
        config = self.config
        return config.max_snapshots > 0 and version - self.last_snapshot_version >= config.snapshot_every

    def add_snapshot(self, version: int, source: str = "") -> tuple[Member, Member | None]:
        """Freeze the learner at ``version``; returns (the new member, the evicted one or None)."""
        member = Member(snapshot_name(version), "snapshot", source or snapshot_name(version), version)
        self.last_snapshot_version = version
        evicted = self._evict() if len(self.snapshots()) >= self.config.max_snapshots else None
        self.members.insert(self._self_index(), member)
        return member, evicted

    def _evict(self) -> Member:
        """Remove the snapshot the learner beats most (the oldest among equals) and return it."""
        evicted = max(self.snapshots(), key=lambda m: (m.win_rate, -m.version))
        self.members.remove(evicted)
        return evicted

    def _self_index(self) -> int:
        for i, m in enumerate(self.members):
            if m.kind == "self":
                return i
        return len(self.members)

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.as_dict(),
            "members": [m.as_dict() for m in self.members],
            "last_snapshot_version": self.last_snapshot_version,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], config: LeagueConfig | None = None) -> League:
        """Rebuild from :meth:`state_dict`; ``config`` (if given) replaces the saved parameters.

        Raises:
            ValueError: the state is malformed.
        """
        try:
            saved = LeagueConfig(**state["config"])
            members = [Member(**m) for m in state["members"]]
            last = int(state["last_snapshot_version"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a league state: {exc}") from None
        league = cls(config or saved, members, last)
        has_self = any(m.kind == "self" for m in members)
        if league.config.self_share > 0 and not has_self:
            league.members.append(Member(SELF, "self"))
        elif league.config.self_share == 0 and has_self:
            league.members = [m for m in members if m.kind != "self"]
        if league.config.ladder:  # given at resume, it narrows the saved ladder: the bots it leaves out leave
            kept = set(league.config.ladder_names)
            league.members = [m for m in league.members if m.kind != "scripted" or m.name == DRAWN or m.name in kept]
        has_drawn = any(m.name == DRAWN for m in league.members)
        if league.config.drawn and not has_drawn:  # turned on at resume: after the other scripted members
            scripted = [i for i, m in enumerate(league.members) if m.kind == "scripted"]
            league.members.insert(scripted[-1] + 1 if scripted else 0, Member(DRAWN, "scripted", league.config.drawn_source))
        elif not league.config.drawn and has_drawn:
            league.members = [m for m in league.members if m.name != DRAWN]
        elif has_drawn:  # its families as the config now says (its record is kept: the same member, narrowed or widened)
            league.member(DRAWN).source = league.config.drawn_source
        while len(league.snapshots()) > league.config.max_snapshots:  # a smaller cap given on resume
            league._evict()
        if not league.opponents():
            raise ValueError("the saved league has no opponents")
        return league

    def table(self) -> list[dict[str, Any]]:
        """Members with their draw probability, for progress lines and summaries."""
        probabilities = self.probabilities()
        return [
            {"name": m.name, "kind": m.kind, "win_rate": round(m.win_rate, 4), "rounds": m.rounds,
             "draw_probability": round(probabilities.get(m.name, 0.0), 4)}
            for m in self.members
        ]  # fmt: skip
