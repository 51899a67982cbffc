"""Re-simulation: the engine, fed the recorded actions, redraws every recorded frame (and notices a change)."""

from __future__ import annotations

import dataclasses

from PIL import Image

from arena.replay import Recording, RenderConfig, frame_indices, resimulate, verify


def test_replay_reproduces_the_match_tick_for_tick(recorded):
    """Re-simulating from the seed and the recorded actions yields every recorded frame, in order."""
    recording = Recording.load(recorded[0])
    assert list(resimulate(recording)) == list(recording.frames())
    checked = verify(recording)
    assert checked.ok and checked.frames == recording.n_frames and checked.rounds == 2


def test_verify_finds_a_changed_action(recorded):
    """One altered action (a tank turning instead of what it did) is caught at or after its tick."""
    recording = Recording.load(recorded[0])
    actions = recording.actions.copy()
    actions[30, 0] = [1.0, 1.0, 1.0, -1.0, -1.0]
    checked = verify(dataclasses.replace(recording, actions=actions))
    assert checked.mismatch is not None and checked.mismatch.index >= 30
    assert "round 1" in checked.mismatch.describe()


def test_sample_replay_in_docs_verifies(sample):
    """docs/replay_tracker.replay (the match docs/replay_tracker.gif shows) still re-simulates frame for frame.

    An engine change that alters any rule's outcome breaks this: then re-record the sample (docs/arena.md says how)
    or find out why the engine departs from what it did."""
    recording = Recording.load(sample)
    assert recording.names[1] == "tracker" and recording.n_frames == 1331 and recording.rounds == [1]
    checked = verify(recording)
    assert checked.ok, checked.mismatch.describe() if checked.mismatch else ""
    assert checked.frames == 1331
    with Image.open(sample.with_suffix(".gif")) as gif:  # the GIF is this recording at stride 3
        assert gif.n_frames == len(frame_indices(recording, RenderConfig(stride=3)))
