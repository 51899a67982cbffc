"""Helpers shared by the tank game's tests: hand-placed duels, action arrays, the state to compare.

``tests/arena/royale/test_game.py`` imports ``act`` and ``duel`` through ``test_engine`` (which re-exports them).
"""

from __future__ import annotations

import numpy as np

from arena.games.tank import ACT_DIM, TankBattle, TankRules

__all__ = ["RULES", "act", "duel", "fire_level", "state"]

RULES = TankRules()


def duel(x0=200.0, y0=300.0, x1=600.0, y1=300.0, h0=0.0, h1=180.0, rules: TankRules = RULES) -> TankBattle:
    """One 1v1 match with tanks placed by hand, both still, guns along the body, gun heat 0."""
    b = TankBattle(1, 2, rules, seed=0)
    b.x[0] = [x0, x1]
    b.y[0] = [y0, y1]
    b.heading[0] = [h0, h1]
    b.gun_heading[0] = [h0, h1]
    b.radar_heading[0] = [h0, h1]
    b.gun_heat[0] = 0.0
    return b


def act(*tanks: list[float]) -> np.ndarray:
    """Actions for one 1v1 match: one list of up to 5 floats per tank (missing tanks/columns 0)."""
    a = np.zeros((1, max(2, len(tanks)), ACT_DIM))
    for i, t in enumerate(tanks):
        a[0, i, : len(t)] = t
    return a


def fire_level(power: float, r: TankRules = RULES) -> float:
    return (power - r.min_bullet_power) / (r.max_bullet_power - r.min_bullet_power)


def state(b: TankBattle) -> list[np.ndarray]:
    names = [
        "x",
        "y",
        "heading",
        "velocity",
        "energy",
        "gun_heading",
        "radar_heading",
        "gun_heat",
        "alive",
        "scores",
        "tick",
        "round",
        "bullet_active",
        "bullet_x",
        "bullet_y",
        "bullet_power",
    ]
    return [getattr(b, n).copy() for n in names]
