"""Speed benchmark of the tank engine (arena.games.tank): tank-ticks per second on one core.

Run ``python bench/arena.py`` (about 70 s; ``--seconds`` sets the time per
measurement, ``--no-numba`` skips the compiled engine). Progress goes to stderr; the
last stdout line is one JSON object.

What is measured (numpy only, no torch; BLAS/OpenMP threads limited to 1 and the
process pinned to one CPU where the OS allows it):

* ``engine``: the training-loop cycle ``step(actions)`` + ``reset(info.round_over)``
  + ``observe()`` with uniform random actions (pre-drawn, so the RNG is not timed),
  for 1v1 with 1, 64, 128, 256 and 1024 matches and an 8-tank free-for-all with 32 matches.
  ``step_only`` is the same without reset/observe. One tank-tick = one tank advanced by
  one tick, so a rate is steps/s x matches x tanks.
* ``numba``: the same 1v1 cycle with ``TankBattle(..., engine="numba")`` (the compiled
  kernels of ``arena/games/tank/compiled.py``), in
  the same run, and its speedup over the numpy engine; plus the kernels' first-run compile
  time and their load time from numba's disk cache, each in a fresh process with a fresh
  cache folder (``NUMBA_CACHE_DIR``), import of numba excluded.
* ``scripted``: the same cycle with the scripted bots computing the actions
  (tracker vs spinner, 256 matches): the cost of the bots on top of the engine.
* ``opponents``: the learning bot's game without its policy, as a league seats it: 128 matches,
  tank 1 of each played by one of the four scripted bots (a quarter of the matches each, on
  their rows, as ``arena.league.MixedSeat`` calls them), tank 0 by ``tracker``; numpy engine
  and bots beside the compiled ones (``engine="numba"`` for both), in microseconds per
  step (one step = one match advanced one tick, the unit of the trainer's steps/s).
* ``bot_side``: the learning bot's whole loop as ``arena train`` runs it (``bench/bot_loop.py``):
  the policy's actions for all matches, the league's opponents (or ``sitting``), the compiled engine,
  resets, the recorder and the msgpack frames, 128 matches, in microseconds per step. Target: at
  most 3 us per step against the league (``bot_side_meets_target``).
* ``baseline``: the same game written the naive way, a pure-Python loop over matches
  and tanks per tick (math module, no numpy): velocity, turns, moves, walls, firing,
  bullet flight and hits, and the 23-column observation of each tank; no rams, scores
  or inactivity, so it does a little *less* work than the engine. Random actions,
  8 matches 1v1, step + reset + observe like ``engine``. Also ``numpy_op_us``: the raw
  cost of one numpy elementwise op on a (256, 2) float64 array, the unit a vectorized
  step is made of.

Target: >= 100,000 tank-ticks/s for 1v1 at 256 matches (``meets_target``); for the
compiled engine >= 4,000,000 at 128 or 256 matches (``numba_meets_target``).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

# Run as ``python bench/arena.py``, this file's folder comes first on sys.path and its
# name would shadow the ``arena`` package: put the repository root there instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
from typing import Literal  # noqa: E402

import numpy as np  # noqa: E402

from arena.games.tank import ACT_DIM, TankBattle, TankRules, make_scripted  # noqa: E402

TARGET = 100_000
NUMBA_TARGET = 4_000_000
BOT_SIDE_TARGET_US = 3.0
"""The learning bot's whole loop against the league at 128 matches: microseconds per step, at most."""
ROOT = os.path.dirname(_here)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pin_one_cpu() -> int | None:
    """Pin this process to one CPU (Linux); returns it, or None where not supported."""
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def bench_engine(
    n_matches: int, n_tanks: int, seconds: float, full_loop: bool = True, engine: Literal["numpy", "numba"] = "numpy"
) -> dict[str, float]:
    """Random actions; full_loop = step + reset(finished) + observe, else step alone."""
    battle = TankBattle(n_matches, n_tanks, seed=0, engine=engine)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (32, n_matches, n_tanks, ACT_DIM)).astype(np.float32)
    steps = 0
    rounds = 0
    # Warm-up, then timed window.
    for i in range(20):
        info = battle.step(actions[i % 32])
        battle.reset(info.round_over)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(10):
            info = battle.step(actions[steps % 32])
            if full_loop:
                rounds += int(info.round_over.sum())
                battle.reset(info.round_over)
                battle.observe()
            else:
                battle.reset(info.round_over)  # keep matches running (not timed separately)
            steps += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    dt = now - t0
    return {
        "steps_per_s": steps / dt,
        "tank_ticks_per_s": steps * n_matches * n_tanks / dt,
        "us_per_step": dt / steps * 1e6,
        "rounds_finished": rounds,
    }


