"""The compiled tank engine (``TankBattle(..., engine="numba")``) against the numpy reference: the same game.

Both engines play the same seeded battles side by side, free-running (nothing is copied from one to the
other), and after every step every state array, every StepInfo field and the observation must be
**bit-equal** (compared as bytes). That holds because the kernels do the numpy code's float operations in
the same order and their only transcendental functions, sin, cos, hypot and sqrt, are the C library's,
which numpy's float64 ufuncs call too; numpy's arctan2 is its own SIMD routine on AVX-512 machines, so the
compiled step takes that one from numpy. ``libm_matches_numpy`` checks the premise on the machine running
the tests; where it fails (a numpy that vectorizes sin/cos itself), the battles are instead compared step by
step from synchronized states (the numpy battle's state copied into the numba one before each step, so
chaos cannot amplify a last-bit difference) with a tolerance of 1e-9 relative on float64 and 1e-5 on the
float32 outputs.

The compiled tests are few and small: the kernels compile once per machine (~10-20 s, then numba's cache
loads them in under a second, which ``test_a_second_process_loads_the_kernels_from_the_cache`` checks).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from arena.games.tank import ACT_DIM, StepInfo, TankBattle, TankRules, compiled, kernels, make_scripted, precompile
from arena.games.tank.rules import DEFAULT_RULES
from tests.conftest import ROOT

STATE = (
    "x", "y", "heading", "velocity", "energy", "gun_heading", "radar_heading", "gun_heat", "alive", "scores",
    "tick", "round", "inactive_ticks", "round_over", "truncated", "winner", "bullet_active", "bullet_x", "bullet_y",
    "bullet_heading", "bullet_power", "bullet_speed", "bullet_owner", "_bullet_dx", "_bullet_dy",
    "bullet_damage_dealt", "ram_damage_dealt",
)  # fmt: skip
INFO = (
    "energy_delta", "enemy_energy_delta", "damage_dealt", "enemy_distance", "gun_bearing_abs", "alive", "died",
    "round_over", "truncated", "scores", "winner",
)  # fmt: skip
EXACT = compiled.libm_matches_numpy()


def same(what: str, ref: np.ndarray, got: np.ndarray) -> None:
    """Bit-equal (or, off the premise, close) arrays of the same dtype and shape."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    if not EXACT and ref.dtype.kind == "f":
        rtol = 1e-9 if ref.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol, err_msg=what)
    elif got.tobytes() != ref.tobytes():
        bad = np.argwhere(got != ref)
        if not len(bad):
            raise AssertionError(f"{what}: the signs of zeros differ")
        at = tuple(bad[0])
        raise AssertionError(f"{what} differs first at {at}: numpy {ref[at]!r}, numba {got[at]!r}")


def same_state(ref: TankBattle, got: TankBattle) -> None:
    for name in STATE:
        same(name, getattr(ref, name), getattr(got, name))


def same_info(ref: StepInfo, got: StepInfo) -> None:
    for name in INFO:
        same(f"StepInfo.{name}", getattr(ref, name), getattr(got, name))
    assert got.max_distance == ref.max_distance and got.events is None


def sync(ref: TankBattle, got: TankBattle) -> None:
    """Off the premise only: give the numba battle the numpy one's state before a step."""
    if not EXACT:
        for name in STATE:
            getattr(got, name)[...] = getattr(ref, name)


Policy = Callable[[int, np.ndarray], np.ndarray]
"""Actions for one tick from the tick number and the observation (M, 2, OBS_DIM)."""


def play(
    rules: TankRules, policy: Policy, n_matches: int, ticks: int, seed: int, setup: Callable[[TankBattle], None] | None = None
) -> Iterator[tuple[TankBattle, TankBattle, StepInfo]]:
    """Step a numpy and a numba battle side by side, comparing everything after every step; yields both and the info.

    The numpy battle records events (which changes nothing in its state) so that the callers can check that the
    scenario reached what it means to test.
    """
    ref = TankBattle(n_matches, 2, rules, seed=seed)
    got = TankBattle(n_matches, 2, rules, seed=seed, engine="numba")
    assert got._compiled is not None and ref._compiled is None
    if setup is not None:
        setup(ref)
        setup(got)
    ref.record_events = True
    same_state(ref, got)
    obs = ref.observe()
    same("observation", obs, got.observe())
    for t in range(ticks):
        actions = policy(t, obs)
        sync(ref, got)
        info_ref, info_got = ref.step(actions), got.step(actions)
        same_state(ref, got)
        same_info(info_ref, info_got)
        yield ref, got, info_ref
        ref.reset(info_ref.round_over)
        got.reset(info_got.round_over)
        same_state(ref, got)
        obs = ref.observe()
        same("observation", obs, got.observe())


def random_policy(seed: int, n_matches: int, fire_bias: float = 0.0) -> Policy:
    """Uniform actions beyond [-1, 1] (clipped by the engines), with NaNs and infinities sprinkled in."""
    rng = np.random.default_rng(seed)

    def act(t: int, obs: np.ndarray) -> np.ndarray:
        a = rng.uniform(-1.5, 1.5, (n_matches, 2, ACT_DIM))
        a[..., 3] += fire_bias
        a[rng.random(a.shape) < 0.02] = np.nan
        a[rng.random(a.shape) < 0.005] = np.inf
        return a.astype(np.float32) if t % 2 else a

    return act


