"""A numpy copy of the trainer's actor, so a bot acts locally with no torch installed.

Three kinds of actor (see ``Architecture``): ``gaussian_mlp`` (PPO) samples around its
mean with its own std; ``tanh_mlp`` (DDPG, TD3) is deterministic, and exploration is
added here, as the server's ``explore`` settings say: uniform random actions while the
trainer warms up its replay buffer, then Gaussian noise in action units, clipped to the
bounds; ``mixed_mlp`` (PPO with discrete branches) samples its continuous dims as
``gaussian_mlp`` does and each branch from a categorical over the actions the bot's mask
allows (:mod:`bot_protocol.categorical`). The forward passes match
``agents.networks.GaussianActor`` and ``agents.td3.DeterministicActor`` within float32
tolerance (tested against them), and the masked log-probs and entropies torch's
distributions within 1e-6. Any kind may normalize its observations first, as the trainer
did (``Architecture.obs_clip`` and the ``obs_norm.mean`` and ``obs_norm.std`` tensors), and
read an image through a convolutional torso first (``Architecture.conv``, :mod:`bot_protocol.conv`).
A :class:`Policy` is immutable once built: a bot swaps the
whole object for a new one when weights arrive, so it never acts with half-updated
weights.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import categorical
from .actions import ActionSpace
from .errors import ErrorCode, ProtocolError
from .messages import Architecture, Weights
from .policy_id import PolicyId
from .recurrent import RecurrentSpec
from .tensors import decode_tensors

__all__ = ["MixedAction", "Policy"]


def _relu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.maximum(x, np.float32(0.0), out=x)


def _tanh(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.tanh(x, out=x)


_ACTIVATIONS: dict[str, Callable[[NDArray[np.float32]], NDArray[np.float32]]] = {"tanh": _tanh, "relu": _relu}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


KINDS = ("gaussian_mlp", "tanh_mlp", "mixed_mlp")
OBS_NORM_TENSORS = ("obs_norm.mean", "obs_norm.std")
"""The observation statistics a normalizing actor carries beside its layers (with ``Architecture.obs_clip``)."""


class _ObsNorm(NamedTuple):
    """The trainer's observation scaling: ``clip((obs - mean) / std, -clip, clip)``, float32 throughout."""

    mean: NDArray[np.float32]
    std: NDArray[np.float32]
    clip: np.float32

    def apply(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """``obs`` normalized and clipped, a new array (the same operations, so the same floats, as the trainer's)."""
        x = obs - self.mean
        x /= self.std
        return np.clip(x, -self.clip, self.clip, out=x)


class MixedAction(NamedTuple):
    """What a ``mixed_mlp`` policy picked for a batch of rows: what a bot records and sends.

    The first two fields are what the other kinds return, in the same order, so
    ``actions, logp, dact = policy.act(...)`` reads like ``actions, logp = policy.act(...)``.
    """

    actions: NDArray[np.float32]
    """(n, continuous): the raw Gaussian samples (``act``), as ``gaussian_mlp`` draws them."""
    logp: NDArray[np.float32]
    """(n,): log-prob of the whole row: the Gaussian's plus each branch's under its mask."""
    dact: NDArray[np.int64]
    """(n, n_branches): the action taken in each branch (``dact``); never one the mask forbids."""


class Policy:
    """An MLP actor in numpy: ``act(obs)`` picks actions (and their log-probs) for a batch.

    Args:
        arch: the network description from the ``weights`` message.
        tensors: ``l{i}.weight`` (out, in), ``l{i}.bias`` (out,) per layer, and ``log_std``
            (``gaussian_mlp``, and ``mixed_mlp`` with continuous dims: one entry per dim); with
            ``arch.obs_clip``, ``obs_norm.mean`` and ``obs_norm.std`` (obs_dim,), which every
            observation is normalized by before the first layer; with ``arch.conv``, ``c{i}.weight``
            (out, in, kh, kw) and ``c{i}.bias`` (out,) per convolution.
        generation, version: the weights' identity, stamped on every transition acted with them.
        explore: ``tanh_mlp`` only: ``noise`` (Gaussian std in action units, default 0.1)
            and ``random`` (1 = uniform random actions: the trainer is still warming up).

    A ``mixed_mlp`` takes ``mask`` (n, sum(branches)), 1 or True where an action is legal
    (``None``: all are), in :meth:`act`, :meth:`log_prob` and :meth:`entropy`.

    Raises:
        ProtocolError: ``bad_weights`` when a tensor is missing or of the wrong shape, or when
            ``obs_clip`` and the two ``obs_norm`` tensors do not come together.
    """

    def __init__(
        self,
        arch: Architecture,
        tensors: Mapping[str, NDArray[np.float32]],
        generation: int = 0,
        version: int = 0,
        explore: Mapping[str, float] | None = None,
    ) -> None:
        if arch.kind not in KINDS:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unsupported architecture kind {arch.kind!r}")
        if arch.activation not in _ACTIVATIONS:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unsupported activation {arch.activation!r}")
        self.arch = arch
        self.generation = generation
        self.version = version
        self._activation = _ACTIVATIONS[arch.activation]
        self.deterministic_kind = arch.kind == "tanh_mlp"
        self.mixed = arch.kind == "mixed_mlp"
        self._space = _space_of(arch)
        self.explore = dict(explore or {})
        self.noise = float(self.explore.get("noise", 0.1))
        self.random = float(self.explore.get("random", 0.0)) >= 0.5
        if not (math.isfinite(self.noise) and self.noise >= 0):
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"explore noise must be a finite number >= 0, got {self.noise}")
        self._layers = _load_layers(arch, tensors)
        self._conv = _load_conv(arch, tensors)
        shapes = arch.recurrent.tensor_shapes() if arch.recurrent is not None else {}
        self._rnn = {name: _tensor(tensors, name, shape) for name, shape in shapes.items()}
        self._obs_norm = _load_obs_norm(arch, tensors)
        n_std = 0 if self.deterministic_kind else self._space.continuous
        expected = {f"l{i}.{part}" for i in range(len(self._layers)) for part in ("weight", "bias")}
        expected |= set(arch.conv.tensor_shapes()) if arch.conv is not None else set()
        expected |= set(shapes)
        expected |= set(OBS_NORM_TENSORS) if self._obs_norm is not None else set()
        extra = set(tensors) - expected - ({"log_std"} if n_std else set())
        if extra:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unexpected tensors {sorted(extra)[:4]}")
        if self.deterministic_kind:
            self.limit = np.float32(arch.act_limit)
            self.log_std = np.zeros(arch.layers[-1], dtype=np.float32)
            self.std = np.zeros(arch.layers[-1], dtype=np.float32)
            self._logp_const = 0.0
            return
        log_std = _tensor(tensors, "log_std", (n_std,)) if n_std else np.zeros(0, np.float32)
        self.log_std = np.clip(log_std, arch.log_std_min, arch.log_std_max).astype(np.float32)
        self.std = np.exp(self.log_std).astype(np.float32)
        self._logp_const = float(-(self.log_std.sum() + _HALF_LOG_2PI * len(self.log_std)))

    @property
    def obs_dim(self) -> int:
        return self.arch.obs_dim

    @property
    def act_dim(self) -> int:
        """Continuous action dims (``hello.act_dim``): every output but a ``mixed_mlp``'s logits."""
        return self._space.continuous

    @property
    def actions(self) -> ActionSpace:
        """The action space this policy acts in (``hello``'s ``act_dim`` and ``branches``)."""
        return self._space

    @property
    def policy_id(self) -> PolicyId:
        """The weights' identity: a client adopts only newer ones, and stamps it on what it records."""
        return PolicyId(self.generation, self.version)

    @classmethod
    def from_weights(cls, weights: Weights, explore: Mapping[str, float] | None = None) -> Policy:
        """Verify a ``weights`` message (sha256, blob limits, shapes) and build its policy.

        ``explore`` applies when the message carries no ``explore`` map of its own (pass the
        settings from ``welcome`` or of the policy being replaced).

        Raises:
            ProtocolError: ``bad_weights`` on any mismatch; the caller keeps its old policy.
        """
        if hashlib.sha256(weights.tensors).digest() != weights.sha256:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, "sha256 of the weights blob does not match")
        settings = weights.explore or explore
        return cls(weights.arch, decode_tensors(weights.tensors), weights.generation, weights.version, settings)

    def to_weights(self) -> Weights:
        """This policy as a ``weights`` message (its identity and explore settings kept).

        A league keeps frozen copies of a learner this way: a snapshot is saved, reloaded
        and sent exactly like the weights a server publishes. ``gaussian_mlp`` log-stds are
        stored as clamped when the policy was built.
        """
        tensors: dict[str, NDArray[np.float32]] = {}
        for i, (weight_t, bias) in enumerate(self._layers):
            tensors[f"l{i}.weight"] = np.ascontiguousarray(weight_t.T)
            tensors[f"l{i}.bias"] = bias
        for i, (weight, bias) in enumerate(self._conv):
            tensors[f"c{i}.weight"], tensors[f"c{i}.bias"] = weight, bias
        tensors.update(self._rnn)
        if len(self.log_std) and not self.deterministic_kind:
            tensors["log_std"] = self.log_std
        if self._obs_norm is not None:
            tensors.update(zip(OBS_NORM_TENSORS, (self._obs_norm.mean, self._obs_norm.std), strict=True))
        return Weights.pack(self.generation, self.version, self.arch, tensors, self.explore)

    @property
    def recurrent(self) -> RecurrentSpec | None:
        """The recurrent core, or None for a memoryless actor (which :meth:`act` runs; a recurrent one :meth:`step`)."""
        return self.arch.recurrent

    @property
    def state_size(self) -> int:
        """Entries of one agent's recurrent state (0 for a memoryless actor)."""
        return self.arch.recurrent.state_size if self.arch.recurrent is not None else 0

    def initial_state(self, n: int) -> NDArray[np.float32]:
        """Each of ``n`` agents' state at an episode's start: zeros, (n, state_size); (n, 0) without a core."""
        return np.zeros((n, self.arch.recurrent.state_size if self.arch.recurrent else 0), np.float32)

    def mean(self, obs: NDArray[np.float32], state: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """The noise-free action for a batch of observations, shape (n, act_dim).

        ``gaussian_mlp``: the Gaussian's mean; ``tanh_mlp``: ``act_limit * tanh(y)``;
        ``mixed_mlp``: the mean of its continuous dims (its discrete modes: :meth:`act` with
        ``deterministic``). ``state``: a recurrent actor's state before this step (required for one).
        """
        return self._mean_of(self._forward(obs, state))

    def _mean_of(self, y: NDArray[np.float32]) -> NDArray[np.float32]:
        if self.deterministic_kind:
            y = np.tanh(y, out=y)
            y *= self.limit
        if self.mixed:
            return y[:, : self._space.continuous]
        return y

    def logits(self, obs: NDArray[np.float32], state: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """A ``mixed_mlp``'s raw logits (n, sum(branches)), branch after branch, before any mask."""
        return self._forward(obs, state)[:, self._space.continuous :]

    def _forward(self, obs: NDArray[np.float32], state: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """The MLP's last-layer output ``y`` for a batch (a recurrent actor's from ``state``, its new state dropped)."""
        return self._run(obs, state)[0]

    def _run(
        self, obs: NDArray[np.float32], state: ArrayLike | None
    ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
        """``y`` for a batch, and a recurrent actor's new state (None without a core).

        The observations are normalized first and read through the torso when the actor says so.
        """
        y = np.asarray(obs, dtype=np.float32)
        if self._obs_norm is not None:
            y = self._obs_norm.apply(y)
        if self.arch.conv is not None:
            y = self.arch.conv.forward(y, self._conv, self._activation)
        new_state = None
        if self.arch.recurrent is not None:
            y, new_state = self.arch.recurrent.step(y, self._state_of(state, len(y)), self._rnn)
        last = len(self._layers) - 1
        for i, (weight_t, bias) in enumerate(self._layers):
            y = y @ weight_t
            y += bias  # in place: one array fewer a layer
            if i < last:
                y = self._activation(y)
        return y, new_state

    def _state_of(self, state: ArrayLike | None, n: int) -> NDArray[np.float32]:
        """``state`` as a recurrent actor's (n, state_size) float32 array, or ValueError saying what is wrong."""
        spec = self.arch.recurrent
        assert spec is not None
        if state is None:
            raise ValueError("a recurrent policy needs each agent's state: step(obs, state, ...), initial_state(n) to start")
        array = np.asarray(state, dtype=np.float32)
        if array.shape != (n, spec.state_size):
            raise ValueError(f"recurrent state has shape {list(array.shape)}, expected {[n, spec.state_size]}")
        return array

    def act(
        self,
        obs: NDArray[np.float32],
        rng: np.random.Generator,
        deterministic: bool = False,
        mask: ArrayLike | None = None,
    ) -> tuple[NDArray[Any], ...]:
        """Sample actions for a batch (n, obs_dim) and return them with their log-probs.

        ``gaussian_mlp``: actions are the raw Gaussian samples (not clipped): the game clips
        them to its bounds, and the log-prob must be of the sample the policy actually drew.
        ``tanh_mlp``: uniform random in the bounds while ``explore`` says ``random``, else
        the actor's action plus N(0, noise²) clipped to ±act_limit; log-probs are zeros
        (off-policy learners do not use them). Both return ``(actions, logp)``.

        ``mixed_mlp``: a :class:`MixedAction` ``(actions, logp, dact)``; each branch draws only
        among the actions ``mask`` allows, and ``logp`` is under that masked distribution.
        ``deterministic``: the Gaussian mean and each branch's most likely legal action.

        Raises:
            ValueError: a ``mask`` for a policy without discrete branches, or of the wrong shape.
            ProtocolError: ``bad_mask`` for a mask the server would refuse.
        """
        if self.arch.recurrent is not None:
            raise ValueError("a recurrent policy acts with step(obs, state, rng, ...), which returns its next state too")
        return self._act_from(self._forward(obs), rng, deterministic, mask)

    def step(
        self,
        obs: NDArray[np.float32],
        state: ArrayLike,
        rng: np.random.Generator,
        deterministic: bool = False,
        mask: ArrayLike | None = None,
    ) -> tuple[tuple[NDArray[Any], ...], NDArray[np.float32]]:
        """:meth:`act` for a recurrent policy: ``(what act returns, each agent's next state)``.

        ``state`` (n, state_size) is each agent's state before this step (:meth:`initial_state` at an
        episode's start); the bot keeps the next one and sends ``state`` with the row (docs/protocol.md).
        A memoryless policy takes an (n, 0) state and returns one.
        """
        if self.arch.recurrent is None:
            return self.act(obs, rng, deterministic, mask), np.zeros((len(obs), 0), np.float32)
        y, new_state = self._run(obs, state)
        assert new_state is not None
        return self._act_from(y, rng, deterministic, mask), new_state

    def _act_from(
        self, y: NDArray[np.float32], rng: np.random.Generator, deterministic: bool, mask: ArrayLike | None
    ) -> tuple[NDArray[Any], ...]:
        """:meth:`act` from the MLP's output ``y``."""
        if self.mixed:
            return self._act_mixed(y, rng, deterministic, mask)
        if mask is not None:
            raise ValueError(f"a {self.arch.kind} policy has no discrete branches to mask")
        mean = self._mean_of(y)
        actions = self._sample(mean, rng, deterministic)
        if self.deterministic_kind:
            return actions, np.zeros(len(mean), dtype=np.float32)
        return actions, self._gaussian_log_prob(actions, mean)

    def sample(self, obs: NDArray[np.float32], rng: np.random.Generator, deterministic: bool = False) -> NDArray[np.float32]:
        """:meth:`act`'s actions alone (same draws from ``rng``), for opponents that send no transitions.

        Continuous kinds only: a ``mixed_mlp`` also picks discrete actions, which :meth:`act` returns.
        """
        if self.mixed:
            raise ValueError("a mixed_mlp policy picks discrete actions too: use act()")
        if self.arch.recurrent is not None:
            raise ValueError("a recurrent policy acts with step(obs, state, rng, ...), which returns its next state too")
        return self._sample(self.mean(obs), rng, deterministic)

    def _sample(self, mean: NDArray[np.float32], rng: np.random.Generator, deterministic: bool) -> NDArray[np.float32]:
        if deterministic:
            return mean
        if self.deterministic_kind:
            if self.random:
                return rng.uniform(-self.limit, self.limit, size=mean.shape).astype(np.float32)
            noisy = mean + np.float32(self.noise) * rng.standard_normal(mean.shape, dtype=np.float32)
            return np.clip(noisy, -self.limit, self.limit).astype(np.float32)
        noise = rng.standard_normal(mean.shape, dtype=np.float32)
        noise *= self.std
        noise += mean  # mean + std * noise, in place (the same floats: both operations commute)
        return noise

    def log_prob(
        self,
        obs: NDArray[np.float32],
        actions: NDArray[np.float32],
        mean: NDArray[np.float32] | None = None,
        dact: ArrayLike | None = None,
        mask: ArrayLike | None = None,
        state: NDArray[np.float32] | None = None,
    ) -> NDArray[np.float32]:
        """Log-density of ``actions`` under the diagonal Gaussian, summed over action dims.

        ``mixed_mlp``: plus, for each branch, the log-prob of ``dact``'s action under the
        categorical that ``mask`` leaves (``-inf`` for a forbidden one); an action outside its
        branch is ``bad_action``. ``state``: a recurrent actor's state before the step.
        """
        if not self.mixed:
            return self._gaussian_log_prob(actions, self.mean(obs, state) if mean is None else mean)
        if dact is None:
            raise ValueError("a mixed_mlp's log-prob needs dact, the discrete actions taken")
        y = self._forward(obs, state)
        cont = self._space.continuous
        logp = self._gaussian_log_prob(actions, y[:, :cont] if mean is None else mean)
        taken = np.asarray(dact, np.int64).reshape(len(y), self._space.n_branches)
        self._space.check_actions(taken)
        for b, branch in enumerate(self._branch_logits(y, mask)):
            logp += _picked(categorical.log_softmax(branch), taken[:, b])
        return logp

    def entropy(
        self, obs: NDArray[np.float32], mask: ArrayLike | None = None, state: NDArray[np.float32] | None = None
    ) -> NDArray[np.float32]:
        """Entropy of the policy's distribution for each row (n,): the Gaussian's plus each masked branch's.

        Raises:
            ValueError: for a ``tanh_mlp``, which is deterministic (its noise is the bot's).
        """
        if self.deterministic_kind:
            raise ValueError("a tanh_mlp policy is deterministic: it has no entropy")
        obs = np.asarray(obs, dtype=np.float32)
        gaussian = np.float32(self.log_std.sum() + (0.5 + _HALF_LOG_2PI) * len(self.log_std))
        out = np.full(len(obs), gaussian, np.float32)
        if self.mixed and self._space.branches:
            for branch in self._branch_logits(self._forward(obs, state), mask):
                out += categorical.entropy(categorical.log_softmax(branch))
        return out

    def _gaussian_log_prob(self, actions: NDArray[np.float32], mean: NDArray[np.float32]) -> NDArray[np.float32]:
        z = (actions - mean) / self.std
        logp: NDArray[np.float32] = (-0.5 * np.einsum("ij,ij->i", z, z) + self._logp_const).astype(np.float32, copy=False)
        return logp

    def _act_mixed(
        self, y: NDArray[np.float32], rng: np.random.Generator, deterministic: bool, mask: ArrayLike | None
    ) -> MixedAction:
        """:meth:`act` for a ``mixed_mlp`` from its output ``y``: the Gaussian dims as ``gaussian_mlp``, then each branch."""
        mean = y[:, : self._space.continuous]
        actions = self._sample(mean, rng, deterministic)
        logp = self._gaussian_log_prob(actions, mean)
        dact = np.zeros((len(y), self._space.n_branches), np.int64)
        for b, branch in enumerate(self._branch_logits(y, mask)):
            dact[:, b] = categorical.mode(branch) if deterministic else categorical.sample(branch, rng)
            logp += _picked(categorical.log_softmax(branch), dact[:, b])
        return MixedAction(np.ascontiguousarray(actions), logp, dact)

    def _branch_logits(self, y: NDArray[np.float32], mask: ArrayLike | None) -> list[NDArray[np.float32]]:
        """Each branch's logits with ``-inf`` where ``mask`` forbids (the mask checked as the server would)."""
        space = self._space
        branches = space.split(y[:, space.continuous :])
        if mask is None:
            return branches
        legal = space.mask_of(mask, len(y)) != 0
        return [categorical.masked(logits, part) for logits, part in zip(branches, space.split(legal), strict=True)]


def _picked(logp: NDArray[np.float32], actions: NDArray[np.int64]) -> NDArray[np.float32]:
    """``logp[i, actions[i]]`` for every row ``i``."""
    return np.take_along_axis(logp, actions[:, None], axis=1)[:, 0]


def _space_of(arch: Architecture) -> ActionSpace:
    """The space an architecture acts in, or ``bad_weights``: a ``mixed_mlp``'s outputs must be its space's."""
    try:
        space = arch.actions
    except ValueError as exc:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, str(exc)) from None
    if arch.kind == "mixed_mlp" and space.continuous + space.n_logits != arch.layers[-1]:
        raise ProtocolError(
            ErrorCode.BAD_WEIGHTS, f"a mixed_mlp's last layer must have {space.continuous + space.n_logits} outputs"
        )
    return space


def _load_layers(
    arch: Architecture, tensors: Mapping[str, NDArray[np.float32]]
) -> list[tuple[NDArray[np.float32], NDArray[np.float32]]]:
    """Each layer's (weight transposed, bias), checked: stored transposed once so each forward step is one x @ W."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(arch.layers, arch.layers[1:], strict=False)):
        weight = _tensor(tensors, f"l{i}.weight", (fan_out, fan_in))
        bias = _tensor(tensors, f"l{i}.bias", (fan_out,))
        layers.append((np.ascontiguousarray(weight.T), bias))
    return layers


def _load_conv(
    arch: Architecture, tensors: Mapping[str, NDArray[np.float32]]
) -> list[tuple[NDArray[np.float32], NDArray[np.float32]]]:
    """Each convolution's (weight, bias), checked; empty without a ``conv`` torso."""
    if arch.conv is None:
        return []
    shapes = arch.conv.tensor_shapes()
    return [
        (_tensor(tensors, f"c{i}.weight", shapes[f"c{i}.weight"]), _tensor(tensors, f"c{i}.bias", shapes[f"c{i}.bias"]))
        for i in range(len(arch.conv.layers))
    ]


def _load_obs_norm(arch: Architecture, tensors: Mapping[str, NDArray[np.float32]]) -> _ObsNorm | None:
    """The observation scaling ``arch`` and ``tensors`` give, or None: all three parts, or none of them.

    One part without the others is refused rather than guessed at: a policy that skipped a scaling
    its weights were trained with would act on inputs they never saw.
    """
    parts = {name: name in tensors for name in OBS_NORM_TENSORS} | {"arch field 'obs_clip'": arch.obs_clip is not None}
    if not any(parts.values()):
        return None
    missing = [name for name, present in parts.items() if not present]
    if missing:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"observation normalization without {', '.join(missing)}")
    assert arch.obs_clip is not None
    shape = (arch.obs_dim,)
    mean, std = (_tensor(tensors, name, shape).astype(np.float32) for name in OBS_NORM_TENSORS)
    if not (std > 0).all():
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, "tensor 'obs_norm.std' must be > 0 everywhere")
    if not (math.isfinite(arch.obs_clip) and arch.obs_clip > 0):
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"obs_clip must be a finite number > 0, got {arch.obs_clip}")
    return _ObsNorm(mean, std, np.float32(arch.obs_clip))


def _tensor(tensors: Mapping[str, NDArray[np.float32]], name: str, shape: tuple[int, ...]) -> NDArray[np.float32]:
    array = tensors.get(name)
    if array is None:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"missing tensor {name!r}")
    if tuple(array.shape) != shape:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"tensor {name!r} has shape {list(array.shape)}, expected {list(shape)}")
    if not np.isfinite(array).all():
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"tensor {name!r} holds NaN or Inf")
    return array
