"""A turn-based game for the tests, in PettingZoo's AEC API: two players take 1 or 2 stones; who takes the last one wins.

``env()`` is what ``arena gym tests.arena.bots.tiny_nim`` loads. From 4 stones the first player
wins by taking 1 (then answering every move so that 3, then 0, remain), so a policy that learned the
game wins nearly always as the first player against a random one. Taking 2 of 1 stone is illegal:
the observation's ``action_mask`` forbids it, and the game counts any illegal move it receives.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from tests.arena.bots.two_seats import TwoSeatGame

STONES = 4


class TinyNim(TwoSeatGame):
    metadata: ClassVar[dict[str, Any]] = {"name": "tiny_nim_v0", "is_parallelizable": False}

    def __init__(self) -> None:
        obs = spaces.Dict({"observation": spaces.Discrete(STONES + 1), "action_mask": spaces.Box(0, 1, (2,), np.int8)})
        super().__init__(obs, spaces.Discrete(2))

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.start_seats()
        self.stones = STONES

    def observe(self, agent: str) -> dict[str, Any]:
        mask = np.array([1, 1 if self.stones >= 2 else 0], np.int8)
        return {"observation": self.stones, "action_mask": mask}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        take = int(action) + 1
        if take > self.stones:
            self.illegal += 1
            take = self.stones
        self.stones -= take
        other = self.agents[1 - self.agents.index(agent)]
        self._cumulative_rewards[agent] = 0.0
        if self.stones == 0:
            self.rewards = {agent: 1.0, other: -1.0}
            self.terminations = {a: True for a in self.agents}
        else:
            self.rewards = {a: 0.0 for a in self.agents}
        self._accumulate_rewards()
        self.agent_selection = other


def env() -> TinyNim:
    return TinyNim()
