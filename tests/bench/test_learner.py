"""bench/learner.py: both action spaces build their agents and time a real update of each step (tiny shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.networks import MixedActor
from agents.ppo import PPOAgent
from agents.ppo.steps import EagerStep, WrittenOutStep
from bench.learner import BOARD_DIM, COLUMNS, STEPS, board_segments, config_for, time_updates

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_connect_fours_shape_is_the_masked_actor_on_the_written_out_step_and_the_reference():
    fused, reference = (PPOAgent(config_for("connect-four", 256, 64, 2, fused)) for fused in (True, False))
    assert isinstance(fused.actor, MixedActor) and fused.config.branches == (COLUMNS,) and fused.config.act_dim == 0
    assert type(fused.step) is WrittenOutStep and type(reference.step) is EagerStep


def test_board_segments_are_legal_moves_of_the_asked_length():
    segments = board_segments(300, np.random.default_rng(0))
    assert sum(s.steps for s in segments) == 300
    for s in segments:
        assert s.obs.shape[1] == BOARD_DIM and s.act.shape[1] == 1 + COLUMNS
        taken, mask = s.act[:, 0].astype(int), s.act[:, 1:]
        assert (mask[np.arange(len(taken)), taken] == 1.0).all()


@pytest.mark.parametrize("space", ["tank", "connect-four"])
def test_time_updates_reports_both_steps(space: str):
    points = time_updates(256, 64, threads=1, repeats=1, epochs=1, space=space)
    assert [p["step"] for p in points] == list(STEPS) and all(p["space"] == space for p in points)
    assert all(p["seconds_per_update"] > 0 and p["env_steps_per_s"] > 0 for p in points)
