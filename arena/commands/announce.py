"""What a running ``arena`` command tells its user: its dashboard, what it resumed, one-line notes on stderr.

Shared by ``arena train``, ``arena serve`` and ``arena match``; also the one place a run's metrics
log gains its TensorBoard writer (``--tensorboard``). The flags themselves are in
:mod:`arena.commands.options`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..outputs.run_log import MetricsLog

__all__ = ["announce_dashboard", "attach_tensorboard", "resume_line", "stderr_lines"]


def announce_dashboard(server: Any, token: str | None) -> None:
    """Print the live dashboard's address (with a token placeholder when bots need one); nothing without a dashboard."""
    if server.dashboard is not None:
        hint = "?token=<your token>" if token else ""
        print(f"dashboard: {server.dashboard.url.rstrip('/')}/{hint}", flush=True)


def attach_tensorboard(log: MetricsLog, out: Path, config: Mapping[str, Any], command: str) -> None:
    """``--tensorboard``: every row of ``log`` also as TensorBoard scalars in ``out/tensorboard``, ``config`` (the
    command line as parsed) recorded once; a missing package is one line on stderr, not an error."""
    from ..outputs.tensorboard import ScalarLogger, TensorBoardUnavailable

    try:
        log.tensorboard = ScalarLogger(out / "tensorboard")
        log.tensorboard.add_config({k: str(v) if isinstance(v, Path) else v for k, v in config.items()})
    except TensorBoardUnavailable as exc:
        print(f"{command}: {exc}", file=sys.stderr)


def resume_line(command: str, trainer: Any) -> str:
    """What ``--resume`` resumed: the checkpoint, the new generation and the version it continues."""
    if trainer.resumed_from is None:
        return f"{command}: no valid checkpoint to resume from; starting fresh as generation {trainer.generation}"
    return (
        f"{command}: resumed from {trainer.resumed_from.name}: generation {trainer.generation}, version "
        f"{trainer.version}, {trainer.updates:,} updates and {trainer.steps_trained:,} steps trained before"
    )


def stderr_lines(command: str) -> Callable[[str], None]:
    """A ``say`` for ``command``'s notes while it runs: each message one flushed line on stderr, after its name.

    stderr, so that stdout stays what scripts read (a table, ``--json``'s one object).
    """

    def say(message: str) -> None:
        print(f"{command}: {message}", file=sys.stderr, flush=True)

    return say
