"""Scripted bots against each other: a round runner, the 1v1 cross table of every pair and its markdown.

``python -m arena.games.tank.tournament --rounds 200`` prints the cross table of docs/arena.md. The runner
plays the numpy engine and numpy bots, the reference: the table is what the game's rules make of the bots.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .actions import ACT_DIM
from .engine import TankBattle
from .roster import SCRIPTED, make_scripted
from .rules import DEFAULT_RULES, TankRules

__all__ = ["cross_table", "markdown", "play_scripted"]

CrossTable = dict[str, dict[str, dict[str, float]]]
"""``table[a][b]``: ``win_rate``, ``draw_rate``, ``mean_score`` and ``mean_energy`` of bot ``a`` against bot ``b``."""


def play_scripted(
    names: list[str], rounds: int, seed: int = 0, n_matches: int = 50, rules: TankRules = DEFAULT_RULES
) -> dict[str, object]:
    """Play ``rounds`` rounds of scripted bots against each other (tank ``i`` is ``names[i]``).

    ``n_matches`` rounds run in parallel; every started round is counted (a match is
    not restarted once ``rounds`` rounds were started, so short rounds are not
    over-represented). Returns per-slot lists (same order as ``names``): ``wins``,
    ``win_rate``, ``mean_score`` (Robocode round score), ``mean_energy`` (energy left at
    round end), plus ``draws`` (no survivor, or tick cap), ``truncated`` and ``mean_ticks``.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    T = len(names)
    M = min(int(n_matches), int(rounds))
    battle = TankBattle(M, T, rules, seed)
    bots = [make_scripted(nm, M, seed * 7919 + 101 * (i + 1), rules) for i, nm in enumerate(names)]
    wins = np.zeros(T, np.int64)
    draws = 0
    truncated = 0
    score_sum = np.zeros(T)
    energy_sum = np.zeros(T)
    ticks_sum = 0
    done = 0
    started = M
    pending = np.ones(M, bool)
    obs = battle.observe()
    act = np.empty((M, T, ACT_DIM), np.float32)
    while done < rounds:
        for i, bot in enumerate(bots):
            act[:, i] = bot.act(obs[:, i])
        info = battle.step(act)
        fin = info.round_over & pending
        if fin.any():
            idx = np.flatnonzero(fin)
            w = info.winner[idx]
            wins += np.bincount(w[w >= 0], minlength=T)
            draws += int((w < 0).sum())
            truncated += int(info.truncated[idx].sum())
            score_sum += info.scores[idx].sum(axis=0)
            energy_sum += battle.energy[idx].sum(axis=0)
            ticks_sum += int(battle.tick[idx].sum())
            done += len(idx)
            pending[idx] = False
            again = idx[: max(0, rounds - started)]
            if len(again):
                mask = np.zeros(M, bool)
                mask[again] = True
                started += len(again)
                pending[again] = True
                battle.reset(mask)
                for bot in bots:
                    bot.reset(mask)
        obs = battle.observe()
    return {
        "names": list(names),
        "rounds": int(rounds),
        "wins": wins.tolist(),
        "win_rate": (wins / rounds).tolist(),
        "draws": draws,
        "truncated": truncated,
        "mean_score": (score_sum / rounds).tolist(),
        "mean_energy": (energy_sum / rounds).tolist(),
        "mean_ticks": ticks_sum / rounds,
    }


def cross_table(
    names: list[str] | None = None, rounds: int = 200, seed: int = 0, n_matches: int = 50, rules: TankRules = DEFAULT_RULES
) -> CrossTable:
    """1v1 results of every pair of scripted bots (mirror matches included).

    ``table[a][b]`` holds ``win_rate`` (rounds ``a`` won against ``b``), ``draw_rate``,
    ``mean_score`` and ``mean_energy`` of ``a`` in ``rounds`` rounds of ``a`` vs ``b``.
    Each unordered pair is played once (``a`` as tank 0); start positions are random.
    """
    names = list(SCRIPTED) if names is None else names
    table: CrossTable = {a: {} for a in names}
    for i, a in enumerate(names):
        for b in names[i:]:
            res = play_scripted([a, b], rounds, seed=seed, n_matches=n_matches, rules=rules)
            wins, scores, energy = res["wins"], res["mean_score"], res["mean_energy"]
            assert isinstance(wins, list) and isinstance(scores, list) and isinstance(energy, list)
            draw = int(res["draws"]) / rounds  # type: ignore[call-overload]
            table[a][b] = {"win_rate": wins[0] / rounds, "draw_rate": draw, "mean_score": scores[0], "mean_energy": energy[0]}
            table[b][a] = {"win_rate": wins[1] / rounds, "draw_rate": draw, "mean_score": scores[1], "mean_energy": energy[1]}
            if a == b:  # mirror match: report the two tanks together
                table[a][a] = {
                    "win_rate": (wins[0] + wins[1]) / (2 * rounds),
                    "draw_rate": draw,
                    "mean_score": (scores[0] + scores[1]) / 2,
                    "mean_energy": (energy[0] + energy[1]) / 2,
                }
    return table


def markdown(table: CrossTable, rounds: int, seed: int) -> str:
    """The cross table as docs/arena.md shows it: win rates (with draws), mean round scores, mean energy left."""
    names = list(table)
    lines = [f"Win rate of the row bot against the column bot ({rounds} rounds 1v1 per pair, seed {seed}):", ""]
    cells = {}
    for a in names:
        for b in names:
            c = table[a][b]
            cells[a, b] = f"{c['win_rate']:.0%}" + (f" ({c['draw_rate']:.0%} draws)" if c["draw_rate"] else "")
    lines += _grid(names, cells)
    for title, key in (("Mean round score", "mean_score"), ("Mean energy left at round end", "mean_energy")):
        lines += ["", f"{title} of the row bot against the column bot:", ""]
        lines += _grid(names, {(a, b): f"{table[a][b][key]:.1f}" for a in names for b in names})
    return "\n".join(lines)


def _grid(names: list[str], cells: dict[tuple[str, str], str]) -> list[str]:
    """A markdown table with a row and a column per bot (row bot against column bot)."""
    rows = ["| row \\ column | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    return rows + [f"| **{a}** | " + " | ".join(cells[a, b] for b in names) + " |" for a in names]


def main(argv: list[str] | None = None) -> None:
    """Print the cross table of the ladder bots (``--rounds`` per pair, ``--seed``) and the seconds it took."""
    ap = argparse.ArgumentParser(description="Cross table of the scripted tank bots (1v1, all pairs).")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = cross_table(rounds=args.rounds, seed=args.seed)
    print(markdown(table, args.rounds, args.seed))
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
