"""Sans-I/O tests of bot_protocol.transitions: a ``tr`` batch round-trips, and its shapes come from the session spec."""

from __future__ import annotations

import numpy as np
import pytest

from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, ErrorCode, TransitionBatch, decode_from_bot, encode
from tests.bot_protocol.helpers import MAX, SPEC, TERMS_SPEC, assert_code, make_batch
from tests.bot_protocol.helpers import mutate as _mutate


@pytest.mark.parametrize("terms", [False, True])
def test_transition_batch_round_trip_bitwise(terms):
    """A batch with truncations and ends survives encode → decode bit for bit."""
    batch = make_batch(6, [0, FLAG_TRUNCATED, 0, FLAG_TERMINAL, 0, FLAG_TRUNCATED], terms=terms)
    out = decode_from_bot(encode(batch), TERMS_SPEC if terms else SPEC, MAX)
    assert isinstance(out, TransitionBatch)
    assert (out.seq, out.generation, out.version) == (batch.seq, batch.generation, batch.version)
    for name in ("agent", "episode", "obs", "act", "logp", "flags", "rew", "terms", "next_obs", "score"):
        a, b = getattr(batch, name), getattr(out, name)
        if a is None:
            assert b is None
        else:
            assert a.tobytes() == b.tobytes(), name
    assert out.next_obs.shape == (2, 4)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"obs": np.zeros((4, 5), np.float32).tobytes()}, ErrorCode.SHAPE),  # wrong obs_dim
        ({"obs": np.zeros((4, 4), np.float64).tobytes()}, ErrorCode.SHAPE),  # float64 bytes
        ({"act": np.zeros((4, 3), np.float32).tobytes()}, ErrorCode.SHAPE),
        ({"logp": b""}, ErrorCode.SHAPE),
        ({"n": 0}, ErrorCode.BAD_FIELD),
        ({"n": -1}, ErrorCode.BAD_FIELD),
        ({"n": 5}, ErrorCode.SHAPE),
        ({"n": 2000}, ErrorCode.BAD_FIELD),  # beyond max_batch
        ({"agent": np.array([0, 1, 2, 3], np.uint32).tobytes()}, ErrorCode.BAD_FIELD),  # agent >= n_agents
        ({"flags": np.array([0, 3, 0, 0], np.uint8).tobytes()}, ErrorCode.BAD_FIELD),
        ({"flags": np.array([0, 4, 0, 0], np.uint8).tobytes()}, ErrorCode.BAD_FIELD),
        ({"obs": None}, ErrorCode.BAD_FIELD),
        ({"obs": [1.0, 2.0]}, ErrorCode.BAD_FIELD),  # float arrays are never msgpack arrays
        ({"seq": -1}, ErrorCode.BAD_FIELD),
        ({"terms": np.zeros((4, 5), np.float32).tobytes()}, ErrorCode.BAD_FIELD),  # terms in a scalar session
        ({"flags": np.array([0, 2, 0, 0], np.uint8).tobytes()}, ErrorCode.SHAPE),  # truncation without next_obs (§7.1)
    ],
)
def test_batch_shape_and_field_checks(changes, code):
    """Shapes come from the session spec; every mismatch is refused with a stable code."""
    assert_code(code, _mutate(make_batch(), **changes))


def test_terms_session_requires_scores_for_ended_steps():
    """In terms mode every ended step needs a score row; rew is refused."""
    batch = make_batch(4, [0, FLAG_TERMINAL, 0, 0], terms=True)
    assert isinstance(decode_from_bot(encode(batch), TERMS_SPEC, MAX), TransitionBatch)
    assert_code(ErrorCode.SHAPE, _mutate(batch, score=None), TERMS_SPEC)  # left out while the flags call for a row (§7.1)
    assert_code(ErrorCode.SHAPE, _mutate(batch, score=np.zeros(2, np.float32).tobytes()), TERMS_SPEC)
    assert_code(ErrorCode.BAD_FIELD, _mutate(batch, rew=np.zeros(4, np.float32).tobytes()), TERMS_SPEC)
