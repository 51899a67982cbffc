"""Torch networks and their export to the language-neutral tensor layout bots load.

Exported actors use the names of the ``gaussian_mlp`` and ``mixed_mlp`` architectures in
``docs/protocol.md``: ``l{i}.weight`` (out, in) and ``l{i}.bias`` for the i-th linear
layer, plus ``log_std`` (for ``mixed_mlp`` only when it has continuous dims).
``bot_protocol.policy.Policy`` runs exactly this layout in numpy.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from .recurrent import RecurrentCore

__all__ = [
    "Actor",
    "Body",
    "ConvShape",
    "ConvTorso",
    "Critic",
    "FastTanh",
    "GaussianActor",
    "LogStdRange",
    "MaskedCategorical",
    "MixedActor",
    "check_same_shapes",
    "linear_arrays",
    "masked_categorical",
    "mlp",
    "split_actions",
]


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


ConvShape: TypeAlias = tuple[tuple[int, int, int], tuple[tuple[int, int, int], ...]]
"""A convolutional torso's shape: the image (height, width, channels) and each layer's (out_channels, kh, kw)."""


class ConvTorso(nn.Module):
    """Stride-1, unpadded convolutions over the image at the start of each observation, then the rest of it.

    The image is stored channels last (``H*W*C`` entries, row-major), as a game or gymnasium flattens a
    board; the output is the last layer's activations flattened in (channel, row, column) order, then the
    observation's remaining entries: the MLP's input. ``bot_protocol.conv`` runs the same in numpy.
    Hidden-layer initialization as the MLP's (orthogonal, gain sqrt(2)), as CleanRL's Atari networks.
    """

    def __init__(self, obs_dim: int, shape: ConvShape, activation: str) -> None:
        super().__init__()
        self.image, self.layer_shapes = tuple(shape[0]), tuple(tuple(layer) for layer in shape[1])
        height, width, channels = self.image
        self.image_size = height * width * channels
        self.extra = obs_dim - self.image_size
        assert self.extra >= 0, "the image is larger than the observation"
        convs: list[nn.Module] = []
        in_channels = channels
        for out, kh, kw in self.layer_shapes:
            conv = nn.Conv2d(in_channels, out, (kh, kw))  # with a bias (bias=True)
            nn.init.orthogonal_(conv.weight, gain=math.sqrt(2.0))
            nn.init.zeros_(conv.get_parameter("bias"))
            convs += [conv, _ACTIVATIONS[activation]()]
            in_channels, height, width = out, height - kh + 1, width - kw + 1
        self.convs = nn.Sequential(*convs)
        self.features = in_channels * height * width
        """Inputs the MLP after the torso gets: the flattened output, then the ``extra`` observation entries."""

    @property
    def out_dim(self) -> int:
        return self.features + self.extra

    def forward(self, obs: Tensor) -> Tensor:
        height, width, channels = self.image
        image = obs[:, : self.image_size].reshape(-1, height, width, channels).permute(0, 3, 1, 2)
        flat = self.convs(image).flatten(1)
        return torch.cat([flat, obs[:, self.image_size :]], dim=1) if self.extra else flat

    def export(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """The ``conv`` architecture field and the ``c{i}.weight`` / ``c{i}.bias`` tensors."""
        wire = {"image": list(self.image), "layers": [list(layer) for layer in self.layer_shapes]}
        tensors: dict[str, NDArray[np.float32]] = {}
        for i, conv in enumerate(m for m in self.convs if isinstance(m, nn.Conv2d)):
            tensors[f"c{i}.weight"] = conv.weight.detach().cpu().numpy().astype(np.float32, copy=True)
            tensors[f"c{i}.bias"] = conv.get_parameter("bias").detach().cpu().numpy().astype(np.float32, copy=True)
        return wire, tensors


class Body(nn.Module):
    """What reads a network's input rows before its MLP: an optional :class:`ConvTorso`, then an optional recurrent core.

    Without a core a row is an observation. With one (:class:`agents.recurrent.RecurrentCore`) a row is an
    observation and then the state the bot acted from, ``obs_dim + state_size`` entries: :meth:`forward`
    takes one step from each row's own state, and :meth:`forward_chunks` unrolls chunks of consecutive rows
    from the state of each chunk's first row, the backpropagation through time PPO's sequence step runs.
    """

    def __init__(self, obs_dim: int, activation: str, conv: ConvShape | None, recurrent: tuple[str, int] | None) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.conv = ConvTorso(obs_dim, conv, activation) if conv is not None else None
        features = self.conv.out_dim if self.conv is not None else obs_dim
        self.core = RecurrentCore(recurrent[0], features, recurrent[1]) if recurrent is not None else None
        self.out_dim = self.core.size if self.core is not None else features
        """The MLP's input width."""

    @property
    def state_size(self) -> int:
        """Entries of the state each row carries after its observation (0 without a core)."""
        return self.core.state_size if self.core is not None else 0

    def features(self, obs: Tensor) -> Tensor:
        """The torso's output for observations (the observations themselves without one): what a core reads."""
        return self.conv(obs) if self.conv is not None else obs

    def forward(self, rows: Tensor) -> Tensor:
        """The MLP's input for each row (a core steps once, from the row's own state)."""
        if self.core is None:
            return self.features(rows)
        return self.core.step(self.features(rows[:, : self.obs_dim]), rows[:, self.obs_dim :])[0]

    def forward_chunks(self, rows: Tensor, length: int) -> Tensor:
        """The MLP's input for rows laid out as chunks of ``length`` consecutive steps, each unrolled from its first state."""
        if self.core is None:
            return self.features(rows)
        features = self.features(rows[:, : self.obs_dim])
        chunks = features.reshape(-1, length, features.shape[-1])
        out = self.core.unroll(chunks, rows[::length, self.obs_dim :])
        return out.reshape(len(rows), -1)

    def export(self, arch: dict[str, Any], tensors: dict[str, NDArray[np.float32]]) -> None:
        """Add the torso's and the core's fields and tensors to an export (nothing for a plain MLP)."""
        if self.conv is not None:
            arch["conv"], conv_tensors = self.conv.export()
            tensors.update(conv_tensors)
        if self.core is not None:
            arch["recurrent"], core_tensors = self.core.export()
            tensors.update(core_tensors)


