"""The left-right mirror of a board game: index maps that are their own inverse, and true to the game's rules."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from arena.bots.board_mirror import BoardMirror, mirror_fault
from arena.bots.turn_bot import Seats
from tests.arena.bots import tiny_drop


def test_a_mirror_of_columns_or_squares_undoes_itself():
    for moves in (4, 12):
        mirror = BoardMirror.of((3, 4, 2), moves)
        np.testing.assert_array_equal(mirror.obs_index[mirror.obs_index], np.arange(24))
        np.testing.assert_array_equal(mirror.move_index[mirror.move_index], np.arange(moves))
    np.testing.assert_array_equal(BoardMirror.of((3, 4, 2), 4).move_index, [3, 2, 1, 0])
    np.testing.assert_array_equal(BoardMirror.of((2, 3, 1), 6).move_index, [2, 1, 0, 5, 4, 3])  # squares row by row
    board = np.arange(24, dtype=np.float32).reshape(1, 3, 4, 2)
    mirrored = BoardMirror.of((3, 4, 2), 4).observations(board.reshape(1, -1)).reshape(1, 3, 4, 2)
    np.testing.assert_array_equal(mirrored, board[:, :, ::-1, :])


def test_a_game_that_is_no_board_or_whose_moves_are_not_its_columns_or_squares_is_refused():
    with pytest.raises(ValueError, match=r"--mirror needs a board"):
        BoardMirror.of(None, 4)
    with pytest.raises(ValueError, match=r"one move per column \(4\) or per square \(12\) of the 3 x 4 board, got 5"):
        BoardMirror.of((3, 4, 2), 5)


def _play(moves: list[int]) -> tuple[np.ndarray, np.ndarray]:
    env = tiny_drop.env()
    env.reset(seed=0)
    seats = Seats.of(env)
    for move in moves:
        env.step(move)
    obs, _, _, _, info = env.last()
    flat, legal = seats.read(obs, info)
    return flat[None], legal[None]


@pytest.mark.parametrize("moves", [[0, 0, 0, 1], [3, 2, 2, 1, 0], [1, 1, 1, 2, 3, 3]])
def test_the_mirror_of_a_position_is_the_position_the_mirrored_moves_reach(moves):
    """What makes a mirrored row true: the game, played in the looking-glass, sees what the mirror shows."""
    mirror = BoardMirror.of((tiny_drop.ROWS, tiny_drop.COLUMNS, 2), tiny_drop.COLUMNS)
    obs, legal = _play(moves)
    twin_obs, twin_legal = _play([int(m) for m in mirror.moves(np.array(moves))])
    np.testing.assert_array_equal(mirror.observations(obs), twin_obs)
    np.testing.assert_array_equal(mirror.masks(legal), twin_legal)


def test_the_check_finds_a_symmetric_game_symmetric_and_names_the_turn_where_a_rule_or_a_map_is_not():
    env = tiny_drop.env()
    env.reset()
    seats = Seats.of(env)
    mirror = BoardMirror.of((tiny_drop.ROWS, tiny_drop.COLUMNS, 2), tiny_drop.COLUMNS)
    assert mirror_fault(mirror, tiny_drop.env, seats.read) is None
    fault = mirror_fault(mirror, tiny_drop.lopsided, seats.read)  # nobody opens in the first column
    assert fault == "game 0, turn 0: the mirrored position's legal moves are not the mirror image's"
    unmirrored_moves = BoardMirror(mirror.obs_index, np.arange(tiny_drop.COLUMNS))  # the board flipped, the moves not
    assert "the mirrored moves reach a position that is not the mirror image" in str(
        mirror_fault(unmirrored_moves, tiny_drop.env, seats.read)
    )
