"""A numpy copy of the trainer's actor, so a bot acts locally with no torch installed.

The forward pass matches ``agents.networks.GaussianActor`` within float32 tolerance
(tested against it). A :class:`Policy` is immutable once built: a bot swaps the
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
from .tensors import decode_tensors

__all__ = ["Policy"]


def _relu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.maximum(x, np.float32(0.0), out=x)


def _tanh(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.tanh(x, out=x)


_ACTIVATIONS: dict[str, Callable[[NDArray[np.float32]], NDArray[np.float32]]] = {"tanh": _tanh, "relu": _relu}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Policy:
    """A Gaussian MLP actor in numpy: ``act(obs)`` samples actions and their log-probs.

    Args:
        arch: the network description from the ``weights`` message.
        tensors: ``l{i}.weight`` (out, in), ``l{i}.bias`` (out,) per layer, and ``log_std``.
        generation, version: the weights' identity, stamped on every transition acted with them.

    Raises:
        ProtocolError: ``bad_weights`` when a tensor is missing or of the wrong shape.
    """

    def __init__(
        self, arch: Architecture, tensors: Mapping[str, NDArray[np.float32]], generation: int = 0, version: int = 0
    ) -> None:
        if arch.kind != "gaussian_mlp":
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unsupported architecture kind {arch.kind!r}")
        if arch.activation not in _ACTIVATIONS:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unsupported activation {arch.activation!r}")
        self.arch = arch
        self.generation = generation
        self.version = version
        self._activation = _ACTIVATIONS[arch.activation]
        self._layers: list[tuple[NDArray[np.float32], NDArray[np.float32]]] = []
        expected = {"log_std"}
        for i, (fan_in, fan_out) in enumerate(zip(arch.layers, arch.layers[1:], strict=False)):
            weight = _tensor(tensors, f"l{i}.weight", (fan_out, fan_in))
            bias = _tensor(tensors, f"l{i}.bias", (fan_out,))
            # Stored transposed once so each forward step is one x @ W (no per-call transpose copy).
            self._layers.append((np.ascontiguousarray(weight.T), bias))
            expected |= {f"l{i}.weight", f"l{i}.bias"}
        extra = set(tensors) - expected
        if extra:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, f"unexpected tensors {sorted(extra)[:4]}")
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

    @classmethod
    def from_weights(cls, weights: Weights) -> Policy:
        """Verify a ``weights`` message (sha256, blob limits, shapes) and build its policy.

        Raises:
            ProtocolError: ``bad_weights`` on any mismatch; the caller keeps its old policy.
        """
        if hashlib.sha256(weights.tensors).digest() != weights.sha256:
            raise ProtocolError(ErrorCode.BAD_WEIGHTS, "sha256 of the weights blob does not match")
        return cls(weights.arch, decode_tensors(weights.tensors), weights.generation, weights.version)

    def mean(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """The action mean for a batch of observations, shape (n, act_dim)."""
        y = np.asarray(obs, dtype=np.float32)
        last = len(self._layers) - 1
        for i, (weight_t, bias) in enumerate(self._layers):
            y = y @ weight_t + bias
            if i < last:
                y = self._activation(y)
        return y

    def act(
        self, obs: NDArray[np.float32], rng: np.random.Generator, deterministic: bool = False
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Sample actions for a batch (n, obs_dim) and return them with their log-probs.

        Actions are the raw Gaussian samples (not clipped): the game clips them to its
        bounds, and the log-prob must be of the sample the policy actually drew.
        """
        mean = self.mean(obs)
        if deterministic:
            actions = mean
        else:
            actions = (mean + self.std * rng.standard_normal(mean.shape, dtype=np.float32)).astype(np.float32)
        return actions, self.log_prob(obs, actions, mean)

    def log_prob(
        self, obs: NDArray[np.float32], actions: NDArray[np.float32], mean: NDArray[np.float32] | None = None
    ) -> NDArray[np.float32]:
        """Log-density of ``actions`` under the diagonal Gaussian, summed over action dims."""
        if mean is None:
            mean = self.mean(obs)
        z = (actions - mean) / self.std
        logp: NDArray[np.float32] = (-0.5 * np.einsum("ij,ij->i", z, z) + self._logp_const).astype(np.float32)
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
