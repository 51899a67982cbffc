"""What a training run writes and shows while it runs: ``metrics.jsonl``, the progress display, ``summary.json``.

Split from ``arena.cli`` (which wires them to the server): each reads a running ``TrainingServer``
through one ``server.stats.ServerStats`` snapshot (the figures ``/metrics`` and the dashboard show)
and the match log, never the server's parts.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "LOSS_FIGURES",
    "MetricsLog",
    "Progress",
    "league_summary",
    "print_summary",
    "strict_json",
    "summarize",
    "throughput_figures",
]


LOSS_FIGURES = {
    "ppo": {"policy loss": "train/policy_loss", "value loss": "train/value_loss", "approx KL": "train/approx_kl"},
    "off-policy": {"critic loss": "train/critic_loss", "actor loss": "train/actor_loss", "mean Q": "train/mean_q"},
}
"""Progress-display rows per kind of agent: label → metrics key."""


def strict_json(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with NaN and infinities as None: ``metrics.jsonl`` is strict JSON (jq, JSON.parse read it).

    ``rollout/win_rate_last_100`` is NaN until the first round ends, for example; Python's
    ``json`` would write it as the non-standard ``NaN``.
    """
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


class MetricsLog:
    """Appends one JSON line per update to ``metrics.jsonl`` (trainer thread); with ``path`` None it
    keeps the rows only (a learner rank other than 0 writes no files)."""

    def __init__(self, path: Path | None, started: float, extra: Callable[[], dict[str, float]] | None = None) -> None:
        self.path = path
        self.started = started
        self.extra = extra
        self.lock = threading.Lock()
        self.rows: list[dict[str, float]] = []
        self.dashboard: Any = None
        """The server's live dashboard, if any: each row also goes to its charts."""
        self.tensorboard: Any = None
        """An ``arena.outputs.tensorboard.ScalarLogger`` (--tensorboard), if any: each row also becomes scalars."""

    def __call__(self, stats: dict[str, float]) -> None:
        row = {"wall_seconds": round(time.monotonic() - self.started, 3), **stats, **(self.extra() if self.extra else {})}
        with self.lock:
            self.rows.append(row)
            if self.path is not None:
                with self.path.open("a") as f:
                    f.write(json.dumps(strict_json(row)) + "\n")
        if self.dashboard is not None:
            self.dashboard.publish_stats(row)
        if self.tensorboard is not None:
            self.tensorboard(row)


def summarize(
    agent: str,
    game: str,
    server: StatsSource,
    wall: float,
    rounds_log: Any,
    reach_games: dict[int, Any],
    opponents: list[str],
) -> dict[str, Any]:
    """``summary.json`` but its ``layout``, ``league``, ``throughput`` and ``evaluation``: the run's outcome."""
    stats = server.stats()
    summary: dict[str, Any] = {
        "agent": agent,
        "game": game,
        "generation": stats.trainer_policy.generation,
        "policy_version": stats.trainer_policy.version,
        "updates": stats.updates,
        "gradient_steps": stats.gradient_steps,
        "transitions": stats.transitions_received,
        "transitions_trained": stats.transitions_trained,
        "wall_seconds": round(wall, 1),
    }
    if rounds_log is not None:
        won = rounds_log.won_rounds
        summary.update(
            {
                "opponents": opponents,
                "rounds": rounds_log.rounds,
                "win_rate_last_100": round(rounds_log.win_rate_last_100, 3) if rounds_log.rounds else None,
                # With fewer than 100 rounds the first and the last 100 are the same rounds: no separate figure.
                "win_rate_first_100": round(sum(won[:100]) / 100, 3) if len(won) >= 100 else None,
                "ticks": rounds_log.ticks,
                # Time to a skill, counted from the first environment step (not from the start-up).
                "win_rate_100_after": None
                if rounds_log.perfect_at is None
                else {"seconds": round(rounds_log.perfect_at[0], 2), "steps": rounds_log.perfect_at[1]},
            }
        )
    else:
        returns = [r for game in reach_games.values() for r in game.finished]
        summary.update(
            {
                "episodes": len(returns),
                "mean_return_first_100": round(sum(returns[:100]) / max(len(returns[:100]), 1), 3),
                "mean_return_last_100": round(sum(returns[-100:]) / max(len(returns[-100:]), 1), 3),
            }
        )
    return summary


