"""A gymnasium environment whose process ends at its first reset, without a word (``os._exit``): for bot_process's test.

Made by id, ``tests.arena.bots.dying_env:Dying-v0``: gymnasium imports this module (which registers it) in
the process that makes it, so a spawned child can make it too.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

EXIT_CODE = 7


class Dying(gym.Env):  # type: ignore[misc]
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        os._exit(EXIT_CODE)

    def step(self, action: Any) -> Any:
        raise AssertionError("never reached")


gym.register("Dying-v0", entry_point=f"{__name__}:Dying")
