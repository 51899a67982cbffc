"""The league on disk: ``OUT/league/state.json`` and one weights file per snapshot.

A snapshot is saved as the very ``weights`` message the server publishes (``arena export``'s
format), so ``arena match --bot OUT/league/snapshots/self@v400.weights`` plays it and a bot in
any language can load it. Every file is written to a temporary name and renamed, so a crash
leaves the previous state whole, never half of a new one. ``--resume`` reloads the state
and the snapshots it names, and the league continues where it stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bot_protocol import Policy, encode

from .matchmaking import League, LeagueConfig, Member

__all__ = ["LeagueStore", "atomic_write"]


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


class LeagueStore:
    """Reads and writes one league's files under ``directory``.

    ``exclusive``: this league is the only one using the directory, so evicted snapshots'
    files are deleted. Several learning bot processes each keep their own league
    (``state-<worker>.json``) and share the snapshot files, which then stay.
    """

    def __init__(self, directory: Path, worker: int = 0, exclusive: bool = True) -> None:
        self.directory = directory
        self.exclusive = exclusive
        self.state_path = directory / ("state.json" if exclusive else f"state-{worker}.json")
        self.snapshots = directory / "snapshots"

    def save_snapshot(self, member: Member, policy: Policy) -> None:
        """Write a snapshot's weights (``member.source`` becomes its file name)."""
        member.source = f"{member.name}.weights"
        path = self.snapshots / member.source
        if not path.exists():
            atomic_write(path, encode(policy.to_weights()))

    def forget_snapshot(self, member: Member) -> None:
        if self.exclusive and member.source:
            (self.snapshots / member.source).unlink(missing_ok=True)

    def save(self, league: League, extra: dict[str, Any] | None = None) -> None:
        state = league.state_dict() | (extra or {})
        atomic_write(self.state_path, (json.dumps(state, indent=1) + "\n").encode())

    def load(self, config: LeagueConfig | None = None) -> tuple[League, dict[str, Policy]] | None:
        """The saved league and its snapshot policies, or None if nothing was saved.

        Raises:
            ValueError: the state or a snapshot file it names cannot be read.
        """
        from ..bots.policies import load_policy

        if not self.state_path.is_file():
            return None
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"league state {self.state_path} is unreadable: {exc}") from None
        league = League.from_state(state, config)
        policies: dict[str, Policy] = {}
        for member in league.snapshots():
            try:
                policies[member.name] = load_policy(self.snapshots / member.source)
            except (FileNotFoundError, ValueError) as exc:
                raise ValueError(f"league snapshot {member.name}: {exc}") from None
        return league, policies
