"""Shared by the tests of :mod:`arena.replay`: one recorded match, and the sample recording in docs/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.bots.play import PolicyController, ScriptedController, play_match
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.frames import frame
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rules import TankRules
from arena.replay import Recorder
from bot_protocol import Architecture, Policy
from tests.conftest import ROOT


def random_policy(seed: int) -> Policy:
    """A small untrained Gaussian MLP: noisy float32 actions, the hardest case for an exact replay."""
    rng = np.random.default_rng(seed)
    arch = Architecture("gaussian_mlp", (OBS_DIM, 16, ACT_DIM), "tanh", log_std_min=-5.0, log_std_max=2.0)
    tensors = {
        "l0.weight": rng.normal(0, 0.5, (16, OBS_DIM)).astype(np.float32),
        "l0.bias": np.zeros(16, np.float32),
        "l1.weight": rng.normal(0, 0.5, (ACT_DIM, 16)).astype(np.float32),
        "l1.bias": np.full(ACT_DIM, 0.3, np.float32),
        "log_std": np.full(ACT_DIM, -0.5, np.float32),
    }
    return Policy(arch, tensors, generation=1, version=7)


class FrameLog:
    """A second observer: the frames exactly as ``snapshot.frame`` returned them during play."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        self.frames.append(frame(battle, 0))

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        self.frames.append(frame(battle, 0))


class Both:
    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        for o in self.observers:
            o.round_started(battle, matches)

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        for o in self.observers:
            o.ticked(battle, actions)


@pytest.fixture(scope="session")
def rules() -> TankRules:
    """The rules of the :func:`recorded` match (short rounds keep the tests fast)."""
    return TankRules(max_ticks=200)


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory, rules: TankRules) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """Two 200-tick rounds of tracker, spinner and a sampling policy (free-for-all), saved to a file.

    Returns the file, the frames as ``snapshot.frame`` gave them during play, and the match's result.
    Played once per session: every module of this package reads it (none writes to it).
    """
    players: list[Any] = [
        ScriptedController("tracker", 1, seed=1),
        ScriptedController("spinner", 1, seed=2),
        PolicyController("policy", random_policy(0), seed=3),
    ]
    names = [p.name for p in players]
    recorder = Recorder(names, seed=5, rules=rules, bots=[{"name": n} for n in names])
    played = FrameLog()
    result = play_match(players, 2, seed=5, n_matches=1, rules=rules, observer=Both(recorder, played))
    path = tmp_path_factory.mktemp("replay") / "match.replay"
    recorder.recording(result).save(path)
    return path, played.frames, result


@pytest.fixture(scope="session")
def sample() -> Path:
    """docs/replay_tracker.replay: the recording behind docs/replay_tracker.gif (docs/arena.md)."""
    return ROOT / "docs" / "replay_tracker.replay"
