"""The numpy mixed_mlp Policy must give torch's masked log-probs and entropies, and never pick a forbidden action.

The reference is built here from torch's own distributions (``Normal``, and ``Categorical``
over logits set to -inf where the mask forbids), run on the very tensors the policy loads:
what the trainer's actor computes for the same weights.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bot_protocol import (
    ActionSpace,
    Architecture,
    ErrorCode,
    MixedAction,
    Policy,
    ProtocolError,
    decode_tensors,
    encode_tensors,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS = 5
SPACES = {
    "discrete": ActionSpace(0, (6,)),
    "multi-discrete": ActionSpace(0, (3, 1, 4)),
    "mixed": ActionSpace(2, (3, 2)),
}


def make_policy(space: ActionSpace, hidden: tuple[int, ...] = (8,), scale: float = 0.5, seed: int = 0) -> Policy:
    """A mixed_mlp with random weights of O(``scale``) (logits of order 1 at 0.5) and a log_std per continuous dim."""
    rng = np.random.default_rng(seed)
    layers = (OBS, *hidden, space.continuous + space.n_logits)
    tensors = {}
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(layers)):
        tensors[f"l{i}.weight"] = (scale * rng.standard_normal((fan_out, fan_in))).astype(np.float32)
        tensors[f"l{i}.bias"] = (scale * rng.standard_normal(fan_out)).astype(np.float32)
    if space.continuous:
        tensors["log_std"] = np.linspace(-0.6, 0.3, space.continuous).astype(np.float32)
    arch = Architecture("mixed_mlp", layers, "tanh", -3.0, 0.5, continuous=space.continuous, branches=space.branches)
    return Policy(arch, tensors)


def random_mask(space: ActionSpace, n: int, rng: np.random.Generator, p_legal: float = 0.5) -> np.ndarray:
    """A random (n, n_logits) bool mask that leaves every branch of every row at least one legal action."""
    mask = rng.random((n, space.n_logits)) < p_legal
    for start, size in zip(space.offsets, space.branches, strict=True):
        mask[np.arange(n), start + rng.integers(0, size, n)] = True
    return mask


def torch_reference(policy: Policy, obs, actions, dact, mask) -> tuple[np.ndarray, np.ndarray]:
    """(logp, entropy) per row from torch's distributions over the policy's own tensors."""
    weights = policy.to_weights()
    tensors = {k: torch.from_numpy(v.copy()) for k, v in decode_tensors(weights.tensors).items()}
    n_layers = len(policy.arch.layers) - 1
    y = torch.from_numpy(obs)
    for i in range(n_layers):
        y = y @ tensors[f"l{i}.weight"].T + tensors[f"l{i}.bias"]
        if i < n_layers - 1:
            y = torch.tanh(y)
    space = policy.actions
    c = space.continuous
    logp, entropy = torch.zeros(len(obs)), torch.zeros(len(obs))
    if c:
        normal = torch.distributions.Normal(y[:, :c], tensors["log_std"].exp())
        logp = logp + normal.log_prob(torch.from_numpy(actions)).sum(-1)
        entropy = entropy + normal.entropy().sum(-1)
    legal = torch.ones(len(obs), space.n_logits, dtype=torch.bool) if mask is None else torch.from_numpy(mask)
    for b, (start, size) in enumerate(zip(space.offsets, space.branches, strict=True)):
        logits = y[:, c + start : c + start + size].masked_fill(~legal[:, start : start + size], float("-inf"))
        categorical = torch.distributions.Categorical(logits=logits)
        logp = logp + categorical.log_prob(torch.from_numpy(dact[:, b]))
        entropy = entropy + categorical.entropy()
    return logp.numpy(), entropy.numpy()


def close(a: np.ndarray, b: np.ndarray, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=atol)


FLOAT32_PATHS = 1e-5
"""Two float32 computations of one log-prob, each summing in its own order (numpy's matmul and torch's): on the
trainer's actor below (ReLU, weights of order 1) each lay up to 3.3e-6 from the float64 value (measured with
numpy 2.4.6 and torch 2.13.0), so they may differ by twice that; 1e-6 between them held only by luck of the order."""


# ── parity with torch ────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", list(SPACES))
@pytest.mark.parametrize("masked", [True, False])
def test_sampled_logp_and_entropy_match_torch(name, masked):
    """act()'s log-probs and entropy() equal torch's Normal + masked Categorical within 1e-6, with random masks."""
    space = SPACES[name]
    policy = make_policy(space, seed=3)
    rng = np.random.default_rng(4)
    obs = rng.standard_normal((256, OBS)).astype(np.float32)
    mask = random_mask(space, 256, rng) if masked else None
    acted = policy.act(obs, rng, mask=mask)
    assert isinstance(acted, MixedAction)
    assert acted.actions.shape == (256, space.continuous) and acted.dact.shape == (256, space.n_branches)
    assert acted.logp.dtype == np.float32 and acted.actions.dtype == np.float32
    logp, entropy = torch_reference(policy, obs, acted.actions, acted.dact, mask)
    close(acted.logp, logp)
    close(policy.entropy(obs, mask), entropy)
    close(policy.log_prob(obs, acted.actions, dact=acted.dact, mask=mask), logp)


@pytest.mark.parametrize("name", list(SPACES))
def test_log_prob_of_given_legal_actions_matches_torch(name):
    """log_prob() of actions the policy did not draw (uniform among the legal ones) equals torch's."""
    space = SPACES[name]
    policy = make_policy(space, hidden=(7, 6), seed=5)
    rng = np.random.default_rng(6)
    obs = (2.0 * rng.standard_normal((128, OBS))).astype(np.float32)
    mask = random_mask(space, 128, rng, p_legal=0.3)
    pairs = list(zip(space.offsets, space.branches, strict=True))
    dact = np.array([[rng.choice(np.flatnonzero(row[s : s + k])) for s, k in pairs] for row in mask]).reshape(128, -1)
    actions = rng.standard_normal((128, space.continuous)).astype(np.float32)
    close(policy.log_prob(obs, actions, dact=dact, mask=mask), torch_reference(policy, obs, actions, dact, mask)[0])


