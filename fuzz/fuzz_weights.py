#!/usr/bin/env python3
"""Fuzz target D3/S4: the bot SDK's weights loader (safetensors bytes → :class:`Policy`).

Contract: for any blob, :func:`~bot_protocol.decode_tensors` returns float32 arrays
that fit inside the blob, or raises ``ProtocolError(bad_weights)``; building a
:class:`~bot_protocol.Policy` from whatever it returned either gives a policy that
acts with the right shapes or raises ``ProtocolError(bad_weights)``. Any other
exception, a hang over a second or an RSS above the limit is a crash.

Each input is the blob itself (so the corpus is plain ``.safetensors`` files). It is
tried against two fixed architectures (a PPO ``gaussian_mlp`` 4→3→2 and a TD3
``tanh_mlp`` 4→3→2), against the architecture its own tensor names imply (built with
``Architecture.from_wire``, as a bot would from a ``weights`` message), and through
``Policy.from_weights`` with a matching sha256 (the exact SDK entry point).

Usage (see ``fuzz/README.md``)::

    python fuzz/fuzz_weights.py -max_total_time=60 -rss_limit_mb=1024 -timeout=1 -max_len=1048576 fuzz/corpus/weights
    python fuzz/fuzz_weights.py --self-test -runs=5000 fuzz/corpus/weights
    python fuzz/fuzz_weights.py --make-corpus fuzz/corpus/weights
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_decode import ROOT, instrumented, main  # the shared runner

with instrumented():
    import numpy as np

    from bot_protocol import Architecture, ErrorCode, Policy, ProtocolError, Weights, decode_tensors, encode_tensors

ARCHES = (
    Architecture("gaussian_mlp", (4, 3, 2), "tanh", -20.0, 2.0),
    Architecture("tanh_mlp", (4, 3, 2), "relu", act_limit=1.0),
)
_LAYER = re.compile(r"l(\d{1,3})\.weight")  # bounded: int() of a 5000-digit name would be a harness bug


def implied_arch(tensors: dict[str, np.ndarray]) -> Architecture | None:
    """The architecture a blob's own ``l{i}.weight`` tensors describe, via the wire validator."""
    weights = {int(m.group(1)): t for name, t in tensors.items() if (m := _LAYER.fullmatch(name))}
    if not weights or sorted(weights) != list(range(len(weights))) or len(weights) > 32:
        return None
    if any(weights[i].ndim != 2 for i in weights):
        return None
    layers = [int(weights[0].shape[1])] + [int(weights[i].shape[0]) for i in range(len(weights))]
    wire: dict[str, object] = {"layers": tuple(layers), "activation": "tanh"}
    if "log_std" in tensors:
        wire.update(kind="gaussian_mlp", log_std_min=-20.0, log_std_max=2.0)
    else:
        wire.update(kind="tanh_mlp", act_limit=1.0)
    try:
        return Architecture.from_wire(wire)
    except ProtocolError as exc:
        if exc.code is not ErrorCode.BAD_FIELD:
            raise AssertionError(f"Architecture.from_wire raised {exc.code!r}") from None
        return None


def check_policy(policy: Policy, arch: Architecture) -> None:
    """A policy that was built must act: right shapes, float32, finite log-std."""
    obs = np.zeros((2, arch.obs_dim), np.float32)
    with np.errstate(all="ignore"):  # finite but huge weights may overflow; acting is the bot's business
        actions, logp = policy.act(obs, np.random.default_rng(0))
    if actions.shape != (2, arch.layers[-1]) or logp.shape != (2,):
        raise AssertionError(f"policy acted with shapes {actions.shape}, {logp.shape}")
    if actions.dtype != np.float32 or not np.isfinite(policy.std).all():
        raise AssertionError("policy built with non-float32 actions or a non-finite std")


