"""Every pair of bots plays the same number of 1v1 rounds, all pairs side by side in one battle.

``arena league RUN_DIR`` and ``arena match --rate`` use it to rate bots on a common footing:
during training the league's members only meet the learner, so their training ratings are
relative to the learner of their time. One :class:`~arena.games.tank.engine.TankBattle` holds a
match per round (tank 0 and tank 1 seated by :class:`MixedSeat`), so the cost is about the
longest round's ticks, not the number of rounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..bots.play import Controller
from ..games.tank.engine import ACT_DIM, TankBattle
from ..games.tank.rules import TankRules
from .opponents import outcomes
from .ratings import Ratings, RoundOutcome
from .seats import MixedSeat

__all__ = ["ControllerFactory", "cross_table", "rate", "round_robin"]

ControllerFactory = Callable[[int, int], Controller]
"""(matches, seed) → a controller driving one tank in each of that many matches."""


def round_robin(
    players: Mapping[str, ControllerFactory],
    rounds_per_pair: int,
    seed: int = 0,
    rules: TankRules | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[RoundOutcome]:
    """Play ``rounds_per_pair`` rounds for every pair of ``players``; returns each round's outcome.

    Each pair plays half its rounds from each seat. ``progress`` (if given) receives (rounds
    done, rounds in all) as rounds finish.
    """
    if len(players) < 2:
        raise ValueError(f"a round-robin needs at least two bots, got {len(players)}")
    if rounds_per_pair < 1:
        raise ValueError(f"rounds per pair must be >= 1, got {rounds_per_pair}")
    seats: list[list[str]] = [[], []]
    for a, b in itertools.combinations(players, 2):
        for r in range(rounds_per_pair):
            first, second = (a, b) if r % 2 == 0 else (b, a)
            seats[0].append(first)
            seats[1].append(second)
    n = len(seats[0])
    battle = TankBattle(n, 2, rules or TankRules(), seed=seed)

    def maker(slot: int) -> Callable[[str], Controller]:
        def make(name: str) -> Controller:
            return players[name](n, seed + 7919 * (1 + list(players).index(name)) + 104_729 * slot)

        return make

    tank0, tank1 = MixedSeat(0, seats[0], maker(0)), MixedSeat(1, seats[1], maker(1))
    actions = np.zeros((n, 2, ACT_DIM), np.float32)
    done = np.zeros(n, bool)
    results: list[RoundOutcome] = []
    while not done.all():
        obs = battle.observe()
        tank0.act(obs, actions)
        tank1.act(obs, actions)
        info = battle.step(actions)
        ended = np.flatnonzero(info.round_over & ~done)
        for m, outcome in zip(ended.tolist(), outcomes(info, ended).tolist(), strict=True):
            results.append((seats[0][m], seats[1][m], outcome))
        done[ended] = True
        if info.round_over.any():
            battle.reset(info.round_over)
            tank0.reset(info.round_over)
            tank1.reset(info.round_over)
            if progress is not None and len(ended):
                progress(int(done.sum()), n)
    return results


def rate(results: Sequence[RoundOutcome]) -> Ratings:
    """openskill ratings from a round-robin's outcomes, in the order they were played."""
    ratings = Ratings()
    ratings.record_all(results)
    return ratings


def cross_table(results: Sequence[RoundOutcome]) -> dict[str, dict[str, float]]:
    """``table[a][b]``: a's score against b (wins plus half the draws, over their rounds)."""
    totals: dict[tuple[str, str], list[float]] = {}
    for a, b, outcome in results:
        totals.setdefault((a, b), []).append(outcome)
        totals.setdefault((b, a), []).append(1.0 - outcome)
    table: dict[str, dict[str, float]] = {}
    for (a, b), scores in totals.items():
        table.setdefault(a, {})[b] = round(float(np.mean(scores)), 4)
    return table
