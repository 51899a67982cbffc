"""Torch networks and their export to the language-neutral tensor layout bots load.

Exported actors use the names of the ``gaussian_mlp`` architecture in
``docs/protocol.md``: ``l{i}.weight`` (out, in) and ``l{i}.bias`` for the i-th linear
layer, plus ``log_std``. ``bot_protocol.policy.Policy`` runs exactly this layout in numpy.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

__all__ = ["Critic", "FastTanh", "GaussianActor", "check_same_shapes", "linear_arrays", "mlp"]


class _TanhBySigmoid(torch.autograd.Function):
    """tanh(x) computed as 2 sigmoid(2x) - 1, with tanh's own backward, 1 - y^2."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        grad_in: Tensor = torch.ops.aten.tanh_backward(grad, y)
        return grad_in


class FastTanh(nn.Module):
    """``nn.Tanh``, the same function to float32 rounding (|diff| < 2e-7), cheaper on the CPU.

    Why: torch's CPU ``tanh`` is several times slower than its ``sigmoid`` and was a large share of
    a PPO minibatch step (docs/agents.md, "The update's cost on the CPU"). The bots' numpy ``Policy``
    keeps ``np.tanh``: the two agree to float32 rounding, far below anything a log-prob ratio notices.
    """

    def forward(self, x: Tensor) -> Tensor:
        return _TanhBySigmoid.apply(x)  # type: ignore[no-any-return, no-untyped-call]


_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": FastTanh, "relu": nn.ReLU}


def mlp(sizes: tuple[int, ...], activation: str, head_gain: float) -> nn.Sequential:
    """Linear layers with ``activation`` between them (none after the last).

    Orthogonal init with gain sqrt(2) for hidden layers and ``head_gain`` for the output
    (CleanRL's PPO: a small policy head starts the policy near its mean action).
    """
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        linear = nn.Linear(fan_in, fan_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, gain=head_gain if last else math.sqrt(2.0))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def linear_arrays(net: nn.Sequential) -> dict[str, NDArray[np.float32]]:
    """The linear layers of ``net`` as ``l{i}.weight`` / ``l{i}.bias`` float32 arrays."""
    out: dict[str, NDArray[np.float32]] = {}
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, linear in enumerate(linears):
        out[f"l{i}.weight"] = linear.weight.detach().cpu().numpy().astype(np.float32, copy=True)
        out[f"l{i}.bias"] = linear.bias.detach().cpu().numpy().astype(np.float32, copy=True)
    return out


class GaussianActor(nn.Module):
    """Diagonal Gaussian policy: an MLP for the mean and a state-independent log-std.

    The log-std is clamped to [``log_std_min``, ``log_std_max``] wherever it is used
    (acting and training must use the same std, or importance ratios are distorted) and
    the raw parameter is clamped again after every optimizer step so it cannot drift
    past the bounds.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...],
        activation: str,
        log_std_init: float,
        log_std_min: float,
        log_std_max: float,
    ) -> None:
        super().__init__()
        self.sizes = (obs_dim, *hidden, act_dim)
        self.activation = activation
        self.net = mlp(self.sizes, activation, head_gain=0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max

    def forward(self, obs: Tensor) -> Tensor:
        """The action mean, shape (n, act_dim)."""
        return self.net(obs)  # type: ignore[no-any-return]

    def clamped_log_std(self) -> Tensor:
        return self.log_std.clamp(self.log_std_min, self.log_std_max)

    def log_prob(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-density of ``actions`` summed over action dims, and the clamped log-std used."""
        return self.log_prob_at(self(obs), actions)

    def log_prob_at(self, mean: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`log_prob` for a mean already computed (the PPO step's fused forward gives it)."""
        log_std = self.clamped_log_std()
        z = (actions - mean) * torch.exp(-log_std)
        logp = (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
        return logp, log_std

    @torch.no_grad()
    def clamp_log_std_(self) -> None:
        self.log_std.clamp_(self.log_std_min, self.log_std_max)

    def export(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """(architecture, tensors) in the bot-ready layout."""
        arch = {
            "kind": "gaussian_mlp",
            "layers": list(self.sizes),
            "activation": self.activation,
            "log_std_min": float(self.log_std_min),
            "log_std_max": float(self.log_std_max),
        }
        tensors = linear_arrays(self.net)
        tensors["log_std"] = self.log_std.detach().cpu().numpy().astype(np.float32, copy=True)
        return arch, tensors


class Critic(nn.Module):
    """State-value MLP. Its weights stay on the server: bots never need them."""

    def __init__(self, obs_dim: int, hidden: tuple[int, ...], activation: str) -> None:
        super().__init__()
        self.net = mlp((obs_dim, *hidden, 1), activation, head_gain=1.0)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(obs).squeeze(-1)  # type: ignore[no-any-return]


def check_same_shapes(name: str, expected: dict[str, Tensor], found: Any) -> None:
    """Raise ``ValueError`` unless ``found`` (a checkpoint's state dict) has ``expected``'s keys and shapes."""
    if not isinstance(found, dict) or set(found) != set(expected):
        raise ValueError(f"checkpoint {name} network sizes do not match this run's (different layers)")
    for key, tensor in expected.items():
        if not isinstance(found[key], Tensor) or found[key].shape != tensor.shape:
            shape = tuple(found[key].shape) if isinstance(found[key], Tensor) else type(found[key]).__name__
            raise ValueError(f"checkpoint {name} network sizes differ: {key} is {shape}, this run needs {tuple(tensor.shape)}")
