"""Learning benchmark on a masked board game: connect four by self-play through the server, beside sb3-contrib's MaskablePPO.

Run ``python bench/turns.py`` (``pip install -e '.[turns]'``; with ``.[bench]`` and sb3-contrib for the
baseline). Ours is the command a user types, ``arena gym pettingzoo.classic.connect_four_v3 --minutes
M``-style: ``arena gym MODULE --steps N --seed S --json`` in a subprocess (its own server and
trainer, one bot playing both seats of ``--n-envs`` games), stopped by its step budget, which the
first seed sizes to the wall-clock budget (``--minutes``, 10 by default: the issue's budget on 2
cores). The final policy then plays 200 games as each seat against two fixed players: a random
legal player and a one-move-lookahead player (takes a winning move, else blocks the opponent's,
else random), deterministically, and its moves against the lookahead player are audited
(``tactics_vs_lookahead``: how often it took a win that was there, blocked the opponent's, and kept
off a square under the opponent's winning one), which says where its losses come from. The baseline
is MaskablePPO trained for the same wall-clock budget against a random legal player (the seat
alternating by episode, its masks from ``action_masks()``), evaluated the same way.
``--baseline-only`` runs the baseline alone; ``--out DIR`` keeps the runs.

Targets (issue's proof, every seed): against random legal >= 95% won as first and as second,
against the lookahead player >= 60% as first and as second, 0 illegal moves. Progress goes to
stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # bench/arena.py must not shadow arena
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

GAME = "pettingzoo.classic.connect_four_v3"
ROWS, COLUMNS = 6, 7
TARGETS = {"random": 0.95, "lookahead": 0.60}
PROBE_MOVES = 300_000
"""Moves of the run that sizes the step budget. Why this many: a run's first seconds (start-up, the first
rollout) are slow, and a 60,000-move probe measured 5,627 moves a second where the full runs then played
8,560, so seeds stopped after 400-590 of their 600 s."""


def log(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:6.0f} s] {message}", file=sys.stderr, flush=True)


# ── the fixed players ────────────────────────────────────────────────────────


def _wins(board: NDArray[np.bool_]) -> bool:
    """Four in a row anywhere on a (6, 7) board of one player's pieces."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(ROWS):
            for c in range(COLUMNS):
                if all(
                    0 <= r + k * dr < ROWS and 0 <= c + k * dc < COLUMNS and board[r + k * dr, c + k * dc] for k in range(4)
                ):
                    return True
    return False


def _drop(mine: NDArray[np.bool_], theirs: NDArray[np.bool_], column: int) -> NDArray[np.bool_]:
    """``mine`` with a piece dropped into ``column`` (the lowest empty row: row 5 is the bottom)."""
    filled = mine | theirs
    row = max(r for r in range(ROWS) if not filled[r, column])
    after = mine.copy()
    after[row, column] = True
    return after


