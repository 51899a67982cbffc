"""TransitionQueue: the credit gate by steps that bounds an on-policy learner's staleness."""

from __future__ import annotations

import pytest

from server.transition_queue import Arrival, TransitionQueue
from tests.server.test_assembler import rows


def test_credit_steps_reach_the_high_water_mark_before_the_bytes_do():
    """With ``credit_steps``, the queue says "full" at that many steps, however few bytes they are."""
    batch = rows([0, 1], [0, 0])  # two steps
    queue = TransitionQueue(max_bytes=1000 * batch.nbytes, credit_steps=5)
    assert queue.put(Arrival("s", "b", False, 0, batch)) and queue.put(Arrival("s", "b", False, 1, batch))
    assert not queue.full and queue.at_high_water(incoming_steps=1)  # 4 queued + 1 arriving
    assert not queue.put(Arrival("s", "b", False, 2, batch))  # 6 steps: no more room, nothing dropped
    assert queue.full and queue.steps == 6 and len(queue.drain()) == 3
    assert not queue.full


def test_without_credit_steps_only_bytes_count():
    batch = rows([0, 1], [0, 0])
    queue = TransitionQueue(max_bytes=1000 * batch.nbytes)
    for i in range(50):
        assert queue.put(Arrival("s", "b", False, i, batch))
    assert not queue.at_high_water(incoming_steps=10**9)


def test_credit_steps_must_be_positive():
    with pytest.raises(ValueError, match="credit_steps"):
        TransitionQueue(max_bytes=1 << 20, credit_steps=0)
