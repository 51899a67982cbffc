"""``drawn``: a scripted bot built from parts, each tank drawing new parts at every round start.

Why: a learner that trains against four fixed scripts learns four answers, and loses to ordinary bots
whose movement or targeting it never met (docs/arena.md, "The league"). Here every round is a new
opponent from the families Robocode's community documents: a movement family, a targeting family and
a fire-power rule, each with parameters drawn uniformly from :class:`DrawnRanges` (the documented
ranges), so training covers a family rather than a point.

The bot's per-row logic is one function, :func:`arena.games.tank.drawn_kernel.drawn_act`, run compiled
(``engine="numba"``) or as plain Python (``engine="numpy"``). Every random draw comes from the bot's own
generator here: the parts at :meth:`Drawn.reset`, and each tick's uniforms before the kernel runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from .actions import ACT_DIM
from .drawn_kernel import DRAWS, MOVEMENTS, PARAMS, POWER_RULES, STATE, TARGETINGS, drawn_act
from .engines import EngineName
from .observation import OBS_DIM
from .rules import DEFAULT_RULES, TankRules
from .scripted import ScriptedBot, View
from .scripted_kernels import rule_params

__all__ = [
    "DEFAULT_RANGES",
    "MOVEMENTS",
    "PARTS",
    "POWER_RULES",
    "REPLAY_CAPACITY",
    "TARGETINGS",
    "Drawn",
    "DrawnRanges",
    "population_name",
    "population_ranges",
]

Range = tuple[float, float]


@dataclass(frozen=True)
class DrawnRanges:
    """What a ``drawn`` tank may be: the families it picks from (uniformly) and the range of each parameter
    (uniform in [low, high]; tick counts rounded down). A family ignores the parameters it does not use.

    Movement (``MOVEMENTS``): ``still``; ``circling`` (constant speed and turn); ``orbiting`` (perpendicular to
    the enemy at a distance, reversing by chance and at walls); ``oscillating`` (the same, reversing every
    period); ``random`` (a new heading and speed by chance each tick, away from walls); ``stop_and_go`` (stands,
    moves sideways for a while when the enemy's energy drops by a bullet's cost, or when it stood too long);
    ``walls`` (follows the perimeter, as ``walker``); ``corners`` (drives to a corner and waits, maybe moving on
    to the next); ``ramming`` (drives at the enemy). Targeting (``TARGETINGS``): ``none`` (never fires);
    ``head_on``; ``linear`` and ``circular`` (lead the enemy by its velocity, and its last turn rate, for the
    bullet's flight, times a lead factor); ``random_offset`` (head-on plus an offset drawn anew after each shot).
    Fire-power rule (``POWER_RULES``): ``fixed``; ``distance`` (k / distance within [min, max]); ``energy``
    (a share of its own energy within [min, max]). Every targeting fires only with a cold gun aimed within
    atan(tolerance * tank radius / distance) of its aim point, as the other scripted bots do with 0.8.
    """

    movements: tuple[str, ...] = MOVEMENTS
    targetings: tuple[str, ...] = TARGETINGS
    power_rules: tuple[str, ...] = POWER_RULES
    speed: Range = (2.0, 8.0)
    """Units/tick every moving family drives at (``random``: its most; a new speed is drawn in [2, this])."""
    turn: Range = (0.3, 1.0)
    """``circling``: the body-turn action (a share of the turn limit; its side is ``direction``'s)."""
    distance: Range = (120.0, 450.0)
    """``orbiting``, ``oscillating``, ``stop_and_go``: the distance to the enemy it closes in or backs off to."""
    period: Range = (10.0, 60.0)
    """``oscillating``: ticks between two reversals."""
    flip: Range = (0.0, 0.05)
    """``orbiting``: chance per tick to reverse."""
    change: Range = (0.02, 0.2)
    """``random``: chance per tick to pick a new heading and speed."""
    stop: Range = (20.0, 100.0)
    """``stop_and_go``: the most ticks it stands still when the enemy does not fire."""
    go: Range = (8.0, 30.0)
    """``stop_and_go``: ticks it moves each time."""
    margin: Range = (25.0, 120.0)
    """``walls``, ``corners``: distance kept from the walls (tank centre)."""
    switch: Range = (150.0, 600.0)
    """``corners``: ticks before it moves on to the next corner (unless it stays)."""
    stay: float = 0.5
    """``corners``: chance it keeps its corner all round."""
    lead: Range = (0.6, 1.2)
    """``linear``, ``circular``: the lead factor, the error of the prediction (1 exact, below 1 lags)."""
    spread: Range = (2.0, 15.0)
    """``random_offset``: the offsets' bound in degrees (each offset uniform in [-spread, spread])."""
    power: Range = (0.5, 3.0)
    """``fixed``: the bullet power."""
    power_k: Range = (150.0, 900.0)
    """``distance``: k of power = k / distance."""
    power_min: Range = (0.1, 1.5)
    """``distance``, ``energy``: the least power."""
    power_max: Range = (1.5, 3.0)
    """``distance``, ``energy``: the most power."""
    power_per_energy: Range = (0.01, 0.04)
    """``energy``: power per unit of own energy (0.03: power 3 at 100)."""
    tolerance: Range = (0.5, 1.2)
    """How far off the aim it fires, in tank radii at the enemy's distance (the other bots: 0.8)."""

    def __post_init__(self) -> None:
        for name, known in (("movements", MOVEMENTS), ("targetings", TARGETINGS), ("power_rules", POWER_RULES)):
            chosen = getattr(self, name)
            if not isinstance(chosen, tuple) or not chosen or len(set(chosen)) != len(chosen) or set(chosen) - set(known):
                raise ValueError(f"DrawnRanges.{name} must be distinct names from {known}, got {chosen!r}")
        bounds = {"turn": (0.0, 1.0), "flip": (0.0, 1.0), "change": (0.0, 1.0), "stop": (1.0, math.inf)}
        bounds |= dict.fromkeys(("period", "go", "switch"), (1.0, math.inf))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("movements", "targetings", "power_rules"):
                continue
            if f.name == "stay":
                if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                    raise ValueError(f"DrawnRanges.stay must be a number in [0, 1], got {value!r}")
                continue
            low, high = bounds.get(f.name, (0.0, math.inf))
            if (
                not isinstance(value, tuple)
                or len(value) != 2
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value)
                or not low <= value[0] <= value[1] <= high
            ):
                raise ValueError(
                    f"DrawnRanges.{f.name} must be (low, high) with {low} <= low <= high <= {high}, got {value!r}"
                )
        for name in ("speed", "distance", "lead", "power", "power_k", "power_min", "tolerance"):
            if getattr(self, name)[0] <= 0:
                raise ValueError(f"DrawnRanges.{name} must be above 0, got {getattr(self, name)!r}")
        if self.power_min[1] > self.power_max[0]:
            raise ValueError(f"DrawnRanges.power_min {self.power_min} must lie below power_max {self.power_max}")


DEFAULT_RANGES = DrawnRanges()

PARTS: dict[str, tuple[str, ...]] = {"movements": MOVEMENTS, "targetings": TARGETINGS, "power_rules": POWER_RULES}
"""The parts a population may be narrowed to by name (``drawn:movements=...``), with every family of each."""


def population_name(**families: tuple[str, ...] | str) -> str:
    """The bot name of a population drawing from the given families only (``+``-joined strings or tuples; an
    empty one: every family). ``drawn`` itself when nothing is narrowed, else e.g.
    ``drawn:movements=orbiting+random,targetings=linear``: a plain string, so it travels wherever a scripted
    bot's name does (league members, evaluations, ``arena match --bot``). ValueError names what is unknown."""
    given = {key: tuple(n for n in c.split("+") if n) if isinstance(c, str) else tuple(c) for key, c in families.items()}
    for key in given:
        if key not in PARTS:
            raise ValueError(f"unknown part {key!r} of a drawn population (choose from {', '.join(PARTS)})")
    DrawnRanges(**{key: names for key, names in given.items() if names})  # type: ignore[arg-type]  # known, distinct
    narrowed = [
        (key, [n for n in PARTS[key] if n in given[key]])
        for key in PARTS
        if set(given.get(key) or PARTS[key]) != set(PARTS[key])
    ]
    return "drawn" + (":" + ",".join(f"{key}={'+'.join(names)}" for key, names in narrowed) if narrowed else "")


def population_ranges(name: str) -> DrawnRanges:
    """What :func:`population_name` wrote, read back: the ranges of ``drawn`` (all) or ``drawn:KEY=A+B,...``.

    Raises:
        ValueError: not such a name, an unknown part or family, or a part given twice (one line).
    """
    head, colon, spec = name.partition(":")
    if head != "drawn" or (colon and not spec):
        raise ValueError(f"not a drawn population: {name!r} (drawn, or drawn:movements=A+B,targetings=C,power_rules=D)")
    families: dict[str, tuple[str, ...]] = {}
    for item in spec.split(",") if spec else ():
        key, eq, value = item.partition("=")
        if key not in PARTS:
            raise ValueError(f"{name!r}: unknown part {key!r} of a drawn population (choose from {', '.join(PARTS)})")
        if not eq or not value or key in families:
            raise ValueError(f"{name!r}: give each part once, as {key}=A+B")
        families[key] = tuple(value.split("+"))
    try:
        return DrawnRanges(**families)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"{name!r}: {exc}") from None