def linear_arrays(net: nn.Sequential) -> dict[str, NDArray[np.float32]]:
    """The linear layers of ``net`` as ``l{i}.weight`` / ``l{i}.bias`` float32 arrays."""
    out: dict[str, NDArray[np.float32]] = {}
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, linear in enumerate(linears):
        out[f"l{i}.weight"] = linear.weight.detach().cpu().numpy().astype(np.float32, copy=True)
        out[f"l{i}.bias"] = linear.bias.detach().cpu().numpy().astype(np.float32, copy=True)
    return out


class LogStdRange(NamedTuple):
    """A Gaussian's state-independent log-std: where it starts and the bounds it is clamped to."""

    init: float
    low: float
    high: float


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
        log_std: LogStdRange,
        conv: ConvShape | None = None,
        recurrent: tuple[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.body = Body(obs_dim, activation, conv, recurrent)
        self.sizes = (self.body.out_dim, *hidden, act_dim)
        self.activation = activation
        self.net = mlp(self.sizes, activation, head_gain=0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std.init)))
        self.log_std_min, self.log_std_max = log_std.low, log_std.high

    def forward(self, obs: Tensor) -> Tensor:
        """The action mean, shape (n, act_dim)."""
        return self.net(self.body(obs))  # type: ignore[no-any-return]

    def forward_chunks(self, rows: Tensor, length: int) -> Tensor:
        """:meth:`forward` over chunks of ``length`` consecutive rows (:meth:`Body.forward_chunks`)."""
        return self.net(self.body.forward_chunks(rows, length))  # type: ignore[no-any-return]

    def clamped_log_std(self) -> Tensor:
        return self.log_std.clamp(self.log_std_min, self.log_std_max)

    def log_prob(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-density of ``actions`` summed over action dims, and the clamped log-std used."""
        return self.log_prob_at(self(obs), actions)

    def log_prob_at(self, mean: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`log_prob` for a mean already computed (the PPO step's fused forward gives it)."""
        log_std = self.clamped_log_std()
        return gaussian_log_prob(mean, actions, log_std), log_std

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
        self.body.export(arch, tensors)
        return arch, tensors


def gaussian_log_prob(mean: Tensor, actions: Tensor, log_std: Tensor) -> Tensor:
    """The diagonal Gaussian's log-density of ``actions``, summed over the action dims (0 with none)."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)


def split_actions(block: Tensor, continuous: int, branches: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """A packed action block as (continuous actions float, discrete actions long, mask bool).

    The block is ``[continuous | one index per branch, as float | every branch's mask as 0/1]``, one row
    per step: the layout the server packs a rollout's actions in, so that one float matrix carries them
    (indices below 2^24 are exact in float32).
    """
    n = len(branches)
    assert block.shape[-1] == continuous + n + sum(branches), "a packed action block of another action space"
    return block[:, :continuous], block[:, continuous : continuous + n].long(), block[:, continuous + n :] > 0.5


class MaskedCategorical(NamedTuple):
    """Per row, over every branch: the taken actions' log-probability and the entropy, each summed."""

    logp: Tensor
    entropy: Tensor


def masked_categorical(logits: Tensor, dact: Tensor, mask: Tensor, branches: tuple[int, ...]) -> MaskedCategorical:
    """Each branch a categorical over its legal actions: ``logits`` (n, sum(branches)), ``dact`` (n, branches).

    An illegal logit becomes the dtype's most negative finite number rather than -inf: its exp is exactly
    0, so the log-softmax of a legal action and every probability are the exact masked values, while a
    -inf would turn the backward pass's ``-inf - -inf`` and ``0 * -inf`` into NaN. The entropy sums over
    the legal actions only, so an illegal action's huge negative log-probability never enters it.
    """
    masked = torch.where(mask, logits, torch.finfo(logits.dtype).min)
    logp = logits.new_zeros(len(logits))
    entropy = logits.new_zeros(len(logits))
    for b, (part, legal) in enumerate(zip(masked.split(branches, dim=-1), mask.split(branches, dim=-1), strict=True)):
        log_probs = torch.log_softmax(part, dim=-1)
        logp = logp + log_probs.gather(1, dact[:, b : b + 1]).squeeze(1)
        entropy = entropy - torch.where(legal, log_probs.exp() * log_probs, 0.0).sum(-1)
    return MaskedCategorical(logp, entropy)


class MixedActor(nn.Module):
    """A policy over continuous and discrete actions at once: a diagonal Gaussian and masked categoricals.

    One MLP (the :class:`GaussianActor`'s trunk) whose last layer gives the Gaussian's mean, then each
    discrete branch's logits in order; a state-independent log-std for the continuous part, clamped as
    the Gaussian's is. Without continuous dims the log-std is an empty parameter, so every log-std
    clamp and guard acts on nothing. The action is the packed block :func:`split_actions` reads, so PPO's
    loss calls :meth:`log_prob_at` as it calls the Gaussian's.
    """

    def __init__(
        self,
        obs_dim: int,
        continuous: int,
        branches: tuple[int, ...],
        hidden: tuple[int, ...],
        activation: str,
        log_std: LogStdRange,
        conv: ConvShape | None = None,
        recurrent: tuple[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.continuous, self.branches = continuous, tuple(branches)
        self.body = Body(obs_dim, activation, conv, recurrent)
        self.sizes = (self.body.out_dim, *hidden, continuous + sum(self.branches))
        self.activation = activation
        self.net = mlp(self.sizes, activation, head_gain=0.01)  # near-uniform logits at the start
        self.log_std = nn.Parameter(torch.full((continuous,), float(log_std.init)))
        self.log_std_min, self.log_std_max = log_std.low, log_std.high

    def forward(self, obs: Tensor) -> Tensor:
        """The last layer's output, shape (n, continuous + sum(branches)): the mean, then the logits."""
        return self.net(self.body(obs))  # type: ignore[no-any-return]

    def forward_chunks(self, rows: Tensor, length: int) -> Tensor:
        """:meth:`forward` over chunks of ``length`` consecutive rows (:meth:`Body.forward_chunks`)."""
        return self.net(self.body.forward_chunks(rows, length))  # type: ignore[no-any-return]

    def split_output(self, out: Tensor) -> tuple[Tensor, Tensor]:
        """(the Gaussian's mean, every branch's logits) of a :meth:`forward` output."""
        return out[:, : self.continuous], out[:, self.continuous :]

    def split_actions(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(continuous, discrete, mask) of a packed action block (:func:`split_actions`)."""
        return split_actions(actions, self.continuous, self.branches)

    def clamped_log_std(self) -> Tensor:
        return self.log_std.clamp(self.log_std_min, self.log_std_max)

    def log_prob(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-probability of packed ``actions`` (Gaussian density times masked probabilities), and the clamped log-std."""
        return self.log_prob_at(self(obs), actions)

    def log_prob_at(self, out: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`log_prob` for an output already computed."""
        log_std = self.clamped_log_std()
        return self.log_prob_and_entropy(out, *self.split_actions(actions)).logp, log_std

    def log_prob_and_entropy(self, out: Tensor, cont: Tensor, dact: Tensor, mask: Tensor) -> MaskedCategorical:
        """Per row, the whole distribution's: log-probability of (``cont``, ``dact``) under ``mask``, and entropy."""
        mean, logits = self.split_output(out)
        log_std = self.clamped_log_std()
        discrete = masked_categorical(logits, dact, mask, self.branches)
        gaussian_entropy = (log_std + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum()
        return MaskedCategorical(gaussian_log_prob(mean, cont, log_std) + discrete.logp, gaussian_entropy + discrete.entropy)

    @torch.no_grad()
    def clamp_log_std_(self) -> None:
        self.log_std.clamp_(self.log_std_min, self.log_std_max)

    def export(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """(architecture, tensors) in the bot-ready ``mixed_mlp`` layout (``log_std`` only with continuous dims)."""
        arch = {
            "kind": "mixed_mlp",
            "layers": list(self.sizes),
            "activation": self.activation,
            "continuous": self.continuous,
            "branches": list(self.branches),
            "log_std_min": float(self.log_std_min),
            "log_std_max": float(self.log_std_max),
        }
        tensors = linear_arrays(self.net)
        if self.continuous > 0:
            tensors["log_std"] = self.log_std.detach().cpu().numpy().astype(np.float32, copy=True)
        self.body.export(arch, tensors)
        return arch, tensors


Actor: TypeAlias = GaussianActor | MixedActor
"""PPO's actor: the Gaussian for continuous actions only, the mixed one for a space with discrete branches."""


class Critic(nn.Module):
    """State-value MLP (after its own :class:`ConvTorso` with ``conv``). Its weights stay on the server, never sent."""

    def __init__(self, obs_dim: int, hidden: tuple[int, ...], activation: str, conv: ConvShape | None = None) -> None:
        super().__init__()
        self.body = Body(obs_dim, activation, conv, None)
        self.net = mlp((self.body.out_dim, *hidden, 1), activation, head_gain=1.0)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(self.body(obs)).squeeze(-1)  # type: ignore[no-any-return]


def check_same_shapes(name: str, expected: dict[str, Tensor], found: Any) -> None:
    """Raise ``ValueError`` unless ``found`` (a checkpoint's state dict) has ``expected``'s keys and shapes."""
    if not isinstance(found, dict) or set(found) != set(expected):
        raise ValueError(f"checkpoint {name} network sizes do not match this run's (different layers)")
    for key, tensor in expected.items():
        if not isinstance(found[key], Tensor) or found[key].shape != tensor.shape:
            shape = tuple(found[key].shape) if isinstance(found[key], Tensor) else type(found[key]).__name__
            raise ValueError(f"checkpoint {name} network sizes differ: {key} is {shape}, this run needs {tuple(tensor.shape)}")
