"""One tank slot of many matches, each with its own controller (arena/league/seats.py)."""

from __future__ import annotations

import numpy as np

from arena.bots.play import ScriptedController
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.league.seats import MixedSeat


class Fake:
    """A controller that answers with its own constant and remembers what it was asked."""

    def __init__(self, name: str, value: float) -> None:
        self.name, self.value = name, value
        self.calls: list[np.ndarray] = []
        self.resets: list[list[bool]] = []

    def act(self, obs: np.ndarray) -> np.ndarray:
        self.calls.append(obs)
        return np.full((len(obs), ACT_DIM), self.value, np.float32)

    def reset(self, mask: np.ndarray) -> None:
        self.resets.append(mask.tolist())


class RecordingScripted(ScriptedController):
    def __init__(self, name: str, n: int) -> None:
        super().__init__(name, n)
        self.rows: list[list[int]] = []

    def act(self, obs, view=None, rows=None):
        self.rows.append(rows.tolist())
        return super().act(obs, view, rows)


def test_each_controller_acts_once_per_tick_on_its_own_rows() -> None:
    made: list[str] = []

    def make(name: str):
        made.append(name)
        return RecordingScripted(name, 5) if name == "sitting" else Fake(name, {"a": 0.5, "b": -0.5}[name])

    seat = MixedSeat(1, ["a", "b", "a", "sitting", "a"], make)
    assert sorted(made) == ["a", "b", "sitting"]
    obs = np.arange(5 * 2 * OBS_DIM, dtype=np.float32).reshape(5, 2, OBS_DIM)
    out = np.full((5, 2, ACT_DIM), 9.0, np.float32)
    seat.act(obs, out)
    a, b, sitting = (seat.controllers[n] for n in ("a", "b", "sitting"))
    assert len(a.calls) == len(b.calls) == 1
    np.testing.assert_array_equal(a.calls[0], obs[[0, 2, 4], 1])  # tank 1's observations of its matches only
    assert (out[[0, 2, 4], 1] == 0.5).all() and (out[1, 1] == -0.5).all() and (out[3, 1] == 0.0).all()
    assert (out[:, 0] == 9.0).all()  # the other tank's actions are left alone
    assert sitting.rows == [[3]]  # a scripted bot is told which of its per-match rows it plays
    mask = np.array([True, False, False, False, True])
    seat.reset(mask)
    assert a.resets == b.resets == [mask.tolist()]


def test_assign_makes_controllers_on_demand_and_drop_unused_forgets_them() -> None:
    made: list[str] = []

    def make(name: str) -> Fake:
        made.append(name)
        return Fake(name, {"a": 1.0, "b": 2.0, "c": 3.0}[name])

    seat = MixedSeat(0, ["a", "a", "b"], make)
    seat.add("snap", Fake("snap", 7.0))
    seat.assign(np.array([1, 2]), ["c", "snap"])
    assert seat.names == ["a", "c", "snap"] and made.count("c") == 1 and "snap" not in made
    assert [(c.name, rows.tolist(), scripted) for c, rows, scripted in seat.groups()] == [
        ("a", [0], False),
        ("c", [1], False),
        ("snap", [2], False),
    ]
    seat.drop_unused(keep=lambda name: name == "b")
    assert sorted(seat.controllers) == ["a", "b", "c", "snap"]  # b plays nothing but is kept
    seat.assign(np.array([2]), ["a"])
    seat.drop_unused(keep=lambda name: False)
    assert sorted(seat.controllers) == ["a", "c"]
    out = np.zeros((3, 2, ACT_DIM), np.float32)
    seat.act(np.zeros((3, 2, OBS_DIM), np.float32), out)
    assert out[:, 0, 0].tolist() == [1.0, 3.0, 1.0]
