"""The trainer (server/trainer.py) through its public seam: feed, update, step, republish, the clock.

Segments are handed over with :meth:`Trainer.feed` (as a drain would after assembly), so each rule
of the trainer is tested on its own: the staleness filter, the episode bookkeeping, publishing and the
checkpoint schedule (restarts and rollbacks: tests/server/test_recovery.py). The queue → builder path is covered by
tests/server/test_assembler.py and, over real sockets, by tests/server/test_app.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from agents import Segment, SegmentEnd, make_agent
from server import TrainerConfig
from server.metrics import Metrics
from server.trainer import Trainer, TrainerHooks
from server.transition_queue import Arrival, TransitionQueue
from server.weights import PublishedWeights

OBS, ACT = 3, 2
ROLLOUT = 32


def segment(
    steps: int,
    *,
    bot: str = "b",
    agent: int = 0,
    generation: int = 0,
    version: int = 0,
    end: SegmentEnd = SegmentEnd.TRUNCATED,
    seed: int = 0,
) -> Segment:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((steps, OBS)).astype(np.float32)
    return Segment(
        bot,
        agent,
        obs,
        rng.uniform(-1, 1, (steps, ACT)).astype(np.float32),
        np.full(steps, -2.0, np.float32),
        end,
        None if end is SegmentEnd.TERMINAL else obs[-1].copy(),
        generation,
        version,
        reward=np.ones(steps, np.float32),
    )


class Published(list[PublishedWeights]):
    """The snapshots a trainer published, in order (its ``publish`` callback)."""

    def ids(self) -> list[tuple[int, int]]:
        return [(s.generation, s.version) for s in self]


def make_trainer(
    algo: str = "ppo", published: Published | None = None, agent: Any = None, **config: Any
) -> tuple[Trainer, Published]:
    published = Published() if published is None else published
    if agent is None:
        options: dict[str, Any] = {"hidden": (8,), "seed": 0}
        if algo == "ppo":
            options.update(rollout_steps=ROLLOUT, minibatch_size=16, epochs=1)
        else:
            options.update(batch_size=16, buffer_size=256, warmup_steps=0, updates_per_publish=2)
        agent = make_agent(algo, OBS, ACT, **options)
    clock = config.pop("clock", time.monotonic)
    trainer = Trainer(
        agent,
        TransitionQueue(1 << 20),
        Metrics(),
        TrainerConfig(**config),
        TrainerHooks(publish=published.append),
        clock=clock,
    )
    return trainer, published


# ── feed and update ──────────────────────────────────────────────────────────


def test_feed_then_update_trains_the_rollout_and_publishes_the_next_version():
    trainer, published = make_trainer()
    assert not trainer.update(), "nothing held: no update"
    assert trainer.feed([segment(ROLLOUT)]) == ROLLOUT
    assert trainer.held_steps == ROLLOUT
    assert trainer.update()
    assert published.ids() == [(0, 1)] and trainer.published.version == 1
    assert trainer.held_steps == 0 and trainer.steps_trained == ROLLOUT
    assert trainer.metrics.counter("transitions_trained") == ROLLOUT
    assert trainer.last_metrics["server/policy_version"] == 1.0


def test_step_runs_the_update_for_what_was_fed():
    trainer, published = make_trainer()
    trainer.feed([segment(ROLLOUT)])
    assert trainer.step()
    assert published.ids() == [(0, 1)]
    assert not trainer.step(), "nothing queued, nothing held: step reports no work"


def test_on_policy_feed_drops_old_generations_and_stale_versions():
    trainer, _ = make_trainer()
    trainer.generation, trainer.version = 1, 10
    lag = trainer.agent.max_policy_lag
    assert lag is not None
    kept = trainer.feed(
        [
            segment(8, generation=0, version=10),  # acted before a resume: its log-probs mean nothing now
            segment(8, generation=1, version=10 - lag - 1),  # too old
            segment(8, generation=1, version=10 - lag, agent=1),  # as old as allowed
        ]
    )
    assert kept == 8
    dropped = trainer.metrics.by_label("transitions_dropped", "reason")
    assert dropped == {"old_generation": 8, "stale": 8}


def test_replay_agents_keep_every_generations_experience():
    trainer, _ = make_trainer("td3")
    trainer.generation, trainer.version = 3, 50
    assert trainer.feed([segment(8, generation=0, version=0)]) == 8
    assert not trainer.metrics.by_label("transitions_dropped", "reason")


def test_open_episodes_follow_cuts_and_ends():
    trainer, _ = make_trainer()
    trainer.feed([segment(4, agent=0, end=SegmentEnd.CUT), segment(4, agent=1, end=SegmentEnd.CUT)])
    assert trainer.open_episodes("b") == [0, 1]
    trainer.feed([segment(4, agent=0, end=SegmentEnd.TERMINAL)])
    assert trainer.open_episodes("b") == [1]
    assert trainer.episode_returns.tolist() == [8.0], "the cut's return and the end's, summed"
    assert trainer.open_episodes("someone else") == []


def test_a_bot_that_leaves_is_forgotten():
    trainer, _ = make_trainer()
    trainer.feed([segment(4, end=SegmentEnd.CUT)])
    assert trainer.open_episodes("b") == [0]
    trainer.queue.put(Arrival(session="s", bot="b", terms=False, index=0, batch=None))
    assert trainer.step()
    assert trainer.open_episodes("b") == []


def test_accounting_sees_each_step_in_exactly_one_place():
    trainer, _ = make_trainer()
    trainer.feed([segment(ROLLOUT - 8), segment(8, agent=1)])
    assert trainer.accounting()["pending_in_agent"] == ROLLOUT
    trainer.update()
    figures = trainer.accounting()
    assert (figures["trained"], figures["pending_in_agent"]) == (ROLLOUT, 0)


def test_republish_publishes_the_current_networks_under_the_current_ids():
    trainer, published = make_trainer()
    trainer.generation, trainer.version = 2, 7
    trainer.republish()
    assert published.ids() == [(2, 7)] and trainer.published is published[-1]


# ── checkpoints on the trainer's clock ───────────────────────────────────────


def test_checkpoints_follow_the_clock_and_the_first_comes_early(tmp_path: Path):
    now = [1000.0]
    trainer, _ = make_trainer(
        checkpoint_dir=tmp_path, checkpoint_interval=30.0, first_checkpoint_after=5.0, clock=lambda: now[0]
    )
    assert trainer.store is not None
    trainer.feed([segment(ROLLOUT)])
    trainer.step()  # the first update: the first checkpoint is due 5 s after it
    written = lambda: trainer.metrics.counter("checkpoints")  # noqa: E731
    assert written() == 0
    now[0] += 5.0
    trainer.step()
    assert written() == 1 and len(trainer.store.checkpoints()) == 1
    now[0] += 29.0
    trainer.step()
    assert written() == 1, "the next one waits for the interval"
    now[0] += 1.0
    trainer.step()
    assert written() == 2


def test_request_checkpoint_writes_one_at_the_next_step(tmp_path: Path):
    trainer, _ = make_trainer(checkpoint_dir=tmp_path, checkpoint_interval=3600.0, clock=lambda: 0.0)
    assert trainer.store is not None
    trainer.request_checkpoint()
    trainer.step()
    trainer.step()
    assert len(trainer.store.checkpoints()) == 1 and trainer.metrics.counter("checkpoints") == 1
