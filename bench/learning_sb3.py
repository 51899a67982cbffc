"""``bench/learning.py --sb3`` and ``--equal-samples``: Stable-Baselines3's PPO beside ours against ``tracker``.

What a user would otherwise pick, trained on the same engine for the same minutes (:func:`sb3_tracker`),
and ours stopped at the samples SB3 used (:func:`ours_at_sb3_samples`): the wall-clock comparison and the
per-sample one, since ours, being faster, also sees more samples in the same minutes.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.learning_matches import ArenaError, arena, log, win_rates
from bench.learning_verdicts import spread

__all__ = ["OUR_SHAPE_FLAGS", "SB3_SHAPES", "ours_at_sb3_samples", "sb3_tracker"]

SB3_SHAPES: dict[str, dict[str, int]] = {
    "sb3-defaults": {"n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10},
    "our-shape": {"n_envs": 128, "n_steps": 64, "batch_size": 1024, "n_epochs": 2},
    "16x128": {"n_envs": 16, "n_steps": 128, "batch_size": 256, "n_epochs": 4},
}
"""Stable-Baselines3 PPO batch shapes (everything else its defaults): its own defaults, ours (128 matches x 64
steps, minibatches of 1,024, 2 epochs), and a smaller rollout with more gradient steps per sample."""


OUR_SHAPE_FLAGS: dict[str, list[str]] = {
    "sb3-defaults": ["--matches", "1", "--agent-option", "rollout_steps=2048", "--agent-option", "minibatch_size=64",
                     "--agent-option", "epochs=10"],
    "our-shape": [],
    "16x128": ["--matches", "16", "--agent-option", "rollout_steps=2048", "--agent-option", "minibatch_size=256",
               "--agent-option", "epochs=4"],
}  # fmt: skip
"""``arena train`` flags for our PPO at each of :data:`SB3_SHAPES` (matches x 64-step rollouts, minibatch, epochs)."""


def ours_at_sb3_samples(sb3: dict[str, Any], root: Path, rounds: int) -> dict[str, Any]:
    """Our PPO against ``tracker`` at each SB3 shape and seed, stopped at the samples SB3 used (no more).

    ``arena train --opponent tracker --steps T`` with T = 99% of SB3's environment steps / matches:
    the per-sample comparison the wall-clock one cannot make (ours is faster, so in the same minutes it
    also sees more samples). Its returned and last policies play ``rounds`` rounds against ``tracker``.
    """
    found: dict[str, Any] = {}
    for shape, result in sb3.items():
        if not isinstance(result, dict) or "seeds" not in result:
            continue
        runs = []
        for sb3_run in result["seeds"]:
            seed, flags = sb3_run["seed"], OUR_SHAPE_FLAGS[shape]
            matches = int(flags[flags.index("--matches") + 1]) if "--matches" in flags else 128
            # 1% under SB3's count: the run stops at its first budget check past the mark (checked ~1 s apart)
            ticks = max(1, int(sb3_run["steps"] * 0.99) // matches)
            run = root / f"ours-at-sb3-{shape}-seed{seed}"
            args = ["train", "--opponent", "tracker", "--steps", str(ticks), "--out", str(run), "--seed", str(seed), *flags]
            log(f"ours at SB3's {shape} samples ({ticks * matches:,}), seed {seed}: arena {shlex.join(args)}")
            entry: dict[str, Any] = {"seed": seed, "shape": shape, "sb3_steps": sb3_run["steps"]}
            entry["command"] = "arena " + shlex.join(args)
            try:
                arena(*args, timeout=3600)
                summary = json.loads((run / "summary.json").read_text())
                last = sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1]
                errors: list[str] = []
                entry |= {
                    "transitions_trained": summary.get("transitions_trained"),
                    "trained_steps_per_s": (summary.get("throughput") or {}).get("trained_steps_per_s"),
                    "win_rate": win_rates(str(run), "returned policy", ["tracker"], rounds, seed + 1, errors)["tracker"],
                    "win_rate_last": win_rates(str(last), "last policy", ["tracker"], rounds, seed + 1, errors)["tracker"],
                }
                if errors:
                    entry["errors"] = errors
            except (ArenaError, OSError, ValueError, IndexError) as exc:
                entry["error"] = str(exc)[-500:]
                log(f"  FAILED: {entry['error']}")
            runs.append(entry)
        found[shape] = {"seeds": runs, "win_rate": spread([r.get("win_rate") for r in runs]),
                        "win_rate_last": spread([r.get("win_rate_last") for r in runs])}  # fmt: skip
    return found


def sb3_tracker(shapes: Sequence[str], minutes: float, seeds: Sequence[int], rounds: int) -> dict[str, Any]:
    """Stable-Baselines3's PPO trained against ``tracker`` on the same engine for the same minutes, per shape and seed:
    the anchor a user would otherwise pick, beside our ``tracker`` case (``--case tracker``)."""
    if importlib.util.find_spec("stable_baselines3") is None:
        log("no stable-baselines3 (pip install -e '.[bench]' after torch): the SB3 comparison is skipped")
        return {"skipped": "stable-baselines3 is not installed"}
    from bench.sb3_tank import train_sb3  # torch and stable-baselines3: only when asked for

    found: dict[str, Any] = {}
    for shape in shapes:
        runs = []
        for seed in seeds:
            log(f"SB3 PPO, {shape}, seed {seed}: {minutes:g} minutes against tracker")
            run = train_sb3(minutes * 60, opponent="tracker", seed=seed, eval_rounds=rounds, **SB3_SHAPES[shape])
            log(f"  {run['steps']:,} steps ({run['steps_per_s']:,}/s); {run['eval_win_rate']:.0%} of {rounds} rounds")
            runs.append(run | {"seed": seed})
        found[shape] = {"seeds": runs, "win_rate": spread([r["eval_win_rate"] for r in runs]),
                        "steps": spread([r["steps"] for r in runs])}  # fmt: skip
    return found
