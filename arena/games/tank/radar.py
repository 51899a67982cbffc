"""The radar observation: each tank knows its enemy only from what its own radar swept over, as in Tank Royale.

Why: the arena's observation (``observation.py``) is perfect information, the enemy's exact state every
tick. A Tank Royale bot sees its enemy only in the tick its radar sweeps over it (a ``ScannedBotEvent``:
position, energy, direction, speed), so a policy trained on perfect information has to have its radar
locked on the enemy by the export, and cannot use the radar at all. In the radar observation the enemy
columns come from the tank's **last scan** of it, the radar's direction is in the policy's hands (the
action's radar column) and its sight, and the scan's age says how stale the picture is. A memoryless
policy cannot tell that the enemy fired (its energy dropped between two scans) or where it went; a
recurrent one can (docs/agents.md, "Memory: recurrent policies").

:class:`RadarMemory` follows a 1v1 :class:`~arena.games.tank.engine.TankBattle` from outside: it copies
the few arrays a scan depends on before each step and, after it, computes the same scan as the engine's
recorded events (the sector the radar swept this tick, from tanks that moved or turned something; tested
against them). So it costs nothing to a battle that does not use it, and works with either engine.

The layout, ``RADAR_OBS_FIELDS``: the 25 columns of ``OBS_FIELDS``, the enemy's (9-17 and 23-24) computed
from the last scan (zero before the first), then three more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .geometry import DEG, normalize_relative, sweep_touches
from .observation import OBS_DIM, OBS_FIELDS, Enemy, enemy_columns

if TYPE_CHECKING:  # the engine imports nothing of this module; typing only
    from .engine import TankBattle
    from .events import StepInfo

__all__ = [
    "OBSERVATIONS",
    "RADAR_OBS_DIM",
    "RADAR_OBS_FIELDS",
    "SCAN_AGE_TICKS",
    "RadarMemory",
    "Sight",
    "observation_dim",
]

RADAR_OBS_FIELDS: tuple[str, ...] = (
    *OBS_FIELDS,
    "radar_sin",  # 25 radar heading minus own heading
    "radar_cos",  # 26
    "scan_age",  # 27 ticks since the enemy was last scanned / SCAN_AGE_TICKS, at most 1 (1: never this round)
)
RADAR_OBS_DIM: int = len(RADAR_OBS_FIELDS)
SCAN_AGE_TICKS = 100.0
"""The scan age that reads 1.0: older scans (and none at all) read 1.0 too."""
_ENEMY_COLUMNS = np.array([9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 24])
"""The columns of ``OBS_FIELDS`` that describe the enemy: the radar observation takes them from the last scan."""
OBSERVATIONS = ("full", "radar")
"""The tank's observation modes: ``full`` (perfect information, ``OBS_FIELDS``) and ``radar`` (this module)."""


def observation_dim(observation: str) -> int:
    """The observation width of a mode (``OBSERVATIONS``); ValueError for another name."""
    if observation not in OBSERVATIONS:
        raise ValueError(f"unknown tank observation {observation!r} (choose from {', '.join(OBSERVATIONS)})")
    return RADAR_OBS_DIM if observation == "radar" else OBS_DIM


