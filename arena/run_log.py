"""What a training run writes and shows while it runs: ``metrics.jsonl``, the progress display, ``summary.json``.

Split from ``arena.cli`` (which wires them to the server): each reads a running ``TrainingServer``
through its metrics counters, the trainer's own figures and the match log, never its sockets.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LOSS_FIGURES", "MetricsLog", "Progress", "league_summary", "summarize", "throughput_figures"]


LOSS_FIGURES = {
    "ppo": {"policy loss": "train/policy_loss", "value loss": "train/value_loss", "approx KL": "train/approx_kl"},
    "off-policy": {"critic loss": "train/critic_loss", "actor loss": "train/actor_loss", "mean Q": "train/mean_q"},
}
"""Progress-display rows per kind of agent: label → metrics key."""


class MetricsLog:
    """Appends one JSON line per update to ``metrics.jsonl`` (trainer thread)."""

    def __init__(self, path: Path, started: float, extra: Callable[[], dict[str, float]] | None = None) -> None:
        self.path = path
        self.started = started
        self.extra = extra
        self.lock = threading.Lock()
        self.rows: list[dict[str, float]] = []
        self.dashboard: Any = None
        """The server's live dashboard, if any: each row also goes to its charts."""
        self.tensorboard: Any = None
        """An ``arena.tensorboard.ScalarLogger`` (--tensorboard), if any: each row also becomes scalars."""

    def __call__(self, stats: dict[str, float]) -> None:
        row = {"wall_seconds": round(time.monotonic() - self.started, 3), **stats, **(self.extra() if self.extra else {})}
        with self.lock:
            self.rows.append(row)
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if self.dashboard is not None:
            self.dashboard.publish_stats(row)
        if self.tensorboard is not None:
            self.tensorboard(row)


def summarize(
    args: argparse.Namespace, server: Any, wall: float, rounds_log: Any, reach_games: dict[int, Any], opponents: list[str]
) -> dict[str, Any]:
    trainer = server.trainer
    summary: dict[str, Any] = {
        "agent": args.agent,
        "game": args.game,
        "generation": trainer.generation,
        "policy_version": trainer.version,
        "updates": trainer.updates,
        "transitions": int(server.metrics.counter("transitions_received")),
        "transitions_trained": int(server.metrics.counter("transitions_trained")),
        "wall_seconds": round(wall, 1),
    }
    if rounds_log is not None:
        won = rounds_log.won_rounds
        summary.update(
            {
                "opponents": opponents,
                "rounds": rounds_log.rounds,
                "win_rate_last_100": round(rounds_log.win_rate_last_100, 3) if rounds_log.rounds else None,
                "win_rate_first_100": round(sum(won[:100]) / len(won[:100]), 3) if won else None,
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


def throughput_figures(server: Any, rounds_log: Any, pool: Any, trainer_cpu: float, played_until: float) -> dict[str, Any]:
    """Where a run's time went: rates from the first environment step to the stop, the learner's and the bots' cost per step.

    ``bench/throughput.py`` reads these; every figure is also meaningful to a user comparing two runs.
    """
    trainer = server.trainer
    first = rounds_log.first_tick_at if rounds_log is not None else None
    played = played_until - first if first is not None else None
    trained = trainer.steps_trained
    figures: dict[str, Any] = {
        "seconds_from_first_step": round(played, 2) if played else None,
        "trained_steps_per_s": round(trained / played) if played else None,
        "received_steps_per_s": round(server.metrics.counter("transitions_received") / played) if played else None,
        "update_seconds_total": round(trainer.update_seconds_total, 2),
        "update_time_share": round(trainer.update_seconds_total / played, 3) if played else None,
        "minibatch_ms": round(1e3 * trainer.update_seconds_total / trainer.gradient_steps_total, 2)
        if trainer.gradient_steps_total
        else None,
        "trainer_cpu_us_per_step": round(1e6 * trainer_cpu / trained, 2) if trained else None,
        "dropped_by_reason": {k: int(v) for k, v in server.metrics.by_label("transitions_dropped", "reason").items()},
    }
    with contextlib.suppress(RuntimeError):  # the window changed size under us: leave the lag out
        lag = server.lag.percentiles()
        figures["loop_lag_p99_ms"] = round(lag["p99"] * 1e3, 2)
        figures["loop_lag_max_ms"] = round(lag["max"] * 1e3, 2)
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


class Progress:
    """A live rich table on a terminal; a plain line every 10 s otherwise (CI logs)."""

    def __init__(self, server: Any, started: float, rounds_log: Any, league: Any = None) -> None:
        self.server = server
        self.league = league
        self.started = started
        self.rounds_log = rounds_log
        self.live: Any = None
        self._last_plain = 0.0
        self._last = (started, 0.0, 0)

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

    def _figures(self) -> dict[str, str]:
        server, trainer = self.server, self.server.trainer
        now = time.monotonic()
        received = server.metrics.counter("transitions_received")
        ticks = self.rounds_log.ticks if self.rounds_log is not None else 0
        then, before, ticks_before = self._last
        dt = max(now - then, 1e-6)
        self._last = (now, received, ticks)
        m = trainer.last_metrics
        figures = {"elapsed": f"{now - self.started:.0f} s"}
        if self.rounds_log is not None:
            figures["rounds"] = str(self.rounds_log.rounds)
            figures["win rate (last 100)"] = f"{self.rounds_log.win_rate_last_100:.0%}" if self.rounds_log.rounds else "–"
            figures["ticks/s"] = f"{(ticks - ticks_before) / dt:,.0f}"
        figures.update(
            {
                "policy version": str(trainer.version),
                "updates": str(trainer.updates),
                "bots connected": str(len(server.sessions)),
                "transitions/s": f"{(received - before) / dt:,.0f}",
                "mean return (last 100)": f"{m.get('rollout/ep_rew_mean', float('nan')):.2f}",
            }
        )
        losses = LOSS_FIGURES["ppo" if trainer.agent.name == "ppo" else "off-policy"]
        figures.update({label: f"{m.get(key, float('nan')):.4f}" for label, key in losses.items()})
        figures["loop lag p99"] = f"{server.lag.percentiles()['p99'] * 1000:.1f} ms"
        if self.league is not None:
            figures["league"] = self.league.leader_line()
        return figures

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
