"""A trained actor as an ONNX model, for game engines: ``arena export CHECKPOINT --onnx -o policy.onnx``.

Why ONNX: a game developer runs the policy inside the engine (Unity, Unreal, Godot, a C++ or
JavaScript game) with onnxruntime, instead of re-implementing our forward pass in each language.
The graph is exported with ``torch.onnx`` from the *bot-ready weights* (the exact ``weights``
message bots receive, docs/protocol.md §4) rebuilt as plain torch layers, so a checkpoint of any
algorithm, a run directory or a ``.weights`` file all give the same graph, and the model computes
what :class:`bot_protocol.Policy` computes (tested to float32 tolerance with onnxruntime).

The model (opset :data:`OPSET`, one dynamic batch axis): input ``obs`` float32 (batch, obs_dim);
outputs ``mean`` and ``log_std`` for ``gaussian_mlp`` (PPO), ``action`` for ``tanh_mlp`` (DDPG,
TD3). The game clips actions to its bounds; :func:`model_metadata` states the sizes, bounds and
the weights' identity. docs/export.md describes the model for its users.
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

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from bot_protocol import Weights
from bot_protocol.tensors import decode_tensors

__all__ = ["OPSET", "export_onnx", "model_metadata", "reference_actions", "weights_module"]

OPSET = 18
"""The ONNX opset of exported models: onnxruntime 1.16 and later (2023) run it, as do Unity Sentis and
ONNX Runtime Web."""

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


class _Actor(nn.Module):
    """The forward pass of a bot-ready actor in plain torch layers (exportable; no custom autograd)."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        arch = weights.arch
        if arch.kind not in ("gaussian_mlp", "tanh_mlp"):
            raise ValueError(f"cannot export architecture kind {arch.kind!r} to ONNX")
        if arch.activation not in _ACTIVATIONS:
            raise ValueError(f"cannot export activation {arch.activation!r} to ONNX")
        tensors = decode_tensors(weights.tensors)
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
        self.net = nn.Sequential(*layers)
        self.gaussian = arch.kind == "gaussian_mlp"
        if self.gaussian:
            log_std = np.clip(np.array(tensors["log_std"], np.float32), arch.log_std_min, arch.log_std_max)
            # Not named "log_std": that is the output's name, and an ONNX graph names each value once.
            self.register_buffer("clamped_log_std", torch.from_numpy(log_std.astype(np.float32)))
        else:
            self.act_limit = float(arch.act_limit)

    def forward(self, obs: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        y: Tensor = self.net(obs)
        if self.gaussian:
            log_std = self.get_buffer("clamped_log_std")
            return y, log_std.expand_as(y)
        return self.act_limit * torch.tanh(y)


def weights_module(weights: Weights) -> nn.Module:
    """The actor of ``weights`` as a torch module (eval mode): what :func:`export_onnx` exports."""
    return _Actor(weights).eval()


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
        "arena.obs_dim": str(arch.layers[0]),
        "arena.act_dim": str(arch.layers[-1]),
        "arena.generation": str(weights.generation),
        "arena.version": str(weights.version),
        "arena.inputs": "obs: float32 (batch, obs_dim)",
    }
    if arch.kind == "tanh_mlp":
        limit = float(arch.act_limit)
        meta |= {"arena.outputs": "action: float32 (batch, act_dim), act_limit * tanh(mlp(obs))",
                 "arena.action_low": f"{-limit:g}", "arena.action_high": f"{limit:g}"}  # fmt: skip
    else:
        meta["arena.outputs"] = (
            "mean: float32 (batch, act_dim), the Gaussian's mean; log_std: float32 (batch, act_dim), its clamped "
            "log standard deviation; act with mean + exp(log_std) * N(0, 1) (as in training) or with mean"
        )
    meta |= dict(game or {})
    return meta


def export_onnx(weights: Weights, out: Path, game: Mapping[str, str] | None = None) -> None:
    """Write ``weights``' actor to ``out`` as an ONNX model (see the module docstring); checked, then renamed into place.

    Raises:
        ValueError: an architecture that cannot be exported.
        RuntimeError: the exporter or ``onnx.checker`` failed (nothing is left at ``out``).
    """
    import onnx

    module = weights_module(weights)
    obs_dim = weights.arch.layers[0]
    example = torch.zeros((2, obs_dim), dtype=torch.float32)
    names = ["mean", "log_std"] if weights.arch.kind == "gaussian_mlp" else ["action"]
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
            program = torch.onnx.export(
                module,
                (example,),
                input_names=["obs"],
                output_names=names,
                dynamic_shapes={"obs": {0: batch}},
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


def reference_actions(weights: Weights, obs: NDArray[np.float32]) -> dict[str, NDArray[np.float32]]:
    """What the ONNX model must output for ``obs``, computed by the numpy ``Policy`` bots use."""
    from bot_protocol import Policy

    policy = Policy.from_weights(weights)
    mean = policy.mean(obs)
    if weights.arch.kind == "tanh_mlp":
        return {"action": mean}
    log_std = np.broadcast_to(policy.log_std, mean.shape).astype(np.float32)
    assert math.isfinite(float(log_std.sum()))
    return {"mean": mean, "log_std": log_std}
