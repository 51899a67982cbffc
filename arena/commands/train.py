"""``arena train``: server, trainer thread and headless arena in one process."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..defaults import (
    MINIBATCHES,
    ROYALE_MATCHES,
    ROYALE_TURNS_PER_S,
    STEPS_PER_AGENT,
    TANK_MATCHES,
    choose_layout,
)
from ..outputs.run_log import (
    RATE_WINDOW,
    MetricsLog,
    Progress,
    league_summary,
    print_summary,
    summarize,
    throughput_figures,
)
from .options import (
    GAMES,
    LEAGUE,
    SCRIPTED_NAMES,
    _add_agent_flags,
    _add_server_flags,
    _announce_dashboard,
    _attach_tensorboard,
    _make_server,
    _opponent_kind,
    _positive_float,
    _positive_int,
    _resume_line,
    _train_line,
)


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena train`` to the subcommands of ``arena``."""
    train = commands.add_parser(
        "train",
        help="train a policy: server, trainer thread and headless arena in one process",
        description=(
            "Start the training server and its trainer thread, connect learning bots to it over a "
            "loopback websocket, and play headless arena matches against scripted opponents until the "
            "budget is spent. The learning bots act with a local copy of the policy and hot-swap new "
            "weights between ticks. Writes metrics.jsonl, checkpoints/, returned.json (the policy it hands back: the best "
            "it evaluated, which 'arena match --bot OUT' and 'arena export OUT' use), summary.json, learning_curve.png "
            "and a one-page report (report.html, report.png: the curve, the returned policy against each "
            "scripted bot, throughput) to --out. Ctrl-C stops cleanly with a final checkpoint."
        ),
        epilog="example: arena train --opponent sitting --opponent spinner --minutes 10 --out runs/tank",
    )
    _add_agent_flags(train)
    train.add_argument(
        "--game", choices=GAMES, default="tank", help="tank: the Robocode-style arena (default); reach: a tiny test game"
    )
    train.add_argument(
        "--opponent",
        action="append",
        type=_opponent_kind,
        metavar="league|NAME|FILE|royale:PATH",
        help="league (the default): the scripted ladder, snapshots of the learner and self-play, matched by PFSP "
        "(docs/arena.md, 'The league'); with league, each FILE given too (a checkpoint, run directory or weights "
        "file) joins it. Without league, the opponents are fixed: scripted names (sitting, spinner, walker, "
        "tracker), policy FILEs or Tank Royale bot directories (royale:PATH, one bot process per match, see "
        "docs/royale.md), spread over the matches",
    )
    train.add_argument(
        "--league-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a league parameter, repeatable (docs/arena.md, 'The league'); each with its default: " + _league_defaults(),
    )
    train.add_argument(
        "--matches",
        type=_positive_int,
        default=None,
        help=f"parallel matches per learning bot (default: {TANK_MATCHES}; reach: 16); PPO's rollout is "
        f"matches x bots x {STEPS_PER_AGENT} steps, in {MINIBATCHES} minibatches",
    )
    train.add_argument(
        "--bots",
        type=_positive_int,
        default=None,
        help="learning bot connections as threads of this process (default: see --workers)",
    )
    train.add_argument(
        "--royale-matches",
        type=_positive_int,
        default=None,
        help=f"with the league: parallel matches against each royale:PATH bot, one bot process each, played by a "
        f"learning bot of their own at the bots' pace (default: {ROYALE_MATCHES}; docs/royale.md)",
    )
    train.add_argument(
        "--royale-turns-per-s",
        type=_positive_float,
        default=None,
        help=f"with the league: the most turns a second of its Tank Royale share (default: {ROYALE_TURNS_PER_S:g}; "
        "unpaced, official-API bots starve the learner on a small machine)",
    )
    train.add_argument(
        "--workers",
        type=int,
        default=None,
        help="run N learning bots in worker processes (tank only). Default: 1 worker process with 2+ cores, "
        "else 1 bot thread (summary.json says which and why); --workers 0 forces threads. See docs/arena.md",
    )
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=_positive_float, default=None, help="wall-clock budget (default: 5; reach: 1)")
    budget.add_argument("--rounds", type=_positive_int, default=None, help="stop after this many finished rounds (tank)")
    budget.add_argument("--steps", type=_positive_int, default=None, help="stop after this many ticks per learning bot")
    train.add_argument(
        "--ticks-per-round", type=_positive_int, default=2000, help="round tick cap, a truncation (default: 2000)"
    )
    train.add_argument("--seed", type=int, default=0, help="seed for the games and the agent (default: 0)")
    train.add_argument("--out", type=Path, default=Path("runs/latest"), help="output directory (default: runs/latest)")
    train.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    train.add_argument(
        "--eval-rounds",
        type=int,
        default=50,
        metavar="N",
        help="every minute of training and at its end, the policy plays N rounds against each scripted bot; the run "
        "returns the best of these (OUT/returned.json) and its match table is the report's "
        "(tank; 0 skips it and returns the last policy; default: 50, a few seconds of a core each)",
    )
    train.add_argument("--no-report", action="store_true", help="write no report.html/report.png and skip the evaluation")
    train.add_argument(
        "--json", action="store_true", help="end with summary.json's object as one line on stdout instead of a table"
    )
    train.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write every metrics row as TensorBoard scalars to OUT/tensorboard (needs pip install -e '.[tensorboard]')",
    )
    _add_server_flags(train, default_port=0)