def lookahead_move(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
    """Take a win, else block the opponent's, else a random legal move (the issue's one-move lookahead)."""
    planes = obs.reshape(ROWS, COLUMNS, 2) > 0.5
    mine, theirs = planes[..., 0], planes[..., 1]
    columns = np.flatnonzero(legal)
    for column in columns:
        if _wins(_drop(mine, theirs, int(column))):
            return int(column)
    for column in columns:
        if _wins(_drop(theirs, mine, int(column))):
            return int(column)
    return int(rng.choice(columns))


def _winning_columns(mine: NDArray[np.bool_], theirs: NDArray[np.bool_], legal: NDArray[np.bool_]) -> set[int]:
    """The legal columns where a piece of ``mine`` would make four in a row."""
    return {int(c) for c in np.flatnonzero(legal) if _wins(_drop(mine, theirs, int(c)))}


class Tactics:
    """How often a player makes the one-move tactical choices, counted over its moves in real games.

    Why: the lookahead player punishes exactly these, so a policy's figure against it is read through
    them. Per move of the audited player: a win was there (``win``: taken or not); else the opponent
    threatened one and it could be blocked (``block``); else some move was safe, and the one played did
    not put the opponent's winning square within reach (``safe``: a piece dropped under it).
    """

    def __init__(self) -> None:
        self.counts = {name: [0, 0] for name in ("win", "block", "safe")}

    def audit(self, obs: NDArray[np.float32], legal: NDArray[np.bool_], move: int) -> None:
        planes = obs.reshape(ROWS, COLUMNS, 2) > 0.5
        mine, theirs = planes[..., 0], planes[..., 1]
        wins = _winning_columns(mine, theirs, legal)
        if wins:
            self._count("win", move in wins)
            return
        threats = _winning_columns(theirs, mine, legal)
        if threats:
            self._count("block", move in threats)
            return
        safe = set()
        for column in np.flatnonzero(legal):
            after = _drop(mine, theirs, int(column))
            still = np.asarray(~(after | theirs).all(axis=0))  # columns with room left
            if not _winning_columns(theirs, after, still):
                safe.add(int(column))
        if safe and len(safe) < int(legal.sum()):
            self._count("safe", move in safe)

    def _count(self, name: str, right: bool) -> None:
        self.counts[name][0] += int(right)
        self.counts[name][1] += 1

    def as_dict(self) -> dict[str, Any]:
        return {name: {"right": r, "of": n, "rate": round(r / n, 3) if n else None} for name, (r, n) in self.counts.items()}


def audited(mover: Any, tactics: Tactics) -> Any:
    """``mover`` (a move function), each of its moves counted by ``tactics``."""

    def move(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
        chosen = int(mover(obs, legal, rng))
        tactics.audit(obs, legal, chosen)
        return chosen

    return move


# ── ours ─────────────────────────────────────────────────────────────────────


def ours(seed: int, steps: int, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``arena gym GAME --steps N --json`` (plus the probe's flags: ``--agent-option``s, ``--opponent``, ``--opening``,
    ``--workers``, ``--mirror``) in a subprocess: its summary, or a failure."""
    command = [sys.executable, "-m", "arena.cli", "gym", GAME, "--steps", str(steps), "--seed", str(seed)]
    command += ["--n-envs", str(args.n_envs), "--eval-episodes", "0", "--json", "--out", str(out)]
    command += ["--opponent", args.opponent, *[flag for option in args.agent_option for flag in ("--agent-option", option)]]
    command += [] if args.opening is None else ["--opening", str(args.opening)]
    command += [] if args.workers is None else ["--workers", str(args.workers)]
    command += [] if args.mirror is None else ["--mirror", args.mirror]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"seed": seed, "failed": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seed": seed, "seconds": round(time.monotonic() - started, 1), **summary}


def evaluate_ours(run: Path, games: int, seed: int) -> dict[str, Any]:
    from arena.bots.policies import load_policy
    from arena.bots.turn_bot import load_turn_game

    policy = load_policy(run)

    def play(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
        _, _, dact = policy.act(obs[None], rng, deterministic=True, mask=legal[None])
        return int(dact[0, 0])

    return _as_policy_results(play, load_turn_game(GAME), games, seed)


# ── MaskablePPO ──────────────────────────────────────────────────────────────


def maskable_ppo(seed: int, seconds: float, games: int) -> dict[str, Any]:
    """sb3-contrib's MaskablePPO against a random legal player for ``seconds``, then the same evaluation."""
    import gymnasium as gym
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback

    from arena.bots.turn_bot import load_turn_game, random_move

    torch.set_num_threads(1)
    factory = load_turn_game(GAME)

    class AgainstRandom(gym.Env):  # type: ignore[misc]
        """One seat of connect four against a random legal player; the seat alternates by episode."""

        observation_space = gym.spaces.Box(0, 1, (ROWS * COLUMNS * 2,), np.float32)
        action_space = gym.spaces.Discrete(COLUMNS)

        def __init__(self) -> None:
            self.env = factory()
            self.rng = np.random.default_rng(seed)
            self.episode = 0
            self.mask = np.ones(COLUMNS, bool)

        def _until_mine(self) -> tuple[NDArray[np.float32], float, bool]:
            while True:
                obs, reward, terminated, truncated, _ = self.env.last()
                name = self.env.agent_selection
                mine = name == self.me
                if terminated or truncated:
                    final = float(self.env._cumulative_rewards.get(self.me, reward if mine else 0.0))
                    return np.zeros(self.observation_space.shape, np.float32), final, True
                flat = np.asarray(obs["observation"], np.float32).reshape(-1)
                legal = np.asarray(obs["action_mask"]).astype(bool)
                if mine:
                    self.mask = legal
                    return flat, 0.0, False
                self.env.step(random_move(flat, legal, self.rng))

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
            self.env.reset(seed=seed)
            self.me = self.env.possible_agents[self.episode % 2]
            self.episode += 1
            obs, _, _ = self._until_mine()
            return obs, {}

        def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
            self.env.step(int(action))
            obs, reward, done = self._until_mine()
            return obs, reward, done, False, {}

        def action_masks(self) -> NDArray[np.bool_]:
            return self.mask

    class Budget(BaseCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.deadline = time.monotonic() + seconds

        def _on_step(self) -> bool:
            return time.monotonic() < self.deadline

    model = MaskablePPO("MlpPolicy", AgainstRandom(), seed=seed, device="cpu", verbose=0)
    started = time.monotonic()
    model.learn(total_timesteps=10**9, callback=Budget())
    trained = time.monotonic() - started

    def play(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
        action, _ = model.predict(obs, deterministic=True, action_masks=legal)
        return int(action)

    return {
        "seed": seed,
        "train_seconds": round(trained, 1),
        "steps": int(model.num_timesteps),
        "results": _as_policy_results(play, factory, games, seed),
    }


def _as_policy_results(play: Any, factory: Any, games: int, seed: int) -> dict[str, Any]:
    """A move function's games as each seat against both fixed players, and its tactics against the lookahead one."""
    from arena.bots.turn_bot import play_against, random_move

    results: dict[str, Any] = {}
    tactics = Tactics()  # its moves against the lookahead player, both seats
    for opponent, player in (("random", random_move), ("lookahead", lookahead_move)):
        mover = audited(play, tactics) if opponent == "lookahead" else play
        results[opponent] = {
            seat_name: play_against(mover, factory, player, seat, games, seed=seed).as_dict()
            for seat, seat_name in enumerate(("first", "second"))
        }
    results["tactics_vs_lookahead"] = tactics.as_dict()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget per run (default: 10)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default: 0 1 2)")
    parser.add_argument("--games", type=int, default=200, help="evaluation games per opponent and seat (default: 200)")
    parser.add_argument("--n-envs", type=int, default=16, help="games arena gym plays side by side (default: 16)")
    parser.add_argument("--rows-per-s", type=float, default=None, help="size the step budget (default: measured)")
    parser.add_argument("--no-baseline", action="store_true", help="skip MaskablePPO")
    parser.add_argument("--baseline-only", action="store_true", help="run MaskablePPO only (the same seeds and budget)")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--opponent", default="self", help="arena gym's --opponent while training (default: self)")
    parser.add_argument("--opening", type=int, default=None, help="arena gym's --opening (default: arena gym's)")
    parser.add_argument("--workers", type=int, default=None, help="arena gym's --workers (default: arena gym's)")
    parser.add_argument("--mirror", choices=("auto", "on", "off"), default=None, help="arena gym's --mirror")
    parser.add_argument(
        "--agent-option", action="append", default=[], metavar="NAME=VALUE", help="passed to arena gym (a probe)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    budget = args.minutes * 60
    runs: list[dict[str, Any]] = []
    if args.no_baseline and args.baseline_only:
        parser.error("--no-baseline and --baseline-only leave nothing to run")
    with tempfile.TemporaryDirectory(prefix="arena-bench-turns-") as scratch:
        root = str(args.out or scratch)
        rate = args.rows_per_s
        if rate is None and not args.baseline_only:  # a short run sizes the step budget to the wall-clock one
            probe = ours(0, PROBE_MOVES, Path(root) / "probe", args)
            rate = probe.get("steps_per_s", 2_000.0)
            log(started, f"probe: {rate:,.0f} learner moves a second")
        steps = 0 if rate is None else int(rate * budget)
        for seed in [] if args.baseline_only else args.seeds:
            run = ours(seed, steps, Path(root) / f"seed{seed}", args)
            if "failed" not in run:
                run["results"] = evaluate_ours(Path(root) / f"seed{seed}", args.games, seed + 10_000)
            runs.append(run)
            log(started, f"ours, seed {seed}: {json.dumps(run.get('results', run))}")
    baseline: dict[str, Any]
    if args.no_baseline:
        baseline = {"skipped": "--no-baseline"}
    else:
        try:
            import sb3_contrib  # noqa: F401
        except ImportError:
            baseline = {"skipped": "sb3-contrib is not installed (pip install sb3-contrib after torch)"}
        else:
            theirs = [maskable_ppo(seed, budget, args.games) for seed in args.seeds]
            baseline = {"seeds": theirs}
    met = bool(runs) and all(
        "results" in run
        and all(run["results"][o][s]["win"] >= t for o, t in TARGETS.items() for s in ("first", "second"))
        and all(run["results"][o][s]["illegal_moves"] == 0 for o in TARGETS for s in ("first", "second"))
        for run in runs
    )
    wins = (
        {
            f"{o}_{s}": statistics.median(r["results"][o][s]["win"] if "results" in r else 0.0 for r in runs)
            for o in TARGETS
            for s in ("first", "second")
        }
        if runs
        else {}
    )
    print(
        json.dumps(
            {
                "bench": "turns",
                "game": GAME,
                "minutes": args.minutes,
                "agent_options": args.agent_option,
                "opponent": args.opponent,
                "opening": args.opening,
                "workers": args.workers,
                "mirror": args.mirror,
                "steps": steps,
                "ours": {"seeds": runs, "median_win": wins},
                "maskable_ppo": baseline,
                "targets": TARGETS,
                "targets_met": met,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
