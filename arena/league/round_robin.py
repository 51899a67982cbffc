"""Every pair of bots plays the same number of 1v1 rounds, all pairs side by side in one battle.

``arena league RUN_DIR`` and ``arena match --rate`` use it to rate bots on a common footing:
during training the league's members only meet the learner, so their training ratings are
relative to the learner of their time. One :class:`~arena.games.tank.engine.TankBattle` holds a
match per round (tank 0 and tank 1 seated by :class:`MixedSeat`), so the cost is about the
longest round's ticks, not the number of rounds.

The ratings are a Bradley-Terry fit of every round at once, on the Elo scale
(:func:`rate`): a round-robin is a batch, and a batch fit does not care in which order its rounds
ended. openskill, which rates the league's rounds one by one as they come in training, did: rated
in the order the rounds ended (short rounds first), in the order they were scheduled, or reversed,
the same 100-rounds-a-pair round-robin of one run ranked the returned policy 1st, 4th and 6th of 7.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..bots.play import Controller
from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.engines import EngineName
from ..games.tank.radar import Sight
from ..games.tank.rules import TankRules
from .opponents import outcomes
from .ratings import RoundOutcome
from .seats import MixedSeat

__all__ = ["ControllerFactory", "RatingRow", "cross_table", "rate", "round_robin"]

ControllerFactory = Callable[[int, int], Controller]
"""(matches, seed) → a controller driving one tank in each of that many matches."""

RatingRow = dict[str, Any]
"""One bot's line of :func:`rate`: ``name``, ``elo``, ``score`` (wins plus half the draws, over its rounds), ``rounds``."""

ELO_SCALE = 400.0 / math.log(10.0)
"""Elo points per unit of log strength: 400 points are odds of 10 to 1."""


def round_robin(
    players: Mapping[str, ControllerFactory],
    rounds_per_pair: int,
    seed: int = 0,
    rules: TankRules | None = None,
    progress: Callable[[int, int], None] | None = None,
    engine: EngineName = "numpy",
) -> list[RoundOutcome]:
    """Play ``rounds_per_pair`` rounds for every pair of ``players``; returns each round's outcome.

    Each pair plays half its rounds from each seat. The outcomes come in the schedule's order (every
    pair's first round, then every pair's second, ...), not in the order the rounds ended.
    ``progress`` (if given) receives (rounds done, rounds in all) as rounds finish; ``engine`` steps the
    battle (the players' factories choose their own: :func:`arena.league.commands.scripted_player`).
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
    battle = TankBattle(n, 2, rules or TankRules(), seed=seed, engine=engine)

    def maker(slot: int) -> Callable[[str], Controller]:
        def make(name: str) -> Controller:
            return players[name](n, seed + 7919 * (1 + list(players).index(name)) + 104_729 * slot)

        return make

    tank0, tank1 = MixedSeat(0, seats[0], maker(0)), MixedSeat(1, seats[1], maker(1))
    sight = Sight(battle, tank0.on_radar or tank1.on_radar)  # a policy of the radar observation sees its radar's
    actions = np.zeros((n, 2, ACT_DIM), np.float32)
    done = np.zeros(n, bool)
    results: dict[int, RoundOutcome] = {}
    while not done.all():
        obs, seen = sight.observe()
        tank0.act(obs, actions, seen)
        tank1.act(obs, actions, seen)
        info = sight.step(actions)
        ended = np.flatnonzero(info.round_over & ~done)
        for m, outcome in zip(ended.tolist(), outcomes(info, ended).tolist(), strict=True):
            results[m] = (seats[0][m], seats[1][m], outcome)
        done[ended] = True
        if info.round_over.any():
            sight.reset(info.round_over)
            tank0.reset(info.round_over)
            tank1.reset(info.round_over)
            if progress is not None and len(ended):
                progress(int(done.sum()), n)
    # Match m is round m % rounds_per_pair of pair m // rounds_per_pair.
    return [results[m] for m in sorted(results, key=lambda m: (m % rounds_per_pair, m // rounds_per_pair))]


def rate(results: Sequence[RoundOutcome], prior_rounds: float = 1.0, tolerance: float = 1e-10) -> list[RatingRow]:
    """Bradley-Terry ratings of every bot from all of ``results`` at once, on the Elo scale; best first.

    The model: a bot of strength p_a beats one of strength p_b with chance p_a / (p_a + p_b); a draw
    counts half a win to each. The fit is the maximum-likelihood strengths by Hunter's MM iteration
    (each step raises the likelihood), with ``prior_rounds`` drawn rounds added to every pair that met,
    so a bot that won all its rounds gets a finite rating. The mean Elo is 0. Any order of ``results``
    gives the same ratings.
    """
    if prior_rounds <= 0:
        raise ValueError(f"prior_rounds must be > 0, got {prior_rounds}")
    names = sorted({name for a, b, _ in results for name in (a, b)})
    if not names:
        return []
    index = {name: i for i, name in enumerate(names)}
    k = len(names)
    wins = np.zeros((k, k))  # wins[i, j]: i's wins (draws half) against j
    played = np.zeros((k, k))
    for a, b, outcome in results:
        i, j = index[a], index[b]
        if i == j:
            raise ValueError(f"a bot cannot be rated against itself ({a!r})")
        wins[i, j] += outcome
        wins[j, i] += 1.0 - outcome
        played[i, j] += 1.0
        played[j, i] += 1.0
    met = played > 0
    score = wins.sum(axis=1) / np.maximum(played.sum(axis=1), 1.0)
    wins = wins + 0.5 * prior_rounds * met
    played = played + prior_rounds * met
    total_wins = wins.sum(axis=1)
    strength = np.ones(k)
    for _ in range(100_000):
        pair_sum = strength[:, None] + strength[None, :]
        updated = total_wins / (played / pair_sum).sum(axis=1)
        updated /= np.exp(np.log(updated).mean())
        converged = np.max(np.abs(np.log(updated) - np.log(strength))) < tolerance
        strength = updated
        if converged:
            break
    elo = ELO_SCALE * np.log(strength)
    rows = [
        {"name": name, "elo": round(float(elo[i]), 1), "score": round(float(score[i]), 4),
         "rounds": int(played[i].sum() - prior_rounds * met[i].sum())}
        for i, name in enumerate(names)
    ]  # fmt: skip
    return sorted(rows, key=lambda row: -row["elo"])


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