@pytest.mark.parametrize("name", list(SPACES))
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_matches_the_trainers_mixed_actor(name, activation):
    """The trainer's MixedActor, exported and loaded here, scores the bot's packed actions as the bot did (1e-6)."""
    from agents.networks import LogStdRange, MixedActor

    space = SPACES[name]
    torch.manual_seed(0)
    actor = MixedActor(OBS, space.continuous, space.branches, (16, 8), activation, LogStdRange(-0.5, -3.0, 0.5))
    with torch.no_grad():
        for p in actor.net.parameters():
            p.add_(0.5 * torch.randn(p.shape))  # logits of order 1, not the near-uniform ones of a fresh head
    arch, tensors = actor.export()
    policy = Policy(Architecture.from_mapping(arch), tensors)
    rng = np.random.default_rng(1)
    obs = rng.standard_normal((256, OBS)).astype(np.float32)
    mask = random_mask(space, 256, rng)
    acted = policy.act(obs, rng, mask=mask)
    block = torch.from_numpy(space.pack(acted.actions, acted.dact, mask))
    with torch.no_grad():
        expected = actor.log_prob_and_entropy(actor(torch.from_numpy(obs)), *actor.split_actions(block))
    close(acted.logp, expected.logp.numpy(), atol=FLOAT32_PATHS)
    close(policy.entropy(obs, mask), expected.entropy.numpy(), atol=FLOAT32_PATHS)


def test_a_forbidden_action_has_log_prob_minus_infinity():
    space = SPACES["discrete"]
    policy = make_policy(space)
    mask = np.array([[True, False, True, True, True, True]])
    logp = policy.log_prob(np.zeros((1, OBS), np.float32), np.zeros((1, 0), np.float32), dact=[[1]], mask=mask)
    assert logp.tolist() == [-np.inf]
    for outside in (6, -1):
        with pytest.raises(ProtocolError) as info:
            policy.log_prob(np.zeros((1, OBS), np.float32), np.zeros((1, 0), np.float32), dact=[[outside]])
        assert info.value.code is ErrorCode.BAD_ACTION


