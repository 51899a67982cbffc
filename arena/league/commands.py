"""The league's part of the ``arena`` command: a league from flags, ``arena league``, ``arena match --rate``'s players.

``arena.cli`` parses the flags and calls these; each raises ValueError or FileNotFoundError
with one readable line for bad input, which the CLI prints before exiting with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..bots.play import Controller, PolicyController, ScriptedController
from ..games.tank.engines import EngineName
from ..games.tank.rules import TankRules
from .matchmaking import LeagueConfig
from .opponents import LeagueSpec
from .ratings import LeagueTable
from .round_robin import ControllerFactory, cross_table, rate, round_robin
from .store import LeagueStore

__all__ = [
    "check_policy_file",
    "league_command",
    "league_report",
    "league_spec",
    "load_table",
    "panel_bots",
    "parse_options",
    "play_panel",
    "policy_player",
    "print_league",
    "rate_bots",
    "rate_players",
    "scripted_player",
    "unique_name",
]

LEAGUE = "league"
"""The ``--opponent`` value that trains against the league (the default)."""


def parse_options(pairs: Sequence[str]) -> LeagueConfig:
    """``--league-option KEY=VALUE`` pairs as a validated config."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--league-option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value.strip()
    return LeagueConfig.from_options(options)


def unique_name(spec: str, taken: Sequence[str]) -> str:
    """A short member name for a policy file: its stem (a run directory's name), made unique."""
    path = Path(spec)
    name = path.stem if path.suffix in (".pt", ".weights", ".msgpack") else path.name or spec
    base, k = name, 2
    while name in taken:
        name, k = f"{base}#{k}", k + 1
    return name


def check_policy_file(spec: str) -> None:
    """Load a policy file once, so a bad one fails before any process starts.

    Raises:
        FileNotFoundError, ValueError: unreadable, or of other sizes than the tank arena's.
    """
    from ..bots.policies import load_policy
    from ..games.tank.actions import ACT_DIM
    from ..games.tank.observation import OBS_DIM

    try:
        policy = load_policy(Path(spec))
    except (FileNotFoundError, ValueError) as exc:
        raise type(exc)(f"opponent {spec}: {exc}") from None
    if policy.obs_dim != OBS_DIM or policy.act_dim != ACT_DIM:
        raise ValueError(
            f"opponent {spec}: a policy of sizes {policy.obs_dim}→{policy.act_dim}, the tank arena's are {OBS_DIM}→{ACT_DIM}"
        )


def league_spec(
    files: Sequence[str], options: Sequence[str], directory: Path, resume: bool, exclusive: bool = True
) -> LeagueSpec:
    """The league of ``arena train``: the scripted ladder, ``files`` as fixed members, snapshots under ``directory``."""
    from ..games.tank.roster import SCRIPTED

    config = parse_options(options)
    config.ladder_of(SCRIPTED)  # a name not on the ladder: one line now, not in a worker later
    named: list[tuple[str, str]] = []
    for spec in files:
        check_policy_file(spec)
        named.append((unique_name(spec, [*SCRIPTED, *(n for n, _ in named)]), spec))
    if resume and not LeagueStore(directory, exclusive=exclusive).state_path.is_file():
        resume = False  # a run from before the league, or one with fixed opponents: the league starts now
    return LeagueSpec(config, tuple(SCRIPTED), tuple(named), directory, resume, exclusive)


# ── arena league RUN_DIR ─────────────────────────────────────────────────────