def throughput_figures(
    server: StatsSource, rounds_log: Any, pool: Any, trainer_cpu: float, played_until: float
) -> dict[str, Any]:
    """Where a run's time went: rates from the first environment step to the stop, the learner's and the bots' cost per step.

    ``bench/throughput.py`` reads these; every figure is also meaningful to a user comparing two runs.
    The rates here are whole-run means (steps / seconds played), not the snapshot's windowed rates.
    """
    stats = server.stats()
    first = rounds_log.first_tick_at if rounds_log is not None else None
    # None too when play ended before the first report reached this process (a run of a few rounds): its first
    # tick is then logged after the stop, and a rate over no time would be meaningless (it printed as negative).
    played = played_until - first if first is not None and played_until > first else None
    trained = stats.steps_trained
    figures: dict[str, Any] = {
        "seconds_from_first_step": round(played, 2) if played else None,
        "trained_steps_per_s": round(trained / played) if played else None,
        "received_steps_per_s": round(stats.transitions_received / played) if played else None,
        "update_seconds_total": round(stats.update_seconds_total, 2),
        "update_time_share": round(stats.update_seconds_total / played, 3) if played else None,
        "minibatch_ms": round(1e3 * stats.update_seconds_total / stats.gradient_steps, 2) if stats.gradient_steps else None,
        "trainer_cpu_us_per_step": round(1e6 * trainer_cpu / trained, 2) if trained else None,
        "dropped_by_reason": dict(stats.dropped),
    }
    if stats.loop_lag is not None:  # None: the window changed size under us; leave the lag out
        figures["loop_lag_p99_ms"] = round(stats.loop_lag.p99 * 1e3, 2)
        figures["loop_lag_max_ms"] = round(stats.loop_lag.max * 1e3, 2)
    if pool is not None and rounds_log is not None and rounds_log.ticks:
        figures["bot_cpu_us_per_step"] = round(1e6 * sum(pool.cpu_seconds) / rounds_log.ticks, 2)
    return figures


def league_summary(spec: Any, table: Any) -> dict[str, Any]:
    """``summary.json``'s ``league``: its parameters, its members as saved, the ratings and win rates."""
    members: list[dict[str, Any]] = []
    if spec.directory is not None:
        for state in sorted(spec.directory.glob("state*.json")):
            with contextlib.suppress(OSError, ValueError):
                members += json.loads(state.read_text()).get("members", [])
    return {"config": spec.config.as_dict(), "members": members, **table.summary()}


def print_summary(summary: dict[str, Any], file: Any = None) -> None:
    """The end of ``arena train`` as a person reads it: a short table (every number is in ``summary.json``)."""
    from rich.console import Console
    from rich.table import Table

    rows: list[tuple[str, str]] = [("agent", str(summary["agent"])), ("wall time", f"{summary['wall_seconds']:.0f} s")]
    throughput = summary.get("throughput", {})
    rate = throughput.get("trained_steps_per_s")
    steps = f"{summary['transitions_trained']:,}" + (f" ({rate:,} steps/s)" if rate else "")
    rows += [("steps trained", steps), ("updates", f"{summary['updates']:,} (policy version {summary['policy_version']})")]
    if "rounds" in summary:
        rows.append(("opponents", ", ".join(summary["opponents"])))
        rounds, last = summary["rounds"], summary.get("win_rate_last_100")
        if last is None:
            rows.append(("rounds", f"{rounds:,}: none finished"))
        elif rounds < 100:
            rows.append(("win rate", f"{last:.0%} of all {rounds} rounds (fewer than 100)"))
        else:
            first = summary.get("win_rate_first_100")
            rows.append(("win rate", f"{first:.0%} in the first 100 rounds, {last:.0%} in the last 100 of {rounds:,}"))
        perfect = summary.get("win_rate_100_after")
        if perfect:
            rows.append(("last 100 rounds all won", f"after {perfect['seconds']:.1f} s, {perfect['steps']:,} steps"))
    else:
        first, last = summary["mean_return_first_100"], summary["mean_return_last_100"]
        rows.append(("mean return", f"{first:.2f} in the first 100 episodes, {last:.2f} in the last 100"))
    league = summary.get("league")
    if league and league.get("ratings"):
        ranking = [r["name"] for r in league["ratings"]]
        where = f"#{ranking.index('learner') + 1} of {len(ranking)}" if "learner" in ranking else "unrated"
        rows.append(("league rating", f"learner {where}; top: {', '.join(ranking[:3])}"))
    evaluation = summary.get("evaluation")
    if evaluation:
        kinds = {"fresh": "fresh rounds", "selection": "its selection rounds"}
        rounds_of = kinds.get(evaluation.get("rounds_of", ""), "rounds")
        rows.append(
            (f"returned policy (v{evaluation['policy']['version']}), {evaluation['rounds_per_opponent']} {rounds_of} each",
             ", ".join(f"{o['opponent']} {o['win_rate']:.0%}" for o in evaluation["opponents"]))
        )  # fmt: skip
    returned = summary.get("returned_policy")
    if returned and returned.get("reason"):
        rows.append(("returned", f"{returned['checkpoint']}: {returned['reason']}"))
    if league and league.get("collapses"):
        rows.append(("collapses", f"{league['collapses']}: the learner lost an opponent it had beaten (league/collapses)"))
    table = Table(title="arena train: done", show_header=False)
    for key, value in rows:
        table.add_row(key, value)
    Console(file=file or sys.stdout, width=120).print(table)


