"""A board game's left-right mirror: the same position seen in a looking-glass, and the same move in it.

Why: a board game whose rules do not care about left and right (connect four, tic-tac-toe, gomoku)
gives every position a twin. A policy that is a plain MLP over the board's squares learns a pattern
and its mirror image separately, so each lesson comes twice as often when every row is also sent
mirrored. Board-game learners have used a game's symmetries this way since AlphaGo. A board's
shape does not say whether its rules are symmetric, or how its moves are numbered, so
:func:`mirror_fault` checks the mirror against the game itself before ``arena gym --mirror auto``
(the default) uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class BoardMirror:
    """Index maps that mirror a flat board observation and a move; each is its own inverse.

    ``obs[:, obs_index]`` is the mirrored observation, ``mask[:, move_index]`` the mirrored legal
    moves, and ``move_index[move]`` the mirrored move.
    """

    obs_index: NDArray[np.intp]
    move_index: NDArray[np.intp]

    @classmethod
    def of(cls, image: tuple[int, int, int] | None, n_moves: int) -> BoardMirror:
        """The mirror of a board of ``image`` = (rows, columns, planes) whose moves are its columns or its squares.

        Raises:
            ValueError: the observation is not a board (a 2- or 3-dimensional ``Box``), or the moves
                are neither one per column nor one per square (in row-major order).
        """
        if image is None:
            raise ValueError("--mirror needs a board: an observation Box of (rows, columns[, planes])")
        rows, columns, planes = image
        obs_index = np.arange(rows * columns * planes).reshape(rows, columns, planes)[:, ::-1, :].reshape(-1)
        if n_moves == columns:
            move_index = np.arange(columns)[::-1]
        elif n_moves == rows * columns:
            move_index = np.arange(rows * columns).reshape(rows, columns)[:, ::-1].reshape(-1)
        else:
            raise ValueError(
                f"--mirror needs one move per column ({columns}) or per square ({rows * columns}) of the "
                f"{rows} x {columns} board, got {n_moves} moves"
            )
        return cls(np.ascontiguousarray(obs_index, dtype=np.intp), np.ascontiguousarray(move_index, dtype=np.intp))

    def observations(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """Rows of flat observations (n, obs_dim), mirrored."""
        return obs[:, self.obs_index]

    def masks(self, mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Rows of legal-move masks (n, moves), mirrored."""
        return mask[:, self.move_index]

    def moves(self, moves: NDArray[np.int64]) -> NDArray[np.int64]:
        """Moves (any shape), mirrored."""
        return self.move_index[moves].astype(np.int64)


Reader = Callable[[Any, Any], tuple[NDArray[np.float32], NDArray[np.bool_]]]
"""A seat's raw observation and info → its flat observation and legal moves (:meth:`~.turn_bot.Seats.read`)."""


def mirror_fault(
    mirror: BoardMirror, factory: Callable[[], Any], read: Reader, games: int = 20, seed: int = 0, max_turns: int = 1_000
) -> str | None:
    """Why ``mirror`` is not a symmetry of the game ``factory`` makes, or None when it held in ``games`` random games
    (each followed for at most ``max_turns`` turns).

    Each game is played twice side by side, with random legal moves in one and their mirror images in the other;
    at every turn the second must see the mirror of what the first sees (observation and legal moves), and the
    seats must be rewarded and ended alike. Why check: a mirrored row of a game whose rules are not symmetric
    teaches a wrong lesson, silently; a board's shape alone does not say which way its moves are numbered.
    """
    rng = np.random.default_rng(seed)
    plain, looking_glass = factory(), factory()
    try:
        for game in range(games):
            plain.reset(seed=seed + game)
            looking_glass.reset(seed=seed + game)
            for turn, name in enumerate(plain.agent_iter(max_iter=max_turns)):
                obs, reward, terminated, truncated, info = plain.last()
                twin_obs, twin_reward, twin_terminated, twin_truncated, twin_info = looking_glass.last()
                if looking_glass.agent_selection != name or (reward, terminated, truncated) != (
                    twin_reward,
                    twin_terminated,
                    twin_truncated,
                ):
                    return f"game {game}, turn {turn}: the mirrored game's seats moved, scored or ended otherwise"
                if terminated or truncated:
                    plain.step(None)
                    looking_glass.step(None)
                    continue
                flat, legal = read(obs, info)
                twin_flat, twin_legal = read(twin_obs, twin_info)
                if not np.array_equal(mirror.observations(flat[None])[0], twin_flat):
                    return f"game {game}, turn {turn}: the mirrored moves reach a position that is not the mirror image"
                if not np.array_equal(mirror.masks(legal[None])[0], twin_legal):
                    return f"game {game}, turn {turn}: the mirrored position's legal moves are not the mirror image's"
                move = int(rng.choice(np.flatnonzero(legal)))
                plain.step(move)
                looking_glass.step(int(mirror.move_index[move]))
    finally:
        plain.close()
        looking_glass.close()
    return None
