"""``arena export``: write a checkpoint's policy as weights, a Tank Royale bot or an ONNX model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``arena export`` to the subcommands of ``arena``."""
    export = commands.add_parser(
        "export",
        help="write a checkpoint's policy in the bot-ready weights format",
        description=(
            "Write the policy of CHECKPOINT as one encoded 'weights' message — exactly what bots receive "
            "online (msgpack: arch, safetensors tensors, sha256; see docs/protocol.md) — for bots that load "
            "weights offline. bot_protocol.Policy and 'arena match --bot FILE' read it. CHECKPOINT may also be a run "
            "directory (its newest checkpoint) or, with --royale, an exported weights file."
        ),
    )
    export.add_argument(
        "checkpoint",
        type=Path,
        help="a checkpoint file (*.pt with its .json manifest) or a run directory; with --royale also a weights file",
    )
    export.add_argument("-o", "--output", type=Path, required=True, help="file to write (e.g. policy.weights)")
    export_as = export.add_mutually_exclusive_group()
    export_as.add_argument(
        "--royale", action="store_true", help="write a Tank Royale bot directory OUTPUT instead (see docs/royale.md)"
    )
    export_as.add_argument(
        "--onnx",
        action="store_true",
        help="write the actor as an ONNX model OUTPUT (e.g. policy.onnx) for game engines (onnxruntime; see docs/export.md)",
    )


def run(args: argparse.Namespace) -> int:
    """``arena export``: a checkpoint's policy written as weights, a Tank Royale bot or an ONNX model; the exit code."""
    from ..bots.policies import export_weights

    if args.royale:
        from ..royale.export import export_royale_bot

        weights = export_royale_bot(args.checkpoint, args.output)
        print(f"arena export: wrote the Tank Royale bot {args.output}/ (version {weights.generation}.{weights.version})")
        return 0
    if args.onnx:
        return _export_onnx(args)
    weights = export_weights(args.checkpoint, args.output)
    print(
        f"arena export: wrote {args.output} ({args.output.stat().st_size:,} bytes): {weights.arch.kind} "
        f"{'→'.join(map(str, weights.arch.layers))}, generation {weights.generation}, version {weights.version}"
    )
    return 0


def _export_onnx(args: argparse.Namespace) -> int:
    from ..bots.policies import load_weights
    from ..games.tank.actions import ACT_DIM
    from ..games.tank.observation import OBS_DIM
    from ..games.tank.radar import RADAR_OBS_DIM

    try:
        from ..outputs.onnx_export import OPSET, export_onnx, signature
    except ModuleNotFoundError as exc:  # onnx/onnxscript are the export extra
        raise ValueError(f"--onnx needs {exc.name}: pip install -e '.[export]'") from None
    weights = load_weights(args.checkpoint)
    layers = weights.arch.layers
    tank = weights.arch.kind != "mixed_mlp" and weights.arch.obs_dim in (OBS_DIM, RADAR_OBS_DIM) and layers[-1] == ACT_DIM
    radar = weights.arch.obs_dim == RADAR_OBS_DIM
    game = (
        {
            "arena.game": "tank",
            "arena.action_low": "-1",
            "arena.action_high": "1",
            "arena.observation": f"the tank arena's {RADAR_OBS_DIM} columns of the radar observation, docs/arena.md "
            "'The radar observation'"
            if radar
            else f"the tank arena's {OBS_DIM} columns, docs/arena.md 'Observation'",
        }
        if tank
        else {}
    )
    export_onnx(weights, args.output, game)
    inputs, outputs = signature(weights)
    widths = {"obs": weights.arch.obs_dim, "mask": weights.arch.actions.n_logits}
    print(
        f"arena export: wrote {args.output} ({args.output.stat().st_size:,} bytes, ONNX opset {OPSET}): {weights.arch.kind} "
        f"{'→'.join(map(str, layers))}, {'input' if len(inputs) == 1 else 'inputs'} "
        f"{', '.join(f'{name} (batch, {widths[name]})' for name in inputs)}, outputs {', '.join(outputs)}; "
        f"generation {weights.generation}, version {weights.version}"
    )
    return 0
