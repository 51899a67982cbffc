"""Weight snapshots and latest-wins slots (server/weights.py): one frame per publish, the newest policy pending."""

from __future__ import annotations

import time

import numpy as np

from agents.networks import GaussianActor, LogStdRange
from bot_protocol import PolicyId, Weights, decode_from_server, decode_tensors
from server.weights import PublishedWeights, WeightsSlot, published_weights


def exported_actor() -> tuple[dict, dict[str, np.ndarray]]:
    return GaussianActor(3, 2, (4,), "tanh", LogStdRange(-0.5, -3.0, 0.0)).export()


def snapshot(generation: int, version: int) -> PublishedWeights:
    arch, tensors = exported_actor()
    return published_weights(PolicyId(generation, version), arch, tensors)


def test_the_snapshot_frame_decodes_to_the_same_policy_tensors_and_exploration():
    arch, tensors = exported_actor()
    before = time.monotonic()
    made = published_weights(PolicyId(2, 17), arch, tensors, explore={"noise": 0.25})
    assert before <= made.published_at <= time.monotonic()
    assert (made.generation, made.version, made.identity) == (2, 17, PolicyId(2, 17))
    decoded = decode_from_server(made.frame)
    assert isinstance(decoded, Weights) and decoded == made.message
    assert decoded.policy_id == PolicyId(2, 17) and dict(decoded.explore) == {"noise": 0.25}
    assert decoded.arch.layers == (3, 4, 2) and decoded.arch.kind == "gaussian_mlp"
    received = decode_tensors(decoded.tensors)
    assert set(received) == set(tensors)
    for name, array in tensors.items():
        assert received[name].dtype == np.float32 and np.array_equal(received[name], array)


def test_a_slot_keeps_only_policies_newer_than_it_delivered():
    slot = WeightsSlot(PolicyId(1, 5))
    assert not slot.offer(snapshot(1, 5))  # the one delivered
    assert not slot.offer(snapshot(0, 99))  # an older generation, whatever its version
    assert slot.take() is None
    assert slot.offer(snapshot(2, 0))  # a newer generation sorts above every version of the old one
    assert slot.take().identity == PolicyId(2, 0)
    assert slot.delivered == PolicyId(2, 0) and slot.take() is None


def test_a_newer_offer_replaces_an_unsent_one_and_an_older_does_not():
    slot = WeightsSlot(PolicyId(0, 0))
    assert slot.offer(snapshot(0, 1)) and slot.offer(snapshot(0, 3))
    assert not slot.offer(snapshot(0, 2)) and not slot.offer(snapshot(0, 3))
    taken = slot.take()
    assert taken is not None and taken.identity == PolicyId(0, 3)  # a slow reader skips straight to the newest
    assert slot.delivered == PolicyId(0, 3) and not slot.offer(snapshot(0, 2))
