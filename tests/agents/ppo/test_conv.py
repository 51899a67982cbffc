"""PPO with a convolutional torso (``conv`` and ``image``): the config's checks, the path it takes, that it
learns, and that checkpoints hold it. The torso's numbers against the bots' numpy copy:
tests/bot_protocol/test_policy_conv.py.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from agents import PPOAgent, PPOConfig, agent_from_checkpoint
from agents.networks import ConvTorso, MixedActor
from agents.ppo.steps import EagerStep, choose_step
from tests.agents.ppo.test_agent import config, snapshot
from tests.agents.ppo.test_discrete import STATES, bandit_config, bandit_round, mixed_segments, probabilities

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def image_config(**overrides: object) -> PPOConfig:
    """The discrete bandit's states as a one-row image of STATES cells, one lit: a 1x2 conv slides over it."""
    return bandit_config(image=(1, STATES, 1), conv=(4, 1, 2), **overrides)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"conv": (8, 2, 2)}, "conv needs image=height,width,channels"),
        ({"image": (2, 2, 1)}, "it needs conv"),
        ({"conv": (8, 2), "image": (2, 2, 1)}, "three positive numbers a layer"),
        ({"conv": (8, 2, 2), "image": (2, 3, 1)}, "more than obs_dim 4"),
        ({"conv": (8, 3, 1), "image": (2, 2, 1)}, "a 3x1 kernel does not fit"),
        ({"conv": (8, 2, 2, 4, 2, 1), "image": (2, 2, 1)}, "a 2x1 kernel does not fit"),
        ({"conv": (0, 2, 2), "image": (2, 2, 1)}, "three positive numbers"),
    ],
)
def test_a_conv_torso_that_cannot_be_built_is_refused_by_name(options: dict[str, object], message: str):
    with pytest.raises(ValueError, match=message):
        config(obs_dim=4, **options)


def test_a_conv_config_puts_a_torso_in_front_of_both_networks_and_takes_the_reference_step():
    """The written-out and graph steps hold the MLP's maths by hand: a torso takes autograd's, on every device."""
    cfg = config(obs_dim=14, image=(2, 3, 2), conv=(5, 2, 2))
    agent = PPOAgent(cfg)
    for net in (agent.actor, agent.critic):
        assert isinstance(net.body.conv, ConvTorso)
        assert net.net[0].in_features == 5 * 1 * 2 + 2  # the torso's output, then the two entries after the image
    assert type(agent.step) is EagerStep and choose_step(config(**{**vars(cfg), "device": "cuda"})) is EagerStep
    arch, tensors = agent.export_actor()
    assert arch["conv"] == {"image": [2, 3, 2], "layers": [[5, 2, 2]]} and tensors["c0.weight"].shape == (5, 2, 2, 2)


def test_the_torso_reads_the_image_channels_last_and_flattens_channel_row_column():
    """Pinned by hand: the layout docs/protocol.md §4.6 states, the one a bot in another language implements."""
    torso = ConvTorso(obs_dim=3 * 2 * 2 + 1, shape=((3, 2, 2), ((1, 1, 1),)), activation="relu")
    with torch.no_grad():
        torso.convs[0].weight.copy_(torch.tensor([1.0, 10.0]).reshape(1, 2, 1, 1))  # channel 0 + 10 x channel 1
        torso.convs[0].bias.zero_()
    obs = torch.arange(13, dtype=torch.float32)[None]  # obs[(h*W + w)*C + c]
    expected = [(2 * k) + 10 * (2 * k + 1) for k in range(6)] + [12]  # each cell's two channels, rows then columns
    assert torso(obs)[0].tolist() == expected


def test_ppo_with_a_conv_torso_learns_the_discrete_bandit():
    agent = PPOAgent(image_config())
    assert isinstance(agent.actor, MixedActor) and isinstance(agent.actor.body.conv, ConvTorso)
    rng = np.random.default_rng(0)
    for _ in range(12):
        metrics = bandit_round(agent, rng, masked_share=0.0)
        assert math.isfinite(metrics["train/entropy"])
    probs = probabilities(agent, np.ones((STATES, STATES), dtype=bool))
    assert (probs.argmax(-1) == np.arange(STATES)).all(), probs
    assert probs[np.arange(STATES), np.arange(STATES)].min() > 0.8, probs


def test_a_checkpoint_rebuilds_the_torso_and_resumes_bitwise():
    options = {"obs_dim": 4, "act_dim": 2, "branches": (3, 2), "image": (2, 2, 1), "conv": (3, 2, 1, 2, 1, 2)}
    a = PPOAgent(config(**options))
    a.observe(mixed_segments(a, seed=0))
    a.update()
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    b = agent_from_checkpoint(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert isinstance(b, PPOAgent) and b.config == a.config and isinstance(b.critic.body.conv, ConvTorso)
    segments = mixed_segments(a, seed=1)
    for agent in (a, b):
        agent.observe(segments)
        agent.update()
    assert all(torch.equal(x, y) for x, y in zip(snapshot(a), snapshot(b), strict=True))
    with pytest.raises(ValueError, match="network sizes"):
        PPOAgent(config(**{**options, "conv": (4, 2, 1, 2, 1, 2)})).load_state_dict(a.state_dict())
