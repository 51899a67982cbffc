"""Restarts and rollbacks (server/recovery.py), through a real trainer and its public seams.

A crash inside a step restarts the trainer under a new generation while the quota allows, and stops
it (reported once) beyond; non-finite updates publish nothing and roll back after enough in a row.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

from server import TrainerConfig
from server.metrics import Metrics
from server.trainer import Trainer, TrainerHooks
from server.transition_queue import TransitionQueue
from tests.conftest import timeout
from tests.server.test_trainer import ROLLOUT, make_trainer, segment


class _FailingUpdates:
    """Wraps an agent so that its next ``failures`` updates raise."""

    def __init__(self, agent: Any, failures: int) -> None:
        self._agent = agent
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def update(self) -> dict[str, float]:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("injected update failure")
        result: dict[str, float] = self._agent.update()
        return result


def _wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + timeout(seconds)
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_a_crash_restarts_the_trainer_under_a_new_generation_and_it_trains_on():
    base, _ = make_trainer()
    agent = _FailingUpdates(base.agent, failures=1)
    trainer, published = make_trainer(agent=agent, restart_interval=0.0, max_restarts=1)
    trainer.start()
    try:
        trainer.feed([segment(ROLLOUT)])
        _wait_for(lambda: trainer.restarts == 1 and published, 10)
        assert published.ids()[0] == (1, 0), "the restart republishes under a new generation"
        # The update failed before taking the rollout: the agent still holds it, nothing is lost,
        # and it is trained under the new generation; fresh data then trains on.
        assert not trainer.metrics.by_label("transitions_dropped", "reason")
        _wait_for(lambda: (1, 1) in published.ids(), 10)
        trainer.feed([segment(ROLLOUT, generation=1, version=1)])
        _wait_for(lambda: (1, 2) in published.ids(), 10)
        assert trainer.steps_trained == 2 * ROLLOUT
    finally:
        trainer.stop(checkpoint=False)
    assert trainer.error is None


def test_a_crash_beyond_the_quota_stops_the_trainer_and_reports_it():
    base, _ = make_trainer()
    fatal: list[BaseException] = []
    stopped = threading.Event()

    def on_fatal(exc: BaseException) -> None:
        fatal.append(exc)
        stopped.set()

    trainer = Trainer(
        _FailingUpdates(base.agent, failures=5),
        TransitionQueue(1 << 20),
        Metrics(),
        TrainerConfig(max_restarts=0),
        TrainerHooks(on_fatal=on_fatal),
    )
    trainer.start()
    trainer.feed([segment(ROLLOUT)])
    assert stopped.wait(timeout(10))
    assert isinstance(trainer.error, RuntimeError) and fatal == [trainer.error]
    assert not trainer.alive


def test_restarts_are_spaced_by_the_interval_and_capped_by_the_quota():
    """On the trainer's clock: a second crash within restart_interval gives up, and so does one beyond max_restarts."""
    now = [100.0]
    trainer, published = make_trainer(restart_interval=60.0, max_restarts=2, clock=lambda: now[0])
    recovery = trainer.recovery
    assert recovery.restart(RuntimeError("first"))
    assert (trainer.generation, published.ids()) == (1, [(1, 0)])
    now[0] += 30.0
    assert not recovery.restart(RuntimeError("too soon"))
    now[0] += 31.0
    assert recovery.restart(RuntimeError("second"))
    now[0] += 61.0
    assert not recovery.restart(RuntimeError("beyond the quota"))
    assert trainer.restarts == 2 and trainer.metrics.counter("trainer_restarts") == 2


def test_skipped_updates_roll_back_to_the_last_good_state_after_enough_in_a_row():
    trainer, published = make_trainer(rollback_after_skips=2)
    recovery = trainer.recovery
    good = [p.detach().clone() for p in trainer.agent.actor.parameters()]
    recovery.remember_good_state()
    with torch.no_grad():
        next(trainer.agent.actor.parameters()).fill_(float("nan"))
    assert not recovery.state_is_finite()
    recovery.update_skipped()
    assert trainer.generation == 0 and not published  # one skip: nothing yet
    recovery.update_applied()  # a good update in between resets the count
    recovery.update_skipped()
    assert trainer.generation == 0
    recovery.update_skipped()
    assert trainer.generation == 1 and published.ids() == [(1, 0)]
    assert trainer.metrics.counter("rollbacks", reason="nonfinite") == 1 and trainer.metrics.counter("nan_skips") == 3
    for before, after in zip(good, trainer.agent.actor.parameters(), strict=True):
        assert torch.equal(before, after)
    assert recovery.state_is_finite()
