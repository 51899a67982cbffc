"""The ring replay buffer (agents/replay.py): wraparound, sample shapes, refusals, its checkpoint state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.replay import ReplayBatch, ReplayBuffer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def add_rows(replay: ReplayBuffer, values: np.ndarray) -> None:
    """Rows whose every field is its value (obs and act repeated across their widths), none terminal."""
    n = len(values)
    v = values.astype(np.float32)
    replay.add(
        np.repeat(v[:, None], replay.obs_dim, 1), np.repeat(v[:, None], replay.act_dim, 1), v,
        np.repeat(v[:, None] + 0.5, replay.obs_dim, 1), np.zeros(n, np.float32),
    )  # fmt: skip


def test_replay_refuses_to_sample_more_than_it_holds():
    replay = ReplayBuffer(10, 2, 1)
    with pytest.raises(ValueError, match="holds 0 transitions, cannot sample 1"):
        replay.sample(1)
    replay.add(np.zeros((3, 2), np.float32), np.zeros((3, 1), np.float32), np.zeros(3, np.float32),
               np.zeros((3, 2), np.float32), np.zeros(3, np.float32))  # fmt: skip
    assert replay.sample(3).obs.shape == (3, 2)
    with pytest.raises(ValueError, match="holds 3 transitions, cannot sample 4"):
        replay.sample(4)
    with pytest.raises(ValueError, match="capacity must be positive"):
        ReplayBuffer(0, 2, 1)


def test_replay_ring_keeps_the_newest():
    replay = ReplayBuffer(5, 1, 1)
    for start in (0, 3, 6):
        rows = np.arange(start, start + 3, dtype=np.float32)
        replay.add(rows[:, None], rows[:, None], rows, rows[:, None], np.zeros(3, np.float32))
    assert len(replay) == 5 and replay.cursor == 4
    assert sorted(replay.rew.tolist()) == [4.0, 5.0, 6.0, 7.0, 8.0]
    big = np.arange(20, 32, dtype=np.float32)
    replay.add(big[:, None], big[:, None], big, big[:, None], np.zeros(12, np.float32))
    assert sorted(replay.rew.tolist()) == [27.0, 28.0, 29.0, 30.0, 31.0]


def test_a_write_across_the_end_wraps_to_the_front_field_by_field():
    replay = ReplayBuffer(4, 3, 2)
    add_rows(replay, np.array([0.0, 1.0, 2.0]))
    add_rows(replay, np.array([3.0, 4.0]))  # row 3 at the end, row 4 over row 0
    assert replay.cursor == 1 and len(replay) == 4
    assert replay.rew.tolist() == [4.0, 1.0, 2.0, 3.0]
    assert replay.obs[:, 0].tolist() == [4.0, 1.0, 2.0, 3.0] and replay.act[0].tolist() == [4.0, 4.0]
    assert replay.next_obs[0].tolist() == [4.5] * 3 and replay.terminal.tolist() == [0.0] * 4


def test_samples_have_the_fields_shapes_and_come_from_what_is_held():
    replay = ReplayBuffer(100, 3, 2)
    add_rows(replay, np.arange(1.0, 41.0))  # no row of 0: that is what an empty row holds
    batch = replay.sample(32, torch.Generator().manual_seed(0))
    assert isinstance(batch, ReplayBatch)
    assert batch.obs.shape == batch.next_obs.shape == (32, 3) and batch.act.shape == (32, 2)
    assert batch.rew.shape == batch.terminal.shape == (32,) and batch.obs.dtype == torch.float32
    assert set(batch.rew.tolist()) <= set(range(1, 41))  # never an empty row past the filled ones
    assert torch.equal(batch.obs[:, 0], batch.rew) and torch.equal(batch.next_obs[:, 0], batch.rew + 0.5)
    again = replay.sample(32, torch.Generator().manual_seed(0))
    assert torch.equal(again.rew, batch.rew)  # a seeded generator draws the same batch


def test_gather_writes_into_the_given_tensors():
    replay = ReplayBuffer(8, 3, 2)
    add_rows(replay, np.arange(8.0))
    out = ReplayBatch(torch.empty(2, 3, 3), torch.empty(2, 3, 2), torch.empty(2, 3), torch.empty(2, 3, 3), torch.empty(2, 3))
    index = torch.tensor([[7, 0, 3], [1, 1, 2]])
    gathered = replay.gather(index, out)
    assert gathered is out and out.rew.tolist() == [[7.0, 0.0, 3.0], [1.0, 1.0, 2.0]]
    assert out.act[0, 0].tolist() == [7.0, 7.0]


@pytest.mark.parametrize(
    ("obs", "act", "rew"),
    [((3, 2), (3, 1), (3,)), ((3, 3), (3, 2), (3,)), ((3, 3), (3, 1), (2,))],
)
def test_rows_of_the_wrong_width_are_refused(obs, act, rew):
    replay = ReplayBuffer(8, 3, 1)
    with pytest.raises(ValueError, match=r"must (be obs/next_obs|have shape)"):
        replay.add(np.zeros(obs, np.float32), np.zeros(act, np.float32), np.zeros(rew, np.float32),
                   np.zeros(obs, np.float32), np.zeros(3, np.float32))  # fmt: skip
    assert len(replay) == 0


def test_state_dict_holds_the_filled_rows_and_restores_them_into_a_buffer_of_the_same_capacity():
    replay = ReplayBuffer(6, 3, 2)
    add_rows(replay, np.arange(4.0))
    state = replay.state_dict()
    assert state["size"] == 4 and state["obs"].shape == (4, 3)
    restored = ReplayBuffer(6, 3, 2)
    restored.load_state_dict(state)
    assert (len(restored), restored.cursor) == (4, 4) and torch.equal(restored.rew[:4], replay.rew[:4])
    with pytest.raises(ValueError, match="capacity 6"):
        ReplayBuffer(7, 3, 2).load_state_dict(state)
    with pytest.raises(ValueError, match="does not fit this run"):
        ReplayBuffer(6, 4, 2).load_state_dict(state)