def load_table(directory: Path) -> LeagueTable | None:
    """The ratings saved by a run (``OUT/league/table.json``), or None if none were."""
    path = directory / "table.json"
    if not path.is_file():
        return None
    try:
        return LeagueTable.from_state(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is unreadable: {exc}") from None


def _member_players(run: Path, directory: Path, engine: EngineName) -> dict[str, ControllerFactory]:
    """The policy the run handed back, every league member with a policy or a scripted name (computed by ``engine``),
    as round-robin players."""
    from ..bots.policies import load_policy
    from .store import LeagueStore

    players: dict[str, ControllerFactory] = {}
    players["returned"] = policy_player("returned", load_policy(run))  # the policy the run handed back
    states = sorted(directory.glob("state*.json"))
    if not states:
        raise FileNotFoundError(f"no league in {directory} (train with the default --opponent league)")
    seen: set[str] = set()
    for state in states:
        worker = 0 if state.name == "state.json" else int(state.stem.split("-")[-1])
        loaded = LeagueStore(directory, worker, exclusive=state.name == "state.json").load()
        if loaded is None:
            continue
        league, snapshots = loaded
        for member in league.members:
            if member.name in seen or member.kind == "self":
                continue
            seen.add(member.name)
            if member.kind == "scripted":
                players[member.name] = scripted_player(member.name, engine)
            elif member.kind == "snapshot":
                players[member.name] = policy_player(member.name, snapshots[member.name])
            else:
                players[member.name] = policy_player(member.name, load_policy(Path(member.source)))
    return players


def scripted_player(name: str, engine: EngineName = "numpy") -> ControllerFactory:
    """The scripted bot ``name`` as a round-robin player, computed by ``engine``."""

    def make(n: int, seed: int) -> Controller:
        return ScriptedController(name, n, seed, engine)

    return make


def policy_player(name: str, policy: Any, stochastic: bool = True) -> ControllerFactory:
    def make(n: int, seed: int) -> Controller:
        return PolicyController(name, policy, seed=seed, stochastic=stochastic)

    return make


def league_report(
    run: Path,
    rounds_per_pair: int,
    seed: int,
    ticks_per_round: int,
    progress: Callable[[int, int], None] | None = None,
    engine: EngineName = "numpy",
) -> dict[str, Any]:
    """``arena league RUN_DIR``: the training ratings, and a round-robin of the policy the run handed back and every
    member, its battles and scripted bots on ``engine``.

    Raises:
        FileNotFoundError, ValueError: no league or no policy in ``run``.
    """
    directory = run / "league"
    table = load_table(directory)
    players = _member_players(run, directory, engine)
    results = round_robin(players, rounds_per_pair, seed, TankRules(max_ticks=ticks_per_round), progress, engine=engine)
    return {
        "run": str(run),
        "training": table.summary() if table is not None else None,
        "round_robin": {
            "rounds_per_pair": rounds_per_pair,
            "ratings": rate(results),
            "scores": cross_table(results),
        },
    }


def rate_bots(
    players: Mapping[str, ControllerFactory], rounds_per_pair: int, seed: int, rules: TankRules, engine: EngineName = "numpy"
) -> dict[str, Any]:
    """``arena match --rate``: a round-robin of the given bots on ``engine`` and their Elo ratings (a Bradley-Terry fit)."""
    results = round_robin(players, rounds_per_pair, seed, rules, engine=engine)
    return {"rounds_per_pair": rounds_per_pair, "ratings": rate(results), "scores": cross_table(results)}


def print_league(report: Mapping[str, Any]) -> None:
    """The ratings tables and the score matrix, as a person reads them."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    training = report.get("training")
    if training:
        table = Table(title="ratings in training (rounds against the learner of their time)")
        for column in ("member", "mu", "sigma", "ordinal", "rounds", "learner's win rate"):
            table.add_column(column, justify="left" if column == "member" else "right")
        opponents = training["opponents"]
        for row in training["ratings"]:
            record = opponents.get(row["name"], {})
            win = record.get("win_rate")
            table.add_row(row["name"], f"{row['mu']:.1f}", f"{row['sigma']:.2f}", f"{row['ordinal']:.1f}",
                          str(row["rounds"]), "–" if win is None else f"{win:.0%}")  # fmt: skip
        console.print(table)
    panel = report.get("panel")
    if panel:
        table = Table(title=f"the returned policy against the panel {panel['directory']} ({panel['rounds']} rounds each)")
        table.add_column("bot")
        table.add_column("win rate", justify="right")
        for name, rate_ in panel["win_rate"].items():
            failed = panel["failures"].get(name)
            table.add_row(name, f"{rate_:.0%}" + (f" (failed: {failed})" if failed else ""))
        table.add_row("mean", f"{panel['mean']:.0%}")
        console.print(table)
    robin = report.get("round_robin") or report
    rounds = robin["rounds_per_pair"]
    _print_ratings(console, robin, f"round-robin ratings ({rounds} rounds per pair; Bradley-Terry, on the Elo scale)")
    scores: Mapping[str, Mapping[str, float]] = robin["scores"]
    order = [row["name"] for row in robin["ratings"]]
    matrix = Table(title="score of the row against the column (wins + half the draws)")
    matrix.add_column("")
    for name in order:
        matrix.add_column(name, justify="right")
    for a in order:
        matrix.add_row(a, *("–" if a == b else f"{scores[a].get(b, float('nan')):.0%}" for b in order))
    console.print(matrix)


def _print_ratings(console: Any, robin: Mapping[str, Any], title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in ("#", "bot", "Elo", "score", "rounds"):
        table.add_column(column, justify="left" if column == "bot" else "right")
    for i, row in enumerate(robin["ratings"], 1):
        table.add_row(str(i), row["name"], f"{row['elo']:+.0f}", f"{row['score']:.0%}", str(row["rounds"]))
    console.print(table)


# ── the commands ─────────────────────────────────────────────────────────────


def league_command(args: argparse.Namespace) -> int:
    """``arena league RUN_DIR``: the tables, or one JSON object with ``--json``."""
    if not args.run.is_dir():
        raise FileNotFoundError(f"no run directory {args.run}")

    def progress(done: int, total: int) -> None:
        if not args.json and (done == total or done % max(1, total // 10) < 2):
            print(f"\rarena league: round-robin {done}/{total} rounds", end="", file=sys.stderr, flush=True)

    panel = None if args.panel is None else panel_bots(args.panel)  # a bad directory fails before any round
    report = league_report(args.run, args.rounds, args.seed, args.ticks_per_round, progress, args.engine)
    if panel is not None:
        report["panel"] = play_panel(args.run, panel, args.panel_rounds, args.seed, args.ticks_per_round)
    if args.json:
        print(json.dumps(report))
        return 0
    print(file=sys.stderr)
    print_league(report)
    return 0


def panel_bots(directory: Path) -> list[Path]:
    """The Tank Royale bot directories of ``directory`` (``NAME/NAME.json``), sorted by name.

    Raises:
        FileNotFoundError: ``directory`` is not a directory, or holds no Tank Royale bot.
    """
    if not directory.is_dir():
        raise FileNotFoundError(f"--panel {directory}: not a directory")
    bots = sorted(d for d in directory.iterdir() if (d / f"{d.name}.json").is_file())
    if not bots:
        raise FileNotFoundError(f"--panel {directory}: no Tank Royale bot directory (NAME/NAME.json) in it")
    return bots


def play_panel(run: Path, bots: Sequence[Path], rounds: int, seed: int, ticks_per_round: int) -> dict[str, Any]:
    """The policy ``run`` handed back against each bot of a panel, over Tank Royale's protocol (sampled actions, as in
    ``arena match``): win rates per bot and their mean. A bot that fails to boot or dies counts as a match lost."""
    from ..bots.policies import load_policy
    from ..royale.match import RoyaleMatch, play_royale_match, royale_rules
    from ..royale.seats import RoyaleBotSpec, RoyaleMatchError
    from ..royale.server import RoyaleServerConfig

    policy = load_policy(run)
    rates: dict[str, float] = {}
    failures: dict[str, str] = {}
    for i, bot in enumerate(bots):
        print(f"arena league: panel {i + 1}/{len(bots)}: {rounds} rounds against {bot.name}", file=sys.stderr, flush=True)
        learner = PolicyController("returned", policy, seed=seed)
        match = RoyaleMatch(rounds, seed, royale_rules(ticks_per_round), RoyaleServerConfig(port=0), boot_bots=True)
        try:
            result = play_royale_match([learner, RoyaleBotSpec.parse(f"royale:{bot}")], match)
        except RoyaleMatchError as exc:
            rates[bot.name], failures[bot.name] = 0.0, str(exc).splitlines()[0]
            continue
        rates[bot.name] = result["bots"][0]["wins"] / rounds  # type: ignore[index]
        for failure in result.get("royale", {}).get("failures", []):  # type: ignore[union-attr]
            failures[bot.name] = failure["error"]
    return {
        "directory": str(bots[0].parent),
        "rounds": rounds,
        "win_rate": rates,
        "mean": round(sum(rates.values()) / len(rates), 4),
        "failures": failures,
    }


def rate_players(bots: Sequence[str], deterministic: bool, engine: EngineName = "numpy") -> dict[str, ControllerFactory]:
    """``arena match --rate``'s players by member name: scripted bots (computed by ``engine``) and policy files.

    Raises:
        FileNotFoundError, ValueError: a policy file cannot be loaded (``load_policy``).
    """
    from ..bots.policies import load_policy
    from ..games.tank.roster import EXTRA_SCRIPTED, SCRIPTED

    players: dict[str, ControllerFactory] = {}
    for spec in bots:
        name = unique_name(spec, list(players))
        players[name] = (
            scripted_player(spec, engine)
            if spec in SCRIPTED or spec in EXTRA_SCRIPTED
            else policy_player(name, load_policy(Path(spec)), not deterministic)
        )
    return players
