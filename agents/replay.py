"""A ring replay buffer over preallocated tensors on the training device.

One flat allocation per field, written a whole segment at a time and sampled with one
index per field: a list of per-transition tuples would allocate twice per environment
step and scatter every sample (the fused seed's ``ContiguousReplay``). The buffer lives
on the device the networks train on, so a sampled batch never crosses the bus.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

__all__ = ["ReplayBatch", "ReplayBuffer"]


class ReplayBatch(NamedTuple):
    obs: Tensor  # (..., obs_dim)
    act: Tensor  # (..., act_dim)
    rew: Tensor  # (...)
    next_obs: Tensor  # (..., obs_dim)
    terminal: Tensor  # (...) float 1.0 where the episode truly ended: no bootstrap.
    """Terminal, not done: a truncation (time limit, cut) still has a future and is bootstrapped."""


class ReplayBuffer:
    """Fixed capacity; the oldest transitions are overwritten first.

    Raises:
        ValueError: a capacity below 1, rows of the wrong width, or a sample larger than
            what the buffer holds (sampling with replacement from too few transitions
            would silently overfit them).
    """

    FIELDS = ("obs", "act", "rew", "next_obs", "terminal")

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, device: torch.device | str = "cpu") -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be positive, got {capacity}")
        self.capacity = capacity
        self.obs_dim = obs_dim
        self.act_dim = act_dim
        self.device = torch.device(device)
        f32, device = torch.float32, self.device
        self.obs = torch.zeros((capacity, obs_dim), dtype=f32, device=device)
        self.act = torch.zeros((capacity, act_dim), dtype=f32, device=device)
        self.rew = torch.zeros(capacity, dtype=f32, device=device)
        self.next_obs = torch.zeros((capacity, obs_dim), dtype=f32, device=device)
        self.terminal = torch.zeros(capacity, dtype=f32, device=device)
        self.cursor = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: NDArray[np.float32],
        act: NDArray[np.float32],
        rew: NDArray[np.float32],
        next_obs: NDArray[np.float32],
        terminal: NDArray[np.float32],
    ) -> None:
        """Append n transitions (rows), wrapping around; more than ``capacity`` keeps the newest."""
        n = len(obs)
        if obs.shape != (n, self.obs_dim) or next_obs.shape != (n, self.obs_dim) or act.shape != (n, self.act_dim):
            raise ValueError(
                f"rows must be obs/next_obs (n, {self.obs_dim}) and act (n, {self.act_dim}); got "
                f"{obs.shape}, {next_obs.shape}, {act.shape}"
            )
        if rew.shape != (n,) or terminal.shape != (n,):
            raise ValueError(f"rew and terminal must have shape ({n},); got {rew.shape}, {terminal.shape}")
        columns = [obs, act, rew, next_obs, terminal]
        if n > self.capacity:
            columns = [c[-self.capacity :] for c in columns]
            n = self.capacity
        first = min(n, self.capacity - self.cursor)
        for name, column in zip(self.FIELDS, columns, strict=True):
            store: Tensor = getattr(self, name)
            data = torch.from_numpy(np.ascontiguousarray(column, dtype=np.float32))
            store[self.cursor : self.cursor + first].copy_(data[:first])
            if first < n:
                store[: n - first].copy_(data[first:])
        self.cursor = (self.cursor + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample_index(self, count: int, generator: torch.Generator | None) -> Tensor:
        """``count`` indices drawn uniformly with replacement from what the buffer holds."""
        if count > self.size:
            raise ValueError(f"replay buffer holds {self.size} transitions, cannot sample {count}")
        return torch.randint(0, self.size, (count,), generator=generator, device=self.device)

    def gather(self, index: Tensor, out: ReplayBatch | None = None) -> ReplayBatch:
        """The rows at ``index``; written into ``out``'s tensors when given (static CUDA-graph inputs)."""
        if out is None:
            return ReplayBatch(*(getattr(self, name)[index] for name in self.FIELDS))
        for name, target in zip(self.FIELDS, out, strict=True):
            torch.index_select(getattr(self, name), 0, index.view(-1), out=target.view(-1, *target.shape[2:]))
        return out

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> ReplayBatch:
        """A uniform batch of ``batch_size`` transitions."""
        return self.gather(self.sample_index(batch_size, generator))

    def state_dict(self) -> dict[str, Any]:
        """Only the filled rows, on the CPU (a checkpoint must load on any device)."""
        return {
            "capacity": self.capacity,
            "cursor": self.cursor,
            "size": self.size,
            **{name: getattr(self, name)[: self.size].cpu().clone() for name in self.FIELDS},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        size = int(state["size"])
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"saved replay buffer has capacity {state['capacity']}, this run {self.capacity}")
        for name in self.FIELDS:
            saved: Tensor = state[name]
            store: Tensor = getattr(self, name)
            if saved.shape[0] != size or saved.shape[1:] != store.shape[1:]:
                raise ValueError(f"saved replay field {name!r} has shape {tuple(saved.shape)}, does not fit this run")
        for name in self.FIELDS:
            getattr(self, name)[:size].copy_(state[name])
        self.size = size
        self.cursor = int(state["cursor"]) % self.capacity
