"""A numpy copy of the trainer's actor, so a bot acts locally with no torch installed.

Two kinds of actor (see ``Architecture``): ``gaussian_mlp`` (PPO) samples around its
mean with its own std; ``tanh_mlp`` (DDPG, TD3) is deterministic, and exploration is
added here, as the server's ``explore`` settings say: uniform random actions while the
trainer warms up its replay buffer, then Gaussian noise in action units, clipped to the
bounds. The forward passes match ``agents.networks.GaussianActor`` and
``agents.td3.DeterministicActor`` within float32 tolerance (tested against them).
A :class:`Policy` is immutable once built: a bot swaps the
whole object for a new one when weights arrive, so it never acts with half-updated
weights.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError
from .messages import Architecture, Weights
from .policy_id import PolicyId
from .tensors import decode_tensors

__all__ = ["Policy"]


def _relu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.maximum(x, np.float32(0.0), out=x)


def _tanh(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.tanh(x, out=x)


_ACTIVATIONS: dict[str, Callable[[NDArray[np.float32]], NDArray[np.float32]]] = {"tanh": _tanh, "relu": _relu}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


KINDS = ("gaussian_mlp", "tanh_mlp")


class Policy:
    """An MLP actor in numpy: ``act(obs)`` picks actions (and their log-probs) for a batch.

    Args:
        arch: the network description from the ``weights`` message.
        tensors: ``l{i}.weight`` (out, in), ``l{i}.bias`` (out,) per layer, and ``log_std``
            (``gaussian_mlp`` only).
        generation, version: the weights' identity, stamped on every transition acted with them.
        explore: ``tanh_mlp`` only: ``noise`` (Gaussian std in action units, default 0.1)
            and ``random`` (1 = uniform random actions: the trainer is still warming up).

    Raises:
        ProtocolError: ``bad_weights`` when a tensor is missing or of the wrong shape.
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
        self._layers: list[tuple[NDArray[np.float32], NDArray[np.float32]]] = []
        self.deterministic_kind = arch.kind == "tanh_mlp"
        self.explore = dict(explore or {})
        self.noise = float(self.explore.get("noise", 0.1))
        self.random = float(self.explore.get("random", 0.0)) >= 0.5
        if not (math.isfinite(self.noise) and self.noise >= 0):
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"explore noise must be a finite number >= 0, got {self.noise}")
        expected = set() if self.deterministic_kind else {"log_std"}
        for i, (fan_in, fan_out) in enumerate(zip(arch.layers, arch.layers[1:], strict=False)):
            weight = _tensor(tensors, f"l{i}.weight", (fan_out, fan_in))
            bias = _tensor(tensors, f"l{i}.bias", (fan_out,))
            # Stored transposed once so each forward step is one x @ W (no per-call transpose copy).
            self._layers.append((np.ascontiguousarray(weight.T), bias))
            expected |= {f"l{i}.weight", f"l{i}.bias"}
        extra = set(tensors) - expected
        if extra:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unexpected tensors {sorted(extra)[:4]}")
        if self.deterministic_kind:
            self.limit = np.float32(arch.act_limit)
            self.log_std = np.zeros(arch.layers[-1], dtype=np.float32)
            self.std = np.zeros(arch.layers[-1], dtype=np.float32)
            self._logp_const = 0.0
            return
        log_std = _tensor(tensors, "log_std", (arch.layers[-1],))
        self.log_std = np.clip(log_std, arch.log_std_min, arch.log_std_max).astype(np.float32)
        self.std = np.exp(self.log_std).astype(np.float32)
        self._logp_const = float(-(self.log_std.sum() + _HALF_LOG_2PI * len(self.log_std)))

    @property
    def obs_dim(self) -> int:
        return self.arch.layers[0]

    @property
    def act_dim(self) -> int:
        return self.arch.layers[-1]

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
        if not self.deterministic_kind:
            tensors["log_std"] = self.log_std
        return Weights.pack(self.generation, self.version, self.arch, tensors, self.explore)

    def mean(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """The noise-free action for a batch of observations, shape (n, act_dim).

        ``gaussian_mlp``: the Gaussian's mean; ``tanh_mlp``: ``act_limit * tanh(y)``.
        """
        y = np.asarray(obs, dtype=np.float32)
        last = len(self._layers) - 1
        for i, (weight_t, bias) in enumerate(self._layers):
            y = y @ weight_t
            y += bias  # in place: one array fewer a layer
            if i < last:
                y = self._activation(y)
        if self.deterministic_kind:
            y = np.tanh(y, out=y)
            y *= self.limit
        return y

    def act(
        self, obs: NDArray[np.float32], rng: np.random.Generator, deterministic: bool = False
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Sample actions for a batch (n, obs_dim) and return them with their log-probs.

        ``gaussian_mlp``: actions are the raw Gaussian samples (not clipped): the game clips
        them to its bounds, and the log-prob must be of the sample the policy actually drew.
        ``tanh_mlp``: uniform random in the bounds while ``explore`` says ``random``, else
        the actor's action plus N(0, noise²) clipped to ±act_limit; log-probs are zeros
        (off-policy learners do not use them).
        """
        mean = self.mean(obs)
        actions = self._sample(mean, rng, deterministic)
        if self.deterministic_kind:
            return actions, np.zeros(len(mean), dtype=np.float32)
        return actions, self.log_prob(obs, actions, mean)

    def sample(self, obs: NDArray[np.float32], rng: np.random.Generator, deterministic: bool = False) -> NDArray[np.float32]:
        """:meth:`act`'s actions alone (same draws from ``rng``), for opponents that send no transitions."""
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
        self, obs: NDArray[np.float32], actions: NDArray[np.float32], mean: NDArray[np.float32] | None = None
    ) -> NDArray[np.float32]:
        """Log-density of ``actions`` under the diagonal Gaussian, summed over action dims."""
        if mean is None:
            mean = self.mean(obs)
        z = (actions - mean) / self.std
        logp: NDArray[np.float32] = (-0.5 * np.einsum("ij,ij->i", z, z) + self._logp_const).astype(np.float32, copy=False)
        return logp


def _tensor(tensors: Mapping[str, NDArray[np.float32]], name: str, shape: tuple[int, ...]) -> NDArray[np.float32]:
    array = tensors.get(name)
    if array is None:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"missing tensor {name!r}")
    if tuple(array.shape) != shape:
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"tensor {name!r} has shape {list(array.shape)}, expected {list(shape)}")
    if not np.isfinite(array).all():
        raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"tensor {name!r} holds NaN or Inf")
    return array
