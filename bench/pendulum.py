"""Learning benchmark on gymnasium Pendulum-v1: our TD3 and PPO through the real server vs Stable-Baselines3's.

Run ``python bench/pendulum.py`` (about 9 minutes per seed on 2 cores, 6.5 of them TD3;
``--quick`` is a 2.5-minute smoke run). Progress goes to stderr; the last stdout line is
one JSON object.

Ours: a :class:`server.TrainingServer` in a :class:`server.ServerThread` in this process,
and one :class:`arena.bots.gym_bot.GymBot` in a child process (bots are separate programs; a
bot thread in this process would fight the trainer for the GIL) playing Pendulum-v1 over
the websocket. SB3: the same algorithm with RL Zoo's Pendulum-v1 hyperparameters
(``hyperparams/td3.yml``, ``hyperparams/ppo.yml``), trained in the usual single loop.

* **TD3**, 20,000 environment steps, RL Zoo settings on both sides where they map: gamma
  0.98, learning rate 1e-3, hidden (400, 300), Gaussian exploration noise 0.1 (in the
  normalized action box both use), 10,000 uniform-random warm-up steps, one gradient update
  per environment step (SB3: ``train_freq=(1, "episode")``, ``gradient_steps=-1``; ours:
  ``utd_ratio=1``), batch 256, buffer 200k; TD3's defaults (tau 0.005, policy delay 2,
  target noise 0.2 clipped at 0.5) on both.
* **PPO**, 100,000 steps, 4 environments. SB3 as RL Zoo: n_steps 1024 (4096 per
  rollout), 10 epochs, minibatch 64, gamma 0.9, GAE lambda 0.95, lr 1e-3, clip 0.2, no
  entropy bonus, gSDE (``use_sde``, ``sde_sample_freq=4``). Ours, closest mapping:
  ``rollout_steps=4096``, ``epochs=10``, ``minibatch_size=64``, the same gamma, lambda, lr,
  clip and ``entropy_coef=0``, hidden (64, 64) tanh as SB3's default; we have no gSDE, so
  our policy is a plain state-independent Gaussian (``log_std_init`` below).

Coupling: the server's queue is capped at 1024 steps (``--queue-steps``), so the bot
waits for the trainer about as SB3's loop does instead of running thousands of steps
ahead on old weights (with the server's default, PPO's whole first 16k steps were acted
by the initial policy). Torch threads: 1 for our trainer (the other core runs the bot and
the event loop) and 1 for SB3: on this 2-core machine two threads made a 256x400 @ 400x300
matmul 10x *slower* whenever another process was busy.

Figures per run: mean return of 10 deterministic evaluation episodes (our
:func:`arena.bots.gym_bot.evaluate` for both sides, same environment seeds), and environment
steps per second of wall clock over the whole training run including every update (ours:
from the bot's first step until the trainer has finished the updates those steps earn;
SB3: ``learn()``).

Targets: TD3 mean evaluation return >= -200 after 20,000 steps, and our TD3 env steps/s >=
SB3's. PPO is reported side by side, with no target.
"""

from __future__ import annotations

import os
import sys

# Run as ``python bench/pendulum.py``, this file's folder comes first on sys.path and
# bench/arena.py would shadow the ``arena`` package: put the repository root there instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import queue as queue_module  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ENV_ID = "Pendulum-v1"
EVAL_EPISODES = 10
EVAL_SEED = 10_000
"""Evaluation environments are seeded EVAL_SEED + run seed, the same for ours and SB3's."""
TARGET_RETURN = -200.0

ZOO = {
    "td3": {
        "n_envs": 1,
        "steps": 20_000,
        "sb3": {
            "gamma": 0.98,
            "buffer_size": 200_000,
            "learning_starts": 10_000,
            "learning_rate": 1e-3,
            "train_freq": (1, "episode"),
            "gradient_steps": -1,
            "policy_kwargs": {"net_arch": [400, 300]},
        },
        "noise_std": 0.1,
    },
    "ppo": {
        "n_envs": 4,
        "steps": 100_000,
        "sb3": {
            "n_steps": 1024,
            "gae_lambda": 0.95,
            "gamma": 0.9,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 1e-3,
            "clip_range": 0.2,
            "use_sde": True,
            "sde_sample_freq": 4,
        },
    },
}
"""RL Zoo's Pendulum-v1 entries (n_timesteps as ``steps``)."""


