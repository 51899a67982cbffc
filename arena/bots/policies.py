"""Load a trained policy for local play: from a checkpoint (``.pt``) or an exported weights file.

An exported file is exactly the ``weights`` message bots receive (``arena export``), so a
bot in any language can load it offline with the same code it uses online.
"""

from __future__ import annotations

import json
from pathlib import Path

from bot_protocol import Policy, ProtocolError, Weights, decode_from_server, encode

__all__ = [
    "RETURNED",
    "export_weights",
    "load_policy",
    "load_weights",
    "newest_checkpoint",
    "returned_checkpoint",
    "run_policy_checkpoint",
    "weights_from_checkpoint",
]

RETURNED = "returned.json"
"""A run directory's record of the policy ``arena train`` handed back (``arena.outputs.selection``)."""


def weights_from_checkpoint(path: Path) -> Weights:
    """The actor of a verified checkpoint as a ``weights`` message (generation and version kept).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the checkpoint does not verify or holds an unknown agent.
    """
    from agents import CheckpointInvalid, CheckpointStore, agent_from_checkpoint

    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = CheckpointStore.load_file(path)
    except CheckpointInvalid as exc:
        raise ValueError(str(exc)) from None
    agent = agent_from_checkpoint(state["agent"])
    arch, tensors = agent.export_actor()
    return Weights.pack(int(state["generation"]), int(state["version"]), arch, tensors)


def export_weights(checkpoint: Path, out: Path) -> Weights:
    """Write the checkpoint's (or run directory's newest checkpoint's) actor to ``out`` as one ``weights`` message."""
    weights = weights_from_checkpoint(run_policy_checkpoint(checkpoint) if checkpoint.is_dir() else checkpoint)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(encode(weights))
    tmp.replace(out)
    return weights


def newest_checkpoint(run: Path) -> Path:
    """The newest ``ckpt-*.pt`` in a run directory (``RUN/checkpoints``) or a checkpoint directory.

    Raises:
        FileNotFoundError: there is none.
    """
    for directory in (run / "checkpoints", run):
        found = sorted(directory.glob("ckpt-*.pt"))
        if found:
            return found[-1]
    raise FileNotFoundError(f"no checkpoint (ckpt-*.pt) in {run} or {run / 'checkpoints'}")


def returned_checkpoint(run: Path) -> Path | None:
    """The checkpoint a run's ``returned.json`` names, or None (no record, or its file is gone)."""
    try:
        record = json.loads((run / RETURNED).read_text())
        path = run / str(record["checkpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if path.is_file() else None


def run_policy_checkpoint(run: Path) -> Path:
    """The checkpoint that stands for a run directory: the policy the run handed back (``returned.json``:
    the best of its evaluated checkpoints), else its newest checkpoint (an older run, or one still going).

    Raises:
        FileNotFoundError: there is none.
    """
    return returned_checkpoint(run) or newest_checkpoint(run)


def load_weights(path: Path) -> Weights:
    """The policy of a checkpoint (``*.pt``), a run directory (the policy it handed back, see
    :func:`run_policy_checkpoint`) or an exported weights file, as the ``weights`` message bots receive.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a valid checkpoint or weights file.
    """
    if path.is_dir():
        path = run_policy_checkpoint(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint or weights file at {path}")
    if path.suffix == ".pt":
        return weights_from_checkpoint(path)
    try:
        message = decode_from_server(path.read_bytes())
    except ProtocolError as exc:
        raise ValueError(f"{path} is neither a checkpoint (*.pt) nor a weights file ({exc.message})") from None
    if not isinstance(message, Weights):
        raise ValueError(f"{path} holds a {message.TYPE!r} message, not weights")
    return message


def load_policy(path: Path) -> Policy:
    """A numpy policy from a checkpoint (``*.pt``), a run directory (the policy it handed back) or an
    exported weights file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a valid checkpoint or weights file, or weights that do not verify.
    """
    weights = load_weights(path)
    try:
        return Policy.from_weights(weights)
    except ProtocolError as exc:
        raise ValueError(f"{path} is not a valid weights file ({exc.message})") from None
