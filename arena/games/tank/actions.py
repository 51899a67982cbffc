"""What a tank does: the action columns every controller hands the engine, a learned policy or a scripted bot.

The action layout is a contract with every trained policy, the ONNX export and the Tank Royale bot, as the
observation's is (``observation.py``), so it stands apart from the engine that reads it and from the bots
that write it (docs/arena.md has the table).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["ACT_DIM", "read_actions"]

ACT_DIM: int = 5
"""Action columns: target velocity, body turn, gun turn, fire power, radar turn (all in [-1, 1])."""


def read_actions(actions: Any, n_matches: int, n_tanks: int) -> NDArray[np.float64]:
    """The actions as a step reads them: a float64 copy of shape (M, T, ACT_DIM), NaN as 0, clipped to [-1, 1].

    Raises ValueError for another shape. The compiled step reads each value the same way (``kernels._action``).
    """
    a = np.array(actions, np.float64)  # a private copy
    if a.shape != (n_matches, n_tanks, ACT_DIM):
        raise ValueError(f"actions must have shape ({n_matches}, {n_tanks}, {ACT_DIM}), got {a.shape}")
    nan = np.isnan(a)
    if nan.any():
        a[nan] = 0.0
    np.minimum(np.maximum(a, -1.0, out=a), 1.0, out=a)
    return a
