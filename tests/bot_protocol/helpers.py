"""Shared helpers of the sans-I/O protocol tests: a session spec, a sample batch and weights, and refusal checks."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    FLAG_TRUNCATED,
    Architecture,
    ErrorCode,
    ProtocolError,
    RewardMode,
    SessionSpec,
    TransitionBatch,
    Weights,
    decode_from_bot,
    encode,
    encode_tensors,
)

MAX = 1 << 20
SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.SCALAR)
TERMS_SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.TERMS)


def make_batch(n: int = 4, flags: list[int] | None = None, terms: bool = False, seq: int = 5) -> TransitionBatch:
    """A valid ``tr`` batch for :data:`SPEC` (or :data:`TERMS_SPEC` with ``terms``), with the columns ``flags`` call for."""
    rng = np.random.default_rng(0)
    f = np.array(flags if flags is not None else [0] * n, dtype=np.uint8)
    n_trunc = int((f == FLAG_TRUNCATED).sum())
    n_end = int((f != 0).sum())
    return TransitionBatch(
        seq=seq,
        generation=0,
        version=3,
        agent=(np.arange(n) % 3).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, 4)).astype(np.float32),
        act=rng.standard_normal((n, 2)).astype(np.float32),
        logp=rng.standard_normal(n).astype(np.float32),
        flags=f,
        rew=None if terms else rng.standard_normal(n).astype(np.float32),
        terms=rng.standard_normal((n, 5)).astype(np.float32) if terms else None,
        next_obs=rng.standard_normal((n_trunc, 4)).astype(np.float32),
        score=rng.standard_normal(n_end).astype(np.float32) if terms else None,
    )


def wire_of(batch: TransitionBatch) -> dict:
    """The decoded msgpack map of ``batch``'s frame."""
    return msgpack.unpackb(encode(batch), raw=False)


def reencode(fields: dict) -> bytes:
    """A frame of ``fields`` as they stand (no checks)."""
    return msgpack.packb(fields, use_bin_type=True)


def assert_code(code: ErrorCode, data: bytes, spec: SessionSpec | None = SPEC) -> None:
    """Decoding ``data`` as a bot's frame in a session of ``spec`` is refused with ``code``."""
    with pytest.raises(ProtocolError) as info:
        decode_from_bot(data, spec, MAX)
    assert info.value.code is code, info.value


def mutate(batch: TransitionBatch, **changes) -> bytes:
    """``batch``'s frame with fields replaced (a value of None removes the field)."""
    fields = wire_of(batch)
    for key, value in changes.items():
        if value is None:
            fields.pop(key)
        else:
            fields[key] = value
    return reencode(fields)


def make_weights() -> Weights:
    """A valid weights message of a (4 → 2) gaussian_mlp with no hidden layer."""
    blob = encode_tensors(
        {"l0.weight": np.ones((2, 4), np.float32), "l0.bias": np.zeros(2, np.float32), "log_std": np.full(2, -0.5, np.float32)}
    )
    arch = Architecture("gaussian_mlp", (4, 2), "tanh", -3.0, 0.0)
    return Weights(1, 7, arch, blob, hashlib.sha256(blob).digest())


def make_discrete_batch(
    spec: SessionSpec, n: int = 4, flags: list[int] | None = None, masked: bool = True, seq: int = 5, seed: int = 0
) -> TransitionBatch:
    """A valid ``tr`` batch for a session with branches: legal ``dact`` under a random ``mask`` (or none)."""
    rng = np.random.default_rng(seed)
    space = spec.actions
    batch = make_batch(n, flags, terms=spec.reward is RewardMode.TERMS, seq=seq)
    mask = (rng.random((n, space.n_logits)) < 0.6).astype(np.uint8)
    dact = np.zeros((n, space.n_branches), np.uint32)
    for b, (start, size) in enumerate(zip(space.offsets, space.branches, strict=True)):
        dact[:, b] = rng.integers(0, size, n)
        mask[np.arange(n), start + dact[:, b]] = 1  # the action taken is legal
    return replace(
        batch,
        act=rng.standard_normal((n, spec.act_dim)).astype(np.float32),
        dact=dact,
        mask=mask if masked else None,
    )
