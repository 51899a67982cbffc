"""bench/turns.py's fixed players and its tactics audit, on boards built by hand (no game library needed)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from bench.turns import COLUMNS, ROWS, Tactics, lookahead_move

RNG = np.random.default_rng(0)
ALL = np.ones(COLUMNS, bool)


def board(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> NDArray[np.float32]:
    """The flat observation PettingZoo gives the player to move: (row, column) pieces, row 5 the bottom."""
    planes = np.zeros((ROWS, COLUMNS, 2), np.float32)
    for r, c in mine:
        planes[r, c, 0] = 1.0
    for r, c in theirs:
        planes[r, c, 1] = 1.0
    return planes.reshape(-1)


THREE_MINE = board([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1)])
"""Column 3 wins for the player to move."""
THREE_THEIRS = board([(4, 4), (4, 5)], [(5, 4), (5, 5), (5, 6)])
"""Column 3 blocks the opponent's row; nothing wins for the player to move."""
UNDER_THREAT = board([(5, 1), (5, 3)], [(5, 2), (4, 1), (4, 2), (4, 3)])
"""The opponent wins at (4, 0) and (4, 4), each reachable only once a piece lies under it: every column
but 0 and 4 is safe, and nothing wins or needs blocking now."""


def test_lookahead_takes_a_win_before_it_blocks() -> None:
    both = board([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (4, 2)])  # column 3 wins for both sides
    assert lookahead_move(both, ALL, RNG) == 3
    assert lookahead_move(THREE_MINE, ALL, RNG) == 3
    assert lookahead_move(THREE_THEIRS, ALL, RNG) == 3


def test_tactics_counts_wins_blocks_and_safe_moves() -> None:
    tactics = Tactics()
    tactics.audit(THREE_MINE, ALL, 3)  # a win taken
    tactics.audit(THREE_MINE, ALL, 6)  # a win missed
    tactics.audit(THREE_THEIRS, ALL, 3)  # a block made
    tactics.audit(UNDER_THREAT, ALL, 5)  # a safe move
    tactics.audit(UNDER_THREAT, ALL, 0)  # a piece under the opponent's winning square
    counts = tactics.as_dict()
    assert counts["win"] == {"right": 1, "of": 2, "rate": 0.5}
    assert counts["block"] == {"right": 1, "of": 1, "rate": 1.0}
    assert counts["safe"] == {"right": 1, "of": 2, "rate": 0.5}


def test_an_empty_board_counts_nothing() -> None:
    tactics = Tactics()
    tactics.audit(board([], []), ALL, 3)
    assert all(entry["of"] == 0 and entry["rate"] is None for entry in tactics.as_dict().values())
