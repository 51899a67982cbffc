"""The trainer's coordinator (server/coordinator.py): alone it decides nothing; a rank needs a PPO agent.

The distributed form's behaviour over real process groups is tested in
tests/arena/commands/test_serve_distributed.py (two ranks under torchrun's environment).
"""

from __future__ import annotations

import pytest
import torch.distributed as dist

from agents import make_agent
from server.coordinator import Coordinator, RankCoordinator
from server.distributed import Agreement
from tests.server.test_trainer import make_trainer


def test_a_single_learner_decides_alone_and_shares_nothing():
    solo = Coordinator()
    for ready, due in ((True, False), (False, True)):
        assert solo.agree(ready, due, stopping=True) == Agreement(update=ready, checkpoint=due, stop=False)
    asked: list[bool] = []
    assert solo.checkpoint(Agreement(False, False, False), lambda: asked.append(True) or True)
    assert asked == [True], "alone, the checkpoint is decided after the update, on the clock of that moment"
    assert solo.keeps_looping(False) and not solo.keeps_looping(True)
    stats: dict[str, float] = {}
    solo.add_update_stats(stats, 0.0)
    assert stats == {} and solo.sync_seconds() == 0.0
    error = RuntimeError("boom")
    assert solo.explain(error) is error
    assert solo.restarts_allowed and solo.updates_alone and solo.final_checkpoint_on_crash


def test_a_trainer_without_a_group_gets_the_single_learner_form():
    trainer, _ = make_trainer()
    assert type(trainer.coordinator) is Coordinator


def test_a_rank_trains_ppo_only_and_never_restarts_alone(tmp_path):
    """A real one-rank gloo group (the averager needs one); attach needs no LearnerGroup."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        rank = RankCoordinator(group=None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="distributed learners train PPO"):
            rank.attach(make_agent("td3", 3, 2, hidden=(8,)))
        ppo = make_agent("ppo", 3, 2, hidden=(8,))
        rank.attach(ppo)
        assert ppo.gradient_sync is rank.gradient_sync
    finally:
        dist.destroy_process_group()
    assert not rank.restarts_allowed and not rank.updates_alone and not rank.final_checkpoint_on_crash
    assert rank.keeps_looping(True), "a rank leaves only when the ranks agreed to stop"
