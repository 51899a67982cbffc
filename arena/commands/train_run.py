"""``arena train``'s run, from its plan: the server, the learning bots, the watch loop, the report.

Reads a :class:`~arena.commands.train_plan.TrainPlan` only (the flags were checked when it was
made). :class:`TrainingRun` goes in order: the server and its metrics log
(:meth:`~TrainingRun.start_server`), the bots (:func:`arena.bots.launch.launch_bots`, plus the
league's Tank Royale share) and a loop that watches the budget, the candidates and the league
every quarter second (:meth:`~TrainingRun.play`), then the summary, the returned policy and the
report (:meth:`~TrainingRun.finish`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from ..outputs.run_log import RATE_WINDOW, MetricsLog, Progress, league_summary, print_summary, summarize, throughput_figures
from .announce import announce_dashboard, attach_tensorboard, resume_line, stderr_lines
from .server_plan import make_server
from .train_plan import TrainPlan, member_name

__all__ = ["FRESH_SEED_OFFSET", "TrainingRun", "run_training"]

FRESH_SEED_OFFSET = 7919
"""The returned policy's closing evaluation plays battle seed ``--seed`` + this: fresh rounds, not the ones its
selection played (``--seed``), on which the chosen policy is optimistic by construction."""
_say = stderr_lines("arena train")
"""The run's notes and warnings, one line each on stderr."""


def run_training(plan: TrainPlan) -> int:
    """Train as ``plan`` says; the exit code (0 done, 1 a bot or the trainer failed, 2 refused, 130 interrupted)."""
    _compile_engine(plan)
    run = TrainingRun(plan)
    run.start_server()
    return run.finish(*run.play())


def _compile_engine(plan: TrainPlan) -> None:
    """Compile the numba kernels (PPO's loss, guards and GAE, the engine, the scripted bots) before the budget's clock starts.

    numba compiles them once, then every process loads them from its disk cache; a first run would otherwise
    spend its budget's first seconds on it. The line says where they were cached, or that nothing could be
    (a read-only install with no home and no writable temp directory).
    """
    from .compile import compile_kernels

    # The population's kernel only for a run that plays it (``drawn``, or ``drawn:...`` narrowed).
    drawn = any(o.partition(":")[0] == "drawn" for o in (*plan.opponents, *plan.eval_opponents))
    result = compile_kernels(ppo=plan.agent == "ppo", tank=plan.engine == "numba" and plan.tank, drawn=drawn)
    if result is not None:
        print(f"arena train: {result[0]}", flush=True)


