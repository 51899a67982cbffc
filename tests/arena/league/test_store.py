"""The league on disk (arena/league/store.py): state.json, snapshot weights files, atomic writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.observation import OBS_DIM
from arena.league import League, LeagueConfig, LeagueStore
from arena.league.store import atomic_write
from bot_protocol import Architecture, Policy, Weights


def tiny_policy(version: int) -> Policy:
    """A linear numpy actor (no torch): enough to be saved, reloaded and compared."""
    rng = np.random.default_rng(version)
    tensors = {
        "l0.weight": rng.normal(size=(ACT_DIM, OBS_DIM)).astype(np.float32),
        "l0.bias": rng.normal(size=ACT_DIM).astype(np.float32),
        "log_std": np.full(ACT_DIM, -0.5, np.float32),
    }
    arch = Architecture("gaussian_mlp", (OBS_DIM, ACT_DIM), "tanh", -3.0, 0.0)
    return Policy.from_weights(Weights.pack(0, version, arch, tensors))


def test_save_and_load_round_trip_with_a_snapshot(tmp_path) -> None:
    store = LeagueStore(tmp_path / "league")
    assert store.load() is None  # nothing saved yet
    league = League.start(LeagueConfig(snapshot_every=2, max_snapshots=2), ("sitting", "tracker"))
    member, _ = league.add_snapshot(4)
    policy = tiny_policy(4)
    store.save_snapshot(member, policy)
    assert member.source == "self@v4.weights" and (store.snapshots / member.source).is_file()
    store.save(league, extra={"note": "kept"})
    assert json.loads(store.state_path.read_text())["note"] == "kept"
    assert sorted(p.name for p in store.directory.rglob("*")) == [
        "self@v4.weights",
        "snapshots",
        "state.json",
    ]  # no temp files
    loaded = store.load()
    assert loaded is not None
    again, policies = loaded
    assert again.state_dict() == league.state_dict() and list(policies) == ["self@v4"]
    obs = TankBattle(3, 2, seed=0).observe()[:, 1]
    np.testing.assert_array_equal(policies["self@v4"].mean(obs), policy.mean(obs))


def test_unreadable_state_and_missing_snapshots_are_refused(tmp_path) -> None:
    store = LeagueStore(tmp_path)
    league = League.start(LeagueConfig(max_snapshots=2), ("sitting",))
    league.add_snapshot(2)
    store.save(league)
    with pytest.raises(ValueError, match="league snapshot self@v2"):
        store.load()  # the state names a snapshot whose file is not there
    atomic_write(store.state_path, b"{")
    with pytest.raises(ValueError, match="unreadable"):
        store.load()


def test_only_an_exclusive_store_deletes_forgotten_snapshots(tmp_path) -> None:
    shared = LeagueStore(tmp_path, worker=2, exclusive=False)
    assert shared.state_path.name == "state-2.json" and LeagueStore(tmp_path).state_path.name == "state.json"
    league = League.start(LeagueConfig(max_snapshots=2), ("sitting",))
    member, _ = league.add_snapshot(6)
    shared.save_snapshot(member, tiny_policy(6))
    written = (shared.snapshots / member.source).read_bytes()
    other, _ = League.start(LeagueConfig(max_snapshots=2), ("sitting",)).add_snapshot(6)
    shared.save_snapshot(other, tiny_policy(7))  # the file is there already: another worker wrote it, kept as is
    assert (shared.snapshots / member.source).read_bytes() == written
    shared.forget_snapshot(member)
    assert (shared.snapshots / member.source).exists()
    LeagueStore(tmp_path).forget_snapshot(member)
    assert not (shared.snapshots / member.source).exists()