_DRAWN = ("speed", "turn", "distance", "period", "flip", "change", "stop", "go", "margin", "switch", "lead", "spread",
          "power", "power_k", "power_min", "power_max", "power_per_energy", "tolerance")  # fmt: skip
"""The ranges drawn as one block of uniforms per round, in this order (each is also a ``PARAMS`` column)."""
_TICKS = ("period", "stop", "go", "switch")
_EXTRA = ("direction", "corner", "stay", "heading", "offset")
"""Uniforms drawn after that block: orbit side, corner, whether a corner bot stays, random walk heading, first offset."""
REPLAY_CAPACITY = 256
"""The most unbeaten draws a ``drawn`` bot keeps for replay (:meth:`Drawn.replay_unbeaten`)."""
_COLUMN = {name: k for k, name in enumerate(PARAMS)}
_SLOT = {name: k for k, name in enumerate(STATE)}


class Drawn(ScriptedBot):
    """A scripted bot whose every tank plays parts drawn from ``ranges`` at each round start (module docstring)."""

    name = "drawn"

    def __init__(
        self,
        n: int,
        seed: int = 0,
        rules: TankRules = DEFAULT_RULES,
        engine: EngineName = "numpy",
        ranges: DrawnRanges = DEFAULT_RANGES,
    ) -> None:
        super().__init__(n, seed, rules, engine)
        self.ranges = ranges
        self._rules_vector = rule_params(rules)
        self._act = drawn_act if engine == "numba" else drawn_act.py_func
        self._all_rows = np.arange(self.n, dtype=np.intp)
        self.params = np.zeros((n, len(PARAMS)))
        """Each tank's drawn parts, ``drawn_kernel.PARAMS`` columns (family ids, then parameters)."""
        self.state = np.zeros((n, len(STATE)))
        """Each tank's state between ticks, ``drawn_kernel.STATE`` columns."""
        self._ids = {
            "move": np.array([MOVEMENTS.index(m) for m in ranges.movements], np.float64),
            "target": np.array([TARGETINGS.index(t) for t in ranges.targetings], np.float64),
            "power_rule": np.array([POWER_RULES.index(r) for r in ranges.power_rules], np.float64),
        }
        self.replay_share = 0.0
        """Share of the rows a reset redraws that replay an unbeaten draw instead (:meth:`replay_unbeaten`)."""
        self._unbeaten: dict[int, NDArray[np.float64]] = {}
        """Draws the learner has not beaten yet, by entry number (oldest first): their ``params`` rows."""
        self._capacity = 0
        self._entries = 0
        self._replaying = np.full(n, -1, np.int64)
        """The entry each tank replays this round; -1: a fresh draw."""
        self.reset(np.ones(n, bool))

    def replay_unbeaten(self, share: float, capacity: int = REPLAY_CAPACITY) -> None:
        """From now on, ``share`` of the rounds replay a draw the learner did not win against (:meth:`record`).

        Why: fresh draws spend most rounds on parts the learner already beats, while the few it loses to
        (an accurate gun on an evasive mover, a still tank it never reaches) come back only by chance.
        Replaying them until they are beaten is prioritized level replay (Jiang et al., 2021) over
        opponents: the population's hard draws return, and no second learner is needed. The rest of the
        rounds stay fresh draws, so the easy signal a first approach needs is never crowded out. At most
        ``capacity`` draws are kept, the oldest dropped first. Off (0) by default: the bot's draws are then
        exactly those of a bot that never heard of replay.
        """
        if not (isinstance(share, (int, float)) and 0.0 <= share < 1.0):
            raise ValueError(f"drawn replay share must be a number in [0, 1), got {share!r}")
        if not (isinstance(capacity, int) and capacity >= 1):
            raise ValueError(f"drawn replay capacity must be an integer >= 1, got {capacity!r}")
        self.replay_share, self._capacity = float(share), capacity

    @property
    def unbeaten(self) -> int:
        """How many draws wait for replay."""
        return len(self._unbeaten)

    def record(self, rows: NDArray[np.intp], learner_won: NDArray[np.bool_]) -> None:
        """The rounds of tanks ``rows`` ended (before their :meth:`reset`); ``learner_won``: whether their enemy won each.

        With replay on, a fresh draw the learner did not beat (a loss or a draw) is kept for replay, and a
        replayed one it beat is dropped: it has been learned. Without replay this records nothing.
        """
        if self.replay_share <= 0.0:
            return
        for row, won in zip(np.asarray(rows, np.intp).tolist(), np.asarray(learner_won, bool).tolist(), strict=True):
            entry = int(self._replaying[row])
            if won and entry >= 0:
                self._unbeaten.pop(entry, None)
            elif not won and entry < 0:
                self._unbeaten[self._entries] = self.params[row].copy()
                self._entries += 1
                if len(self._unbeaten) > self._capacity:
                    del self._unbeaten[next(iter(self._unbeaten))]

    def reset(self, mask: NDArray[np.bool_]) -> None:
        """New parts for the tanks in ``mask``, and their state cleared."""
        rows = np.flatnonzero(np.asarray(mask, bool))
        m = len(rows)
        if not m:
            return
        prm = np.zeros((m, len(PARAMS)))
        column, slot = _COLUMN, _SLOT
        for name, ids in self._ids.items():
            prm[:, column[name]] = ids[self.rng.integers(len(ids), size=m)]
        u = self.rng.random((m, len(_DRAWN) + len(_EXTRA)))
        for k, name in enumerate(_DRAWN):
            low, high = getattr(self.ranges, name)
            value = low + u[:, k] * (high - low)
            prm[:, column[name]] = np.floor(value) if name in _TICKS else value
        extra = dict(zip(_EXTRA, u[:, len(_DRAWN) :].T, strict=True))
        prm[:, column["direction"]] = np.where(extra["direction"] < 0.5, 1.0, -1.0)
        prm[:, column["corner"]] = np.minimum(np.floor(extra["corner"] * 4.0), 3.0)
        stays = extra["stay"] < self.ranges.stay
        prm[:, column["switch"]] = np.where(stays, 0.0, prm[:, column["switch"]])
        self._replaying[rows] = -1
        if self.replay_share > 0.0 and self._unbeaten:  # no draw of the generator's otherwise: the stream stays the same
            chosen = np.flatnonzero(self.rng.random(m) < self.replay_share)
            entries = np.fromiter(self._unbeaten, np.int64, len(self._unbeaten))
            picked = entries[self.rng.integers(len(entries), size=len(chosen))]
            for k, entry in zip(chosen.tolist(), picked.tolist(), strict=True):
                prm[k] = self._unbeaten[entry]
            self._replaying[rows[chosen]] = picked
        move = prm[:, column["move"]]
        self.params[rows] = prm

        st = np.zeros((m, len(STATE)))
        st[:, slot["direction"]] = prm[:, column["direction"]]
        oscillating, corners = move == MOVEMENTS.index("oscillating"), move == MOVEMENTS.index("corners")
        st[:, slot["timer"]] = np.where(
            oscillating, prm[:, column["period"]], np.where(corners, prm[:, column["switch"]], 0.0)
        )
        st[:, slot["corner"]] = prm[:, column["corner"]]
        st[:, slot["want_heading"]] = extra["heading"] * 360.0
        st[:, slot["want_speed"]] = prm[:, column["speed"]]
        st[:, slot["offset"]] = (2.0 * extra["offset"] - 1.0) * prm[:, column["spread"]]
        self.state[rows] = st

    def describe(self, row: int) -> dict[str, str | float]:
        """Tank ``row``'s parts by name: its families, then every parameter (for logs and tests)."""
        values = dict(zip(PARAMS, self.params[row].tolist(), strict=True))
        named = {
            "move": MOVEMENTS[int(values["move"])],
            "target": TARGETINGS[int(values["target"])],
            "power_rule": POWER_RULES[int(values["power_rule"])],
        }
        return {**values, **named}

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        o = np.ascontiguousarray(obs, np.float32).astype(np.float64)  # as View reads it; numba's float() keeps float32
        if o.ndim != 2 or o.shape[1] != OBS_DIM or len(o) > self.n:
            raise ValueError(f"obs must have shape (N <= {self.n}, {OBS_DIM}), got {o.shape}")
        k = len(o)
        index = self._all_rows[:k] if rows is None else np.ascontiguousarray(rows, np.intp)
        if len(index) != k or (k and index.view(np.uintp).max() >= self.n):
            raise ValueError(f"rows must name {k} of the bot's {self.n} tanks, got {index.tolist()}")
        draws = self.rng.random((k, DRAWS))
        out = np.empty((k, ACT_DIM), np.float32)
        self._act(self._rules_vector, o, index, self.params, self.state, draws, out)
        return out