def numba_compile_times() -> dict[str, float]:
    """The kernels' compile time (first run) and cache-load time, each in a fresh process, one fresh cache folder."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "from arena.games.tank import precompile\n"
        "t1 = time.perf_counter(); seconds = precompile.compile_all()\n"
        "print(t1 - t0, seconds)\n"
    )
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for key in ("compile_s", "cache_load_s"):
            done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
            import_s, seconds = map(float, done.stdout.split())
            out[key] = seconds
            out["import_s"] = import_s
    return out


def bench_scripted(
    names: tuple[str, str], n_matches: int, seconds: float, engine: Literal["numpy", "numba"] = "numpy"
) -> dict[str, float]:
    battle = TankBattle(n_matches, 2, seed=0, engine=engine)
    bots = [make_scripted(n, n_matches, seed=i, engine=engine) for i, n in enumerate(names)]
    act = np.empty((n_matches, 2, ACT_DIM), np.float32)
    obs = battle.observe()
    steps = 0
    t_bots = 0.0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        tb = time.perf_counter()
        for i, bot in enumerate(bots):
            act[:, i] = bot.act(obs[:, i])
        t_bots += time.perf_counter() - tb
        info = battle.step(act)
        if info.round_over.any():
            battle.reset(info.round_over)
            for bot in bots:
                bot.reset(info.round_over)
        obs = battle.observe()
        steps += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    dt = now - t0
    return {
        "steps_per_s": steps / dt,
        "tank_ticks_per_s": steps * n_matches * 2 / dt,
        "bots_share": t_bots / dt,
    }


def bench_opponents(n_matches: int, seconds: float, engine: Literal["numpy", "numba"]) -> dict[str, float]:
    """Engine + the league's four scripted bots on their rows (tank 1) + tracker (tank 0): us per match-tick."""
    names = ("sitting", "spinner", "walker", "tracker")
    battle = TankBattle(n_matches, 2, seed=0, engine=engine)
    player = make_scripted("tracker", n_matches, seed=99, engine=engine)
    seats = [(make_scripted(n, n_matches, seed=i, engine=engine), np.arange(i, n_matches, 4)) for i, n in enumerate(names)]
    act = np.empty((n_matches, 2, ACT_DIM), np.float32)
    obs = battle.observe()
    steps = 0
    t_bots = 0.0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        tb = time.perf_counter()
        act[:, 0] = player.act(obs[:, 0])
        seat_obs = obs[:, 1]
        for bot, rows in seats:
            act[rows, 1] = bot.act(seat_obs[rows], rows=rows)
        t_bots += time.perf_counter() - tb
        info = battle.step(act)
        after = battle.observe()
        if info.round_over.any():
            battle.reset(info.round_over)
            player.reset(info.round_over)
            for bot, _ in seats:
                bot.reset(info.round_over)
            after = battle.observe()
        obs = after
        steps += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    dt = now - t0
    return {"us_per_step": dt / (steps * n_matches) * 1e6, "bots_us_per_step": t_bots / (steps * n_matches) * 1e6}


# --- naive baseline: the same rules as a per-match, per-tank Python loop ---------------------------


