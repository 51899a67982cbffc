"""``arena train``'s defaults on the tank arena, in one place, each with the measurement behind it.

PPOConfig's own defaults are the original (Nim) trainer's (a 2,048-step rollout, minibatches of 64)
and stay available through ``--agent-option``; these are what the tank arena runs with unless told
otherwise.
The sweep and the ablation behind them are in docs/arena.md ("Choosing the defaults") and
docs/agents.md ("Learning per sample").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENGINE",
    "LEAGUE_PPO",
    "MINIBATCHES",
    "ROYALE_MATCHES",
    "ROYALE_TURNS_PER_S",
    "STEPS_PER_AGENT",
    "TANK_MATCHES",
    "TANK_PPO",
    "TANK_SEGMENT_STEPS",
    "Layout",
    "choose_layout",
    "tank_ppo_options",
]

TANK_MATCHES = 128
"""Parallel matches per learning bot. The bot's cost per tick is mostly per-call overhead (engine,
scripted opponent, policy, one websocket frame), so more matches per call cost little more per
step: 16 matches ran ~7,000 steps/s end to end, 128 run 101,500-108,300 with the shape below.
256 matches (32 steps each) trained slower (51,000-53,000 steps/s) and no better per sample."""

ROYALE_MATCHES = 2
"""The league's parallel matches against each Tank Royale bot (``arena train --royale-matches``), one bot
process each, all in one battle of the share's worker (docs/royale.md)."""

ROYALE_TURNS_PER_S = 50.0
"""The pace of the league's Tank Royale share (``arena train --royale-turns-per-s``). An official-API
Python bot costs ~0.7 ms of CPU a turn and answers in lockstep as fast as it can: unpaced, one
SpinBot in two matches took the learner from 54,900-56,900 to 33,200 steps/s on 2 cores; at 50
turns/s, to 44,300-49,100 (docs/royale.md). Tank Royale itself plays 30 turns/s."""

ENGINE = "numba"
"""The tank engine of every command's battles and scripted bots unless ``--engine`` says otherwise: the
compiled one. It plays the numpy reference's game bit for bit (tests/arena/games/test_compiled_engine.py,
tests/arena/games/tank/test_scripted_kernels.py) and runs the learning bot's game (128 matches against the
scripted bots: step, observe, reset) in 1.79 us a step against 12.98 us (docs/arena.md, "Speed"). numba
compiles it once per machine (10-20 s), then loads it from its disk cache (``arena compile``)."""

DISTRIBUTED_TIMEOUT = 60.0
"""Seconds a learner rank of ``arena serve --distributed`` waits in a collective for the others before it
stops with one line (a rank that dies is noticed at once; this bounds one that hangs). The ranks meet
once per trainer step, so a rank whose bots are slow never makes the others wait this long."""

STEPS_PER_AGENT = 64
"""Rollout steps per parallel agent (CleanRL's ``num_steps``): rollout = agents x 64, so 8,192 steps
at 128 matches. What sets learning per sample here is gradient steps per sample: 32,768-step
rollouts in minibatches of 4,096 (one step per 1,024 samples) needed 1.1-1.7 M steps to 100%
against ``sitting``; 8,192-step rollouts with the same number of steps per sample learned no faster
(1.2-1.3 M), with twice as many, 0.5-1.3 M (docs/arena.md, "Choosing the defaults")."""

TANK_SEGMENT_STEPS = 128
"""The server's segment cut (``ServerConfig.segment_steps``, 256 by default; ``arena train --segment-steps``)
for the tank's PPO. GAE across a cut bootstraps from V(next_obs), a critic that cannot see bullets in
flight; a bullet flies 14-36 ticks, so a shot fired near the end of a short segment gets its hit's credit
only through that estimate. Cut at 32 (chosen for the time to 100% against ``sitting``: 0.45-0.65 M steps
against 0.61-0.82 M at 64), the main job's 2-minute probe ended at a median of 94 / 71 / 42 / 3% against
sitting / spinner / walker / tracker and a worst seed of 4% against ``sitting``; cut at 128 with
``gae_lambda`` 0.98 (:data:`TANK_PPO`), 96 / 89 / 48 / 6% and a worst seed of 96% against ``sitting``
(3 seeds each, docs/agents.md, "What the main job learns")."""

MINIBATCHES = 8
"""Minibatches per epoch (CleanRL's ``num_minibatches``): 1,024 rows at 128 matches. With 2 epochs
that is 16 gradient steps per rollout, the count that learned fastest per sample, at 7 us of learner
CPU per step (4 epochs of 2,048 rows: the same 16 steps at 11 us, 65,000-75,000 steps/s end to end)."""

