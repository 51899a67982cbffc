"""CheckpointStore: atomic, verified, pruned, never unpickles code; the Trainer resumes from it with a new generation."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import CheckpointInvalid, CheckpointStore, PPOAgent, PPOConfig
from agents.checkpoint import check_torch_version
from bot_protocol import PolicyId, TransitionBatch
from server.config import TrainerConfig
from server.metrics import Metrics
from server.trainer import Trainer
from server.transition_queue import Arrival, TransitionQueue


def state_for(tag: int) -> dict:
    return {"tag": tag, "weights": torch.arange(6, dtype=torch.float32).reshape(2, 3) * tag, "nested": {"l": [1, 2.5, None]}}


def assert_state_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert a["tag"] == b["tag"]
    assert torch.equal(a["weights"], b["weights"])
    assert a["nested"] == b["nested"]


def write_with_manifest(path: Path, data: bytes) -> None:
    """Plant a checkpoint file plus a manifest whose sha256 matches it (as an attacker with disk access could)."""
    path.write_bytes(data)
    manifest = {"file": path.name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    path.with_suffix(".json").write_text(json.dumps(manifest))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ── save / load ──────────────────────────────────────────────────────────────


def test_save_load_round_trip_with_private_permissions(tmp_path):
    """A saved state loads back equal; the directory is created 0700 and files are written 0600."""
    directory = tmp_path / "ckpt"
    store = CheckpointStore(directory)
    path = store.save(state_for(3), PolicyId(1, 42))
    assert path.name == "ckpt-0001-000000042.pt"
    assert mode(directory) == 0o700
    assert mode(path) == 0o600
    assert mode(path.with_suffix(".json")) == 0o600
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (manifest["generation"], manifest["version"], manifest["bytes"]) == (1, 42, path.stat().st_size)
    assert_state_equal(CheckpointStore.load_file(path), state_for(3))
    loaded, latest = store.load_latest()
    assert latest == path
    assert_state_equal(loaded, state_for(3))
    assert not list(directory.glob("*.tmp"))


def test_load_latest_on_empty_directory_is_none(tmp_path):
    """No checkpoint yet: load_latest returns None rather than raising."""
    assert CheckpointStore(tmp_path / "empty").load_latest() is None


def test_keep_three_prunes_oldest_by_generation_then_version(tmp_path):
    """With keep=3 only the three newest (generation, version) checkpoints and their manifests survive."""
    store = CheckpointStore(tmp_path / "ckpt", keep=3)
    order = [(0, 1), (0, 2), (0, 999_999_999), (1, 0), (1, 1_000_000_000)]
    for i, (gen, ver) in enumerate(order):
        store.save(state_for(i), PolicyId(gen, ver))
    names = [p.name for p in store.checkpoints()]
    assert names == ["ckpt-0001-1000000000.pt", "ckpt-0001-000000000.pt", "ckpt-0000-999999999.pt"]
    assert sorted(p.name for p in store.directory.glob("*.json")) == sorted(n.replace(".pt", ".json") for n in names)
    loaded, _ = store.load_latest()
    assert loaded["tag"] == 4


def test_keep_must_be_positive(tmp_path):
    """keep=0 would delete every checkpoint just written: refused."""
    with pytest.raises(ValueError, match="keep"):
        CheckpointStore(tmp_path / "ckpt", keep=0)


# ── torn, tampered and stale files ───────────────────────────────────────────


def _two_checkpoints(tmp_path: Path) -> tuple[CheckpointStore, Path, Path]:
    store = CheckpointStore(tmp_path / "ckpt")
    old = store.save(state_for(1), PolicyId(0, 1))
    new = store.save(state_for(2), PolicyId(0, 2))
    return store, old, new


def test_truncated_newest_falls_back_to_previous(tmp_path):
    """A torn (truncated) newest checkpoint is invalid; load_latest returns the previous one."""
    store, old, new = _two_checkpoints(tmp_path)
    data = new.read_bytes()
    new.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointInvalid):
        CheckpointStore.load_file(new)
    loaded, path = store.load_latest()
    assert path == old
    assert_state_equal(loaded, state_for(1))


def test_flipped_byte_falls_back_to_previous(tmp_path):
    """A single flipped byte in the newest checkpoint fails its sha256; the previous one is used."""
    store, old, new = _two_checkpoints(tmp_path)
    data = bytearray(new.read_bytes())
    data[len(data) // 2] ^= 0xFF
    new.write_bytes(bytes(data))
    with pytest.raises(CheckpointInvalid, match="sha256"):
        CheckpointStore.load_file(new)
    loaded, path = store.load_latest()
    assert path == old and loaded["tag"] == 1


def test_torn_zip_with_consistent_manifest_is_still_invalid(tmp_path):
    """Even when the manifest matches the torn bytes, the broken zip is rejected as CheckpointInvalid."""
    store, old, new = _two_checkpoints(tmp_path)
    write_with_manifest(new, new.read_bytes()[:-200])
    with pytest.raises(CheckpointInvalid):
        CheckpointStore.load_file(new)
    assert store.load_latest()[1] == old


def test_missing_manifest_falls_back_to_previous(tmp_path):
    """A crash between the .pt and its manifest leaves an unverifiable file: skipped."""
    store, old, new = _two_checkpoints(tmp_path)
    new.with_suffix(".json").unlink()
    with pytest.raises(CheckpointInvalid):
        CheckpointStore.load_file(new)
    assert store.load_latest()[1] == old


def test_stale_tmp_files_are_deleted_at_construction(tmp_path):
    """*.tmp files left by a crash mid-write are removed when the store opens; real checkpoints stay."""
    directory = tmp_path / "ckpt"
    kept = CheckpointStore(directory).save(state_for(1), PolicyId(0, 1))
    stale = [directory / "ckpt-0000-000000002.pt.tmp", directory / "ckpt-0000-000000002.json.tmp"]
    for p in stale:
        p.write_bytes(b"half a checkpoint")
    CheckpointStore(directory)
    assert not any(p.exists() for p in stale)
    assert kept.exists() and kept.with_suffix(".json").exists()


# ── malicious pickle ─────────────────────────────────────────────────────────


class _Exploit:
    """Unpickling this runs a shell command (the classic __reduce__ payload)."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


