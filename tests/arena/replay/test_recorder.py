"""The recorder (`arena match --record`): what it records, read back from its file, equals what was played."""

from __future__ import annotations

import numpy as np
import pytest

from arena.games.tank.engine import TankBattle
from arena.replay import Recorder, Recording


def test_recording_round_trips_the_frames_exactly(recorded, rules):
    """Loading a saved recording gives back every frame `snapshot.frame` produced during play, equal as dicts."""
    path, played, result = recorded
    recording = Recording.load(path)
    assert list(recording.frames()) == played
    assert recording.rounds == [1, 2] and recording.names == ["tracker", "spinner", "policy"]
    assert recording.meta["result"] == result and recording.seed == 5 and recording.rules == rules
    assert [f["tick"] for f in played].count(0) == 2 and played[-1]["over"]
    assert any(f["bullets"] for f in played)  # the interesting part of the format is exercised


def test_recorder_refuses_misuse(rules):
    """One bot description per name, one arena, round_started() before ticked(), something before recording()."""
    with pytest.raises(ValueError, match="one bot description per name"):
        Recorder(["a", "b"], seed=0, rules=rules, bots=[{"name": "a"}])
    recorder = Recorder(["a", "b"], seed=0, rules=rules)
    with pytest.raises(ValueError, match="nothing recorded yet"):
        recorder.recording()
    with pytest.raises(RuntimeError, match="round_started"):
        recorder.ticked(TankBattle(1, 2, rules, seed=0), np.zeros((1, 2, 5), np.float32))
    with pytest.raises(ValueError, match="records one arena"):
        recorder.round_started(TankBattle(2, 2, rules, seed=0), np.ones(2, bool))
    assert recorder.frames == 0
