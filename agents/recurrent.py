"""PPO's recurrent core: a one-layer GRU or LSTM between the observation (or a conv torso) and the actor's MLP.

Why: a bot that sees part of the world must remember what it saw. The core is torch's own
``nn.GRU`` / ``nn.LSTM`` (one layer, batch first), so its tensors are the ones
``bot_protocol.recurrent`` runs in numpy on the bots: ``rnn.weight_ih``, ``rnn.weight_hh``,
``rnn.bias_ih``, ``rnn.bias_hh``. An agent's state is one vector: ``h`` (GRU), or ``h`` then ``c``
(LSTM), zeros at an episode's start.

The learner never keeps states of its own: every row a bot sends carries the state the bot acted
from (its stored state, as R2D2 keeps one), so a chunk of consecutive rows is unrolled from the
state its first row carries, and its gradients flow back through the whole chunk (truncated
backpropagation through time, :mod:`agents.ppo.sequences`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

__all__ = ["CELLS", "RecurrentCore"]

CELLS = ("gru", "lstm")


class RecurrentCore(nn.Module):
    """A one-layer GRU or LSTM over feature rows; :meth:`unroll` runs chunks of consecutive steps."""

    def __init__(self, cell: str, inputs: int, size: int) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"a recurrent cell is one of {', '.join(CELLS)}, got {cell!r}")
        self.cell, self.inputs, self.size = cell, inputs, size
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(inputs, size, batch_first=True)
        # CleanRL's recurrent PPO: orthogonal weights, zero biases.
        for name, param in self.rnn.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    @property
    def state_size(self) -> int:
        """One agent's state: ``h`` (GRU), ``h`` then ``c`` (LSTM)."""
        return self.size * (2 if self.cell == "lstm" else 1)

    def unroll(self, x: Tensor, state: Tensor) -> Tensor:
        """The core's output over chunks: ``x`` (B, T, inputs) from ``state`` (B, state_size) → (B, T, size).

        No reset inside a chunk: a chunk never crosses an episode's end (it lies inside one segment).
        """
        h0 = state[:, : self.size].unsqueeze(0).contiguous()
        if self.cell == "gru":
            out, _ = self.rnn(x, h0)
        else:
            out, _ = self.rnn(x, (h0, state[:, self.size :].unsqueeze(0).contiguous()))
        return out  # type: ignore[no-any-return]

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """One step for a batch: ``x`` (n, inputs), ``state`` (n, state_size) → (output (n, size), next state)."""
        h0 = state[:, : self.size].unsqueeze(0).contiguous()
        if self.cell == "gru":
            out, h = self.rnn(x.unsqueeze(1), h0)
            return out[:, 0], h[0]
        out, (h, c) = self.rnn(x.unsqueeze(1), (h0, state[:, self.size :].unsqueeze(0).contiguous()))
        return out[:, 0], torch.cat([h[0], c[0]], dim=1)

    def export(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """The ``recurrent`` architecture field and the ``rnn.*`` tensors."""
        tensors = {
            f"rnn.{name.removesuffix('_l0')}": value.detach().cpu().numpy().astype(np.float32, copy=True)
            for name, value in self.rnn.named_parameters()
        }
        return {"cell": self.cell, "size": self.size, "inputs": self.inputs}, tensors
