"""The interface the trainer thread drives; PPO, DDPG and TD3 all implement it.

The trainer never looks inside an agent: it hands over segments, asks whether an
update is due, runs it, and exports the actor for the bots. Keeping this small is
what lets one server serve on-policy and off-policy learners alike.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .common import Segment

__all__ = ["Agent"]


@runtime_checkable
class Agent(Protocol):
    """What the trainer calls, in this order, on its own thread only.

    ``observe`` → ``ready`` → ``update`` (when ready) → ``export_actor`` (to publish).
    """

    name: str
    """Short algorithm name sent to bots in ``welcome`` (``"ppo"``, ``"td3"``, …)."""
    update_steps: int
    """Steps one update consumes (sizes the server's queue: see ``server.transition_queue.ON_POLICY_QUEUED_UPDATES``)."""
    max_policy_lag: int | None
    """Segments acted by a policy more than this many versions old are dropped; ``None`` keeps all."""

    @property
    def drain_steps(self) -> int | None:
        """Most steps the trainer takes from the queue per drain; ``None`` takes everything.

        Off-policy agents take small bites while updates are owed, so each drain adds only
        a publish's worth of owed updates: bots then wait briefly and often, not long and rarely.
        """

    def observe(self, segments: list[Segment]) -> None:
        """Take segments (already filtered for staleness) into the rollout or replay buffer."""

    def ready(self) -> bool:
        """True when enough data is held for one update."""

    def discard_stale(self, oldest_version: int) -> int:
        """Drop held segments acted by a policy older than ``oldest_version``; returns their steps.

        The trainer calls it right before each update of an agent with a ``max_policy_lag``:
        staleness is checked when segments are drained, but a segment can then wait in the
        agent while an update publishes a newer version, so it is checked again at train time.
        """

    @property
    def pending_steps(self) -> int:
        """Steps held but not yet trained on (for the trainer's exact accounting)."""

    def update(self) -> dict[str, float]:
        """One update. Returns metrics keyed ``train/...``, including ``train/steps_trained``,
        ``train/applied_steps`` (gradient steps that changed the weights) and
        ``train/skipped_steps`` (steps skipped by the non-finite guard: nothing moved)."""

    def export_actor(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """(architecture, tensors) of the acting policy, in the bot-ready layout."""

    def explore_settings(self) -> dict[str, float]:
        """Exploration settings bots need beyond the weights (empty for PPO)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: networks, optimizers, counters (no data buffers)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; raises ``ValueError`` on an incompatible network."""

    def rollback(self, state: dict[str, Any]) -> None:
        """Like :meth:`load_state_dict`, but keep the data the agent holds (rollout, replay buffer).

        The trainer's recovery: after repeated non-finite updates or a crash, the learner
        goes back to a good state without throwing away experience it already has.
        """