class NaiveDuel:
    """A 1v1 match in plain Python (floats, lists, math): the per-match-loop way of writing the engine."""

    def __init__(self, rng: random.Random, r: TankRules) -> None:
        self.r = r
        self.rng = rng
        self.reset()

    def reset(self) -> None:
        r = self.r
        self.x = [self.rng.uniform(18, 382), self.rng.uniform(418, 782)]
        self.y = [self.rng.uniform(18, 582), self.rng.uniform(18, 582)]
        self.h = [self.rng.uniform(0, 360) for _ in range(2)]
        self.g = list(self.h)
        self.v = [0.0, 0.0]
        self.e = [r.start_energy, r.start_energy]
        self.heat = [r.start_gun_heat, r.start_gun_heat]
        self.bullets: list[list[float]] = []  # x, y, dx, dy, speed, power, owner
        self.tick = 0

    def step(self, act: list[list[float]]) -> bool:
        r = self.r
        for i in range(2):
            a = [max(-1.0, min(1.0, c)) for c in act[i]]
            p = r.min_bullet_power + a[3] * (r.max_bullet_power - r.min_bullet_power)
            if self.heat[i] <= 0 and a[3] > 0 and self.e[i] > p:
                gr = math.radians(self.g[i])
                self.bullets.append([self.x[i], self.y[i], math.cos(gr), math.sin(gr), 20 - 3 * p, p, i])
                self.heat[i] = 1 + p / 5
                self.e[i] -= p
            else:
                self.heat[i] = max(0.0, self.heat[i] - 0.1)
            v = self.v[i]
            delta = a[0] * 8 - v
            lim = 1.0 if (v == 0 or (v > 0) == (delta >= 0)) else 2.0
            v = max(-8.0, min(8.0, v + max(-lim, min(lim, delta))))
            body = a[1] * (10 - 0.75 * abs(v))
            self.h[i] = (self.h[i] + body) % 360
            self.g[i] = (self.g[i] + body + a[2] * 20) % 360
            hr = math.radians(self.h[i])
            x = self.x[i] + v * math.cos(hr)
            y = self.y[i] + v * math.sin(hr)
            cx, cy = max(18.0, min(782.0, x)), max(18.0, min(582.0, y))
            if cx != x or cy != y:
                self.e[i] -= max(abs(v) / 2 - 1, 0)
                v = 0.0
            self.x[i], self.y[i], self.v[i] = cx, cy, v
        keep = []
        for b in self.bullets:
            j = 1 - int(b[6])
            qx, qy = self.x[j] - b[0], self.y[j] - b[1]
            s = max(0.0, min(b[4], qx * b[2] + qy * b[3]))
            if (qx - s * b[2]) ** 2 + (qy - s * b[3]) ** 2 <= 18 * 18:
                p = b[5]
                self.e[j] -= 4 * p + 2 * max(p - 1, 0)
                self.e[int(b[6])] += 3 * p
                continue
            b[0] += b[2] * b[4]
            b[1] += b[3] * b[4]
            if 0 < b[0] < 800 and 0 < b[1] < 600:
                keep.append(b)
        self.bullets = keep
        self.tick += 1
        return min(self.e) <= 0 or self.tick >= 2000

    def observe(self) -> list[list[float]]:
        """The 23 observation columns per tank (same definitions as TankBattle.observe)."""
        out = []
        for i in range(2):
            j = 1 - i
            h, g = math.radians(self.h[i]), math.radians(self.g[i])
            dx, dy = self.x[j] - self.x[i], self.y[j] - self.y[i]
            ang = math.atan2(dy, dx)
            row = [self.x[i] / 400 - 1, self.y[i] / 300 - 1, math.sin(h), math.cos(h), self.v[i] / 8, self.e[i] / 100]
            row += [math.sin(g - h), math.cos(g - h), self.heat[i] / 3, math.sin(ang - h), math.cos(ang - h)]
            eh = math.radians(self.h[j]) - h
            row += [math.hypot(dx, dy) / 1000, self.e[j] / 100, math.sin(eh), math.cos(eh), self.v[j] / 8]
            row += [math.sin(ang - g), math.cos(ang - g)]
            for d in (h, h + math.pi / 2, h + math.pi, h - math.pi / 2):
                c, s_ = math.cos(d), math.sin(d)
                tx = ((782 - self.x[i]) if c >= 0 else (self.x[i] - 18)) / max(abs(c), 1e-9)
                ty = ((582 - self.y[i]) if s_ >= 0 else (self.y[i] - 18)) / max(abs(s_), 1e-9)
                row.append(min(min(tx, ty) / 1000, 1.0))
            row.append(1 / 7)
            out.append(row)
        return out


