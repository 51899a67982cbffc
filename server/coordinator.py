"""What a trainer decides with other learner ranks, and the single-rank form that decides alone.

The trainer's loop asks its coordinator at the few points where ``arena serve --distributed``
differs from one learner: how gradients reach the optimizer, where the starting state comes
from, whether to update, checkpoint or stop this step, and what a crash means. A single
learner's :class:`Coordinator` answers each with "as you decided" and does nothing, so
:mod:`server.trainer` reads straight; :class:`RankCoordinator` is the distributed case
(:mod:`server.distributed` has the group and its reasons).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from agents import Agent
from agents.distributed import GradientAverager

from .distributed import Agreement, LearnerGroup, RankLost

__all__ = ["Coordinator", "RankCoordinator", "StartingState"]


class StartingState(Protocol):
    """The trainer's state a rank takes from rank 0 at start (:class:`server.trainer.Trainer` has it).

    A protocol, not the class: the trainer holds its coordinator, so naming it here would tie the two in a circle.
    """

    agent: Agent
    generation: int
    version: int
    updates: int
    steps_trained: int


logger = logging.getLogger(__name__)


class Coordinator:
    """One learner alone: every decision is its own, and nothing is shared."""

    restarts_allowed = True
    """A crash may restart the trainer from its checkpoint (a rank cannot: the others would train another policy)."""
    updates_alone = True
    """:meth:`Trainer.update` may run outside a step (a rank updates only when every rank does)."""
    final_checkpoint_on_crash = True
    """A trainer that gives up writes a last checkpoint when its state is finite."""

    def attach(self, agent: Agent) -> None:
        """Wire the agent's gradient steps (a single learner's need nothing)."""

    def start(self, trainer: StartingState) -> None:
        """Bring the trainer's starting state in line (a single learner's is its own)."""

    def agree(self, ready: bool, checkpoint_due: bool, stopping: bool) -> Agreement:
        """This step's decisions: update, checkpoint, and whether every learner stops after it."""
        return Agreement(update=ready, checkpoint=checkpoint_due, stop=False)

    def checkpoint(self, agreed: Agreement, due: Callable[[], bool]) -> bool:
        """Whether this step writes a checkpoint: alone, ``due()`` asked after the update (which took time)."""
        return due()

    def keeps_looping(self, stop_requested: bool) -> bool:
        """Whether the loop runs another step (a single learner stops when asked)."""
        return not stop_requested

    def add_update_stats(self, stats: dict[str, float], sync_before: float) -> None:
        """Add what coordinating cost this update to its metrics (nothing alone)."""

    def explain(self, exc: BaseException) -> BaseException:
        """The error a crash beyond recovery is reported as."""
        return exc

    def sync_seconds(self) -> float:
        """Seconds spent averaging gradients with other learners so far."""
        return 0.0


class RankCoordinator(Coordinator):
    """One learner rank of ``arena serve --distributed``: gradients averaged, decisions agreed, rank 0's start."""

    restarts_allowed = False
    updates_alone = False
    final_checkpoint_on_crash = False  # the crash may fall between two gradient steps; the group restarts from rank 0's

    def __init__(self, group: LearnerGroup) -> None:
        self.group = group
        self.gradient_sync = GradientAverager()

    def attach(self, agent: Agent) -> None:
        distribute = getattr(agent, "distribute", None)
        if distribute is None:
            raise ValueError(f"distributed learners train PPO (synchronous updates of one size); not {agent.name}")
        distribute(self.gradient_sync)

    def start(self, trainer: StartingState) -> None:
        """Every rank starts from rank 0's state (fresh or just resumed): weights, optimizer, policy id.

        The data buffers stay each rank's own (a PPO agent holds none at start).
        """
        group = self.group
        mine: dict[str, Any] | None = None
        if group.is_leader:
            agent_state = {k: v for k, v in trainer.agent.state_dict().items() if k != "replay"}
            mine = {"agent": agent_state, "generation": trainer.generation, "version": trainer.version,
                    "updates": trainer.updates, "steps_trained": trainer.steps_trained}  # fmt: skip
        shared = group.share(mine)
        if not group.is_leader:
            trainer.agent.load_state_dict(shared["agent"])
            trainer.generation, trainer.version = int(shared["generation"]), int(shared["version"])
            trainer.updates, trainer.steps_trained = int(shared["updates"]), int(shared["steps_trained"])
        logger.info("rank %d of %d starts at generation %d, version %d", group.rank, group.world_size,
                    trainer.generation, trainer.version)  # fmt: skip

    def agree(self, ready: bool, checkpoint_due: bool, stopping: bool) -> Agreement:
        """The ranks' one collective a step: update, checkpoint and stop together."""
        return self.group.agree(ready, checkpoint_due, stopping)

    def checkpoint(self, agreed: Agreement, due: Callable[[], bool]) -> bool:
        return agreed.checkpoint  # rank 0's clock before the update, as every rank agreed

    def keeps_looping(self, stop_requested: bool) -> bool:
        return True  # until the ranks agree to stop: a rank that left alone would hang the others' collectives

    def add_update_stats(self, stats: dict[str, float], sync_before: float) -> None:
        # What averaging the gradients over the ranks cost this update (a rank waiting on a slower one included).
        stats["distributed/allreduce_seconds"] = self.gradient_sync.seconds - sync_before

    def explain(self, exc: BaseException) -> BaseException:
        return self.group.explain(exc)

    def sync_seconds(self) -> float:
        return self.gradient_sync.seconds


def stopped_by_another_rank() -> RankLost:
    """Why a rank stops when the group agreed to stop and it was not asked to."""
    return RankLost("another learner rank stopped, so this one stops too")