class Tally:
    """What happened over a game, from the numpy battle's events and infos."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(("hits", "kills", "rams", "walls", "clashes", "draws", "wins", "truncated", "zaps"), 0)

    def add(self, ref: TankBattle, info: StepInfo) -> None:
        ev = info.events
        assert ev is not None
        c = self.counts
        c["hits"] += len(ev.bullet_hits)
        c["kills"] += int(info.died.sum())
        c["rams"] += int(ev.rammed.sum())
        c["walls"] += int(ev.hit_wall.sum())
        c["clashes"] += len(ev.bullet_bullets[0])
        over = info.round_over & ~info.truncated
        c["draws"] += int((over & (info.winner < 0)).sum())
        c["wins"] += int((info.winner >= 0).sum())
        c["truncated"] += int(info.truncated.sum())
        c["zaps"] += int(((ref.inactive_ticks >= ref.rules.inactivity_ticks) & ~ref.round_over).sum())


def test_the_kernels_math_is_numpys() -> None:
    """The premise of bit-equality (see the module docstring); atan2 is the known exception, taken from numpy."""
    if not EXACT:
        pytest.skip("numpy's float64 sin/cos/hypot/sqrt are not the C library's here: compared with a tolerance")
    assert compiled.libm_matches_numpy(n=100_000, seed=1)


def test_the_inlined_hypot_is_the_librarys_on_every_path() -> None:
    """The kernels' hypot (the library's algorithm inlined, the library itself off its common path) against numpy's:
    exponents from 1e-300 to 1e300, near-equal and far-apart operands, zeros, infinities and NaN."""
    if not EXACT:
        pytest.skip("numpy's hypot is not the C library's here: compared with a tolerance")
    rng = np.random.default_rng(7)
    n = 200_000
    spread = np.exp(rng.uniform(-690.0, 690.0, (2, n))) * rng.choice([-1.0, 1.0], (2, n))
    near = rng.uniform(1.0, 2.0, n)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 1.7e308, 3.0, 4.0])
    grid_x, grid_y = (g.ravel() for g in np.meshgrid(special, special))
    x = np.concatenate([spread[0], near, grid_x, rng.uniform(-1000.0, 1000.0, n)])
    y = np.concatenate([spread[1], near * (1.0 + rng.uniform(-1e-9, 1e-9, n)), grid_y, rng.uniform(-1000.0, 1000.0, n)])
    out = np.empty((4, len(x)))
    kernels.libm_probe(np.zeros(len(x)), x, y, out)
    with np.errstate(over="ignore"):
        want = np.hypot(x, y)
    assert out[2].tobytes() == want.tobytes()


def test_random_battles_with_kills_rams_walls_and_inactivity() -> None:
    """A small field and little energy: every phase of the tick happens, often; resets follow."""
    rules = TankRules(width=300.0, height=220.0, start_energy=6.0, inactivity_ticks=25, max_ticks=120)
    tally = Tally()
    for ref, _, info in play(rules, random_policy(1, 24, fire_bias=0.3), 24, 260, seed=3):
        tally.add(ref, info)
    c = tally.counts
    assert min(c["hits"], c["kills"], c["rams"], c["walls"], c["draws"], c["wins"], c["zaps"]) > 0, c


def test_random_battles_with_bullet_clashes_and_truncation() -> None:
    """Tank Royale's bullet-bullet collisions on, default field and energy, a short tick cap."""
    rules = TankRules(bullet_collisions=True, max_ticks=90)

    def setup(b: TankBattle) -> None:  # paths that cross at right angles, the crossing further off in each match
        b.x[:] = np.stack([np.full(16, 200.0), 300.0 + 4.0 * np.arange(16)], axis=1)
        b.y[:] = [300.0, 200.0]
        b.heading[:] = b.gun_heading[:] = b.radar_heading[:] = [0.0, 90.0]
        b.gun_heat[:] = 0.0

    def policy(t: int, obs: np.ndarray) -> np.ndarray:
        a = np.zeros((16, 2, ACT_DIM))
        a[..., 3] = 0.3 + 0.35 * (np.arange(16)[:, None] % 3)  # powers differ between matches
        a[8:, :, 0] = np.sin(t / 7.0)  # half of the matches drive back and forth
        a[12:, :, 2] = 0.1 * np.cos(t / 5.0)
        return a

    tally = Tally()
    for ref, _, info in play(rules, policy, 16, 200, seed=4, setup=setup):
        tally.add(ref, info)
    assert tally.counts["clashes"] > 0 and tally.counts["truncated"] > 0 and tally.counts["hits"] > 0, tally.counts