def bench_naive(n_matches: int, seconds: float) -> dict[str, float]:
    rng = random.Random(0)
    r = TankRules()
    duels = [NaiveDuel(rng, r) for _ in range(n_matches)]
    acts = [[[rng.uniform(-1, 1) for _ in range(ACT_DIM)] for _ in range(2)] for _ in range(64)]
    steps = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for d in duels:
            if d.step(acts[steps % 64]):
                d.reset()
            d.observe()
        steps += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    dt = now - t0
    return {"tank_ticks_per_s": steps * n_matches * 2 / dt, "us_per_match_step": dt / (steps * n_matches) * 1e6}


def bench_numba(seconds: float, numpy_engine: dict[str, dict[str, float]]) -> dict[str, object]:
    """The compiled engine's 1v1 cycle beside the numpy one's (same run), and its compile and cache-load times."""
    if importlib.util.find_spec("numba") is None:
        log("numba engine: numba is not installed (pip install numba): skipped")
        return {"skipped": "numba is not installed"}
    times = numba_compile_times()
    log(
        f"numba engine: compile {times['compile_s']:.1f} s on first run, {times['cache_load_s']:.2f} s from the cache "
        f"(import of numba and the package {times['import_s']:.2f} s)"
    )
    rates: dict[str, float] = {}
    for name, m in (("1v1_m1", 1), ("1v1_m64", 64), ("1v1_m128", 128), ("1v1_m256", 256), ("1v1_m1024", 1024)):
        res = bench_engine(m, 2, seconds, engine="numba")
        rates[name] = res["tank_ticks_per_s"]
        speedup = res["tank_ticks_per_s"] / numpy_engine[name]["tank_ticks_per_s"]
        log(
            f"numba  {name:10s}: {res['tank_ticks_per_s']:>10,.0f} tank-ticks/s "
            f"({res['us_per_step']:.1f} us per step+reset+observe, {speedup:.1f}x numpy)"
        )
    best = max(rates["1v1_m128"], rates["1v1_m256"])
    return {
        "engine_tank_ticks_per_s": {k: round(v) for k, v in rates.items()},
        "speedup_vs_numpy": {k: round(v / numpy_engine[k]["tank_ticks_per_s"], 1) for k, v in rates.items()},
        "compile_s": round(times["compile_s"], 2),
        "cache_load_s": round(times["cache_load_s"], 3),
        "import_s": round(times["import_s"], 3),
        "target_tank_ticks_per_s": NUMBA_TARGET,
        "meets_target": bool(best >= NUMBA_TARGET),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.5, help="timed window per measurement (default 2.5)")
    ap.add_argument("--no-numba", action="store_true", help="skip the compiled engine (engine='numba')")
    args = ap.parse_args()
    sec = args.seconds
    cpu = pin_one_cpu()
    log(f"tank engine benchmark: numpy {np.__version__}, python {platform.python_version()}, pinned cpu {cpu}")
    results: dict[str, object] = {}

    engine: dict[str, dict[str, float]] = {}
    for name, m, t in (
        ("1v1_m1", 1, 2),
        ("1v1_m64", 64, 2),
        ("1v1_m128", 128, 2),
        ("1v1_m256", 256, 2),
        ("1v1_m1024", 1024, 2),
        ("ffa8_m32", 32, 8),
    ):
        res = bench_engine(m, t, sec)
        engine[name] = res
        log(
            f"engine {name:10s}: {res['tank_ticks_per_s']:>10,.0f} tank-ticks/s "
            f"({res['steps_per_s']:,.0f} steps/s, {res['us_per_step']:.0f} us per step+reset+observe)"
        )
    numba = bench_numba(sec, engine) if not args.no_numba else {"skipped": "--no-numba"}
    step_only: dict[str, float] = {}
    for name, m, t in (("1v1_m256", 256, 2), ("ffa8_m32", 32, 8)):
        res = bench_engine(m, t, sec, full_loop=False)
        step_only[name] = res["tank_ticks_per_s"]
        log(f"step only {name:8s}: {res['tank_ticks_per_s']:>10,.0f} tank-ticks/s ({res['us_per_step']:.0f} us per step)")
    scripted = bench_scripted(("tracker", "spinner"), 256, sec)
    log(
        f"scripted tracker vs spinner, 256 matches: {scripted['tank_ticks_per_s']:>10,.0f} tank-ticks/s "
        f"(bots take {scripted['bots_share']:.0%} of the time)"
    )
    opponents = {"numpy": bench_opponents(128, sec, "numpy")}
    if not args.no_numba and importlib.util.find_spec("numba") is not None:
        opponents["numba"] = bench_opponents(128, sec, "numba")
    for name, res in opponents.items():
        log(
            f"opponents ({name} engine and bots), 128 matches: {res['us_per_step']:.2f} us per step, "
            f"of which the bots {res['bots_us_per_step']:.2f}"
        )
    bot_side: dict[str, object] = {"skipped": "--no-numba"}
    if not args.no_numba and importlib.util.find_spec("numba") is not None:
        from bench.bot_loop import bot_side as learning_bot_loop

        runs = {opponent: learning_bot_loop(4 * sec, 128, opponent) for opponent in ("sitting", "league")}
        for opponent, res in runs.items():
            log(
                f"learning bot's loop vs {opponent}, 128 matches: {res['us_per_step']:.2f} us per step, "
                f"of which the policy {res['policy_us_per_step']:.2f}"
            )
        bot_side = {
            "us_per_step": {k: v["us_per_step"] for k, v in runs.items()},
            "policy_us_per_step": {k: v["policy_us_per_step"] for k, v in runs.items()},
            "target_us_per_step_league": BOT_SIDE_TARGET_US,
            "meets_target": runs["league"]["us_per_step"] <= BOT_SIDE_TARGET_US,
        }
    naive = bench_naive(8, sec)
    log(
        f"baseline naive Python loop (8 matches, step + observe): {naive['tank_ticks_per_s']:>10,.0f} tank-ticks/s "
        f"({naive['us_per_match_step']:.1f} us per match-tick)"
    )
    a = np.random.default_rng(0).random((256, 2))
    b = np.random.default_rng(1).random((256, 2))
    op_us = min(timeit.repeat(lambda: a * b, number=2000, repeat=5)) / 2000 * 1e6
    log(f"raw numpy elementwise op on (256, 2) float64: {op_us:.2f} us")

    best = engine["1v1_m256"]["tank_ticks_per_s"]
    results = {
        "bench": "arena.games.tank engine",
        "unit": "tank-ticks/s (one tank advanced one tick); engine = step + reset(finished) + observe, random actions",
        "engine_tank_ticks_per_s": {k: round(v["tank_ticks_per_s"]) for k, v in engine.items()},
        "engine_us_per_step": {k: round(v["us_per_step"], 1) for k, v in engine.items()},
        "step_only_tank_ticks_per_s": {k: round(v) for k, v in step_only.items()},
        "scripted_tracker_vs_spinner_m256_tank_ticks_per_s": round(scripted["tank_ticks_per_s"]),
        "scripted_bots_time_share": round(scripted["bots_share"], 3),
        "opponents_m128_us_per_step": {k: round(v["us_per_step"], 2) for k, v in opponents.items()},
        "opponents_m128_bots_us_per_step": {k: round(v["bots_us_per_step"], 2) for k, v in opponents.items()},
        "bot_side_m128": bot_side,
        "baseline": "naive pure-Python per-match/per-tank loop: same physics + observation, no rams/scores/zap; 8 matches 1v1",
        "baseline_tank_ticks_per_s": round(naive["tank_ticks_per_s"]),
        "speedup_vs_baseline_1v1_m256": round(best / naive["tank_ticks_per_s"], 1),
        "numpy_op_us_256x2": round(op_us, 3),
        "target_tank_ticks_per_s": TARGET,
        "meets_target": bool(best >= TARGET),
        "numba": numba,
        "threads": 1,
        "pinned_cpu": cpu,
        "seconds_per_measurement": sec,
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
