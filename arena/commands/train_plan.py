"""``arena train``'s plan: every flag checked once, into one frozen record the run reads.

:meth:`TrainPlan.from_flags` is the only reader of the parsed flags. It refuses a bad combination
before anything starts (one line, exit 2), decides what the command line leaves open (the bots'
layout, the match count, the budget, the league) and plans the server. The run
(:mod:`arena.commands.train_run`) then reads the plan, never the flags, and the bots get a
picklable :class:`~arena.bots.spec.LearningBotSpec` made from it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..bots.spec import LearningBotSpec
from ..defaults import ROYALE_MATCHES, ROYALE_TURNS_PER_S, TANK_MATCHES, Layout, choose_layout
from .options import LEAGUE, check_scripted_name, is_scripted_name
from .server_plan import ServerPlan, TankShape

if TYPE_CHECKING:
    from ..league import LeagueSpec

__all__ = ["TrainPlan", "member_name"]


@dataclass(frozen=True)
class TrainPlan:
    """One ``arena train`` run, decided."""

    game: str
    opponents: tuple[str, ...]
    """The learning bots' opponents: the league's extra members, or the fixed mix (no Tank Royale share)."""
    royale_share: tuple[str, ...]
    """``royale:PATH`` bots that are the league's Tank Royale share (a learning bot of their own)."""
    league: LeagueSpec | None
    layout: Layout
    matches: int
    minutes: float | None
    rounds: int | None
    steps: int | None
    ticks_per_round: int
    seed: int
    out: Path
    out_existed: bool
    """Whether ``--out`` existed before the run (a refused port then leaves no new empty directory)."""
    resume: bool
    eval_rounds: int
    report: bool
    json: bool
    tensorboard: bool
    royale_matches: int
    royale_turns_per_s: float
    engine: Literal["numpy", "numba"]
    """The learning bots' tank engine: "numpy" (the reference) or "numba" (compiled, the same game bit for bit)."""
    server: ServerPlan
    observation: str
    """What the learner sees (tank): ``full`` or ``radar`` (``arena.games.tank.radar``)."""
    flags: Mapping[str, Any]
    """The command line as parsed, for the record (TensorBoard's config); the run reads the fields above."""

    @property
    def tank(self) -> bool:
        return self.game == "tank"

    @property
    def agent(self) -> str:
        return self.server.agent

    @property
    def n_bots(self) -> int:
        return self.layout.workers or self.layout.bots

    @property
    def eval_opponents(self) -> tuple[str, ...]:
        """Whom the run's candidates and its returned policy are evaluated against: the scripted ladder, and the
        ``drawn`` population when the league trains against it (each round a fresh draw of its parts, from the
        families the league draws from)."""
        from ..games.tank.roster import SCRIPTED

        if self.league is None or not self.league.config.drawn:
            return tuple(SCRIPTED)
        return (*SCRIPTED, self.league.config.drawn_source)

    @classmethod
    def from_flags(cls, flags: argparse.Namespace) -> TrainPlan:
        """The plan of ``arena train``'s parsed ``flags`` (read, never written).

        Raises:
            ValueError, FileNotFoundError: a flag or a combination the run cannot use (one line for the user).
        """
        from ..games.reach import ACT_DIM as REACH_ACT
        from ..games.reach import OBS_DIM as REACH_OBS
        from ..games.tank.actions import ACT_DIM
        from ..games.tank.radar import observation_dim
        from ..games.tank.rewards import TANK_REWARD

        tank = flags.game == "tank"
        observation = getattr(flags, "observation", "full")
        if not tank and (flags.opponent or flags.rounds or flags.workers or flags.league_option or observation != "full"):
            raise ValueError("--opponent, --league-option, --rounds, --workers and --observation apply to --game tank only")
        if flags.eval_rounds < 0:
            raise ValueError(f"--eval-rounds must be >= 0, got {flags.eval_rounds}")
        opponents = flags.opponent or [LEAGUE]
        royale = [o for o in opponents if o.startswith("royale:")]
        # With the league, Tank Royale bots are its share of a learning bot of their own (their pace is
        # the bots'); without it they are fixed opponents of the learning bots' own matches.
        royale_share = royale if LEAGUE in opponents else []
        opponents = [o for o in opponents if o not in royale_share]
        if flags.workers and royale and not royale_share:
            raise ValueError("royale:PATH opponents play with --bots (threads of this process), not --workers")
        if (flags.royale_matches is not None or flags.royale_turns_per_s is not None) and not royale_share:
            raise ValueError(
                "--royale-matches and --royale-turns-per-s apply to Tank Royale bots in the league "
                "(--opponent league --opponent royale:PATH)"
            )
        _check_royale_bots(royale)
        for opponent in opponents:
            check_scripted_name(opponent)
        layout = choose_layout(flags.workers, flags.bots, threads_only=bool(royale and not royale_share) or not tank)
        league = _league(flags, opponents, layout) if tank else None
        matches = flags.matches or (TANK_MATCHES if tank else 16)
        minutes = flags.minutes
        if minutes is None and flags.rounds is None and flags.steps is None:
            minutes = 5.0 if tank else 1.0
        # PPO's rollout is sized by the agents (matches x bots), its entropy bonus by the league.
        shape = TankShape(matches * (layout.workers or layout.bots), LEAGUE in opponents) if tank else None
        sizes = (observation_dim(observation), ACT_DIM) if tank else (REACH_OBS, REACH_ACT)
        server = ServerPlan.from_flags(flags, sizes, TANK_REWARD if tank else None, shape)
        if tank:
            _check_memory(observation, server.agent_options, league, royale_share, opponents)
        return cls(
            game=flags.game,
            opponents=tuple(opponents),
            royale_share=tuple(royale_share),
            league=league,
            layout=layout,
            matches=matches,
            minutes=minutes,
            rounds=flags.rounds,
            steps=flags.steps,
            ticks_per_round=flags.ticks_per_round,
            seed=flags.seed,
            out=flags.out,
            out_existed=flags.out.exists(),
            resume=flags.resume,
            eval_rounds=flags.eval_rounds,
            report=not flags.no_report,
            json=flags.json,
            tensorboard=flags.tensorboard,
            royale_matches=flags.royale_matches or ROYALE_MATCHES,
            royale_turns_per_s=flags.royale_turns_per_s or ROYALE_TURNS_PER_S,
            engine=flags.engine,  # numba importable: checked by the command line (arena/cli.py)
            # reach bots send scalar rewards: the server owns no shaping of its own
            server=server,
            observation=observation,
            flags=dict(vars(flags)),
        )

    def bot_spec(self, url: str) -> LearningBotSpec:
        """The learning bots' spec (bot ``i`` of the run plays ``bot_spec(url).nth(i)``)."""
        return LearningBotSpec(
            url, self.opponents, self.matches, self.ticks_per_round, self.server.server.token, self.seed, "tank",
            self.league, rounds=self._rounds_per_log(), engine=self.engine, observation=self.observation,
        )  # fmt: skip

    def _rounds_per_log(self) -> int | None:
        """``--rounds`` as the bots count it, so that they stop at the budget instead of when the watch loop next
        looks (four times a second: a fast run of 100-tick rounds had played 48 when asked for 4). Bot threads share
        one match log and count the run's rounds; each worker process counts its own, so it plays its share."""
        if self.rounds is None or not self.layout.workers:
            return self.rounds
        return -(-self.rounds // self.layout.workers)

    def royale_share_spec(self, url: str) -> LearningBotSpec:
        """The learning bot of the league's Tank Royale share: ``royale_matches`` matches against each bot, paced."""
        share = self.royale_matches
        return LearningBotSpec(
            url, self.royale_share, share * len(self.royale_share), self.ticks_per_round, self.server.server.token,
            self.seed + 1, "royale", royale_matches=share, turns_per_s=self.royale_turns_per_s,
        )  # fmt: skip

    def describe(self) -> str:
        """What the run trains against, for its first line."""
        if not self.tank:
            return "on 'reach'"
        what = f"vs the league ({self.league.describe()})" if self.league is not None else f"vs {', '.join(self.opponents)}"
        if self.royale_share:
            names = ", ".join(map(member_name, self.royale_share))
            what += (
                f" + its Tank Royale share ({names}: {self.royale_matches} match(es) each at "
                f"{self.royale_turns_per_s:g} turns/s, 1 worker process)"
            )
        return what


def member_name(opponent: str) -> str:
    """A league member's name in tables: ``royale:PATH`` as ``royale:NAME`` (the bot directory's name)."""
    return f"royale:{Path(opponent.removeprefix('royale:')).name}" if opponent.startswith("royale:") else opponent


def _check_memory(
    observation: str, options: Mapping[str, Any], league: LeagueSpec | None, royale_share: list[str], opponents: list[str]
) -> None:
    """A recurrent or radar learner plays where its state and its radar are kept: the learning bots and the
    evaluations. Its own snapshots and live self, Tank Royale's share and policy files as opponents do not yet."""
    special = [what for what, on in (("--agent-option recurrent", options.get("recurrent")),
                                     ("--observation radar", observation == "radar")) if on]  # fmt: skip
    if not special:
        return
    what = " and ".join(special)
    if royale_share:
        raise ValueError(f"{what}: the league's Tank Royale share plays memoryless, full-observation policies for now")
    if league is not None and (league.config.max_snapshots or league.config.self_share):
        raise ValueError(f"{what}: the league's snapshots and self-play play memoryless, full-observation policies for now")
    if (league is not None and league.files) or any(not is_scripted_name(o) and o != LEAGUE for o in opponents):
        raise ValueError(f"{what}: the opponents must be scripted bots or the league of them for now")


def _check_royale_bots(kinds: list[str]) -> None:
    """Each ``royale:PATH`` names a Tank Royale bot directory (else one line and exit 2, before anything starts)."""
    from ..royale.booter import find_bot

    for kind in kinds:
        try:
            find_bot(Path(kind.removeprefix("royale:")))
        except (FileNotFoundError, ValueError) as exc:
            raise ValueError(f"--opponent {kind}: {exc}") from None


def _league(flags: argparse.Namespace, opponents: list[str], layout: Layout) -> LeagueSpec | None:
    """The league's spec for ``--opponent league``, else None with the policy files checked."""
    from ..league.commands import check_policy_file, league_spec

    files = [o for o in opponents if o != LEAGUE and not is_scripted_name(o) and not o.startswith("royale:")]
    if LEAGUE not in opponents:
        if flags.league_option:
            raise ValueError("--league-option applies to the league (--opponent league, the default)")
        for file in files:
            check_policy_file(file)
        return None
    drawn = [o for o in opponents if o == "drawn" or o.startswith("drawn:")]
    if drawn:  # a fixed opponent beside the league would be ignored, as the ladder's names are
        raise ValueError(
            f"--opponent {drawn[0]} beside the league: the league plays the population already (its families: "
            "--league-option drawn_movements=A+B, drawn_targetings, drawn_power_rules)"
        )
    directory = flags.out / "league"
    return league_spec(files, flags.league_option, directory, flags.resume, exclusive=(layout.workers or layout.bots) == 1)
