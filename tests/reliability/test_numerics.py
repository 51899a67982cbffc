"""B6 numerical guards (N1–N3) and B4 C6 (the trainer supervisor), on the real Trainer and agents.

Data is injected straight into the agents, bypassing ingress validation (which already
refuses NaN, Inf and |x| > 1e6 at the socket), to prove the trainer's own last line of defence.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
import torch

from agents import Segment, SegmentEnd, TD3Agent, make_agent
from server import TrainerConfig
from server.metrics import Metrics
from server.trainer import Trainer, TrainerHooks
from server.transition_queue import TransitionQueue

from ..conftest import running_server, timeout

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS, ACT = 3, 2


def _segment(steps: int, seed: int = 0, value: float | None = None, reward: float | None = None) -> Segment:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((steps, OBS)).astype(np.float32)
    rewards = rng.standard_normal(steps).astype(np.float32)
    if value is not None:
        obs[:] = value
    if reward is not None:
        rewards[:] = reward
    return Segment(
        "b", 0, obs, rng.uniform(-1, 1, (steps, ACT)).astype(np.float32), np.zeros(steps, np.float32),
        SegmentEnd.TRUNCATED, obs[-1].copy(), 0, 0, reward=rewards,
    )  # fmt: skip


def _agents() -> dict[str, Any]:
    return {
        "ppo": lambda: make_agent("ppo", OBS, ACT, hidden=(16,), rollout_steps=64, minibatch_size=32, epochs=1),
        "td3": lambda: make_agent(
            "td3", OBS, ACT, hidden=(16,), batch_size=16, buffer_size=512, warmup_steps=0, updates_per_publish=4
        ),
    }


def _trainer(agent: Any, published: list[Any], **config: Any) -> Trainer:
    return Trainer(agent, TransitionQueue(1 << 20), Metrics(), TrainerConfig(**config), TrainerHooks(publish=published.append))


def _online(agent: Any) -> list[torch.Tensor]:
    modules = (agent.actor, agent.critic)
    return [p.detach().clone() for m in modules for p in m.parameters()]


def _feed(trainer: Trainer, segment: Segment) -> None:
    assert trainer.feed([segment]) == segment.steps


@pytest.mark.parametrize("algo", ["ppo", "td3"])
def test_n1_a_nonfinite_update_changes_nothing_and_publishes_nothing(algo: str):
    published: list[Any] = []
    trainer = _trainer(_agents()[algo](), published)
    _feed(trainer, _segment(64, value=float("nan")))  # NaN observations: every loss is NaN
    before = _online(trainer.agent)
    assert trainer.step()
    for a, b in zip(before, _online(trainer.agent), strict=True):
        assert torch.equal(a, b)
    assert trainer.metrics.counter("nan_skips") == 1
    assert trainer.version == 0 and not published
    assert trainer.last_metrics["train/applied_steps"] == 0 and trainer.last_metrics["train/skipped_steps"] > 0
    # A good update afterwards publishes as usual.
    _feed(trainer, _segment(64, seed=1))
    if isinstance(trainer.agent, TD3Agent):
        trainer.agent.replay = type(trainer.agent.replay)(512, OBS, ACT)  # drop the poisoned rows
        _feed(trainer, _segment(64, seed=2))
    while trainer.agent.ready():
        trainer.step()
    assert trainer.version >= 1 and published


@pytest.mark.parametrize("algo", ["ppo", "td3"])
def test_n2_three_skipped_updates_in_a_row_roll_back_under_a_new_generation(algo: str):
    published: list[Any] = []
    trainer = _trainer(_agents()[algo](), published, checkpoint_interval=1e-6)
    good = _online(trainer.agent)
    trainer.remember_good_state()  # the state to roll back to
    with torch.no_grad():  # the learner itself goes bad: a NaN weight makes every loss NaN
        next(trainer.agent.actor.parameters()).fill_(float("nan"))
    for i in range(3):
        _feed(trainer, _segment(64, seed=i))
        while trainer.agent.ready() and trainer.generation == 0:
            trainer.update()
    assert trainer.metrics.counter("rollbacks", reason="nonfinite") == 1
    assert trainer.generation == 1 and published and published[-1].generation == 1
    for a, b in zip(good, _online(trainer.agent), strict=True):
        assert torch.equal(a, b)
    assert all(torch.isfinite(p).all() for p in _online(trainer.agent))


@pytest.mark.parametrize("algo", ["ppo", "td3"])
def test_n3_extreme_but_finite_batches_leave_every_parameter_finite(algo: str):
    agent = _agents()[algo]()
    rng = np.random.default_rng(0)
    updates = 0
    while updates < 1000:
        value = float(rng.choice([-1e6, 1e6, 0.0]))
        agent.observe([_segment(64, seed=updates, value=value, reward=float(rng.choice([-1e6, 1e6])))])
        while agent.ready():
            stats = agent.update()
            updates += int(stats.get("train/applied_steps", 0) + stats.get("train/skipped_steps", 0))
    state = agent.state_dict()
    for name in ("actor", "critic"):
        for key, tensor in state[name].items():
            assert torch.isfinite(tensor).all(), f"{algo} {name}.{key} went non-finite"


class _CrashingAgent:
    """Wraps a real agent; its update raises while ``crashes`` > 0 (an injected trainer fault)."""

    def __init__(self, agent: Any, crashes: int) -> None:
        self._agent = agent
        self.crashes = crashes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def update(self) -> dict[str, float]:
        if self.crashes > 0:
            self.crashes -= 1
            raise RuntimeError("injected trainer fault")
        return self._agent.update()  # type: ignore[no-any-return]


def test_c6_a_crashing_trainer_restarts_from_its_checkpoint_and_ingress_keeps_running(tmp_path):
    from arena.games.reach import ACT_DIM, OBS_DIM, play_reach

    agent = _CrashingAgent(make_agent("ppo", OBS_DIM, ACT_DIM, hidden=(16,), rollout_steps=256), crashes=1)
    config = TrainerConfig(checkpoint_dir=tmp_path, restart_interval=0.0, max_restarts=3)
    with running_server(agent=agent, trainer=config) as server:
        _, bot = play_reach(server.url, n_agents=4, steps=600)
        deadline = time.monotonic() + timeout(30)
        while server.trainer.version < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        trainer = server.trainer
        assert trainer.restarts == 1 and server.metrics.counter("trainer_restarts") == 1
        assert trainer.generation == 1  # restarted from the checkpoint under a new generation
        assert trainer.version >= 2 and server.failed is None and trainer.alive
        assert bot.stats.steps_sent == 2400 and not bot.stats.errors  # ingress never stopped
        deadline = time.monotonic() + timeout(10)  # the bot's last frame may still be on its way in
        while server.accounting()["received"] < 2400 and time.monotonic() < deadline:
            time.sleep(0.02)
        accounting = server.accounting()
    lost = accounting.get("dropped_trainer_restart", 0)
    assert accounting["received"] == 2400 and lost <= 256


async def test_c6_crashes_beyond_the_quota_stop_the_server_with_a_final_checkpoint(tmp_path):
    from arena.games.reach import ACT_DIM, OBS_DIM, play_reach

    from ..conftest import serving

    agent = _CrashingAgent(make_agent("ppo", OBS_DIM, ACT_DIM, hidden=(16,), rollout_steps=128), crashes=10**6)
    config = TrainerConfig(checkpoint_dir=tmp_path, restart_interval=0.0, max_restarts=2)
    async with serving(agent=agent, trainer=config) as server:
        # 400 steps fit in the first credit grant, so the bot finishes even once the trainer is gone.
        await asyncio.to_thread(play_reach, server.url, 4, 100)
        failed = await asyncio.wait_for(server.wait_failed(), timeout(30))
        assert "injected" in str(failed) and server.trainer.restarts == 2
        healthy, body = server.health()
        assert not healthy and body["status"] == "degraded"
    assert list(tmp_path.glob("*.pt")), "a final checkpoint is written while the state is still valid"