def _payload(kind: str, sentinel: Path) -> bytes:
    if kind == "torch_zip":
        buffer = io.BytesIO()
        torch.save({"agent": _Exploit(sentinel)}, buffer)
        return buffer.getvalue()
    return pickle.dumps({"agent": _Exploit(sentinel)})


@pytest.mark.parametrize("kind", ["torch_zip", "raw_pickle"])
def test_malicious_pickle_is_refused_without_running(tmp_path, kind):
    """A code-executing pickle with a matching manifest raises CheckpointInvalid and its command never runs."""
    # Control: the payload is live — an unrestricted loader does run it.
    control = tmp_path / "control"
    control_data = _payload(kind, control)
    if kind == "torch_zip":
        torch.load(io.BytesIO(control_data), weights_only=False)
    else:
        pickle.loads(control_data)
    assert control.exists()

    sentinel = tmp_path / "pwned"
    store = CheckpointStore(tmp_path / "ckpt")
    good = store.save(state_for(1), PolicyId(0, 1))
    evil = store.directory / "ckpt-0009-000000009.pt"
    write_with_manifest(evil, _payload(kind, sentinel))
    with pytest.raises(CheckpointInvalid):
        CheckpointStore.load_file(evil)
    assert not sentinel.exists()
    loaded, path = store.load_latest()
    assert path == good and loaded["tag"] == 1
    assert not sentinel.exists()


# ── torch version gate ───────────────────────────────────────────────────────


@pytest.mark.parametrize("version", ["2.9.1", "2.9.0+cu121", "1.13.1", "nightly"])
def test_old_torch_is_refused(version):
    """torch < 2.10 (weights_only loader CVEs) or an unparsable version raises RuntimeError."""
    with pytest.raises(RuntimeError, match="too old"):
        check_torch_version(version)


@pytest.mark.parametrize("version", ["2.10.0", "2.13.0+cpu", "3.0.0"])
def test_current_torch_is_accepted(version):
    """torch >= 2.10 passes the gate (including the installed CPU build's local version suffix)."""
    check_torch_version(version)
    check_torch_version()


# ── Trainer resume ───────────────────────────────────────────────────────────


