"""``PolicyId``: which policy acted, as the wire names it (a ``generation`` and a ``version``).

Every ``weights`` message and every ``tr`` frame carries the two integers; the server
refuses a frame stamped newer than anything it published, a bot adopts only strictly
newer weights, and the trainer drops data of another generation. All of those compare
the *pair*, generation first: a restart or a resume bumps the generation and may reset
the version, and the new generation must still sort above every version of the old one.

It is a ``NamedTuple`` on purpose: it orders and unpacks like the ``(generation, version)``
tuples code built by hand before it existed, so it compares equal to them and mixes with
code that still builds them (the trainer, the segment assembler, the agents). On the wire
nothing changes: messages keep their two integer fields (``gen``, ``ver``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["PolicyId"]


class PolicyId(NamedTuple):
    """A policy's identity: ordered by generation, then version; ``str()`` is ``"generation.version"``."""

    generation: int
    version: int

    def __str__(self) -> str:
        """``"2.17"``: the form ``arena export`` prints (a ``repr`` still names both fields)."""
        return f"{self.generation}.{self.version}"