class TrainingRun:
    """One ``arena train`` run; see the module docstring for its order."""

    def __init__(self, plan: TrainPlan) -> None:
        from ..bots.play import MatchLog

        self.plan = plan
        self.started = time.monotonic()
        self.rounds = MatchLog()
        self.table = _league_table(plan)
        self.selector = _selector(plan)
        self.server: Any = None
        self.running: Any = None
        self.log = MetricsLog(plan.out / "metrics.jsonl", self.started, extra=self._row)
        self._figures: Callable[[], dict[str, float]] | None = None
        table = self.table
        if table is not None:
            self.rounds.listener = lambda results: table.add([(w, sc, member_name(o), d) for w, sc, o, d in results])

    def _row(self) -> dict[str, float]:
        """The run's own columns of each metrics row (the server's figures, rounds, the league)."""
        row = self._figures() if self._figures is not None else {}
        if self.plan.tank:
            row.update({"rollout/rounds": self.rounds.rounds, "rollout/win_rate_last_100": self.rounds.win_rate_last_100})
        if self.table is not None:
            row.update(self.table.metrics())
        return row

    def start_server(self) -> None:
        """Build the server, say what the run does, and start it (a busy port: one line, exit 2, no empty directories)."""
        from server import ListenError, ServerThread

        from ..outputs.tensorboard import ServerScalars

        plan = self.plan
        self.server = make_server(plan.server, self.log)
        self._figures = ServerScalars(self.server)
        self.log.dashboard = self.server.dashboard
        plan.out.mkdir(parents=True, exist_ok=True)
        if plan.tensorboard:
            attach_tensorboard(self.log, plan.out, plan.flags, "arena train")
        where = "worker process(es)" if plan.layout.workers else "bot thread(s)"
        print(
            f"arena train: {plan.agent} {plan.describe()}, {plan.n_bots} {where} x {plan.matches} matches "
            f"({plan.layout.reason}), output in {plan.out}",
            flush=True,
        )
        try:
            self.running = ServerThread(self.server).start()
        except ListenError as exc:
            for directory in (plan.out / "checkpoints", *([] if plan.out_existed else [plan.out])):
                with contextlib.suppress(OSError):
                    directory.rmdir()  # only if empty
            raise ValueError(str(exc)) from None
        announce_dashboard(self.server, plan.server.server.token)
        if plan.resume:
            print(resume_line("arena train", self.server.trainer), flush=True)

    def play(self) -> tuple[Any, bool, float, float]:
        """Run the bots until the budget is spent or Ctrl-C: (the bots, interrupted, trainer CPU s, when play ended)."""
        from server.stats import RateWindow

        from ..bots.launch import BotThreads, launch_bots
        from ..bots.workers import WorkerPool

        plan, url, server = self.plan, self.running.url, self.server
        view = _match_view(server.dashboard, plan.agent, list(plan.opponents))
        bots: Any = (
            launch_bots(plan.bot_spec(url), plan.layout, self.rounds, _say, view) if plan.tank
            else BotThreads(plan.n_bots, partial(_reach_bot, plan, url)).start()
        )  # fmt: skip
        share = WorkerPool(plan.royale_share_spec(url), 1) if plan.royale_share else None  # its own process and GIL
        if share is not None:
            share.start()
        interrupted = False
        try:
            ticks = RateWindow(RATE_WINDOW, start=(self.started, (0.0,)))
            with Progress(server, self.started, self.rounds if plan.tank else None, ticks, self.table) as progress:
                while bots.alive():
                    self._tick(bots, share)
                    progress.update()
                    time.sleep(0.25)
        except KeyboardInterrupt:
            interrupted = True
            print("\narena train: interrupted; stopping bots and writing a final checkpoint…", file=sys.stderr)
        finally:
            played_until = time.monotonic()  # rates end here, not after the shutdown below
            bots.close(self.rounds)
            if share is not None:  # it stops its Tank Royale bot processes on the way out
                share.close(self.rounds)
                if share.failed():  # the league trained on without it: said, not fatal
                    _say(f"the Tank Royale share's worker exited with code {share.failed()[0]}")
            trainer_cpu = server.trainer.cpu_seconds()  # read while its thread lives
            self.running.stop()  # bots get 1001, the trainer joins, the final checkpoint is written
            if self.log.tensorboard is not None:
                self.log.tensorboard.close()
        return bots, interrupted, trainer_cpu, played_until

    def _tick(self, bots: Any, share: Any) -> None:
        """One turn of the watch loop: reports in, the budget, the candidates, the league's table and warnings."""
        for each in (bots, share):
            if each is not None:
                each.collect(self.rounds)
        set_progress = getattr(self.server.trainer.agent, "set_progress", None)
        if set_progress is not None:  # PPO's learning rate follows the budget (PPOConfig.final_lr_fraction)
            set_progress(self._progress())
        if self._spent() or self.server.failed is not None:
            bots.stop.set()
        if self.selector is not None:
            self.selector.poll()
        if self.table is not None:
            self.table.save_every(self.plan.out / "league" / "table.json", seconds=10.0)
            for warning in self.table.warnings():
                _say(warning)

    def _spent(self) -> bool:
        """Whether the budget (minutes, rounds, or ticks per bot) is spent."""
        return self._progress() >= 1.0

    def _progress(self) -> float:
        """The share of the budget spent: the largest of its parts (minutes, rounds, ticks per bot); 0 with none."""
        plan, rounds = self.plan, self.rounds
        parts = [0.0]
        if plan.minutes is not None:
            parts.append((time.monotonic() - self.started) / (plan.minutes * 60))
        if plan.rounds is not None:
            parts.append(rounds.rounds / plan.rounds)
        if plan.tank and plan.steps is not None:
            parts.append(rounds.ticks / (plan.steps * plan.matches * plan.n_bots))
        return max(parts)

    def finish(self, bots: Any, interrupted: bool, trainer_cpu: float, played_until: float) -> int:
        """Summary, returned policy and report after play; the exit code."""
        from ..royale.seats import RoyaleMatchError

        plan, server = self.plan, self.server
        errors = bots.errors()
        if server.failed is not None:
            print(f"arena train: the trainer failed beyond its restart quota: {server.failed!r}", file=sys.stderr)
            errors.append(server.failed)
        elif errors and isinstance(errors[0], RoyaleMatchError):  # its Tank Royale opponents all failed to boot
            print(f"arena train: error: {str(errors[0]).splitlines()[0]}", file=sys.stderr)
            return 2
        elif errors:
            print(f"arena train: a bot failed: {errors[0]!r}", file=sys.stderr)
        rounds = self.rounds if plan.tank else None
        summary = summarize(plan.agent, plan.game, server, time.monotonic() - self.started, rounds,
                            {} if plan.tank else bots.results, list(plan.opponents))  # fmt: skip
        summary["layout"] = plan.layout.as_dict()
        if self.table is not None and plan.league is not None:
            self.table.save(plan.out / "league" / "table.json")
            summary["league"] = league_summary(plan.league, self.table)
        pool = bots if bots.cpu_seconds is not None else None
        summary["throughput"] = throughput_figures(server, rounds, pool, trainer_cpu, played_until)
        self._report(summary, interrupted)
        return 130 if interrupted else (1 if errors else 0)

    def _report(self, summary: dict[str, Any], interrupted: bool) -> None:
        """Evaluate, choose the returned policy, write summary.json and the report, print the closing table."""
        from ..outputs.report import plot_curve, write_report

        plan, log = self.plan, self.log
        evaluation = None if interrupted or not plan.report or not plan.tank else _evaluate(plan)
        if self.selector is not None:
            returned = _returned_policy(plan, self.selector, evaluation, interrupted)
            fresh = None if interrupted or "evaluation" not in returned else _remeasure(plan, returned)
            evaluation = returned.pop("evaluation", evaluation)
            if evaluation is not None:
                evaluation = summary["selection_evaluation"] = {**evaluation, "rounds_of": "selection"}
            evaluation = fresh or evaluation
            summary["returned_policy"] = returned
        if evaluation is not None:
            summary["evaluation"] = evaluation
        (plan.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if not plan.report:
            curve = plot_curve(log.rows, plan.out / "learning_curve.png", plan.tank)
            pictures = [curve] if curve else []
        else:
            settings = {"matches": plan.matches, "bots": plan.layout.bots, "workers": plan.layout.workers,
                        "seed": plan.seed, "ticks_per_round": plan.ticks_per_round, "minutes": plan.minutes,
                        "resumed": plan.resume}  # fmt: skip
            pictures = write_report(plan.out, log.rows, summary, evaluation, settings=settings)
        outputs = [plan.out / "summary.json", plan.out / "metrics.jsonl", plan.out / "checkpoints", *pictures]
        if log.tensorboard is not None:
            outputs.append(log.tensorboard.logdir)
        wrote = "arena train: wrote " + ", ".join(str(p) for p in outputs)
        if plan.json:  # the object is the last line on stdout, as --json promises
            print(wrote)
            print(json.dumps(summary))
        else:
            print_summary(summary)
            print(wrote)


def _reach_bot(plan: TrainPlan, url: str, i: int, stop: threading.Event) -> Any:
    """Bot ``i`` of ``arena train --game reach``: ``--matches`` reach games as one websocket bot until stopped; its games."""
    from ..games.reach import play_reach

    games, _ = play_reach(url, n_agents=plan.matches, steps=plan.steps or 10**12, token=plan.server.server.token,
                          seed=plan.seed * 1000 + i, name=f"reach{i}", stop=stop)  # fmt: skip
    return games


def _league_table(plan: TrainPlan) -> Any:
    """The league's ratings table (the saved one when resuming), or None without a league."""
    if plan.league is None:
        return None
    from ..league.commands import load_table
    from ..league.ratings import LeagueTable

    return (load_table(plan.out / "league") if plan.league.resume else None) or LeagueTable()


def _selector(plan: TrainPlan) -> Any:
    """The run's candidate evaluator (the returned policy is the best evaluated), or None when nothing is evaluated."""
    from ..outputs.selection import CandidateEvaluator

    if not plan.tank or not plan.report or plan.eval_rounds == 0:
        return None
    return CandidateEvaluator(
        plan.out, plan.eval_rounds, plan.seed, plan.ticks_per_round, opponents=plan.eval_opponents, engine=plan.engine
    )


def _returned_policy(plan: TrainPlan, selector: Any, evaluation: dict[str, Any] | None, interrupted: bool) -> dict[str, Any]:
    """Choose the policy the run hands back, say which and why (one line), and return the record."""
    from ..bots.policies import newest_checkpoint

    try:
        final = newest_checkpoint(plan.out)
    except FileNotFoundError:
        final = None
    record: dict[str, Any] = selector.finish(final, None if interrupted else evaluation)
    if record.get("checkpoint"):
        print(f"arena train: returning {plan.out / record['checkpoint']}: {record['reason']}", flush=True)
    return record


def _remeasure(plan: TrainPlan, returned: dict[str, Any]) -> dict[str, Any] | None:
    """The returned policy on fresh rounds (another battle seed than its selection's), recorded in ``returned.json``
    too; None when that cannot be played (the selection rounds then stand, labelled as such)."""
    from ..outputs.report import evaluate_against_scripted
    from ..outputs.selection import score, write_record

    if not returned.get("checkpoint"):
        return None
    seed = plan.seed + FRESH_SEED_OFFSET
    print(f"arena train: the returned policy on fresh rounds, {plan.eval_rounds} against each scripted bot…", flush=True)
    try:
        fresh = evaluate_against_scripted(
            plan.out / returned["checkpoint"], rounds_per_opponent=plan.eval_rounds, seed=seed,
            ticks_per_round=plan.ticks_per_round, opponents=plan.eval_opponents, engine=plan.engine,
        )  # fmt: skip
    except (FileNotFoundError, ValueError) as exc:
        print(f"arena train: no evaluation on fresh rounds ({exc}); the report shows the selection rounds", file=sys.stderr)
        return None
    except KeyboardInterrupt:
        print("arena train: evaluation interrupted; the report shows the selection rounds", file=sys.stderr)
        return None
    returned["fresh_mean_win_rate"] = round(score(fresh), 4)
    write_record(plan.out, returned)
    return {**fresh, "rounds_of": "fresh"}


def _evaluate(plan: TrainPlan) -> dict[str, Any] | None:
    """The final checkpoint against each scripted bot (``--eval-rounds``); None when skipped or impossible."""
    from ..bots.policies import newest_checkpoint
    from ..outputs.report import evaluate_against_scripted

    if plan.eval_rounds == 0:
        return None
    print(f"arena train: evaluating the final policy, {plan.eval_rounds} rounds against each scripted bot…", flush=True)
    try:
        return evaluate_against_scripted(
            newest_checkpoint(plan.out),
            rounds_per_opponent=plan.eval_rounds,
            seed=plan.seed,
            ticks_per_round=plan.ticks_per_round,
            opponents=plan.eval_opponents,
            engine=plan.engine,
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
    from ..games.tank import frames

    header: dict[str, Any] | None = None

    def watch(battle: Any) -> None:
        nonlocal header
        if dashboard.frame_wanted():
            if header is None:
                header = frames.header(battle, [f"learner ({agent})", opponents[0]])
            dashboard.publish_frame(header, frames.frame(battle, 0))

    return watch