def test_gaussian_policy_entropy_matches_torch():
    """entropy() of a gaussian_mlp is its Normal's, the same for every row."""
    layers = (OBS, 3)
    tensors = {
        "l0.weight": np.ones((3, OBS), np.float32),
        "l0.bias": np.zeros(3, np.float32),
        "log_std": np.array([-4.0, -0.5, 0.2], np.float32),  # -4 is clipped to -3 on load
    }
    policy = Policy(Architecture("gaussian_mlp", layers, "tanh", -3.0, 0.5), tensors)
    expected = torch.distributions.Normal(torch.zeros(3), torch.tensor([-3.0, -0.5, 0.2]).exp()).entropy().sum()
    close(policy.entropy(np.zeros((4, OBS), np.float32)), np.full(4, float(expected), np.float32))


# ── masks are obeyed ─────────────────────────────────────────────────────────


@settings(max_examples=200, deadline=None)
@given(
    continuous=st.integers(0, 2),
    branches=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    deterministic=st.booleans(),
)
def test_a_masked_out_action_is_never_picked(continuous, branches, seed, deterministic):
    """Whatever the logits (here large: forbidden actions would win unmasked), every pick is legal and its logp finite."""
    space = ActionSpace(continuous, tuple(branches))
    policy = make_policy(space, scale=4.0, seed=seed % 1000)
    rng = np.random.default_rng(seed)
    obs = (3.0 * rng.standard_normal((64, OBS))).astype(np.float32)
    mask = random_mask(space, 64, rng, p_legal=0.2)
    acted = policy.act(obs, rng, deterministic=deterministic, mask=mask)
    taken = np.take_along_axis(mask, acted.dact + np.array(space.offsets), axis=1)
    assert taken.all()
    assert np.isfinite(acted.logp).all()


def test_sampling_follows_the_masked_probabilities():
    """Draws land on each legal action as often as its masked probability says (and never on a forbidden one)."""
    space = ActionSpace(0, (5,))
    policy = make_policy(space, scale=1.0, seed=2)
    obs = np.repeat(np.random.default_rng(1).standard_normal((1, OBS)).astype(np.float32), 40_000, axis=0)
    mask = np.repeat(np.array([[True, False, True, True, False]]), 40_000, axis=0)
    acted = policy.act(obs, np.random.default_rng(9), mask=mask)
    counts = np.bincount(acted.dact[:, 0], minlength=5) / 40_000
    every = np.arange(5)[:, None]
    probs = np.exp(policy.log_prob(obs[:5], np.zeros((5, 0), np.float32), dact=every, mask=mask[:5]))
    assert counts[1] == counts[4] == 0
    np.testing.assert_allclose(counts, probs, atol=0.01)


def test_deterministic_is_the_mean_and_the_argmax_of_masked_logits():
    space = SPACES["mixed"]
    policy = make_policy(space, seed=8)
    rng = np.random.default_rng(8)
    obs = rng.standard_normal((64, OBS)).astype(np.float32)
    mask = random_mask(space, 64, rng)
    acted = policy.act(obs, rng, deterministic=True, mask=mask)
    np.testing.assert_array_equal(acted.actions, policy.mean(obs))
    logits = np.where(mask, policy.logits(obs), -np.inf)
    expected = [np.argmax(part, axis=1) for part in space.split(logits)]
    np.testing.assert_array_equal(acted.dact, np.stack(expected, axis=1))
    close(acted.logp, policy.log_prob(obs, acted.actions, dact=acted.dact, mask=mask))


# ── misuse and weights ───────────────────────────────────────────────────────


def test_misuse_is_refused():
    """A mask the server would refuse is bad_mask; a misshaped one, a mask for a continuous policy, sample() on a mixed one,
    and a mixed log-prob without dact are bugs in the bot (ValueError)."""
    space = SPACES["multi-discrete"]
    policy = make_policy(space)
    obs = np.zeros((2, OBS), np.float32)
    rng = np.random.default_rng(0)
    empty = np.ones((2, 8), bool)
    empty[1, 3] = False  # the one action of branch 1
    with pytest.raises(ProtocolError) as info:
        policy.act(obs, rng, mask=empty)
    assert info.value.code is ErrorCode.BAD_MASK
    with pytest.raises(ValueError, match="mask must have shape"):
        policy.act(obs, rng, mask=np.ones((2, 7), bool))
    with pytest.raises(ValueError, match="use act"):
        policy.sample(obs, rng)
    with pytest.raises(ValueError, match="needs dact"):
        policy.log_prob(obs, np.zeros((2, 0), np.float32))
    gaussian = Policy(
        Architecture("gaussian_mlp", (OBS, 2), "tanh", -3.0, 0.5),
        {"l0.weight": np.zeros((2, OBS), np.float32), "l0.bias": np.zeros(2, np.float32), "log_std": np.zeros(2, np.float32)},
    )
    with pytest.raises(ValueError, match="no discrete branches"):
        gaussian.act(obs, rng, mask=np.ones((2, 1), bool))
    tanh = Policy(
        Architecture("tanh_mlp", (OBS, 2), "tanh", act_limit=1.0),
        {"l0.weight": np.zeros((2, OBS), np.float32), "l0.bias": np.zeros(2, np.float32)},
    )
    with pytest.raises(ValueError, match="deterministic"):
        tanh.entropy(obs)


