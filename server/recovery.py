"""The trainer's way back: restarts after a crash and rollbacks after non-finite updates.

Supervision (ML-Agents' pattern): an exception inside a trainer step restarts the trainer from
the newest valid checkpoint (or the last good state in memory) under a new generation, at most
once per ``restart_interval`` and ``max_restarts`` times in all; ingress keeps running meanwhile.
Numerical guard: an update whose every gradient step was skipped as non-finite publishes
nothing, and ``rollback_after_skips`` of those in a row roll the agent back to its last good
state. Either way the agent keeps the data it holds (a replay buffer survives); only the
learner's networks, optimizers and counters go back.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

import torch

from agents import Agent, CheckpointStore

from .config import TrainerConfig
from .metrics import Metrics
from .run_state import copy_state

__all__ = ["Recoverable", "Recovery"]


class Recoverable(Protocol):
    """What recovery reads and sets on a trainer (:class:`server.trainer.Trainer` is one).

    A protocol, not the class: the trainer holds its recovery, so naming it here would tie the two in a circle.
    """

    agent: Agent
    config: TrainerConfig
    metrics: Metrics
    store: CheckpointStore | None
    generation: int
    version: int
    clock: Callable[[], float]

    @property
    def restarts_allowed(self) -> bool:
        """Whether a crash may restart it (a learner rank may not)."""

    def drop_lost_steps(self) -> None:
        """Count the steps a failed update took out of the agent as dropped."""

    def publish_new_generation(self) -> None:
        """Publish the restored policy under its new generation."""


logger = logging.getLogger(__name__)


class Recovery:
    """Restarts and rollbacks of one :class:`~server.trainer.Trainer` (see the module docstring)."""

    def __init__(self, trainer: Recoverable) -> None:
        self.trainer = trainer
        self.restarts = 0
        self._last_restart = -math.inf
        self._skipped_in_a_row = 0
        self._last_good: tuple[dict[str, Any], int] | None = None

    def remember_good_state(self) -> None:
        """Take the trainer's current state (without any data buffer) as the target of the next rollback."""
        trainer = self.trainer
        state = {k: v for k, v in trainer.agent.state_dict().items() if k != "replay"}
        self._last_good = copy_state(state), trainer.version

    def state_is_finite(self) -> bool:
        """Whether every float tensor of the agent's state is finite (a state worth keeping or saving)."""

        def finite(value: Any) -> bool:
            if isinstance(value, torch.Tensor):
                return not value.is_floating_point() or bool(torch.isfinite(value).all())
            if isinstance(value, dict):
                return all(finite(v) for v in value.values())
            return True

        return finite({k: v for k, v in self.trainer.agent.state_dict().items() if k != "replay"})

    def restart(self, exc: Exception) -> bool:
        """Recover from a crash inside a trainer step if the quota allows; False to give up."""
        trainer = self.trainer
        now = trainer.clock()
        cfg = trainer.config
        if not trainer.restarts_allowed:
            return False
        if self.restarts >= cfg.max_restarts or now - self._last_restart < cfg.restart_interval:
            return False
        self.restarts += 1
        self._last_restart = now
        trainer.metrics.inc("trainer_restarts")
        logger.error("trainer crashed (restart %d of %d): %r", self.restarts, cfg.max_restarts, exc, exc_info=exc)
        trainer.drop_lost_steps()
        found = trainer.store.load_latest() if trainer.store is not None else None
        if found is not None:
            state, path = found
            logger.info("restarting from %s", path.name)
            self.roll_back("restart", (state["agent"], int(state["version"])))
        else:
            self.roll_back("restart")
        trainer.publish_new_generation()
        return True

    def update_skipped(self) -> None:
        """An update whose every step was non-finite: count it, and roll back after ``rollback_after_skips`` in a row."""
        trainer = self.trainer
        self._skipped_in_a_row += 1
        trainer.metrics.inc("nan_skips")
        logger.warning("update skipped: every gradient step was non-finite (%d in a row)", self._skipped_in_a_row)
        if self._skipped_in_a_row >= trainer.config.rollback_after_skips:
            self._skipped_in_a_row = 0
            self.roll_back("nonfinite")
            trainer.publish_new_generation()

    def update_applied(self) -> None:
        """An update moved the weights: the run of skipped updates is over."""
        self._skipped_in_a_row = 0

    def roll_back(self, why: str, target: tuple[dict[str, Any], int] | None = None) -> None:
        """Restore ``target`` (default: the last good state kept in memory) under a new generation."""
        trainer = self.trainer
        assert self._last_good is not None, "the trainer remembers a good state when it is made"
        state, version = target if target is not None else self._last_good
        trainer.agent.rollback(copy_state(state))
        highest = trainer.store.highest_generation() if trainer.store is not None else trainer.generation
        trainer.generation = max(trainer.generation, highest) + 1
        trainer.version = version
        trainer.metrics.inc("rollbacks", reason=why)
        logger.warning("rolled back to version %d (%s); now generation %d", version, why, trainer.generation)
