"""PPO with a recurrent core (``recurrent``, agents/recurrent.py, agents/ppo/sequences.py): it remembers, its
backpropagation through time is autograd's over the steps, padding weighs nothing, checkpoints hold it.

The memory task: a cue (left or right) shows on an episode's first step only; on its last step the
agent must press the cue's button. A memoryless policy can do no better than a coin. The bots' side
is the real one: the numpy ``Policy`` built from the exported weights acts, keeps each agent's state
and records it with every row, as a bot does.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig, Segment, SegmentEnd, agent_from_checkpoint
from agents.ppo.batch import Minibatch
from agents.ppo.loss import minibatch_loss
from agents.ppo.sequences import chunk_layout, sequence_loss
from bot_protocol import Architecture, Policy, Weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EPISODE = 4
"""Steps of the memory task's episode: the cue, two blank steps, the answer."""


def memory_config(**overrides: object) -> PPOConfig:
    settings: dict[str, object] = {
        "obs_dim": 3,  # cue left, cue right, "answer now"
        "act_dim": 0,
        "branches": (2,),
        "hidden": (32,),
        "recurrent": "gru",
        "recurrent_size": 16,
        "sequence_length": EPISODE,
        "rollout_steps": 512,
        "minibatch_size": 64,
        "epochs": 4,
        "learning_rate": 3e-3,
        "gamma": 0.99,
    }
    settings.update(overrides)
    return PPOConfig(**settings)  # type: ignore[arg-type]


def policy_of(agent: PPOAgent) -> Policy:
    arch, tensors = agent.export_actor()
    return Policy.from_weights(Weights.pack(0, agent.updates, Architecture.from_mapping(arch), tensors))


def memory_round(agent: PPOAgent, rng: np.random.Generator, episodes: int = 128) -> float:
    """``episodes`` episodes acted by the numpy policy, their update; the share answered right."""
    policy = policy_of(agent)
    cues = rng.integers(2, size=episodes)
    state = policy.initial_state(episodes)
    obs_rows, state_rows, dact_rows, logp_rows = [], [], [], []
    for t in range(EPISODE):
        obs = np.zeros((episodes, 3), np.float32)
        if t == 0:
            obs[np.arange(episodes), cues] = 1.0
        if t == EPISODE - 1:
            obs[:, 2] = 1.0
        (_, logp, dact), next_state = policy.step(obs, state, rng)
        obs_rows.append(obs)
        state_rows.append(state)
        dact_rows.append(dact[:, 0])
        logp_rows.append(logp)
        state = next_state
    right = dact_rows[-1] == cues
    segments = []
    for e in range(episodes):
        reward = np.zeros(EPISODE, np.float32)
        reward[-1] = 1.0 if right[e] else -1.0
        packed = np.stack([[float(dact_rows[t][e]), 1.0, 1.0] for t in range(EPISODE)]).astype(np.float32)
        segments.append(
            Segment(
                "bot", e, np.stack([o[e] for o in obs_rows]), packed, np.array([lp[e] for lp in logp_rows], np.float32),
                SegmentEnd.TERMINAL, None, generation=0, version=agent.updates, reward=reward,
                state=np.stack([s[e] for s in state_rows]),
            )
        )  # fmt: skip
    agent.observe(segments)
    metrics = agent.update()
    assert metrics["train/skipped_minibatches"] == 0.0 and math.isfinite(metrics["train/policy_loss"])
    return float(right.mean())


def test_a_recurrent_actor_remembers_a_cue_a_memoryless_one_cannot():
    rates = {}
    for recurrent in ("gru", "lstm", ""):
        torch.manual_seed(0)
        agent = PPOAgent(memory_config(recurrent=recurrent))
        rng = np.random.default_rng(0)
        scores = [memory_round(agent, rng) for _ in range(8)]
        rates[recurrent or "memoryless"] = float(np.mean(scores[-3:]))
    assert rates["gru"] > 0.9 and rates["lstm"] > 0.9, rates
    assert rates["memoryless"] < 0.65, rates


