"""A trained actor as an ONNX model, for game engines: ``arena export CHECKPOINT --onnx -o policy.onnx``.

Why ONNX: a game developer runs the policy inside the engine (Unity, Unreal, Godot, a C++ or
JavaScript game) with onnxruntime, instead of re-implementing our forward pass in each language.
The graph is exported with ``torch.onnx`` from the *bot-ready weights* (the exact ``weights``
message bots receive, docs/protocol.md §4) rebuilt as plain torch layers, so a checkpoint of any
algorithm, a run directory or a ``.weights`` file all give the same graph, and the model computes
what :class:`bot_protocol.Policy` computes (tested to float32 tolerance with onnxruntime).

The model (opset :data:`OPSET`, one dynamic batch axis): input ``obs`` float32 (batch, obs_dim);
a recurrent actor (``arch.recurrent``) also takes ``state`` float32 (batch, state_size), each agent's
state before the step, and outputs ``state_out`` after the others, the state to feed next;
outputs ``mean`` and ``log_std`` for ``gaussian_mlp`` (PPO), ``action`` for ``tanh_mlp`` (DDPG,
TD3). A ``mixed_mlp`` (PPO with discrete branches) also takes ``mask`` float32 (batch,
sum(branches)), 1 where an action is legal, and outputs ``mean``/``log_std`` for its continuous
dims (when it has any), the masked ``logits`` and ``action``, each branch's most likely legal
action (int64). The game clips continuous actions to its bounds; :func:`model_metadata` states the
sizes, bounds and the weights' identity. docs/export.md describes the model for its users.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from bot_protocol import Weights
from bot_protocol.tensors import decode_tensors

__all__ = ["MASKED_LOGIT", "OPSET", "export_onnx", "model_metadata", "reference_actions", "signature", "weights_module"]

OPSET = 18
"""The ONNX opset of exported models: onnxruntime 1.16 and later (2023) run it, as do Unity Sentis and
ONNX Runtime Web."""

MASKED_LOGIT = float(np.finfo(np.float32).min)
"""The ``logits`` output where the mask forbids an action: float32's most negative finite number, as the
trainer masks. Its exp is exactly 0, so a softmax gives it probability 0, yet unlike ``-inf`` an engine's
``x - max(x)`` or ``0 * x`` never turns it into NaN."""

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


class _Actor(nn.Module):
    """The forward pass of a bot-ready ``gaussian_mlp`` or ``tanh_mlp`` in plain torch layers (exportable)."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        arch = weights.arch
        self.net = _Net(weights)
        self.gaussian = arch.kind == "gaussian_mlp"
        if self.gaussian:
            # Not named "log_std": that is the output's name, and an ONNX graph names each value once.
            self.register_buffer("clamped_log_std", _clamped_log_std(weights))
        else:
            self.act_limit = float(arch.act_limit)

    def forward(self, obs: Tensor, state: Tensor | None = None) -> Tensor | tuple[Tensor, ...]:
        y, state_out = self.net(obs, state)
        after = () if state_out is None else (state_out,)
        if self.gaussian:
            log_std = self.get_buffer("clamped_log_std")
            return (y, log_std.expand_as(y), *after)
        action = self.act_limit * torch.tanh(y)
        return (action, *after) if after else action