class StatsSource(Protocol):
    """What the run's outputs read a server through: ``stats()`` hands out one snapshot of it (a
    ``server.stats.ServerStats``; a ``TrainingServer`` is a source). Declared here, not imported:
    arena reaches the server only from its CLI, which passes the server in."""

    def stats(self, bots: int = 0) -> Any: ...


class Rates(Protocol):
    """Per-second rates of cumulative counts (``server.stats.RateWindow`` is one)."""

    def measure(self, read: Callable[[], Sequence[float]]) -> tuple[float, tuple[float, ...], tuple[float, ...]]: ...


RATE_WINDOW = 10.0
"""Seconds the progress display's ticks/s average over (its transitions/s is the server snapshot's, as
the dashboard shows it: over the server's rate window)."""


class Progress:
    """A live rich table on a terminal; a plain line every 10 s otherwise (CI logs)."""

    def __init__(self, server: StatsSource, started: float, rounds_log: Any, ticks: Rates, league: Any = None) -> None:
        """``ticks``: the rate window over which ticks/s is averaged (the CLI passes the server's
        ``RateWindow`` of :data:`RATE_WINDOW` seconds, started at ``started`` with a count of 0)."""
        self.server = server
        self.league = league
        self.started = started
        self.rounds_log = rounds_log
        self.live: Any = None
        self._last_plain = started  # the first plain line after one interval: before it, every figure is "–"
        self._ticks = ticks

    def __enter__(self) -> Progress:
        if sys.stdout.isatty():
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)
        elif self._last_plain == self.started:  # a run shorter than one interval: one line at its end
            print("  ".join(f"{k}={v}" for k, v in self._figures().items()), flush=True)

    def _figures(self) -> dict[str, str]:
        stats = self.server.stats()
        rounds_log = self.rounds_log
        # Rates over a window, not since the previous line: an off-policy trainer drains in bursts
        # and a live table redraws twice a second, so a per-redraw rate would read 0 between drains.
        now, _, (ticks_per_s,) = self._ticks.measure(lambda: (rounds_log.ticks if rounds_log is not None else 0,))
        m = stats.last_update
        figures = {"elapsed": f"{now - self.started:.0f} s"}
        if rounds_log is not None:
            figures["rounds"] = str(rounds_log.rounds)
            figures["win rate (last 100)"] = f"{rounds_log.win_rate_last_100:.0%}" if rounds_log.rounds else "–"
            figures["ticks/s"] = f"{ticks_per_s:,.0f}"
        figures.update(
            {
                "policy version": str(stats.trainer_policy.version),
                "updates": f"{stats.updates} ({stats.gradient_steps:,} gradient steps)",
                "bots connected": str(stats.connected_bots),
                "transitions/s": f"{stats.received_per_s:,.0f}",
                "mean return (last 100)": f"{m.get('rollout/ep_rew_mean', float('nan')):.2f}",
            }
        )
        losses = LOSS_FIGURES["ppo" if stats.agent == "ppo" else "off-policy"]
        figures.update({label: f"{m.get(key, float('nan')):.4f}" for label, key in losses.items()})
        lag = stats.loop_lag  # None: the loop appended to its window while we read it (shown as "–")
        figures["loop lag p99"] = f"{lag.p99 * 1000:.1f} ms" if lag is not None else "–"
        if self.league is not None:
            figures["league"] = self.league.leader_line()
        return {k: "–" if v in ("nan", "nan ms") else v for k, v in figures.items()}

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title="arena train", show_header=False)
        for key, value in self._figures().items():
            table.add_row(key, value)
        return table

    def update(self) -> None:
        if self.live is not None:
            self.live.update(self._table())
        elif time.monotonic() - self._last_plain >= 10:
            self._last_plain = time.monotonic()
            print("  ".join(f"{k}={v}" for k, v in self._figures().items()), flush=True)