@pytest.mark.parametrize("name", list(SPACES))
def test_mixed_weights_round_trip(name):
    """to_weights() → from_weights() gives the same policy; log_std travels only with continuous dims."""
    policy = make_policy(SPACES[name], seed=4)
    weights = policy.to_weights()
    again = Policy.from_weights(weights)
    assert again.actions == policy.actions and again.act_dim == SPACES[name].continuous
    obs = np.random.default_rng(2).standard_normal((16, OBS)).astype(np.float32)
    np.testing.assert_array_equal(again.logits(obs), policy.logits(obs))
    assert ("log_std" in decode_tensors(weights.tensors)) == bool(SPACES[name].continuous)


def test_mixed_weights_checks():
    """A log_std without continuous dims, or a last layer of the wrong width, is bad_weights."""
    arch = Architecture("mixed_mlp", (OBS, 4), "tanh", -3.0, 0.5, continuous=0, branches=(4,))
    tensors = {"l0.weight": np.zeros((4, OBS), np.float32), "l0.bias": np.zeros(4, np.float32)}
    Policy(arch, tensors)
    for bad_arch, bad_tensors in (
        (arch, {**tensors, "log_std": np.zeros(1, np.float32)}),
        (Architecture("mixed_mlp", (OBS, 4), "tanh", -3.0, 0.5, continuous=0, branches=(3,)), tensors),
        (Architecture("mixed_mlp", (OBS, 4), "tanh", -3.0, 0.5, continuous=1, branches=(3,)), tensors),  # no log_std
    ):
        with pytest.raises(ProtocolError) as info:
            Policy(bad_arch, bad_tensors)
        assert info.value.code is ErrorCode.BAD_WEIGHTS


# ── the worked example of the protocol's documentation ──────────────────────


def test_worked_example_of_a_masked_categorical_actor():
    """A (2 → 3 → 4) mixed_mlp, tanh, one branch of 4 actions, action 1 masked out: the documented numbers."""
    tensors = {
        "l0.weight": np.array([[0.5, -0.25], [1.0, 0.5], [-0.75, 0.25]], np.float32),
        "l0.bias": np.array([0.1, -0.2, 0.0], np.float32),
        "l1.weight": np.array([[1.0, -1.0, 0.5], [0.5, 0.5, 0.5], [-1.0, 0.25, 1.0], [0.0, 1.5, -0.5]], np.float32),
        "l1.bias": np.array([0.0, 0.1, -0.1, 0.2], np.float32),
    }
    policy = Policy(Architecture("mixed_mlp", (2, 3, 4), "tanh", -20.0, 2.0, continuous=0, branches=(4,)), tensors)
    obs = np.array([[0.5, -1.0]], np.float32)
    mask = np.array([[1, 0, 1, 1]], np.uint8)
    none = np.zeros((1, 0), np.float32)
    np.testing.assert_allclose(policy.logits(obs), [[0.457125, -0.007463, -1.240993, 0.181237]], atol=1e-6)
    np.testing.assert_allclose(policy.log_prob(obs, none, dact=[[0]], mask=mask), [-0.663680], atol=1e-6)
    np.testing.assert_allclose(policy.log_prob(obs, none, dact=[[3]], mask=mask), [-0.939568], atol=1e-6)
    np.testing.assert_allclose(policy.entropy(obs, mask), [0.931545], atol=1e-6)
    assert policy.act(obs, np.random.default_rng(0), deterministic=True, mask=mask).dact.tolist() == [[0]]