class RadarMemory:
    """What each tank of a 1v1 battle last saw of its enemy, kept from the scans of its own radar.

    Call :meth:`before_step` and :meth:`after_step` around every ``battle.step``, :meth:`reset` after every
    ``battle.reset`` (with the same mask), and :meth:`observe` for the tanks' radar observations.
    """

    def __init__(self, battle: TankBattle) -> None:
        if battle.n_tanks != 2:
            raise ValueError(f"the radar observation is for 1v1 battles, this one has {battle.n_tanks} tanks")
        self.battle = battle
        shape = (battle.n_matches, 2)
        self.x, self.y = np.zeros(shape), np.zeros(shape)
        """Where tank ``i`` last saw its enemy (``[m, i]``: tank i's memory of tank 1 - i)."""
        self.heading, self.velocity, self.energy = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        """The enemy's direction (degrees), speed and energy at that scan."""
        self.age = np.full(shape, np.inf)
        """Ticks since that scan (0: this tick); inf: not yet this round."""
        self.scanned = np.zeros(shape, bool)
        """Whether tank ``i`` scanned its enemy in the last step."""
        self._before: tuple[NDArray[np.float64], ...] = ()
        """Positions and headings (x, y, body, gun, radar) before the step being taken."""
        self._live = np.zeros(shape, bool)
        """Who was alive in a running match before it."""

    def reset(self, matches: NDArray[np.bool_] | None = None) -> None:
        """The selected matches start a new round (all when None): nothing seen yet."""
        rows = slice(None) if matches is None else np.asarray(matches, bool)
        for memory in (self.x, self.y, self.heading, self.velocity, self.energy):
            memory[rows] = 0.0
        self.age[rows] = np.inf
        self.scanned[rows] = False

    def before_step(self) -> None:
        """Copy what this tick's scan is measured against: positions, headings, who is alive and playing."""
        s = self.battle.state
        live = s.alive & ~s.round_over[:, None]
        self._before = (s.x.copy(), s.y.copy(), s.heading.copy(), s.gun_heading.copy(), s.radar_heading.copy())
        self._live = np.asarray(live, bool)

    def after_step(self) -> None:
        """The scan of the step just taken, as the engine's events record it, and the memories it refreshes.

        The radar covers the arc it turned this tick, ending at its new heading, out to ``radar_range``; a
        tank scans only when it moved or turned something, and only living tanks of a running match scan
        or are scanned (``TankBattle._scan``).
        """
        if not self._before:
            raise RuntimeError("RadarMemory.after_step without before_step")
        s, r = self.battle.state, self.battle.rules
        x0, y0, heading0, gun0, radar0 = self._before
        live = self._live
        self._before = ()
        sweep = normalize_relative(s.radar_heading - radar0)
        moving = (s.x != x0) | (s.y != y0) | (s.heading != heading0) | (s.gun_heading != gun0) | (sweep != 0.0)
        seen = sweep_touches(s.x, s.y, s.radar_heading, sweep, r.tank_radius, r.radar_range)
        scanned = np.stack([seen[:, 0, 1], seen[:, 1, 0]], axis=1) & live & moving & live[:, ::-1]
        self.scanned[...] = scanned
        running = np.asarray(live.any(axis=1))[:, None]
        self.age[...] = np.where(scanned, 0.0, self.age + running)
        enemy = (slice(None), slice(None, None, -1))
        for memory, now in ((self.x, s.x), (self.y, s.y), (self.heading, s.heading), (self.velocity, s.velocity),
                            (self.energy, s.energy)):  # fmt: skip
            memory[...] = np.where(scanned, now[enemy], memory)

    def observe(self, full: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """(M, 2, RADAR_OBS_DIM) float32: each tank's radar observation (``RADAR_OBS_FIELDS``).

        ``full``: the battle's ``observe()`` of this state, when the caller has it (its own columns are
        reused); the enemy's columns are the full observation's maths (``enemy_columns``) on the enemy as
        the tank last scanned it.
        """
        battle = self.battle
        s, r = battle.state, battle.rules
        if full is None:
            full = battle.observe()
        h, g = s.heading * DEG, s.gun_heading * DEG
        sh, ch = np.sin(h), np.cos(h)
        eh = self.heading * DEG
        dx, dy = self.x - s.x, self.y - s.y
        enemy = Enemy(
            has=np.isfinite(self.age) & s.alive[:, ::-1],
            dx=dx,
            dy=dy,
            dist=np.sqrt(dx * dx + dy * dy),
            energy=self.energy,
            sin_heading=np.sin(eh),
            cos_heading=np.cos(eh),
            velocity=self.velocity,
        )
        buf = np.empty((OBS_DIM, battle.n_matches, 2))
        enemy_columns(buf, s.x, s.y, (sh, ch, np.sin(g), np.cos(g)), enemy, r)
        out = np.empty((battle.n_matches, 2, RADAR_OBS_DIM), np.float32)
        out[..., :OBS_DIM] = full
        out[..., _ENEMY_COLUMNS] = buf[_ENEMY_COLUMNS].transpose(1, 2, 0)
        radar = s.radar_heading * DEG
        sr, cr = np.sin(radar), np.cos(radar)
        out[..., OBS_DIM] = sr * ch - cr * sh  # sin(radar - heading)
        out[..., OBS_DIM + 1] = cr * ch + sr * sh
        out[..., OBS_DIM + 2] = np.minimum(self.age / SCAN_AGE_TICKS, 1.0)
        return out


class Sight:
    """A battle and what its players see, stepped and reset together: the full observation always, the radar
    one (a :class:`RadarMemory` kept in step) when ``radar`` is asked for. The loops that play a battle call
    this instead of the battle, so a radar player costs them no extra lines and a full-observation game nothing.
    """

    def __init__(self, battle: TankBattle, radar: bool) -> None:
        self.battle = battle
        self.memory = RadarMemory(battle) if radar else None

    def observe(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(the full observation, the radar one): the same array twice without the radar."""
        full = self.battle.observe()
        return full, (self.memory.observe(full) if self.memory is not None else full)

    def step(self, actions: NDArray[np.floating[Any]]) -> StepInfo:
        """``battle.step(actions)``, with the scans it made remembered."""
        if self.memory is None:
            return self.battle.step(actions)
        self.memory.before_step()
        info = self.battle.step(actions)
        self.memory.after_step()
        return info

    def reset(self, matches: NDArray[np.bool_]) -> None:
        """``battle.reset(matches)``; their radar memories start empty."""
        self.battle.reset(matches)
        if self.memory is not None:
            self.memory.reset(matches)