def _league_defaults() -> str:
    """``KEY (default)`` for every league parameter, read from ``LeagueConfig`` so the help cannot drift from it."""
    from dataclasses import fields

    from ..league import LeagueConfig

    def shown(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{f.name} ({shown(f.default)})" for f in fields(LeagueConfig))


def _train(args: argparse.Namespace) -> int:
    from server import ListenError, ServerThread
    from server.stats import RateWindow

    from ..bots.play import MatchLog, play_learning_bot
    from ..games.reach import ACT_DIM as REACH_ACT
    from ..games.reach import OBS_DIM as REACH_OBS
    from ..games.reach import play_reach
    from ..games.tank.engine import ACT_DIM, OBS_DIM, TankRules
    from ..games.tank.rewards import TANK_REWARD
    from ..outputs.report import plot_curve, write_report
    from ..outputs.tensorboard import ServerScalars
    from ..royale.seats import RoyaleMatchError

    tank = args.game == "tank"
    out_existed = args.out.exists()
    if not tank and (args.opponent or args.rounds or args.workers or args.league_option):
        raise ValueError("--opponent, --league-option, --rounds and --workers apply to --game tank only")
    if args.eval_rounds < 0:
        raise ValueError(f"--eval-rounds must be >= 0, got {args.eval_rounds}")
    opponents = args.opponent or [LEAGUE]
    royale = [o for o in opponents if o.startswith("royale:")]
    # With the league, Tank Royale bots are its share of a learning bot of their own (their pace is
    # the bots'); without it they are fixed opponents of the learning bots' own matches.
    royale_share = royale if LEAGUE in opponents else []
    opponents = [o for o in opponents if o not in royale_share]
    if args.workers and royale and not royale_share:
        raise ValueError("royale:PATH opponents play with --bots (threads of this process), not --workers")
    if (args.royale_matches is not None or args.royale_turns_per_s is not None) and not royale_share:
        raise ValueError(
            "--royale-matches and --royale-turns-per-s apply to Tank Royale bots in the league "
            "(--opponent league --opponent royale:PATH)"
        )
    _check_royale_bots(royale)
    layout = choose_layout(args.workers, args.bots, threads_only=bool(royale and not royale_share) or not tank)
    args.workers, args.bots = layout.workers, layout.bots
    league, table = _league(args, opponents) if tank else (None, None)
    if args.matches is None:
        args.matches = TANK_MATCHES if tank else 16
    args.tank_agents = args.matches * (args.workers or args.bots) if tank else None  # sizes PPO's rollout
    args.tank_league = tank and LEAGUE in opponents  # and PPO's entropy bonus (arena.defaults.LEAGUE_PPO)
    rules = TankRules(max_ticks=args.ticks_per_round)
    minutes = args.minutes
    if minutes is None and args.rounds is None and args.steps is None:
        minutes = 5.0 if tank else 1.0
    started = time.monotonic()
    rounds_log = MatchLog()
    server_figures: list[ServerScalars] = []  # set once the server exists; rows start after it does

    if table is not None:
        rounds_log.listener = lambda results: table.add([(w, sc, _member_name(o), d) for w, sc, o, d in results])

    def extra() -> dict[str, float]:
        row = server_figures[0]() if server_figures else {}
        if tank:
            row.update({"rollout/rounds": rounds_log.rounds, "rollout/win_rate_last_100": rounds_log.win_rate_last_100})
        if table is not None:
            row.update(table.metrics())
        return row

    log = MetricsLog(args.out / "metrics.jsonl", started, extra=extra)
    obs_dim, act_dim = (OBS_DIM, ACT_DIM) if tank else (REACH_OBS, REACH_ACT)
    server = _make_server(args, obs_dim, act_dim, log, TANK_REWARD if tank else None)  # reach bots send scalars
    server_figures.append(ServerScalars(server))
    log.dashboard = server.dashboard
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tensorboard:
        _attach_tensorboard(log, args, "arena train")
    stop = threading.Event()
    reach_games: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run_bot(i: int) -> None:
        seed = args.seed * 1000 + i
        try:
            if tank:
                from ..royale.train import play_with_royale_opponents  # royale:PATH opponents: Tank Royale bots, booted

                def play(mix: list[str], n_matches: int, hooks: dict[str, Any]) -> None:
                    play_learning_bot(
                        running.url,
                        mix,
                        n_matches=n_matches,
                        stop=stop,
                        rules=rules,
                        token=args.token,
                        seed=seed,
                        name=f"tank{i}",
                        log=rounds_log,
                        league=None if league is None else functools.partial(league.build, worker=i),
                        **hooks,
                    )

                view = _match_view(server.dashboard, args.agent, opponents) if i == 0 else None
                play_with_royale_opponents(opponents, lambda _: args.matches, rules, play, _train_line, view)
            else:
                reach_games[i], _ = play_reach(
                    running.url,
                    n_agents=args.matches,
                    steps=args.steps or 10**12,
                    token=args.token,
                    seed=seed,
                    name=f"reach{i}",
                    stop=stop,
                )
        except BaseException as exc:  # reported once below; the other bots keep going
            errors.append(exc)
            stop.set()

    what = (
        (f"vs the league ({league.describe()})" if league is not None else f"vs {', '.join(opponents)}")
        if tank
        else "on 'reach'"
    )
    if royale_share:
        share = args.royale_matches or ROYALE_MATCHES
        names = ", ".join(map(_member_name, royale_share))
        pace = args.royale_turns_per_s or ROYALE_TURNS_PER_S
        what += f" + its Tank Royale share ({names}: {share} match(es) each at {pace:g} turns/s, 1 worker process)"
    n_bots = args.workers or args.bots
    where = "worker process(es)" if args.workers else "bot thread(s)"
    print(
        f"arena train: {args.agent} {what}, {n_bots} {where} x {args.matches} matches ({layout.reason}), output in {args.out}",
        flush=True,
    )
    try:
        running = ServerThread(server).start()
    except ListenError as exc:  # a busy port: one line, exit 2, and no empty directories left behind
        for directory in (args.out / "checkpoints", *([] if out_existed else [args.out])):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only if empty
        raise ValueError(str(exc)) from None
    _announce_dashboard(server, args.token)
    if args.resume:
        print(_resume_line("arena train", server.trainer), flush=True)
    interrupted = False
    pool = None
    share_pool = None
    selector = _selector(args, tank)
    try:
        if args.workers:
            from ..bots.workers import WorkerPool

            pool = WorkerPool(
                args.workers, running.url, opponents, args.matches, args.ticks_per_round, args.token, args.seed, league
            )
            pool.start()
            bots_alive: Callable[[], bool] = pool.alive
        else:
            bots = [threading.Thread(target=run_bot, args=(i,), name=f"bot-{i}", daemon=True) for i in range(args.bots)]
            for bot in bots:
                bot.start()

            def bots_alive() -> bool:
                return any(b.is_alive() for b in bots)

        if royale_share:  # the league's Tank Royale share: a worker process of its own (its own GIL), beside the bots
            from ..bots.workers import WorkerPool

            share = args.royale_matches or ROYALE_MATCHES
            share_pool = WorkerPool(1, running.url, royale_share, share * len(royale_share), args.ticks_per_round,
                                    args.token, args.seed + 1, name="royale", royale_matches=share,
                                    turns_per_s=args.royale_turns_per_s or ROYALE_TURNS_PER_S)  # fmt: skip
            share_pool.start()

        ticks = RateWindow(RATE_WINDOW, start=(started, (0.0,)))
        with Progress(server, started, rounds_log if tank else None, ticks, table) as progress:
            while bots_alive():
                for each in (pool, share_pool):
                    if each is not None:
                        each.collect(rounds_log)
                elapsed = time.monotonic() - started
                if (
                    (minutes is not None and elapsed >= minutes * 60)
                    or (args.rounds is not None and rounds_log.rounds >= args.rounds)
                    or (tank and args.steps is not None and rounds_log.ticks >= args.steps * args.matches * n_bots)
                ) or server.failed is not None:
                    stop.set()
                    if pool is not None:
                        pool.stop.set()
                progress.update()
                if selector is not None:
                    selector.poll()
                if table is not None:
                    table.save_every(args.out / "league" / "table.json", seconds=10.0)
                    for warning in table.warnings():
                        _train_line(warning)
                time.sleep(0.25)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        print("\narena train: interrupted; stopping bots and writing a final checkpoint…", file=sys.stderr)
    finally:
        stop.set()
        played_until = time.monotonic()  # rates end here, not after the shutdown below
        if pool is not None:
            pool.close(rounds_log)
            errors.extend(RuntimeError(f"worker exited with code {code}") for code in pool.failed())
        if share_pool is not None:  # it stops its Tank Royale bot processes on the way out
            share_pool.close(rounds_log)
            if share_pool.failed():  # the league trained on without it: said, not fatal
                _train_line(f"the Tank Royale share's worker exited with code {share_pool.failed()[0]}")
        trainer_cpu = server.trainer.cpu_seconds()  # read while its thread lives
        running.stop()  # bots get 1001, the trainer joins, the final checkpoint is written
        if log.tensorboard is not None:
            log.tensorboard.close()
    if server.failed is not None:
        print(f"arena train: the trainer failed beyond its restart quota: {server.failed!r}", file=sys.stderr)
        errors.append(server.failed)
    elif errors and isinstance(errors[0], RoyaleMatchError):  # its Tank Royale opponents all failed to boot
        print(f"arena train: error: {str(errors[0]).splitlines()[0]}", file=sys.stderr)
        return 2
    elif errors:
        print(f"arena train: a bot failed: {errors[0]!r}", file=sys.stderr)
    summary = summarize(args, server, time.monotonic() - started, rounds_log if tank else None, reach_games, opponents)
    summary["layout"] = layout.as_dict()
    if table is not None and league is not None:
        table.save(args.out / "league" / "table.json")
        summary["league"] = league_summary(league, table)
    summary["throughput"] = throughput_figures(server, rounds_log if tank else None, pool, trainer_cpu, played_until)
    evaluation = None if interrupted or args.no_report or not tank else _evaluate(args)
    if selector is not None:
        returned = _returned_policy(args.out, selector, evaluation, interrupted)
        evaluation = returned.pop("evaluation", evaluation)
        summary["returned_policy"] = returned
    if evaluation is not None:
        summary["evaluation"] = evaluation
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.no_report:
        curve = plot_curve(log.rows, args.out / "learning_curve.png", tank)
        pictures = [curve] if curve else []
    else:
        settings = {"matches": args.matches, "bots": args.bots, "workers": args.workers, "seed": args.seed,
                    "ticks_per_round": args.ticks_per_round, "minutes": minutes, "resumed": args.resume}  # fmt: skip
        pictures = write_report(args.out, log.rows, summary, evaluation, settings=settings)
    if args.json:
        print(json.dumps(summary))
    else:
        print_summary(summary)
    outputs = [args.out / "summary.json", args.out / "metrics.jsonl", args.out / "checkpoints", *pictures]
    if log.tensorboard is not None:
        outputs.append(log.tensorboard.logdir)
    print("arena train: wrote " + ", ".join(str(p) for p in outputs))
    return 130 if interrupted else (1 if errors else 0)


def _check_royale_bots(kinds: list[str]) -> None:
    """Each ``royale:PATH`` names a Tank Royale bot directory (else one line and exit 2, before anything starts)."""
    from ..royale.booter import find_bot

    for kind in kinds:
        try:
            find_bot(Path(kind.removeprefix("royale:")))
        except (FileNotFoundError, ValueError) as exc:
            raise ValueError(f"--opponent {kind}: {exc}") from None


def _member_name(opponent: str) -> str:
    """A league member's name in tables: ``royale:PATH`` as ``royale:NAME`` (the bot directory's name)."""
    return f"royale:{Path(opponent.removeprefix('royale:')).name}" if opponent.startswith("royale:") else opponent


def _league(args: argparse.Namespace, opponents: list[str]) -> tuple[Any, Any]:
    """(the league's spec, its ratings table) for ``--opponent league``, else (None, None) with the files checked."""
    from ..league.commands import check_policy_file, league_spec, load_table
    from ..league.ratings import LeagueTable

    files = [o for o in opponents if o not in (LEAGUE, *SCRIPTED_NAMES) and not o.startswith("royale:")]
    if LEAGUE not in opponents:
        if args.league_option:
            raise ValueError("--league-option applies to the league (--opponent league, the default)")
        for file in files:
            check_policy_file(file)
        return None, None
    directory = args.out / "league"
    spec = league_spec(files, args.league_option, directory, args.resume, exclusive=(args.workers or args.bots) == 1)
    table = (load_table(directory) if spec.resume else None) or LeagueTable()
    return spec, table


def _selector(args: argparse.Namespace, tank: bool) -> Any:
    """The run's candidate evaluator (the returned policy is the best evaluated), or None when nothing is evaluated."""
    from ..outputs.selection import CandidateEvaluator

    if not tank or args.no_report or args.eval_rounds == 0:
        return None
    return CandidateEvaluator(args.out, args.eval_rounds, args.seed, args.ticks_per_round)


def _returned_policy(out: Path, selector: Any, evaluation: dict[str, Any] | None, interrupted: bool) -> dict[str, Any]:
    """Choose the policy the run hands back, say which and why (one line), and return the record."""
    from ..bots.policies import newest_checkpoint

    try:
        final = newest_checkpoint(out)
    except FileNotFoundError:
        final = None
    record = selector.finish(final, None if interrupted else evaluation)
    if record.get("checkpoint"):
        print(f"arena train: returning {out / record['checkpoint']}: {record['reason']}", flush=True)
    return record


def _evaluate(args: argparse.Namespace) -> dict[str, Any] | None:
    """The final checkpoint against each scripted bot (``--eval-rounds``); None when skipped or impossible."""
    from ..bots.policies import newest_checkpoint
    from ..outputs.report import evaluate_against_scripted

    if args.eval_rounds == 0:
        return None
    print(f"arena train: evaluating the final policy, {args.eval_rounds} rounds against each scripted bot…", flush=True)
    try:
        return evaluate_against_scripted(
            newest_checkpoint(args.out),
            rounds_per_opponent=args.eval_rounds,
            seed=args.seed,
            ticks_per_round=args.ticks_per_round,
        )
    except (FileNotFoundError, ValueError) as exc:  # no checkpoint written (e.g. a disk error): report without it
        print(f"arena train: no evaluation: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("arena train: evaluation interrupted; the report has no match table", file=sys.stderr)
    return None


def _match_view(dashboard: Any, agent: str, opponents: list[str]) -> Callable[[Any], None] | None:
    """Feed match 0 of a bot thread to the dashboard's live view (one bool check per tick unless watched)."""
    if dashboard is None:
        return None
    from ..games.tank import snapshot

    header: dict[str, Any] | None = None

    def watch(battle: Any) -> None:
        nonlocal header
        if dashboard.frame_wanted():
            if header is None:
                header = snapshot.header(battle, [f"learner ({agent})", opponents[0]])
            dashboard.publish_frame(header, snapshot.frame(battle, 0))

    return watch