def test_worked_example_of_a_mixed_actor():
    """docs/protocol.md §4.5, test vector 2: one continuous dim and branches [3, 2], action 1 of branch 0 masked out.

    Pins the numbers the page prints (logits, log-probs, entropy, deterministic play) and both test vectors'
    weights blobs (size and sha256), so the page cannot drift from the code.
    """
    tensors = {
        "l0.weight": np.array([[0.5, -0.25], [1.0, 0.5], [-0.75, 0.25]], np.float32),
        "l0.bias": np.array([0.1, -0.2, 0.0], np.float32),
        "l1.weight": np.array(
            [[0.5, 0.0, -0.5], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, -1.0, 1.0]],
            np.float32,
        ),
        "l1.bias": np.array([0.1, 0.0, 1.0, 0.0, -0.25, 0.0], np.float32),
        "log_std": np.array([-0.5], np.float32),
    }
    arch = Architecture("mixed_mlp", (2, 3, 6), "tanh", -3.0, 0.0, continuous=1, branches=(3, 2))
    policy = Policy(arch, tensors)
    obs = np.array([[0.5, -1.0]], np.float32)
    mask = np.array([[1, 0, 1, 1, 1]], np.uint8)
    np.testing.assert_allclose(policy.mean(obs), [[0.6458247]], atol=1e-6)
    np.testing.assert_allclose(policy.std, [0.6065307], atol=1e-6)
    np.testing.assert_allclose(policy.logits(obs), [[0.5370496, 0.8026247, -0.5545997, 0.0896743, -0.3572244]], atol=1e-6)
    a = policy.mean(obs) + policy.std * np.float32(-1.0)
    np.testing.assert_allclose(a, [[0.0392940]], atol=1e-6)
    every_0 = np.array([[0, 0], [1, 0], [2, 0]])  # each action of branch 0, beside action 0 of branch 1
    gaussian = -0.9189385  # -0.5 z² - log_std' - 0.5 ln 2π with z = -1, log_std' = -0.5
    logp_1 = -0.494458  # action 0 of branch 1
    np.testing.assert_allclose(
        policy.log_prob(np.repeat(obs, 3, 0), np.repeat(a, 3, 0), dact=every_0, mask=np.repeat(mask, 3, 0)),
        [gaussian - 0.289427 + logp_1, -np.inf, gaussian - 1.381077 + logp_1],
        atol=1e-6,
    )
    np.testing.assert_allclose(policy.log_prob(obs, a, dact=[[2, 1]], mask=mask), [-3.241371], atol=1e-6)
    np.testing.assert_allclose(policy.log_prob(obs, a, dact=[[0, 0]], mask=mask), [-1.702823], atol=1e-6)
    np.testing.assert_allclose(policy.entropy(obs, mask), [2.151498], atol=1e-6)
    acted = policy.act(obs, np.random.default_rng(0), deterministic=True, mask=mask)
    assert acted.dact.tolist() == [[0, 0]]
    np.testing.assert_allclose(acted.actions, [[0.6458247]], atol=1e-6)
    np.testing.assert_allclose(acted.logp, [-1.202823], atol=1e-6)
    assert policy.act(obs, np.random.default_rng(0), deterministic=True).dact.tolist() == [[1, 0]]  # unmasked
    blob = policy.to_weights().tensors
    assert (len(blob), hashlib.sha256(blob).hexdigest()) == (
        464,
        "e2a1a57d1093c064ad5c0593bf21fec959d56c07d75cb767d576d137c57959ba",
    )
    first = encode_tensors(
        {
            "l0.weight": tensors["l0.weight"],
            "l0.bias": tensors["l0.bias"],
            "l1.weight": np.array([[1.0, -1.0, 0.5], [0.5, 0.5, 0.5], [-1.0, 0.25, 1.0], [0.0, 1.5, -0.5]], np.float32),
            "l1.bias": np.array([0.0, 0.1, -0.1, 0.2], np.float32),
        }
    )
    assert (len(first), hashlib.sha256(first).hexdigest()) == (
        364,
        "68ffa430babcc41b51cb0d49c254ac4378b6adf38d961dd8a1b65163b893c605",
    )