@pytest.mark.parametrize(("names", "ticks"), [(("tracker", "walker"), 400), (("spinner", "sitting"), 250)])
def test_scripted_bots(names: tuple[str, str], ticks: int) -> None:
    """Scripted bots acting on the observation: a closed loop through observe(), step() and reset()."""
    n = 12
    bots = [make_scripted(name, n, seed=i) for i, name in enumerate(names)]
    tally = Tally()

    def policy(t: int, obs: np.ndarray) -> np.ndarray:
        return np.stack([bot.act(obs[:, i]) for i, bot in enumerate(bots)], axis=1)

    for ref, _, info in play(TankRules(max_ticks=300), policy, n, ticks, seed=5):
        tally.add(ref, info)
        for bot in bots:
            bot.reset(info.round_over)
    assert tally.counts["hits"] > 0, tally.counts


def test_without_reward_terms_and_after_hand_edits() -> None:
    """``reward_terms`` off, and state edited by hand between a step and observe() (the kernels cache per state)."""
    ref = TankBattle(6, 2, DEFAULT_RULES, seed=8)
    got = TankBattle(6, 2, DEFAULT_RULES, seed=8, engine="numba")
    policy = random_policy(2, 6)
    for t in range(60):
        ref.reward_terms = got.reward_terms = t % 3 != 0
        a = policy(t, ref.observe())
        sync(ref, got)
        same_info(ref.step(a), got.step(a))
        for b in (ref, got):
            b.x[t % 6, 0] = 100.0 + t
            b.velocity[(t + 1) % 6, 1] = 4.0
            b.heading[(t + 2) % 6, 1] = -0.0 if t % 2 else 360.0 - 1e-13
            b.alive[(t + 3) % 6, 0] = t % 4 != 0
        same("observation", ref.observe(), got.observe())


def test_events_and_tank_royale_flags_run_the_numpy_code_in_between() -> None:
    """A tick the kernels do not cover runs the numpy code on the same arrays; compiled ticks go on from there."""
    ref = TankBattle(8, 2, TankRules(bullet_collisions=True), seed=9)
    got = TankBattle(8, 2, TankRules(bullet_collisions=True), seed=9, engine="numba")
    policy = random_policy(3, 8, fire_bias=0.5)
    for t in range(120):
        for b in (ref, got):
            b.record_events = t % 5 == 1
            b.rescan = np.ones((8, 2), bool) if t % 7 == 2 else None
            b.turn_coupling = np.full((8, 2, 3), 0.5) if t % 11 == 3 else None
        a = policy(t, ref.observe())
        sync(ref, got)
        info_ref, info_got = ref.step(a), got.step(a)
        same_state(ref, got)
        for name in INFO:
            same(name, getattr(info_ref, name), getattr(info_got, name))
        assert (info_got.events is None) == (t % 5 != 1)
        ref.reset(info_ref.round_over)
        got.reset(info_got.round_over)
        same("observation", ref.observe(), got.observe())


def test_free_for_all_stays_numpy_and_the_engine_is_checked() -> None:
    b = TankBattle(2, 3, engine="numba")
    assert b._compiled is None and b.engine == "numba"
    b.step(np.zeros((2, 3, ACT_DIM)))
    with pytest.raises(ValueError, match="engine must be one of"):
        TankBattle(2, engine="torch")  # type: ignore[arg-type]


def test_without_numba_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import arena.games.tank as package

    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` fails
    for name in ("compiled", "kernels"):  # as if never imported
        monkeypatch.delitem(sys.modules, f"arena.games.tank.{name}")
        monkeypatch.delattr(package, name)
    with pytest.raises(ImportError, match=r"needs numba .*pip install numba"):
        TankBattle(1, engine="numba")
    TankBattle(1).step(np.zeros((1, 2, ACT_DIM)))  # the numpy engine does not need it


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter at the repository root; returns its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_numpy_engine_does_not_import_numba() -> None:
    code = (
        "import sys, numpy as np\n"
        "from arena.games.tank import TankBattle\n"
        "b = TankBattle(4)\n"
        "b.reset(b.step(np.zeros((4, 2, 5))).round_over)\n"
        "b.observe()\n"
        "print('numba' in sys.modules)\n"
    )
    assert run_python(code).strip() == "False"


def test_a_second_process_loads_the_kernels_from_the_cache() -> None:
    """Compiled here (or already cached), the kernels are loaded from numba's disk cache by the next process."""
    precompile.compile_all()
    code = (
        "import json, time\n"
        "t0 = time.perf_counter()\n"
        "from arena.games.tank import precompile\n"
        "seconds = precompile.compile_all()\n"
        "stats = precompile.kernel_stats()\n"
        "print(json.dumps({'seconds': seconds, 'import': time.perf_counter() - t0 - seconds,\n"
        "    'hits': {k: sum(s.cache_hits.values()) for k, s in stats.items()},\n"
        "    'misses': {k: sum(s.cache_misses.values()) for k, s in stats.items()}}))\n"
    )
    report: dict[str, Any] = json.loads(run_python(code).strip().splitlines()[-1])
    assert not any(report["misses"].values()), report
    assert all(report["hits"][kernel] >= 1 for kernel in (*compiled.KERNELS, *compiled.SCRIPTED_KERNELS)), report
    assert report["seconds"] < 10.0, report  # a compile takes 10-20 s; a cache load well under 1 s
