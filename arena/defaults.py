"""``arena train``'s defaults on the tank arena, in one place, each with the reason for it.

PPOConfig's own defaults are the original trainer's (a 2,048-step rollout, minibatches of 64) and
stay available through ``--agent-option``; these are what the tank arena runs with unless told
otherwise. The measurements behind them are in docs/arena.md ("Choosing the defaults") and
docs/agents.md ("Learning per sample", "What the main job learns").
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
scripted opponent, policy, one websocket frame), so many matches per call cost little more per
step; twice as many trained slower and no better per sample (docs/arena.md, "Choosing the defaults")."""

ROYALE_MATCHES = 2
"""The league's parallel matches against each Tank Royale bot (``arena train --royale-matches``), one bot
process each, all in one battle of the share's worker (docs/royale.md)."""

ROYALE_TURNS_PER_S = 50.0
"""The pace of the league's Tank Royale share (``arena train --royale-turns-per-s``). An official-API
Python bot is costly per turn and answers in lockstep as fast as it can, so unpaced it takes much of
the learner's CPU; this pace keeps most of it (docs/royale.md, "Training against Tank Royale bots").
Tank Royale itself plays 30 turns/s."""

ENGINE = "numba"
"""The tank engine of every command's battles and scripted bots unless ``--engine`` says otherwise: the
compiled one, which plays the numpy reference's game bit for bit (tests/arena/games/test_compiled_engine.py)
several times faster (docs/arena.md, "Speed"). numba compiles it once per machine, then loads it from its
disk cache (``arena compile``)."""

DISTRIBUTED_TIMEOUT = 60.0
"""Seconds a learner rank of ``arena serve --distributed`` waits in a collective for the others before it
stops with one line (a rank that dies is noticed at once; this bounds one that hangs). The ranks meet
once per trainer step, so a rank whose bots are slow never makes the others wait this long."""

STEPS_PER_AGENT = 64
"""Rollout steps per parallel agent (CleanRL's ``num_steps``): rollout = agents x 64, so 8,192 steps
at 128 matches. What sets learning per sample is gradient steps per sample, not the rollout's
length, so the rollout scales with the agents (docs/agents.md, "Learning per sample")."""

TANK_SEGMENT_STEPS = 128
"""The server's segment cut (``ServerConfig.segment_steps``, 256 by default; ``arena train --segment-steps``)
for the tank's PPO. GAE across a cut bootstraps from V(next_obs), a critic that cannot see bullets in
flight, so a shot fired near the end of a short segment gets its hit's credit only through that
estimate. Shorter cuts beat ``sitting`` sooner but learned less against the other bots; 128 with
``gae_lambda`` 0.98 (:data:`TANK_PPO`) learned the most (docs/agents.md, "What the main job learns")."""

MINIBATCHES = 8
"""Minibatches per epoch (CleanRL's ``num_minibatches``): 1,024 rows at 128 matches. With 2 epochs
that is 16 gradient steps per rollout, the count that learned fastest per sample, at less learner CPU
than the same steps as 4 epochs of 2,048 rows (docs/agents.md, "Learning per sample")."""

TANK_PPO: dict[str, Any] = {"epochs": 2, "proximal_anchor": True, "gae_lambda": 0.98, "clip_per_network": True}
"""PPOConfig overrides besides the batch shape (``--agent-option`` overrides them in turn).

- ``clip_per_network=True``: the main job's value loss dwarfs the actor's, so one joint clip scaled
  the actor's step by the critic's error of the moment, least on the minibatches with hits; clipped
  on its own the actor moves further per update and the worst seeds learn more (docs/agents.md,
  "What the main job learns").
- ``gae_lambda=0.98``: gamma x lambda is the weight per tick of a later reward in an advantage, and a
  hit lands many ticks after its shot; a higher lambda pays the shot more of the hit's value
  (docs/agents.md, "What the main job learns").
- ``epochs=2``: with minibatches of 1,024, 2 epochs are as many gradient steps as 4 epochs of 2,048
  at less of the learner's CPU; 3 epochs learned a little more per sample but trained below the throughput target
  (docs/arena.md, "Choosing the defaults").
- ``proximal_anchor=True``: bots act while the trainer trains, so rollouts arrive a version or two
  old; clipping against the policy the update starts from (decoupled PPO) instead of the bots' learns
  faster (docs/agents.md, "Learning per sample").
- Kept from PPOConfig: entropy bonus 0.01, log-std start -0.5 and ceiling 0, advantage normalization
  per rollout, learning rate 3e-4: changing any of them alone moved learning by less than the spread
  between two seeds (docs/agents.md, "Learning per sample").
"""


