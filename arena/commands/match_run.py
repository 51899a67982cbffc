"""``arena match``'s run, from its plan: the players, the rounds (local or with Tank Royale bots), the results.

Reads a :class:`~arena.commands.match_plan.MatchPlan` only (the flags were checked when it was made).
:func:`run_match` goes in order: the players and what each one is (:func:`_players`), an optional
recorder, the rounds (:func:`_play`), the recording, then the results as a table or ``--json``'s one
object; booted Tank Royale bots that failed mid-game are the command's error after the results.
``--rate`` plays a round-robin instead (:func:`_rate`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .announce import stderr_lines
from .match_plan import MatchBot, MatchPlan

if TYPE_CHECKING:
    from ..replay import Recorder

__all__ = ["run_match"]


def run_match(plan: MatchPlan) -> int:
    """Play ``plan`` and print its results; the exit code (0).

    Raises:
        ValueError, FileNotFoundError: a policy file cannot be loaded, or ``--royale-logs`` cannot be made.
        RoyaleMatchError: booted Tank Royale bots failed (did not connect, died, raised); the results, when
            the match got that far, are printed first.
    """
    if plan.rate:
        return _rate(plan)
    _make_log_directory(plan)
    players, about = _players(plan)
    recorder = _recorder(plan, about)
    result = _play(plan, players, recorder)
    if recorder is not None:
        _save_recording(plan, recorder, result)
    for row, bot in zip(result["bots"], about, strict=True):
        row.update({k: v for k, v in bot.items() if k not in row})  # what each bot was: a policy's version, ...
    if plan.json:
        print(json.dumps(result), flush=True)
    else:
        _print_table(plan, result)
        sys.stdout.flush()
    _raise_royale_failures(result)
    return 0


def _make_log_directory(plan: MatchPlan) -> None:
    """Create ``--royale-logs`` before the match (a directory that cannot be made is one line, not a lost match)."""
    logs = plan.royale.logs if plan.royale is not None else None
    if logs is not None:
        try:
            logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--royale-logs {logs}: {exc.strerror or exc}") from None


def _players(plan: MatchPlan) -> tuple[list[Any], list[dict[str, Any]]]:
    """Each bot's player (a controller, or a Tank Royale bot's spec) and what it is, for the results and a recording."""
    players: list[Any] = []
    about: list[dict[str, Any]] = []
    for i, bot in enumerate(plan.bots):
        player, what = _player(plan, i, bot)
        player.name = bot.name
        players.append(player)
        about.append(what)
    return players, about


def _player(plan: MatchPlan, i: int, bot: MatchBot) -> tuple[Any, dict[str, Any]]:
    """Bot ``i``'s player, seeded ``--seed`` + i, and its description (a policy's generation and version too)."""
    from ..bots.play import PolicyController, ScriptedController
    from ..bots.policies import load_policy
    from ..royale.seats import RoyaleBotSpec

    what: dict[str, Any] = {"name": bot.name, "kind": bot.kind, "spec": bot.spec}
    if bot.kind == "scripted":
        return ScriptedController(bot.spec, n=plan.n_matches, seed=plan.seed + i, engine=plan.engine), what
    if bot.kind == "royale":
        return RoyaleBotSpec.parse(bot.spec), what
    policy = load_policy(Path(bot.spec))
    what.update(generation=policy.generation, version=policy.version, deterministic=plan.deterministic)
    return PolicyController(bot.name, policy, seed=plan.seed + i, stochastic=not plan.deterministic), what


def _recorder(plan: MatchPlan, about: list[dict[str, Any]]) -> Recorder | None:
    """``--record``'s recorder (every tick of the one arena), or None."""
    if plan.record is None:
        return None
    from ..replay import Recorder

    return Recorder([bot.name for bot in plan.bots], plan.seed, plan.rules, about)


def _save_recording(plan: MatchPlan, recorder: Recorder, result: dict[str, Any]) -> None:
    """Write ``--record``'s file and say so (on stderr with ``--json``: stdout is its one object)."""
    assert plan.record is not None, "a recorder records to --record"
    size = recorder.recording(result).save(plan.record)
    print(
        f"arena match: recorded {plan.rounds} round(s), {recorder.frames:,} frames to {plan.record} ({size:,} bytes)",
        file=sys.stderr if plan.json else sys.stdout,
        flush=True,
    )


def _play(plan: MatchPlan, players: list[Any], recorder: Recorder | None) -> dict[str, Any]:
    """The rounds: over Tank Royale's protocol when the match has Tank Royale bots, else locally; the results."""
    from ..bots.play import play_match

    settings = plan.royale
    if settings is None:
        return play_match(  # type: ignore[return-value]
            players, plan.rounds, seed=plan.seed, n_matches=plan.n_matches, rules=plan.rules, observer=recorder,
            engine=plan.engine,
        )  # fmt: skip
    from ..royale.match import MatchListeners, RoyaleMatch, play_royale_match
    from ..royale.server import RoyaleServerConfig

    config = RoyaleServerConfig(port=settings.port or 0)
    if settings.turn_timeout_ms is not None:  # else Tank Royale's standard
        config = replace(config, turn_timeout=settings.turn_timeout_ms / 1000.0)
    match = RoyaleMatch(plan.rounds, plan.seed, plan.rules, config, boot_bots=settings.port is None, log_dir=settings.logs)
    return play_royale_match(players, match, MatchListeners(observer=recorder, announce=stderr_lines("arena match")))


def _print_table(plan: MatchPlan, result: dict[str, Any]) -> None:
    """The results as a person reads them: wins, win rate, mean score and energy left per bot; draws below."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"arena match: {plan.rounds} rounds", show_lines=False)
    for column in ("bot", "wins", "win rate", "mean score", "mean energy left"):
        table.add_column(column, justify="left" if column == "bot" else "right")
    for row in result["bots"]:
        table.add_row(
            row["name"],
            str(row["wins"]),
            f"{row['wins'] / plan.rounds:.0%}",
            f"{row['mean_score']:.1f}",
            f"{row['mean_energy']:.1f}",
        )
    if "draws" in result:
        table.caption = f"draws (no winner): {result['draws']}; mean round length: {result['mean_round_ticks']:,} ticks"
    Console().print(table)


def _raise_royale_failures(result: dict[str, Any]) -> None:
    """Booted Tank Royale bots that failed mid-game (died, left, raised) are the command's error (stderr, exit 2),
    each with the end of its log; the results are printed before."""
    failures = result.get("royale", {}).get("failures", [])
    if failures:
        from ..royale.match import failure_message
        from ..royale.seats import RoyaleMatchError

        raise RoyaleMatchError("\n".join(failure_message(f) for f in failures), [f["bot"] for f in failures])


def _rate(plan: MatchPlan) -> int:
    """``--rate``: every pair of bots plays ``--rounds`` rounds 1v1; their Elo ratings and scores, printed."""
    from ..league.commands import print_league, rate_bots, rate_players

    players = rate_players([bot.spec for bot in plan.bots], plan.deterministic, plan.engine)
    report = rate_bots(players, plan.rounds, plan.seed, plan.rules, plan.engine)
    if plan.json:
        print(json.dumps(report))
    else:
        print_league(report)
    return 0
