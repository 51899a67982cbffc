"""What a run carries besides the agent (server/run_state.py): RNG states, state copies, recent returns, identity."""

from __future__ import annotations

import collections
import io
import random

import numpy as np
import pytest
import torch

from agents import make_agent
from server.run_state import CODE_VERSION, RecentValues, capture_rng, config_hash, copy_state, restore_rng


def draws() -> tuple[list[float], list[float], list[float], float]:
    """One draw from every global RNG a run uses (numpy's Gaussian too: it keeps a cached value)."""
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)], float(np.random.randn())


def test_restoring_captured_rng_makes_torch_numpy_and_python_repeat():
    saved_at_start = capture_rng()
    try:
        np.random.randn()  # leave a cached Gaussian in numpy's state, so it is captured too
        rng = capture_rng()
        first = draws()
        assert draws() != first  # the generators moved on
        restore_rng(rng)
        assert draws() == first
    finally:
        restore_rng(saved_at_start)  # leave the process's generators as the test found them


def test_captured_rng_survives_a_weights_only_checkpoint_load():
    saved_at_start = capture_rng()
    try:
        buffer = io.BytesIO()
        torch.save(capture_rng(), buffer)
        first = draws()
        buffer.seek(0)
        restore_rng(torch.load(buffer, weights_only=True))
        assert draws() == first
    finally:
        restore_rng(saved_at_start)


def test_restoring_an_older_checkpoints_partial_rng_leaves_the_rest_alone():
    saved_at_start = capture_rng()
    try:
        torch_only = {"torch": capture_rng()["torch"]}
        first_torch = torch.rand(3).tolist()
        python_next = random.getstate()
        restore_rng(torch_only)
        assert torch.rand(3).tolist() == first_torch and random.getstate() == python_next
        restore_rng({})  # nothing saved: nothing changes, nothing fails
    finally:
        restore_rng(saved_at_start)


def test_copy_state_clones_tensors_and_rebuilds_containers():
    tensor = torch.arange(4.0)
    state = {"t": tensor, "nested": [tensor, (1, {"x": tensor})], "obj": {"a": [1, 2]}, "n": 3}
    copied = copy_state(state)
    assert torch.equal(copied["t"], tensor) and copied["t"].data_ptr() != tensor.data_ptr()
    assert isinstance(copied["nested"][1], tuple) and copied["nested"][1][1]["x"].data_ptr() != tensor.data_ptr()
    tensor.add_(1.0)
    state["obj"]["a"].append(3)
    assert copied["t"].tolist() == [0.0, 1.0, 2.0, 3.0] and copied["obj"] == {"a": [1, 2]} and copied["n"] == 3


@pytest.mark.parametrize("kind", ["ppo", "td3"])
def test_rollback_copy_is_deep_exact_and_keeps_state_dict_types(kind):
    """The trainer's rollback copy (copy_state, not copy.deepcopy: see its docstring) equals the agent's
    state value for value and type (a module state_dict stays an OrderedDict with its _metadata), shares
    no tensor with it, and restores the agent exactly."""
    agent = make_agent(kind, 3, 2)
    state = {k: v for k, v in agent.state_dict().items() if k != "replay"}
    copied = copy_state(state)

    def same(a, b):
        assert type(a) is type(b)
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b) and a.dtype == b.dtype and a.data_ptr() != b.data_ptr()
        elif isinstance(a, dict):
            assert list(a) == list(b) and getattr(a, "_metadata", None) == getattr(b, "_metadata", None)
            for key in a:
                same(a[key], b[key])
        elif isinstance(a, list | tuple):
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                same(x, y)
        else:
            assert a == b or (a != a and b != b)  # NaN equals NaN here

    same(state, copied)
    assert any(isinstance(v, collections.OrderedDict) and hasattr(v, "_metadata") for v in copied.values())
    with torch.no_grad():
        for value in agent.state_dict().values():
            if isinstance(value, dict):
                for tensor in value.values():
                    if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                        tensor.add_(1.0)  # the live state moves on; the copy must not
    agent.rollback(copy_state(copied))
    same({k: v for k, v in agent.state_dict().items() if k != "replay"}, copied)


def test_recent_values_keep_the_last_capacity_values_oldest_first():
    recent = RecentValues(3)
    assert len(recent) == 0 and recent.tolist() == []
    for value in (1.0, 2.0):
        recent.add(value)
    assert len(recent) == 2 and recent.tolist() == [1.0, 2.0] and recent.mean() == 1.5
    for value in (3.0, 4.0, 5.0):
        recent.add(value)
    assert len(recent) == 3 and recent.tolist() == [3.0, 4.0, 5.0] and recent.mean() == 4.0
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        RecentValues(0)


def test_config_hash_ignores_key_order_and_tells_settings_apart():
    assert config_hash({"a": 1, "b": (2, 3)}) == config_hash({"b": [2, 3], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    assert len(config_hash({"device": torch.device("cpu")})) == 64  # anything else hashes by its str()
    assert isinstance(CODE_VERSION, str) and CODE_VERSION