TANK_PPO: dict[str, Any] = {"epochs": 2, "proximal_anchor": True, "gae_lambda": 0.98, "clip_per_network": True}
"""PPOConfig overrides besides the batch shape (``--agent-option`` overrides them in turn).

- ``clip_per_network=True`` (the seed clips the joint norm): the joint gradient norm of the main job's
  minibatches is 13-51 while the value loss runs at 30-110 (a hit is worth +22), so the joint clip at 0.5
  scaled the actor's step by the critic's error of the moment, least on the minibatches with hits. Clipped
  each on its own, the actor moves 3x further per update (KL 0.006 against 0.001-0.002). Over 5 seeds of
  the main job the worst seed went from 99 / 63 / 46.5 / 1.5% to 93.5 / 72 / 71.5 / 45.5% against sitting /
  spinner / walker / tracker (the run that stopped firing is gone), the median from 100 / 97.5 / 87.5 / 75%
  to 99 / 96.5 / 79.5 / 64.5% (docs/agents.md, "What the main job learns").

- ``gae_lambda=0.98`` (the seed's 0.95): gamma x lambda is the weight per tick of a later reward in an
  advantage; at 0.94 a hit 14-36 ticks after its shot paid the shot 11-42% of its value, at 0.97 34-66%.
  With segments of 128 (:data:`TANK_SEGMENT_STEPS`) it lifted the main job's 2-minute probe (3 seeds) from a
  median of 71% to 89% against ``spinner`` and its worst seed against ``sitting`` from 4% to 96%.

- ``epochs=2``: with minibatches of 1,024, 2 epochs are as many gradient steps as 4 epochs of 2,048
  at 63% of the learner's CPU; 96,000-105,000 trained steps/s, 100% against ``sitting`` after
  0.61-0.82 M steps (5.5-7.5 s) over 3 seeds. 3 epochs learned a little more per sample
  (0.33-0.56 M) and trained 73,000-85,000 steps/s: below the 80,000 target in one seed of 3.
- ``proximal_anchor=True``: bots act while the trainer trains, so rollouts arrive 1-2 versions
  old; clipping against the current policy (decoupled PPO) instead of the bots' took 0.35-0.57 M
  steps to 100% against ``sitting`` where the plain clip took 0.51-0.86 M (3 seeds each).
- Kept from PPOConfig (the original trainer's): entropy bonus 0.01, log-std start -0.5 and ceiling
  0, advantage normalization per rollout, learning rate 3e-4: each of them changed one at a time
  (docs/agents.md, "Learning per sample") moved steps to 100% by less than the spread between two
  seeds.
"""


LEAGUE_PPO: dict[str, Any] = {"entropy_coef": 0.001}
"""PPOConfig overrides on top of :data:`TANK_PPO` when training against the league (the default).

``entropy_coef=0.001``: against the league's mix the advantages are noisy, and the seed's bonus
(0.01) drove the exploration std to its ceiling in every run (0.61 at the start, 0.98 after 5
minutes); sampling with std ~1, the learner's long shots miss the idle ``sitting`` (0-86% against
it after 5 minutes, one seed collapsing to sitting 0%, spinner 1%, tracker 0%). With 0.001 the std
shrank to 0.41 and the same seed ended at sitting 72%, spinner 94.5%, walker 30.5%, tracker 4%
(docs/arena.md, "The league"). Against one fixed opponent the ablation saw no difference between
0 and 0.01 (docs/agents.md), so those runs keep the seed's bonus."""


def tank_ppo_options(n_agents: int, league: bool = False) -> dict[str, Any]:
    """PPOConfig overrides for ``n_agents`` parallel agents (matches x learning bots); ``league``: against the league."""
    if n_agents < 1:
        raise ValueError(f"n_agents must be >= 1, got {n_agents}")
    rollout = n_agents * STEPS_PER_AGENT
    return {
        **TANK_PPO,
        **(LEAGUE_PPO if league else {}),
        "rollout_steps": rollout,
        "minibatch_size": max(64, rollout // MINIBATCHES),
    }


@dataclass(frozen=True)
class Layout:
    """Where the learning bots run: ``workers`` processes, or ``bots`` threads of the server's process."""

    workers: int
    bots: int
    cores: int
    reason: str

    def __post_init__(self) -> None:
        if self.workers < 0 or self.bots < 0 or (self.workers == 0) == (self.bots == 0):
            raise ValueError(f"a layout has worker processes or bot threads, not both or neither: {self}")

    @property
    def kind(self) -> str:
        return "processes" if self.workers else "threads"

    def as_dict(self) -> dict[str, Any]:
        return {"bots_in": self.kind, "workers": self.workers, "bot_threads": self.bots, "cores": self.cores,
                "reason": self.reason}  # fmt: skip


def usable_cores() -> int:
    """CPUs this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def choose_layout(workers: int | None, bots: int | None, threads_only: bool, cores: int | None = None) -> Layout:
    """The learning bots' layout: what the user asked for, else one worker process when there are 2+ cores.

    Measured on 2 cores (docs/arena.md): the learner and the bot each need about a core, and in one
    process they share one GIL; at the default shape a worker process trains 101,500-108,300 steps/s,
    a bot thread 49,000-50,000. One core has nothing to gain from a second process, so threads there.

    Args:
        workers, bots: ``--workers`` and ``--bots`` as given (``None``: not given).
        threads_only: bots that must be threads (Tank Royale opponents, the reach game).
    """
    cores = usable_cores() if cores is None else cores
    if workers is not None and workers < 0:
        raise ValueError(f"--workers must be >= 0, got {workers}")
    if workers:
        if bots is not None:
            raise ValueError("--workers and --bots do not go together: bots are worker processes or threads")
        return Layout(workers, 0, cores, "--workers given")
    if bots is not None or workers == 0:
        return Layout(0, bots or 1, cores, "--bots given" if bots is not None else "--workers 0 given")
    if threads_only:
        return Layout(0, 1, cores, "these bots run as threads")
    if cores >= 2:
        return Layout(1, 0, cores, f"{cores} cores: the learning bot in its own process, the learner keeps a core")
    return Layout(0, 1, cores, "1 core: a second process would only contend for it")