class _MixedActor(nn.Module):
    """A bot-ready ``mixed_mlp``: the Gaussian's mean and log-std, the masked logits and each branch's mode.

    The mode is computed in the graph so an engine that only plays deterministically needs no
    per-branch bookkeeping: it reads ``action``. ``ArgMax`` keeps the first of equal logits, as the
    numpy ``Policy`` does.
    """

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        space = weights.arch.actions
        self.continuous, self.branches = space.continuous, space.branches
        self.net = _Net(weights)
        self.register_buffer("clamped_log_std", _clamped_log_std(weights))

    def forward(self, obs: Tensor, mask: Tensor | None = None, state: Tensor | None = None) -> tuple[Tensor, ...]:
        y, state_out = self.net(obs, state)
        outputs: tuple[Tensor, ...] = ()
        if self.continuous:
            mean = y[:, : self.continuous]
            outputs = (mean, self.get_buffer("clamped_log_std").expand_as(mean))
        if self.branches:
            assert mask is not None
            logits = torch.where(mask > 0.5, y[:, self.continuous :], MASKED_LOGIT)
            modes = [part.argmax(dim=1, keepdim=True) for part in logits.split(self.branches, dim=1)]
            outputs += (logits, torch.cat(modes, dim=1))
        return outputs if state_out is None else (*outputs, state_out)


class _Net(nn.Module):
    """The observation scaling and torso, a recurrent core when there is one, then the MLP: ``(y, next state or None)``."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        self.pre, self.mlp = _mlp(weights)
        spec = weights.arch.recurrent
        self.core: _Core | None = None if spec is None else _Core(weights)

    def forward(self, obs: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        x = self.pre(obs)
        state_out = None
        if self.core is not None:
            assert state is not None
            x, state_out = self.core(x, state)
        return self.mlp(x), state_out


class _Core(nn.Module):
    """The ``recurrent`` core (docs/protocol.md §4.7), one step written as its equations: ``(h, next state)``.

    Plain matrix products, sigmoids and tanhs rather than torch's ``nn.GRU``: one step needs no loop,
    and every ONNX runtime runs these operators (an engine may lack the fused RNN ones).
    """

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        spec = weights.arch.recurrent
        assert spec is not None
        tensors = decode_tensors(weights.tensors)
        self.lstm, self.size = spec.cell == "lstm", spec.size
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            self.register_buffer(name, torch.from_numpy(np.array(tensors[f"rnn.{name}"], np.float32)))

    def forward(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        size = self.size
        h = state[:, :size]
        gi = x @ self.get_buffer("weight_ih").T + self.get_buffer("bias_ih")
        gh = h @ self.get_buffer("weight_hh").T + self.get_buffer("bias_hh")
        if not self.lstm:
            reset = torch.sigmoid(gi[:, :size] + gh[:, :size])
            update = torch.sigmoid(gi[:, size : 2 * size] + gh[:, size : 2 * size])
            new = torch.tanh(gi[:, 2 * size :] + reset * gh[:, 2 * size :])
            h_next = (1.0 - update) * new + update * h
            return h_next, h_next
        gates = gi + gh
        i, f = torch.sigmoid(gates[:, :size]), torch.sigmoid(gates[:, size : 2 * size])
        g, o = torch.tanh(gates[:, 2 * size : 3 * size]), torch.sigmoid(gates[:, 3 * size :])
        c_next = f * state[:, size:] + i * g
        h_next = o * torch.tanh(c_next)
        return h_next, torch.cat([h_next, c_next], dim=1)


def _mlp(weights: Weights) -> tuple[nn.Sequential, nn.Sequential]:
    """(the observation scaling and conv torso, the MLP) as torch layers: the activation between layers, none after."""
    arch = weights.arch
    if arch.kind not in ("gaussian_mlp", "tanh_mlp", "mixed_mlp"):
        raise ValueError(f"cannot export architecture kind {arch.kind!r} to ONNX")
    if arch.activation not in _ACTIVATIONS:
        raise ValueError(f"cannot export activation {arch.activation!r} to ONNX")
    tensors = decode_tensors(weights.tensors)
    pre: list[nn.Module] = [] if arch.obs_clip is None else [_Normalize(tensors, arch.obs_clip)]
    if arch.conv is not None:
        pre.append(_ConvTorso(weights, tensors))
    layers: list[nn.Module] = []
    sizes = list(arch.layers)
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        linear = nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(np.array(tensors[f"l{i}.weight"], np.float32)))
            linear.bias.copy_(torch.from_numpy(np.array(tensors[f"l{i}.bias"], np.float32)))
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(_ACTIVATIONS[arch.activation]())
    return nn.Sequential(*pre), nn.Sequential(*layers)


class _ConvTorso(nn.Module):
    """The ``conv`` torso (docs/protocol.md §4.1): the image at the observation's start, channels last, through
    unpadded stride-1 convolutions; their output flattened (channel, row, column), then the observation's rest."""

    def __init__(self, weights: Weights, tensors: Mapping[str, NDArray[np.float32]]) -> None:
        super().__init__()
        conv = weights.arch.conv
        assert conv is not None
        self.image, self.image_size = conv.image, conv.image_size
        layers: list[nn.Module] = []
        for i, (out, kh, kw) in enumerate(conv.layers):
            layer = nn.Conv2d(conv.in_channels(i), out, (kh, kw))
            with torch.no_grad():
                layer.weight.copy_(torch.from_numpy(np.array(tensors[f"c{i}.weight"], np.float32)))
                layer.get_parameter("bias").copy_(torch.from_numpy(np.array(tensors[f"c{i}.bias"], np.float32)))
            layers += [layer, _ACTIVATIONS[weights.arch.activation]()]
        self.convs = nn.Sequential(*layers)

    def forward(self, obs: Tensor) -> Tensor:
        height, width, channels = self.image
        image = obs[:, : self.image_size].reshape(-1, height, width, channels).permute(0, 3, 1, 2)
        return torch.cat([self.convs(image).flatten(1), obs[:, self.image_size :]], dim=1)


