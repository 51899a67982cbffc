"""A recurrent core (GRU or LSTM) between an actor's input and its MLP: its wire description and its numpy cell.

Why: a bot that sees part of the world (a radar sweep, fog of war, cards in hand) must remember what
it saw; a memoryless policy maps this tick's observation alone to an action. The cell is the one torch
computes (``torch.nn.GRU`` / ``torch.nn.LSTM``, one layer, gates in torch's order), so the trainer's
networks load the same tensors and a bot in another language implements it from docs/protocol.md.

The state a bot keeps per agent is one float32 vector of :attr:`RecurrentSpec.state_size` entries:
``h`` for a GRU; ``h`` then ``c`` for an LSTM. It starts at zeros and goes back to zeros when the
agent's episode ends (terminal or truncated) and at a new round.

Tensors (``rnn.*``): ``rnn.weight_ih`` (G*size, in), ``rnn.weight_hh`` (G*size, size), ``rnn.bias_ih``
and ``rnn.bias_hh`` (G*size,), with G = 3 gates for a GRU (reset, update, new) and 4 for an LSTM
(input, forget, cell, output).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError

__all__ = ["CELLS", "MAX_RECURRENT_SIZE", "RecurrentSpec"]

CELLS = {"gru": 3, "lstm": 4}
"""Each cell and its number of gates (how many blocks of ``size`` rows its weights stack)."""
MAX_RECURRENT_SIZE = 4096


def _sigmoid(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """``1 / (1 + exp(-x))`` without overflow warnings for very negative ``x`` (exp(inf) is a clean 0 here)."""
    with np.errstate(over="ignore"):
        out: NDArray[np.float32] = (1.0 / (1.0 + np.exp(-x))).astype(np.float32, copy=False)
    return out


@dataclass(frozen=True)
class RecurrentSpec:
    """The core's shape: which cell, how many units, and what it reads (``inputs``: the observation or a torso's output)."""

    cell: str
    size: int
    inputs: int

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """What is wrong with this shape, or None."""
        if self.cell not in CELLS:
            return f"a recurrent cell is one of {', '.join(sorted(CELLS))}, got {self.cell!r}"
        for name in ("size", "inputs"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= MAX_RECURRENT_SIZE:
                return f"a recurrent core's {name} is 1..{MAX_RECURRENT_SIZE}, got {value!r}"
        return None

    @property
    def gates(self) -> int:
        return CELLS[self.cell]

    @property
    def state_size(self) -> int:
        """Entries of one agent's state: ``h`` (GRU), or ``h`` then ``c`` (LSTM)."""
        return self.size * (2 if self.cell == "lstm" else 1)

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        rows = self.gates * self.size
        return {
            "rnn.weight_ih": (rows, self.inputs),
            "rnn.weight_hh": (rows, self.size),
            "rnn.bias_ih": (rows,),
            "rnn.bias_hh": (rows,),
        }

    def to_wire(self) -> dict[str, Any]:
        return {"cell": self.cell, "size": self.size, "inputs": self.inputs}

    @classmethod
    def from_wire(cls, m: Any, inputs: int | None = None) -> RecurrentSpec:
        """The ``recurrent`` field of an architecture, checked (``bad_field`` otherwise); ``inputs``: its own unless given."""
        if not isinstance(m, Mapping):
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'recurrent' must be a map with 'cell', 'size' and 'inputs'")
        inputs = m.get("inputs") if inputs is None else inputs
        try:
            return cls(m.get("cell"), m.get("size"), inputs)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'recurrent': {exc}") from None

    def initial_state(self, n: int) -> NDArray[np.float32]:
        """Zeros for ``n`` agents: the state at an episode's start."""
        return np.zeros((n, self.state_size), np.float32)

    def step(
        self, x: NDArray[np.float32], state: NDArray[np.float32], tensors: Mapping[str, NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """One step for a batch: ``x`` (n, inputs), ``state`` (n, state_size) → (the output ``h`` (n, size), the new state).

        ``tensors`` holds the four ``rnn.*`` arrays; torch's equations, gate blocks in torch's order.
        """
        size = self.size
        gi = x @ tensors["rnn.weight_ih"].T + tensors["rnn.bias_ih"]
        h = state[:, :size]
        gh = h @ tensors["rnn.weight_hh"].T + tensors["rnn.bias_hh"]
        if self.cell == "gru":
            reset = _sigmoid(gi[:, :size] + gh[:, :size])
            update = _sigmoid(gi[:, size : 2 * size] + gh[:, size : 2 * size])
            new = np.tanh(gi[:, 2 * size :] + reset * gh[:, 2 * size :])
            h_next = ((1.0 - update) * new + update * h).astype(np.float32, copy=False)
            return h_next, h_next
        gates = gi + gh
        i, f = _sigmoid(gates[:, :size]), _sigmoid(gates[:, size : 2 * size])
        g, o = np.tanh(gates[:, 2 * size : 3 * size]), _sigmoid(gates[:, 3 * size :])
        c_next = (f * state[:, size:] + i * g).astype(np.float32, copy=False)
        h_next = (o * np.tanh(c_next)).astype(np.float32, copy=False)
        return h_next, np.concatenate([h_next, c_next], axis=1)
