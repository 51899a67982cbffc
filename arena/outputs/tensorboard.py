"""TensorBoard scalars for a training run, beside the ``metrics.jsonl`` that is always written.

Each update's row becomes one scalar per key, under the reference namespaces of Stable-Baselines3
and CleanRL so runs can be compared with theirs (docs/agents.md, "Metrics and TensorBoard"):
``train/``, ``rollout/``, ``time/`` and ``server/`` keys pass through, ``updates`` and
``wall_seconds`` take SB3's names, and :class:`ServerScalars` adds the server's figures from one
``server.stats.ServerStats`` snapshot. The step axis ``time/total_timesteps`` counts transitions
the learner consumed (SB3's ``num_timesteps``), the same for PPO and TD3, restored from
checkpoints so a ``--resume`` run continues its curves.

Writer: ``tensorboardX``, small and installed by the ``tensorboard`` extra; ``torch.utils.tensorboard``
(which needs the much larger ``tensorboard`` package) when only that is there. Neither installed:
:class:`ScalarLogger` raises :class:`TensorBoardUnavailable` and training goes on with
``metrics.jsonl`` alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .run_log import StatsSource

__all__ = ["INSTALL_HINT", "STEP_KEY", "ScalarLogger", "ServerScalars", "TensorBoardUnavailable", "scalar_tag"]

logger = logging.getLogger(__name__)

INSTALL_HINT = "TensorBoard logging needs tensorboardX: pip install -e '.[tensorboard]' (metrics.jsonl is written anyway)"
"""The one line a caller prints when no writer is installed."""

STEP_KEY = "time/total_timesteps"
"""The row key used as the global step (see the module docstring)."""

_BARE_KEYS = {"updates": "train/n_updates", "wall_seconds": "time/time_elapsed"}
"""Un-namespaced row keys → their SB3 tag."""


class TensorBoardUnavailable(ImportError):
    """Neither tensorboardX nor tensorboard (for ``torch.utils.tensorboard``) is installed."""


def scalar_tag(key: str) -> str:
    """The TensorBoard tag of a row key: namespaced keys unchanged, the bare ones renamed."""
    return _BARE_KEYS.get(key, key)


def _backend() -> tuple[Any, Any]:
    """(``SummaryWriter``, ``Summary`` proto) of tensorboardX, else of torch + tensorboard.

    Raises:
        TensorBoardUnavailable: neither is installed.
    """
    try:
        from tensorboardX import SummaryWriter
        from tensorboardX.proto.summary_pb2 import Summary
    except ImportError:
        try:
            from tensorboard.compat.proto.summary_pb2 import Summary
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise TensorBoardUnavailable(INSTALL_HINT) from None
    return SummaryWriter, Summary


class ScalarLogger:
    """Writes each metrics row as TensorBoard scalars to an event file in ``logdir``.

    Called from the trainer thread (as ``arena.outputs.run_log.MetricsLog`` is), so it must be cheap: a row is
    one event holding all its scalars (one ``Summary`` with many values, as TensorFlow's
    merged summaries were), where ``add_scalar`` per key would cost a multiprocessing-queue put
    each, an order of magnitude more trainer time per row.

    A write error is logged once and turns the logger off: TensorBoard is a view of the
    run, never a reason to stop the trainer (whose update hook this is).

    After the run: call :meth:`close` (it flushes); rows passed after that are ignored.

    Raises:
        TensorBoardUnavailable: no writer package is installed (the message is :data:`INSTALL_HINT`).
    """

    def __init__(self, logdir: Path, flush_secs: float = 10.0) -> None:
        writer_class, self._summary_class = _backend()
        logdir.mkdir(parents=True, exist_ok=True)
        self.logdir = logdir
        # Small flush interval: the point of TensorBoard is watching a run live (the default is 120 s).
        self._writer: Any = writer_class(str(logdir), flush_secs=flush_secs)  # logdir (tensorboardX) = log_dir (torch)
        self._writer_lock = threading.Lock()  # guards _writer and _rows (trainer thread vs. close), nothing else
        self._rows = 0

    @property
    def closed(self) -> bool:
        return self._writer is None

    def add_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's settings once, as a markdown table under TEXT (CleanRL's "hyperparameters")."""
        lines = ["|setting|value|", "|-|-|"] + [f"|{k}|{_markdown_cell(v)}|" for k, v in sorted(config.items())]
        text = "\n".join(lines)
        self._write(lambda writer: writer.add_text("hyperparameters", text, 0))

    def __call__(self, row: Mapping[str, Any]) -> None:
        """Write one row: every finite number in it as a scalar at the row's step.

        Non-finite values are skipped: NaN means "no value yet" in the rows (e.g. the win
        rate before the first round ends), and a missing point is how a chart shows that.
        """
        scalars = {
            scalar_tag(key): float(value)
            for key, value in row.items()
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        }
        wall = time.time()

        summary = self._summary_class(value=[self._summary_class.Value(tag=t, simple_value=v) for t, v in scalars.items()])

        def add(writer: Any) -> None:
            self._rows += 1
            step = int(row.get(STEP_KEY, row.get("updates", self._rows)))
            # The file writer is what add_scalar itself calls (both libraries, for years).
            writer._get_file_writer().add_summary(summary, step, wall)

        self._write(add)

    def flush(self) -> None:
        self._write(lambda writer: writer.flush())

    def close(self) -> None:
        """Flush and close the event file; idempotent."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                logger.error("TensorBoard: closing %s failed: %s", self.logdir, exc)

    def _write(self, action: Callable[[Any], None]) -> None:
        """Run ``action(writer)`` under the lock; on a write error, log once and close the writer."""
        broken = None
        with self._writer_lock:
            if self._writer is None:
                return
            try:
                action(self._writer)
            except (OSError, ValueError) as exc:  # disk full, a file removed under it…
                logger.error("TensorBoard logging stopped (metrics.jsonl goes on): %s", exc)
                broken, self._writer = self._writer, None
        if broken is not None:
            with contextlib.suppress(Exception):  # already failing: nothing more to report
                broken.close()


def _markdown_cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|").replace("\n", " ")


class ServerScalars:
    """The server-side figures of one metrics row, from a snapshot of a running ``TrainingServer``.

    Call it once per update on the trainer thread (e.g. as ``arena.outputs.run_log.MetricsLog``'s ``extra``);
    a snapshot is safe off the event loop (``server.stats``). Without a readable loop-lag
    window at that moment (the loop appended meanwhile) the row has no lag keys.

    Keys (Stable-Baselines3's ``group/name`` style, as every metrics row): ``server/connected_bots``,
    ``server/queue_depth`` (arrivals waiting), ``server/queue_steps``, ``server/queue_bytes``, ``server/dropped_transitions``
    (all reasons, cumulative), ``server/transitions_received`` (cumulative),
    ``server/transitions_per_s`` (received, over the server's rate window, as the dashboard
    shows it), ``server/loop_lag_p50_ms``, ``server/loop_lag_p99_ms``, ``server/loop_lag_max_ms``
    (event-loop wake-up lateness over its recent window) and the step axis
    ``time/total_timesteps``. ``server/policy_lag_{min,avg,max}`` and
    ``server/policy_version`` are already in the trainer's own stats.
    """

    def __init__(self, server: StatsSource) -> None:
        self.server = server

    def __call__(self) -> dict[str, float]:
        return self.figures(self.server.stats())

    @staticmethod
    def figures(stats: Any) -> dict[str, float]:
        """The row's server keys from one snapshot (floats, as ``metrics.jsonl`` has always held them)."""
        figures = {
            STEP_KEY: float(stats.steps_trained),
            "server/connected_bots": float(stats.connected_bots),
            "server/queue_depth": float(stats.queue_arrivals),
            "server/queue_steps": float(stats.queue_steps),
            "server/queue_bytes": float(stats.queue_bytes),
            "server/dropped_transitions": float(stats.dropped_total),
            "server/transitions_received": float(stats.transitions_received),
            "server/transitions_per_s": stats.received_per_s,
        }
        if stats.loop_lag is not None:
            figures.update({f"server/loop_lag_{stat}_ms": value * 1000.0 for stat, value in stats.loop_lag.items()})
        return figures
