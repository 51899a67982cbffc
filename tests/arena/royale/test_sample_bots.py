"""Bots after Tank Royale's samples (tests/data/royale_bots), written with the official Python bot API, play here.

Corners, Crazy, Fire, RamFire, TrackFire and VelocityBot each play one short round against
``sitting`` through ``arena match --json`` (the command's entry point, in this process). A
sitting target never moves or fires, so what each bot does shows in the figures: every one of
them deals damage in those 300 turns, and RamFire, which rams its target, kills it. (TrackFire, which
keeps its gun on it, usually kills it too, but not always on a loaded machine: an official-API bot
acts on the newest tick it has read, so its aim lags when its process is starved.) A turn timeout of a second keeps a
loaded machine from skipping their turns, so a skipped turn means a bot stopped answering.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import DATA

BOTS = DATA / "royale_bots"
pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("robocode_tank_royale") is None,
        reason="the official Tank Royale bot API (pip install -e '.[royale]')",
    ),
    pytest.mark.expensive,
]

SAMPLES = {"Corners": 0, "Crazy": 0, "Fire": 0, "RamFire": 1, "TrackFire": 0, "VelocityBot": 0}
"""Each sample bot and the rounds (of 1) it surely wins against ``sitting`` within 300 turns."""


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_bot_plays_a_match_and_hits(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from arena.cli import main

    argv = ["match", "--bot", f"royale:{BOTS / name}", "--bot", "sitting", "--rounds", "1"]
    argv += ["--ticks-per-round", "300", "--turn-timeout-ms", "1000", "--json"]
    capsys.readouterr()
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    bot, target = result["bots"]
    assert result["rounds"] == 1 and (bot["name"], target["name"]) == (name, "sitting")
    assert 1 <= result["royale"]["turns"] <= 300 and result["royale"]["skipped_turns"] == {name: 0}
    assert bot["mean_score"] > 0 and target["mean_energy"] < 100  # it hit (or rammed) the target
    assert bot["wins"] >= SAMPLES[name] and target["wins"] == 0 and target["mean_score"] == 0