LEAGUE_PPO: dict[str, Any] = {"entropy_coef": 0.001}
"""PPOConfig overrides on top of :data:`TANK_PPO` when training against the league (the default).

``entropy_coef=0.001``: against the league's mix the advantages are noisy, and PPOConfig's bonus
(0.01) drives the exploration std to its ceiling, where the learner's long shots miss even the idle
``sitting``; the smaller bonus lets the std shrink (docs/arena.md, "What the league taught before").
Against one fixed opponent the bonus made no difference (docs/agents.md, "Learning per sample"), so
those runs keep PPOConfig's."""


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


GYM_ENVS = 8
"""Sub-environments ``arena gym`` plays when it runs its own server (one vector env, one bot)."""
GYM_WORKERS = 1
"""Bot processes of ``arena gym`` with its own server (``--workers``), sharing its ``--n-envs`` games."""
GYM_STEPS_PER_ENV = 128
"""Steps each sub-environment adds to one PPO rollout of ``arena gym``."""
TURN_OPENING = 6
"""Turn-based games of ``arena gym``: each game opens with 0 to this many random legal moves (``--opening``).

Why: without it, self-play in connect four sharpens to near-certain moves, the games follow few lines,
and the policy seldom meets the positions another player leads it into (one probe's policy put
probability 1.0 on a wrong column beside an open three, and took 39% of the immediate wins the
lookahead player left it). With up to 6 random moves (tuning seed 10, 10 minutes): against a
random legal player 98 / 95% won as first / second (92.5 / 89% without), against the lookahead player
44 / 36% (38.5 / 35.5%). Short games want less (a 4-stone Nim: 0), since the opening decides them.
"""
MIRROR_MODES = ("auto", "on", "off")
TURN_MIRROR = "auto"
"""Turn-based games of ``arena gym``: also train on every move seen left-right mirrored (``--mirror``).

``auto`` mirrors a game whose observation is a board and whose rules held left-right in 20 random games
(:func:`arena.bots.board_mirror.mirror_fault`), and leaves any other game alone. Why on: an MLP over a
board's squares learns a pattern and its mirror image apart, and the mirrored rows give each lesson
twice. Connect four, 10 minutes, won as first / second against the one-move-lookahead player: tuning
seeds 11 and 12, 74 / 74.5% and 80 / 66% with the mirror, 68 / 58.5% and 67 / 62.5% without; the
benchmark's seeds 0-2, median 83 / 69.5% (worst 79 / 60.5%) with it, 68 / 55.5% (67 / 50.5%) without.
Tic-tac-toe against a random legal player, seeds 0-2 at 100,000 moves: no loss either way, won 98.5 /
93.5% (median) mirrored and 99 / 92.5% not (docs/agents.md, "Turn-based games").
"""


TURN_ENTROPY_COEF = 0.1
"""Turn-based games of ``arena gym``: the entropy bonus (ten times the gymnasium preset's).

Why: in self-play a policy that is nearly sure of a wrong move seldom tries the right one, and the
critic then values the position at what the wrong move earns, so the wrong move's advantage is
about zero and nothing pushes the policy off it (softmax policy gradient's trap). In connect four
with the gymnasium preset's 0.01, the final policy put under 5% on an immediate win in 37% of
the positions that had one, though missing it cost about 0.7 of a game's return. A larger bonus
keeps every legal move tried; the evaluation plays the likeliest move, so a softer policy costs
nothing there. Tuning seed 10, 3.4 M moves, won against the one-move-lookahead player as first /
second: 0.01: 40 / 35%, 0.03: 51 / 33.5%, 0.1: 67.5 / 49%, 0.3: 62.5 / 42.5% (and 0.003, with gamma
0.99 and lambda 0.95: 26.5 / 20%). The benchmark's seeds 0-2 with 0.1 (lambda 0.98), 10 minutes: median 61 / 51%
(47 / 31.5% before), and 98.5 / 100% against a random legal player (96.5 / 91% before)
(docs/agents.md, "Turn-based games").
"""