def one_input(data: bytes) -> None:
    """One fuzz input. Raises (a crash) only if the loader breaks its contract."""
    try:
        tensors = decode_tensors(data)
    except ProtocolError as exc:
        if exc.code is not ErrorCode.BAD_WEIGHTS:
            raise AssertionError(f"decode_tensors raised {exc.code!r}") from None
        return
    total = 0
    for name, array in tensors.items():
        if array.dtype != np.float32 or array.flags.writeable or array.ndim > 8:
            raise AssertionError(f"tensor {name!r}: {array.dtype}, writeable={array.flags.writeable}, ndim={array.ndim}")
        total += array.nbytes
    if total > len(data):
        raise AssertionError(f"tensors hold {total} bytes, more than the {len(data)}-byte blob")
    arches = [*ARCHES]
    implied = implied_arch(tensors)
    if implied is not None:
        arches.append(implied)
    for arch in arches:
        try:
            policy = Policy(arch, tensors, 0, 1)
        except ProtocolError as exc:
            if exc.code is not ErrorCode.BAD_WEIGHTS:
                raise AssertionError(f"Policy raised {exc.code!r}") from None
            continue
        check_policy(policy, arch)
    try:
        policy = Policy.from_weights(Weights(0, 1, arches[-1], data, hashlib.sha256(data).digest()))
    except ProtocolError as exc:
        if exc.code is not ErrorCode.BAD_WEIGHTS:
            raise AssertionError(f"Policy.from_weights raised {exc.code!r}") from None
    else:
        check_policy(policy, arches[-1])


# ── seed corpus ──────────────────────────────────────────────────────────────


def _raw_blob(header: bytes, data: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _blob(header: dict[str, object], data: bytes) -> bytes:
    return _raw_blob(json.dumps(header, separators=(",", ":")).encode(), data)


def _entry(shape: list[int], begin: int, end: int) -> dict[str, object]:
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


def seeds() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    gaussian = {
        "l0.weight": rng.standard_normal((3, 4)).astype(np.float32),
        "l0.bias": rng.standard_normal(3).astype(np.float32),
        "l1.weight": rng.standard_normal((2, 3)).astype(np.float32),
        "l1.bias": rng.standard_normal(2).astype(np.float32),
        "log_std": np.full(2, -0.5, np.float32),
    }
    tanh = {k: v for k, v in gaussian.items() if k != "log_std"}
    deep = {
        "l0.weight": np.ones((8, 4), np.float32),
        "l0.bias": np.zeros(8, np.float32),
        "l1.weight": np.ones((8, 8), np.float32),
        "l1.bias": np.zeros(8, np.float32),
        "l2.weight": np.ones((2, 8), np.float32),
        "l2.bias": np.zeros(2, np.float32),
        "log_std": np.zeros(2, np.float32),
    }
    return {
        "gaussian_4_3_2.safetensors": encode_tensors(gaussian),
        "tanh_4_3_2.safetensors": encode_tensors(tanh),
        "gaussian_4_8_8_2.safetensors": encode_tensors(deep),
        "metadata.safetensors": _blob(
            {"__metadata__": {"format": "pt"}, "a": _entry([2], 0, 8)}, np.ones(2, np.float32).tobytes()
        ),
        "empty_tensor.safetensors": _blob({"a": _entry([0, 3], 0, 0)}, b""),
        "scalar_tensor.safetensors": _blob({"a": _entry([], 0, 4)}, b"\x00\x00\x80\x3f"),
        "empty_header.safetensors": _blob({}, b""),
        # near-misses, each refused by exactly one rule
        "overlap.safetensors": _blob({"a": _entry([1], 0, 4), "b": _entry([1], 2, 6)}, bytes(8)),
        "offsets_out_of_range.safetensors": _blob({"a": _entry([2], 0, 8)}, bytes(4)),
        "dtype_f64.safetensors": _blob({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)),
        "shape_mismatch.safetensors": _blob({"a": _entry([3], 0, 8)}, bytes(8)),
        "nan_weight.safetensors": encode_tensors({**tanh, "l0.bias": np.array([0, np.nan, 0], np.float32)}),
        "header_too_long.safetensors": struct.pack("<Q", (1 << 20) + 1) + b"{}",
        # regressions found by this target (fixed; see fuzz/README.md)
        "regression_dtype_list.safetensors": _blob({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, bytes(4)),
        "regression_5000_digit_int.safetensors": _raw_blob(b'{"a":{"shape":[' + b"1" * 5000 + b"]}}", bytes(4)),
    }


if __name__ == "__main__":
    sys.exit(main(one_input, seeds, ROOT / "fuzz" / "corpus" / "weights"))