def ours_config(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """Our agent's overrides: the Zoo's settings where our config has them."""
    if algo == "td3":
        return {
            "hidden": (400, 300),
            "learning_rate": 1e-3,
            "gamma": 0.98,
            "exploration_noise": 0.1,
            "warmup_steps": args.warmup,
            "utd_ratio": 1.0,
            "batch_size": 256,
            "buffer_size": 200_000,
        }
    return {
        "hidden": (64, 64),
        "activation": "tanh",
        "rollout_steps": 4096,
        "epochs": 10,
        "minibatch_size": 64,
        "gamma": 0.9,
        "gae_lambda": 0.95,
        "learning_rate": 1e-3,
        "clip_epsilon": 0.2,
        "entropy_coef": 0.0,
        "log_std_init": args.ppo_log_std_init,
        "max_policy_lag": args.ppo_max_lag,
    }


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ── ours: server in this process, the bot in a child ─────────────────────────


def _bot_process(url: str, n_envs: int, steps: int, seed: int, batch_steps: int, out: Any) -> None:
    """Child process: play ``steps`` Pendulum steps as one bot; report the start time and the result."""
    from arena.bots.gym_bot import GymBot, make_env

    try:
        with GymBot(url, make_env(ENV_ID, n_envs=n_envs), seed=seed, name="pendulum", batch_steps=batch_steps) as bot:
            out.put(("started", time.time()))
            result = bot.run(steps)
        out.put(
            (
                "done",
                {
                    "steps": result.steps,
                    "seconds": result.seconds,
                    "episodes": len(result.episode_returns),
                    "train_returns_last10": result.episode_returns[-10:],
                    "weights_swapped": result.stats.weights_swapped,
                },
            )
        )
    except BaseException as exc:
        out.put(("error", repr(exc)))
        raise


def trainer_idle(server: Any, steps: int) -> bool:
    """Every step sent is in the agent, no update runs or is owed, and the newest weights are published.

    Read from another thread without the trainer's locks, so the caller asks twice, 0.1 s apart.
    """
    trainer, agent = server.trainer, server.trainer.agent
    updates = trainer.updates
    acc = server.accounting()
    return (
        acc["received"] >= steps
        and acc["queued"] == 0
        and acc["open"] == 0
        and acc["pending_in_agent"] == agent.pending_steps  # PPO takes its rollout out first, reports it after
        and not agent.ready()  # TD3 stays ready until its update has spent the budget
        and trainer.snapshot.version == trainer.updates == updates
    )


def run_ours(algo: str, steps: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from agents import make_agent
    from arena.bots.gym_bot import evaluate
    from bot_protocol.policy import Policy
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    torch.manual_seed(seed)
    agent = make_agent(algo, 3, 1, seed=seed, **ours_config(algo, args))
    options: dict[str, Any] = {"port": 0}
    if args.queue_steps:
        # 33 bytes per step: obs 12, act 4, logp, reward, agent and episode 4 each, flags 1 (TransitionBatch.nbytes).
        options["queue_max_bytes"] = max(4096, args.queue_steps * 33)
    server = TrainingServer(agent, ServerConfig(**options), TrainerConfig(torch_threads=args.torch_threads))
    n_envs = int(ZOO[algo]["n_envs"])
    with ServerThread(server) as thread:
        context = mp.get_context("spawn")
        out = context.Queue()
        child = context.Process(
            target=_bot_process, args=(thread.url, n_envs, steps, seed, args.batch_steps, out), daemon=True
        )
        child.start()
        started: float | None = None
        bot: dict[str, Any] | None = None
        idle_since: tuple[float, int] | None = None
        last_log = time.monotonic()
        while True:
            try:
                kind, value = out.get(timeout=0.05)
            except queue_module.Empty:
                kind, value = "", None
            if kind == "error":
                raise RuntimeError(f"bot process failed: {value}")
            if kind == "started":
                started = value
            elif kind == "done":
                bot = value
            if bot is not None:
                if trainer_idle(server, bot["steps"]):
                    if idle_since is None:
                        idle_since = (time.time(), server.trainer.updates)
                    elif idle_since[1] == server.trainer.updates and time.time() - idle_since[0] >= 0.1:
                        finished = idle_since[0]
                        break
                else:
                    idle_since = None
            elif not child.is_alive() and out.empty():
                raise RuntimeError(f"bot process exited with {child.exitcode}")
            if time.monotonic() - last_log >= 10:
                last_log = time.monotonic()
                metrics = server.trainer.last_metrics
                log(
                    f"  ours {algo} seed {seed}: {server.accounting()['received']:,} steps in, "
                    f"{server.trainer.updates} updates, ep_rew_mean {metrics.get('rollout/ep_rew_mean', float('nan')):.0f}"
                )
        child.join(10)
        assert started is not None
        policy = Policy.from_weights(server.trainer.snapshot.message)
        gradient_updates = int(getattr(agent, "updates", 0))
        accounting = server.accounting()
        trainer_updates = server.trainer.updates
    wall = finished - started
    returns = evaluate(policy, ENV_ID, EVAL_EPISODES, seed=EVAL_SEED + seed)
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "env_steps": bot["steps"],
        "wall_s": wall,
        "env_steps_per_s": bot["steps"] / wall,
        "bot_play_s": bot["seconds"],
        "weights_swapped": bot["weights_swapped"],
        "gradient_updates" if algo == "td3" else "ppo_updates": gradient_updates,
        "published_versions": trainer_updates,
        "accounting": accounting,
        "train_return_last10_mean": float(np.mean(bot["train_returns_last10"])) if bot["train_returns_last10"] else None,
    }


# ── Stable-Baselines3 ────────────────────────────────────────────────────────


def run_sb3(algo: str, steps: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise

    from arena.bots.gym_bot import evaluate

    torch.set_num_threads(args.sb3_torch_threads)
    zoo = ZOO[algo]
    kwargs = dict(zoo["sb3"])
    if algo == "td3":
        if args.warmup != 10_000:
            kwargs["learning_starts"] = args.warmup
        noise = NormalActionNoise(np.zeros(1), zoo["noise_std"] * np.ones(1))
        model: Any = TD3("MlpPolicy", gym.make(ENV_ID), action_noise=noise, seed=seed, device="cpu", verbose=0, **kwargs)
    else:
        env = make_vec_env(ENV_ID, n_envs=int(zoo["n_envs"]), seed=seed)
        model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    started = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - started

    def act(obs: np.ndarray) -> np.ndarray:
        action, _ = model.predict(obs, deterministic=True)
        return model.policy.scale_action(action)  # env units → [-1, 1], which evaluate maps back

    returns = evaluate(act, ENV_ID, EVAL_EPISODES, seed=EVAL_SEED + seed)
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "env_steps": int(model.num_timesteps),
        "wall_s": wall,
        "env_steps_per_s": model.num_timesteps / wall,
        "gradient_updates" if algo == "td3" else "ppo_updates": int(model._n_updates)
        if algo == "td3"
        else int(model._n_updates) // kwargs["n_epochs"],
    }


def have_sb3() -> bool:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return False
    return True


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("eval_return_mean", "env_steps_per_s", "wall_s")
    out: dict[str, Any] = {k: round(statistics.fmean(r[k] for r in runs), 2) for k in keys}
    out["eval_return_by_seed"] = [round(r["eval_return_mean"], 1) for r in runs]
    out["runs"] = runs
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algo", choices=("td3", "ppo", "all"), default="all")
    ap.add_argument("--steps", type=int, default=None, help="environment steps per run (default: RL Zoo's, 20k TD3, 100k PPO)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (default 1)")
    ap.add_argument("--skip-sb3", action="store_true", help="ours only")
    ap.add_argument("--skip-ours", action="store_true", help="SB3 only")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4k TD3 steps (1k warm-up), 16k PPO steps; no targets")
    ap.add_argument("--warmup", type=int, default=None, help="TD3 random warm-up steps, both sides (default 10000)")
    ap.add_argument("--torch-threads", type=int, default=None, help="our trainer's torch threads (default: cores - 1)")
    ap.add_argument("--sb3-torch-threads", type=int, default=1, help="SB3's torch threads (default 1, its fastest here)")
    ap.add_argument("--batch-steps", type=int, default=64, help="rows per tr message from the bot (default 64)")
    ap.add_argument(
        "--queue-steps", type=int, default=1024, help="server queue capacity in steps (default 1024; 0: the server's default)"
    )
    ap.add_argument(
        "--ppo-log-std-init", type=float, default=0.0, help="our PPO's initial log-std (default 0.0, SB3's default)"
    )
    ap.add_argument("--ppo-max-lag", type=int, default=32, help="our PPO's max_policy_lag (default 32)")
    args = ap.parse_args()
    if args.warmup is None:
        args.warmup = 1_000 if args.quick else 10_000
    algos = ["td3", "ppo"] if args.algo == "all" else [args.algo]
    sb3 = not args.skip_sb3 and have_sb3()
    if not args.skip_sb3 and not sb3:
        log("stable-baselines3 is not installed: ours only")
    import gymnasium
    import torch

    log(
        f"Pendulum-v1 benchmark: torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
        f"python {platform.python_version()}, {os.cpu_count()} cpus"
    )
    results: dict[str, Any] = {}
    started = time.monotonic()
    load_start = os.getloadavg()
    for algo in algos:
        default_steps = (4_000 if algo == "td3" else 16_384) if args.quick else int(ZOO[algo]["steps"])
        steps = args.steps or default_steps
        side: dict[str, list[dict[str, Any]]] = {"ours": [], "sb3": []}
        for seed in range(args.seeds):
            if not args.skip_ours:
                log(f"{algo} seed {seed}: ours, {steps:,} steps")
                side["ours"].append(run_ours(algo, steps, seed, args))
                r = side["ours"][-1]
                log(f"  ours: eval {r['eval_return_mean']:.1f}, {r['env_steps_per_s']:.0f} env steps/s ({r['wall_s']:.1f} s)")
            if sb3:
                log(f"{algo} seed {seed}: SB3, {steps:,} steps")
                side["sb3"].append(run_sb3(algo, steps, seed, args))
                r = side["sb3"][-1]
                log(f"  sb3:  eval {r['eval_return_mean']:.1f}, {r['env_steps_per_s']:.0f} env steps/s ({r['wall_s']:.1f} s)")
        results[algo] = {"steps": steps, **{k: summarize(v) for k, v in side.items() if v}}

    log("")
    log(f"{'algo':5s} {'side':5s} {'eval return':>12s} {'env steps/s':>12s} {'wall s':>8s}")
    for algo, res in results.items():
        for name in ("ours", "sb3"):
            if name in res:
                r = res[name]
                log(f"{algo:5s} {name:5s} {r['eval_return_mean']:12.1f} {r['env_steps_per_s']:12.0f} {r['wall_s']:8.1f}")

    verdict: dict[str, Any] = {}
    if "td3" in results and "ours" in results["td3"]:
        td3 = results["td3"]
        verdict["td3_return_ok"] = bool(td3["ours"]["eval_return_mean"] >= TARGET_RETURN)
        if "sb3" in td3:
            verdict["td3_speed_ok"] = bool(td3["ours"]["env_steps_per_s"] >= td3["sb3"]["env_steps_per_s"])
            verdict["td3_speedup_vs_sb3"] = round(td3["ours"]["env_steps_per_s"] / td3["sb3"]["env_steps_per_s"], 2)
    if "ppo" in results and {"ours", "sb3"} <= results["ppo"].keys():
        ppo = results["ppo"]
        verdict["ppo_speedup_vs_sb3"] = round(ppo["ours"]["env_steps_per_s"] / ppo["sb3"]["env_steps_per_s"], 2)
        verdict["ppo_return_gap_vs_sb3"] = round(ppo["ours"]["eval_return_mean"] - ppo["sb3"]["eval_return_mean"], 1)
    checks = [v for k, v in verdict.items() if k.endswith("_ok")]
    verdict["meets_targets"] = bool(checks) and all(checks) and not args.quick
    print(
        json.dumps(
            {
                "bench": "pendulum",
                "env": ENV_ID,
                "unit": "eval return: mean of 10 deterministic episodes; env steps/s: wall clock over training incl. updates",
                "results": results,
                "settings": {
                    "seeds": args.seeds,
                    "quick": args.quick,
                    "sb3": sb3,
                    "td3_warmup": args.warmup,
                    "ours": {
                        a: {k: list(v) if isinstance(v, tuple) else v for k, v in ours_config(a, args).items()} for a in algos
                    },
                    "sb3_hyperparameters": {a: {k: str(v) for k, v in ZOO[a]["sb3"].items()} for a in algos},
                    "torch_threads_ours": args.torch_threads or max(1, (os.cpu_count() or 2) - 1),
                    "torch_threads_sb3": args.sb3_torch_threads,
                    "batch_steps": args.batch_steps,
                    "queue_steps": args.queue_steps,
                    "cpus": os.cpu_count(),
                    "total_s": round(time.monotonic() - started, 1),
                    "loadavg_1m_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
                },
                "targets": {"td3_eval_return_min": TARGET_RETURN, "td3_env_steps_per_s": ">= sb3"},
                "verdict": verdict,
            }
        )
    )


if __name__ == "__main__":
    main()
