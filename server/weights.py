"""Published weights (serialized once, on the trainer thread) and per-bot latest-wins delivery.

A published policy is encoded into its final ``weights`` frame exactly once, however many bots
receive it. Each connection has a :class:`WeightsSlot` holding at most one pending policy: a
slow reader skips straight to the newest version instead of buffering every one (websockets'
``broadcast()`` has no backpressure and would copy per bot).

Words: "published weights" is a policy as the trainer hands it to bots; "snapshot" is kept for
the league's frozen copies of the learner (``arena.league``), "reading" for a
:class:`~server.stats.ServerStats`, "frame" for a match's drawn state (``arena.games.tank.frames``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bot_protocol import PolicyId, Weights, encode

__all__ = ["PublishedWeights", "WeightsSlot", "published_weights"]


@dataclass(frozen=True)
class PublishedWeights:
    """One published policy: its identity, the message, and the ready-to-send frame."""

    generation: int
    version: int
    message: Weights
    frame: bytes
    published_at: float
    """``time.monotonic()`` when the trainer made it (hot-swap latency is measured from here)."""

    @property
    def identity(self) -> PolicyId:
        """Which policy this is: published weights and slots compare these, never versions alone."""
        return PolicyId(self.generation, self.version)


def published_weights(
    policy: PolicyId,
    arch: dict[str, Any],
    tensors: dict[str, NDArray[np.float32]],
    explore: dict[str, float] | None = None,
) -> PublishedWeights:
    """Serialize an exported actor into a ``weights`` message and frame (call on the trainer thread).

    ``explore`` rides along so a change (the end of an off-policy warm-up) reaches bots
    with the weights that go with it.
    """
    message = Weights.pack(policy.generation, policy.version, arch, tensors, explore)
    return PublishedWeights(policy.generation, policy.version, message, encode(message), time.monotonic())


class WeightsSlot:
    """At most one pending policy per connection; a newer offer replaces an unsent one.

    No event and no waiting task: an idle connection should cost as little memory as
    possible (docs/reliability.md, L4), so the server starts a sender task only while
    something is pending (see ``server.delivery.WeightsDelivery.offer``).
    """

    __slots__ = ("_pending", "delivered")

    def __init__(self, delivered: PolicyId) -> None:
        self.delivered = delivered
        """Identity of the newest policy handed to the socket (or sent in ``welcome``)."""
        self._pending: PublishedWeights | None = None

    def offer(self, weights: PublishedWeights) -> bool:
        """Keep ``weights`` if it is newer than anything delivered or pending; True if kept."""
        if weights.identity <= self.delivered:
            return False
        if self._pending is None or weights.identity > self._pending.identity:
            self._pending = weights
            return True
        return False

    def take(self) -> PublishedWeights | None:
        """The policy to send now (marked delivered), or None when nothing is pending."""
        weights, self._pending = self._pending, None
        if weights is not None:
            self.delivered = weights.identity
        return weights
