"""A board game for the tests, in PettingZoo's AEC API: connect three on a 3 x 4 board, cut after ``MAX_MOVES``.

``env()`` is what ``arena gym tests.arena.bots.tiny_drop`` loads. Stones drop into one of 4
columns; three in a row (across, down or diagonal) wins. Its observation is connect four's: a
(rows, columns, 2) Box of the mover's stones and the other's, with an ``action_mask`` of the columns
not yet full; so its rules, like connect four's, do not care about left and right (``--mirror``).
A game still open after ``MAX_MOVES`` moves is cut (truncated, no reward), as a time limit would.
``lopsided()`` is the same game but for one rule that is not symmetric: nobody opens in the first column.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from tests.arena.bots.two_seats import TwoSeatGame

ROWS, COLUMNS, LINE = 3, 4, 3
MAX_MOVES = 9


class TinyDrop(TwoSeatGame):
    metadata: ClassVar[dict[str, Any]] = {"name": "tiny_drop_v0", "is_parallelizable": False}

    def __init__(self, max_moves: int = MAX_MOVES, lopsided: bool = False) -> None:
        board = spaces.Box(0, 1, (ROWS, COLUMNS, 2), np.int8)
        obs = spaces.Dict({"observation": board, "action_mask": spaces.Box(0, 1, (COLUMNS,), np.int8)})
        super().__init__(obs, spaces.Discrete(COLUMNS))
        self.max_moves = max_moves
        self.lopsided = lopsided

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.start_seats()
        self.board = np.full((ROWS, COLUMNS), -1, np.int8)  # -1 empty, else the index of the player whose stone it is
        self.moves = 0

    def observe(self, agent: str) -> dict[str, Any]:
        me = self.possible_agents.index(agent)
        planes = np.stack([self.board == me, self.board == 1 - me], axis=-1).astype(np.int8)
        legal = self.board[0] == -1
        if self.lopsided and self.moves == 0:
            legal[0] = False
        return {"observation": planes, "action_mask": legal.astype(np.int8)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        me = self.possible_agents.index(agent)
        column = int(action)
        if self.board[0, column] != -1:
            self.illegal += 1
            column = int(np.flatnonzero(self.board[0] == -1)[0])
        row = int(np.flatnonzero(self.board[:, column] == -1)[-1])
        self.board[row, column] = me
        self.moves += 1
        other = self.agents[1 - me]
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        if self._wins(me):
            self.rewards = {agent: 1.0, other: -1.0}
            self.terminations = {a: True for a in self.agents}
        elif not (self.board == -1).any():
            self.terminations = {a: True for a in self.agents}
        elif self.moves >= self.max_moves:
            self.truncations = {a: True for a in self.agents}
        self._accumulate_rewards()
        self.agent_selection = other

    def _wins(self, me: int) -> bool:
        mine = self.board == me
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(ROWS):
                for c in range(COLUMNS):
                    cells = [(r + i * dr, c + i * dc) for i in range(LINE)]
                    if all(0 <= y < ROWS and 0 <= x < COLUMNS and mine[y, x] for y, x in cells):
                        return True
        return False


def env() -> TinyDrop:
    return TinyDrop()


def lopsided() -> TinyDrop:
    return TinyDrop(lopsided=True)