TURN_GAE_LAMBDA = 0.5
"""Turn-based games of ``arena gym``: GAE's lambda (the gymnasium preset's is 0.98; gamma stays 0.999).

Why: a tactical move is judged within a move or two (a missed win is taken by the opponent on its
next turn, a missed block loses there), but with lambda 0.98 a row's advantage is nearly the game's
whole remaining outcome, so each row also carries the noise of every later move of both seats.
With 0.5 the advantage leans on the critic's value one or two of the seat's moves on, where the
consequence shows, and the later moves' noise weighs a quarter or less. Tuning seed 10, 4.22 M moves,
won against the one-move-lookahead player as first / second: lambda 0.98: 60 / 51.5% (4.8 M moves),
0.8: 61.5 / 53%, 0.5: 72 / 66%, 0.25: 70 / 53.5%; 0.5 on seeds 11 and 12: 68 / 58.5%, 67 / 62.5%. The
benchmark's seeds 0-2, 10 minutes: median 68 / 55.5% (61 / 51% with 0.98), 100 / 99% against a random
legal player (docs/agents.md, "Turn-based games").
"""


def turn_ppo_options(n_agents: int) -> dict[str, Any]:
    """PPOConfig overrides for a turn-based game's ``n_agents`` seats: the gymnasium preset, its bonus
    :data:`TURN_ENTROPY_COEF`, a short GAE :data:`TURN_GAE_LAMBDA`, and raw observations (a board's 0/1
    planes need no normalizing)."""
    if n_agents < 1:
        raise ValueError(f"n_agents must be >= 1, got {n_agents}")
    return {
        **gym_ppo_options(n_agents, obs_norm=False),
        "entropy_coef": TURN_ENTROPY_COEF,
        "gae_lambda": TURN_GAE_LAMBDA,
    }


def gym_ppo_options(n_envs: int, obs_norm: bool = True) -> dict[str, Any]:
    """PPOConfig overrides for ``arena gym``'s own server: short rollouts, ten epochs over them, a long horizon.

    Why not PPOConfig's (the tank's) values: a gymnasium task is one small env played at thousands of
    steps a second, where on-policy learning gains most from updating often; the learning rate falls
    to zero over ``--steps`` (as RL-Zoo's linear schedules). gamma 0.999, GAE lambda 0.98 and an
    entropy bonus of 0.01 (RL-Zoo's LunarLander values): with gamma 0.99 and no bonus, one
    LunarLander seed of three learned to hover and never land (-76 at 1 M steps); with these, three
    tuning seeds (10-12) reached 221-238, and CartPole-v1 still reaches 478-500 at 100,000 steps.
    Observation normalization (``obs_norm``) on the same seeds: LunarLander 278-287 with a third of
    the spread between episodes, CartPole 500 in every seed, for 3% of the speed; so it is on for
    gymnasium games (turn-based games start from :func:`turn_ppo_options`, without it). Measured in
    ``bench/gym.py``.
    """
    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    rollout = n_envs * GYM_STEPS_PER_ENV
    return {
        "rollout_steps": rollout,
        "minibatch_size": min(256, rollout),
        "epochs": 10,
        "learning_rate": 1e-3,
        "final_lr_fraction": 0.0,
        "gamma": 0.999,
        "gae_lambda": 0.98,
        "entropy_coef": 0.01,
        "obs_norm": obs_norm,
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

    The learner and the bot each need about a core, and in one process they share one GIL, so a
    worker process trains about twice as fast as a bot thread (docs/arena.md, "Choosing the
    defaults"). One core has nothing to gain from a second process, so threads there.

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