class _Normalize(nn.Module):
    """The observation scaling the trainer publishes (``obs_norm.mean``, ``obs_norm.std``, ``arch.obs_clip``), in the graph.

    In the model, not left to the engine: an engine that fed raw observations to a network trained
    on scaled ones would act on nonsense without any error.
    """

    def __init__(self, tensors: Mapping[str, NDArray[np.float32]], clip: float) -> None:
        super().__init__()
        self.register_buffer("obs_mean", torch.from_numpy(np.array(tensors["obs_norm.mean"], np.float32)))
        self.register_buffer("obs_std", torch.from_numpy(np.array(tensors["obs_norm.std"], np.float32)))
        self.clip = float(clip)

    def forward(self, obs: Tensor) -> Tensor:
        scaled = (obs - self.get_buffer("obs_mean")) / self.get_buffer("obs_std")
        return scaled.clamp(-self.clip, self.clip)


def _clamped_log_std(weights: Weights) -> Tensor:
    """The Gaussian's log-std clamped as the trainer clamps it (empty for a ``mixed_mlp`` without continuous dims)."""
    arch = weights.arch
    raw = decode_tensors(weights.tensors).get("log_std")
    log_std = np.zeros(0, np.float32) if raw is None else np.array(raw, np.float32)
    return torch.from_numpy(np.clip(log_std, arch.log_std_min, arch.log_std_max).astype(np.float32))


def weights_module(weights: Weights) -> nn.Module:
    """The actor of ``weights`` as a torch module (eval mode): what :func:`export_onnx` exports."""
    if weights.arch.kind == "mixed_mlp":
        return _MixedActor(weights).eval()
    return _Actor(weights).eval()


def signature(weights: Weights) -> tuple[list[str], list[str]]:
    """The exported model's input and output names, in order: what a game feeds and reads."""
    arch = weights.arch
    inputs, outputs = _signature(weights)
    if arch.recurrent is None:
        return inputs, outputs
    return [*inputs, "state"], [*outputs, "state_out"]