def test_chunks_cut_each_segment_in_order_and_pad_its_last():
    assert chunk_layout(np.array([5, 2, 4]), 4).tolist() == [[0, 1, 2, 3], [4, -1, -1, -1], [5, 6, -1, -1], [7, 8, 9, 10]]


def test_unrolling_chunks_is_stepping_the_core_row_by_row_values_and_gradients():
    """BPTT over a chunk is autograd through every step: the same outputs and gradients as a step-by-step unroll."""
    torch.manual_seed(1)
    agent = PPOAgent(memory_config(recurrent="lstm", sequence_length=6))
    actor, body = agent.actor, agent.actor.body
    assert body.core is not None
    obs = torch.randn(2 * 6, 3)
    start = torch.randn(2, body.state_size)
    rows = torch.cat([obs, torch.zeros(12, body.state_size)], dim=1)
    rows[::6, 3:] = start  # only each chunk's first state is read
    chunked = actor.forward_chunks(rows, 6)
    chunked.square().sum().backward()
    grads = [p.grad.clone() for p in actor.parameters() if p.grad is not None]
    actor.zero_grad()
    state, outs = start, []
    for t in range(6):
        h, state = body.core.step(obs.view(2, 6, 3)[:, t], state)
        outs.append(actor.net(h))
    stepped = torch.stack(outs, dim=1).reshape(12, -1)
    stepped.square().sum().backward()
    torch.testing.assert_close(chunked, stepped, rtol=1e-5, atol=1e-6)
    for mine, reference in zip(grads, [p.grad for p in actor.parameters() if p.grad is not None], strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6)


def test_padding_weighs_nothing_in_any_term():
    """The sequence loss over padded chunks is the reference loss over the real rows alone (a memoryless actor)."""
    agent = PPOAgent(memory_config(recurrent="", sequence_length=4, mean_bound_coef=0.5))
    rng = np.random.default_rng(2)
    n = 6
    packed = np.stack([rng.integers(2, size=n), np.ones(n), np.ones(n)], axis=1).astype(np.float32)
    real = Minibatch(
        torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)), torch.from_numpy(packed),
        torch.from_numpy(rng.normal(-0.7, 0.1, n).astype(np.float32)), torch.from_numpy(rng.normal(size=n).astype(np.float32)),
        torch.from_numpy(rng.normal(size=n).astype(np.float32)),
    )  # fmt: skip
    padded = Minibatch(*(torch.cat([column, torch.zeros((2, *column.shape[1:]))]) for column in real))
    mask = torch.arange(8) < n
    got = sequence_loss(agent.actor, agent.critic, padded, mask, agent.config)
    want = minibatch_loss(agent.actor, agent.critic, real, agent.config)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6, msg=key)


def test_a_checkpoint_holds_the_core_and_another_core_is_refused_by_name():
    a = PPOAgent(memory_config())
    memory_round(a, np.random.default_rng(3), episodes=32)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    b = agent_from_checkpoint(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert isinstance(b, PPOAgent) and b.config == a.config
    x = torch.randn(5, 3 + a.config.state_size)
    torch.testing.assert_close(a.actor(x), b.actor(x))
    with pytest.raises(ValueError, match="recurrent core gru of 16 units, this run's none"):
        PPOAgent(memory_config(recurrent="")).load_state_dict(a.state_dict())


def test_a_segment_without_states_is_refused_by_name():
    agent = PPOAgent(memory_config(rollout_steps=4, minibatch_size=4))
    agent.observe([Segment("bot", 0, np.zeros((4, 3), np.float32), np.ones((4, 3), np.float32), np.zeros(4, np.float32),
                           SegmentEnd.TERMINAL, None, generation=0, version=0, reward=np.zeros(4, np.float32))])  # fmt: skip
    with pytest.raises(ValueError, match="needs each row's state \\(16 entries\\); a segment has none"):
        agent.update()