def _trainer(tmp_path: Path, seed: int, resume: bool) -> Trainer:
    agent = PPOAgent(PPOConfig(obs_dim=3, act_dim=2, hidden=(8,), rollout_steps=32, minibatch_size=16, seed=seed))
    return Trainer(agent, TransitionQueue(1 << 20), Metrics(), TrainerConfig(checkpoint_dir=tmp_path, resume=resume))


def test_trainer_resume_bumps_generation_and_restores_weights(tmp_path):
    """A resumed Trainer has generation old+1, the same version and counters, and bitwise-equal actor weights."""
    first = _trainer(tmp_path, seed=0, resume=False)
    with torch.no_grad():
        first.agent.actor.log_std.fill_(-1.25)
    first.generation, first.version, first.updates, first.steps_trained = 2, 17, 5, 160
    first.save_checkpoint()
    assert first.metrics.counter("checkpoints") == 1.0

    second = _trainer(tmp_path, seed=99, resume=True)
    assert second.generation == 3
    assert second.version == 17
    assert (second.updates, second.steps_trained) == (5, 160)
    assert (second.published.generation, second.published.version) == (3, 17)
    old_params = dict(first.agent.actor.named_parameters())
    new_params = dict(second.agent.actor.named_parameters())
    assert old_params.keys() == new_params.keys()
    for name, p in old_params.items():
        assert torch.equal(p, new_params[name]), name
    assert float(second.agent.actor.log_std.detach()[0]) == -1.25


def test_trainer_resume_without_checkpoint_starts_fresh(tmp_path):
    """resume=True on an empty directory starts at generation 0 instead of failing."""
    trainer = _trainer(tmp_path, seed=0, resume=True)
    assert (trainer.generation, trainer.version) == (0, 0)


def _feed_one_update(trainer: Trainer) -> None:
    """Queue one rollout acted by the trainer's current policy and let step() train and publish."""
    rng = np.random.default_rng(trainer.version)
    n = trainer.agent.update_steps
    flags = np.zeros(n, np.uint8)
    flags[-1] = 1  # one terminal episode: the segment closes and reaches the agent
    batch = TransitionBatch(
        seq=0,
        generation=trainer.generation,
        version=trainer.version,
        agent=np.zeros(n, np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.normal(size=(n, 3)).astype(np.float32),
        act=rng.normal(size=(n, 2)).astype(np.float32),
        logp=np.full(n, -2.0, np.float32),
        flags=flags,
        rew=rng.normal(size=n).astype(np.float32),
        next_obs=np.zeros((0, 3), np.float32),
    )
    trainer.queue.put(Arrival(session="s", bot="bot", terms=False, index=0, batch=batch))
    before = trainer.version
    assert trainer.step()
    assert trainer.version == before + 1


@pytest.mark.parametrize("how_it_ended", ["crashed_before_its_first_checkpoint", "its_checkpoint_is_torn"])
def test_resume_never_reuses_a_generation_that_published_weights(tmp_path, how_it_ended):
    """A resumed run (gen 1) that published weights and left no valid checkpoint must not have its generation reused.

    Bots keep the newest (generation, version) they hold and ignore "older" welcome weights, and the
    old-generation filter is what discards data acted by a dead run's weights; both need fresh generations.
    """
    first = _trainer(tmp_path, seed=0, resume=False)
    _feed_one_update(first)
    first.save_checkpoint()  # ckpt-0000-000000001

    resumed = _trainer(tmp_path, seed=0, resume=True)
    assert resumed.generation == 1
    for _ in range(3):
        _feed_one_update(resumed)  # (1, 2), (1, 3), (1, 4) reach the bots
    if how_it_ended == "its_checkpoint_is_torn":
        resumed.save_checkpoint()
        newest = resumed.store.checkpoints()[0]
        assert newest.name == "ckpt-0001-000000004.pt"
        newest.write_bytes(newest.read_bytes()[:100])
    else:
        # Within checkpoint_interval no periodic checkpoint ran, but the resume made generation 1
        # durable at once (before publishing), so the dead run's generation is on disk.
        assert resumed.store.checkpoints()[0].name == "ckpt-0001-000000001.pt"
    published = resumed.published.identity
    del resumed  # the process dies

    restarted = _trainer(tmp_path, seed=0, resume=True)
    assert restarted.generation > published[0], "generation reused: stale (gen 1) data would pass the generation filter"
    assert restarted.published.identity > published, "bots holding the dead run's weights would ignore the new welcome weights"