def _signature(weights: Weights) -> tuple[list[str], list[str]]:
    """:func:`signature` of a memoryless actor (a recurrent one adds ``state`` in and ``state_out`` out)."""
    arch = weights.arch
    if arch.kind == "tanh_mlp":
        return ["obs"], ["action"]
    if arch.kind != "mixed_mlp":
        return ["obs"], ["mean", "log_std"]
    space = arch.actions
    gaussian = ["mean", "log_std"] if space.continuous else []
    if not space.branches:
        return ["obs"], gaussian
    return ["obs", "mask"], [*gaussian, "logits", "action"]


def model_metadata(weights: Weights, game: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``metadata_props`` of an exported model: sizes, bounds, identity, output meanings.

    ``action_low``/``action_high``: ``tanh_mlp`` actions lie in ±``act_limit`` by construction;
    a ``gaussian_mlp`` mean is unbounded and the game clips what it is given (the tank arena to
    [-1, 1]: pass ``game``). ``observation_*`` and other game facts come from ``game`` when the
    caller knows them (the tank arena's: :data:`arena.games.tank.observation.OBS_DIM` columns, docs/arena.md).
    """
    arch = weights.arch
    meta = {
        "arena.kind": arch.kind,
        "arena.obs_dim": str(arch.obs_dim),
        "arena.act_dim": str(arch.layers[-1]),
        "arena.generation": str(weights.generation),
        "arena.version": str(weights.version),
        "arena.inputs": "obs: float32 (batch, obs_dim)",
    }
    if arch.kind == "tanh_mlp":
        limit = float(arch.act_limit)
        meta |= {"arena.outputs": "action: float32 (batch, act_dim), act_limit * tanh(mlp(obs))",
                 "arena.action_low": f"{-limit:g}", "arena.action_high": f"{limit:g}"}  # fmt: skip
    elif arch.kind == "mixed_mlp":
        meta |= _mixed_metadata(weights)
    else:
        meta["arena.outputs"] = _GAUSSIAN_OUTPUTS
    if arch.recurrent is not None:
        size = arch.recurrent.state_size
        meta["arena.state_size"] = str(size)
        meta["arena.inputs"] += (
            f"; state: float32 (batch, {size}), each agent's {arch.recurrent.cell} state before this step: zeros at an "
            "episode's start, then the state_out of its previous step"
        )
        meta["arena.outputs"] += f"; state_out: float32 (batch, {size}), the state to feed with the agent's next step"
    meta |= dict(game or {})
    return meta


_GAUSSIAN_OUTPUTS = (
    "mean: float32 (batch, act_dim), the Gaussian's mean; log_std: float32 (batch, act_dim), its clamped "
    "log standard deviation; act with mean + exp(log_std) * N(0, 1) (as in training) or with mean"
)


def _mixed_metadata(weights: Weights) -> dict[str, str]:
    """A ``mixed_mlp``'s sizes and signature: ``act_dim`` counts its continuous dims, as ``hello`` does."""
    space = weights.arch.actions
    meta = {"arena.act_dim": str(space.continuous), "arena.branches": ",".join(map(str, space.branches))}
    outputs = [_GAUSSIAN_OUTPUTS] if space.continuous else []
    if space.branches:
        meta["arena.inputs"] = (
            "obs: float32 (batch, obs_dim); mask: float32 (batch, sum(branches)), 1 where an action is legal and 0 "
            "where it is forbidden, branch after branch (all ones: every action legal)"
        )
        meta["arena.masked_logit"] = str(np.float32(MASKED_LOGIT))
        outputs.append(
            "logits: float32 (batch, sum(branches)), each branch's logits in turn, arena.masked_logit where the mask "
            "forbids; act with a softmax sample per branch (as in training) or with action; "
            "action: int64 (batch, n_branches), each branch's most likely legal action (first of equals)"
        )
    return {**meta, "arena.outputs": "; ".join(outputs)}


def export_onnx(weights: Weights, out: Path, game: Mapping[str, str] | None = None) -> None:
    """Write ``weights``' actor to ``out`` as an ONNX model (see the module docstring); checked, then renamed into place.

    Raises:
        ValueError: an architecture that cannot be exported.
        RuntimeError: the exporter or ``onnx.checker`` failed (nothing is left at ``out``).
    """
    import onnx

    module = weights_module(weights)
    inputs, outputs = signature(weights)
    by_name = _example_inputs(weights)
    examples = tuple(by_name[name] for name in inputs)
    batch = torch.export.Dim("batch", min=1)
    quiet = io.StringIO()
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)  # "torchvision is not installed. Skipping torchvision::nms" and the like
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
            # The exporter's progress lines and torch's own deprecation notices (torch 2.13 warns about its
            # internal pytree API from inside the exporter): nothing a user of the exported file can act on.
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            # obs and mask share the batch axis: the exporter names it once and says so about the second.
            warnings.filterwarnings("ignore", "# The axis name: batch will not be used", UserWarning)
            program = torch.onnx.export(
                module,
                examples,
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes={name: {0: batch} for name in inputs},
                opset_version=OPSET,
                dynamo=True,
                verbose=False,
            )
    except Exception as exc:  # the exporter raises many kinds; the user needs one line
        raise RuntimeError(f"torch.onnx could not export the actor: {exc}") from exc
    finally:
        exporter_log.setLevel(level)
    assert program is not None
    model = program.model_proto
    model.doc_string = "Arena Trainer actor: " + model_metadata(weights, game)["arena.outputs"]
    for key, value in model_metadata(weights, game).items():
        model.metadata_props.add(key=key, value=value)
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as exc:
        raise RuntimeError(f"the exported model does not pass onnx.checker: {exc}") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    onnx.save_model(model, str(tmp))
    tmp.replace(out)


def _example_inputs(weights: Weights) -> dict[str, Tensor]:
    """An observation, an all-legal mask and a zero state, two rows each: what the exporter traces the graph with."""
    arch = weights.arch
    n_logits = arch.actions.n_logits if arch.kind == "mixed_mlp" else 0
    state_size = arch.recurrent.state_size if arch.recurrent is not None else 0
    return {
        "obs": torch.zeros((2, arch.obs_dim), dtype=torch.float32),
        "mask": torch.ones((2, n_logits), dtype=torch.float32),
        "state": torch.zeros((2, state_size), dtype=torch.float32),
    }


def reference_actions(
    weights: Weights, obs: NDArray[np.float32], mask: NDArray[Any] | None = None, state: NDArray[np.float32] | None = None
) -> dict[str, NDArray[Any]]:
    """What the ONNX model must output for ``obs`` (and a ``mixed_mlp``'s ``mask``, a recurrent actor's ``state``):
    the numpy ``Policy`` bots use."""
    from bot_protocol import Policy

    policy = Policy.from_weights(weights)
    after: dict[str, NDArray[Any]] = {}
    if policy.recurrent is not None:
        assert state is not None, "a recurrent actor's outputs follow from its state"
        after["state_out"] = policy.step(obs, state, np.random.default_rng(0), deterministic=True, mask=mask)[1]
    mean = policy.mean(obs, state)
    if weights.arch.kind == "tanh_mlp":
        return {"action": mean} | after
    log_std = np.broadcast_to(policy.log_std, mean.shape).astype(np.float32)
    assert math.isfinite(float(log_std.sum()))
    gaussian = {"mean": mean, "log_std": log_std} if mean.shape[1] else {}
    if not policy.actions.branches:
        return gaussian | after
    if mask is None:
        mask = np.ones((len(mean), policy.actions.n_logits), np.float32)
    legal = policy.actions.mask_of(mask, len(mean)) != 0
    logits = np.where(legal, policy.logits(obs, state), np.float32(MASKED_LOGIT))
    modes = policy.step(obs, state if state is not None else policy.initial_state(len(obs)), np.random.default_rng(0),
                        deterministic=True, mask=mask)[0]  # fmt: skip
    return gaussian | {"logits": logits, "action": modes[2]} | after
