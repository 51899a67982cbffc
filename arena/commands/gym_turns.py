"""``arena gym pettingzoo.MODULE``: a turn-based multi-agent game trained by self-play through a server of this process.

The same run as :mod:`arena.commands.gym_local` (its own server and trainer, a run directory,
``--json``, the bot in a child process), with a :class:`~arena.bots.turn_bot.TurnGameBot` in place
of the gymnasium bot: every seat of ``--n-envs`` games is a row of the learning bot (``--opponent
self``), or the learner plays one seat against a fixed player (``random``, its ``past`` selves, or
a trained policy's file). At the end the final
policy plays ``--eval-episodes`` games against a random legal player as each seat.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .gym_local import GymPlan, Say, summary_of

if TYPE_CHECKING:
    from ..bots.turn_bot import Seats

__all__ = ["run_turns"]

PROGRESS_ROWS = 10_000
"""Learner moves between two progress lines (with the mirror, each move sends two rows)."""


def run_turns(plan: GymPlan) -> int:
    """Train the turn-based game ``plan.env`` by self-play (or against ``plan.opponent``); the exit code."""
    from agents import make_agent
    from bot_protocol import Policy, Weights
    from server import ServerConfig, ServerThread, TrainerConfig, TrainingServer

    from ..bots.bot_process import BotJob, BotProcess, BotProcessError
    from ..bots.policies import load_policy
    from ..bots.turn_bot import PAST, RANDOM, SELF, Seats, load_turn_game, play_against, random_move

    factory = load_turn_game(plan.env)
    probe = factory()
    probe.reset(seed=plan.seed)
    try:
        seats = Seats.of(probe)
    finally:
        probe.close()
    if plan.opponent not in (SELF, RANDOM, PAST):
        load_policy(Path(plan.opponent))  # a bad file fails here, in one line, before anything starts
    space = seats.actions.actions
    mirror, mirror_why = _mirror(plan.mirror, factory, seats)
    agents = plan.n_envs * len(seats.names) * (2 if mirror else 1)  # mirrored: each seat's mirror is an agent too
    options = plan.options_for(agents, turns=True, image=seats.observations.image)
    if options.get("recurrent"):
        raise ValueError("--agent-option recurrent: turn-based games train memoryless policies for now")
    agent = make_agent(plan.agent, seats.observations.obs_dim, 0, seed=plan.seed, branches=space.branches, **options)
    plan.out.mkdir(parents=True, exist_ok=True)
    checkpoints = TrainerConfig(checkpoint_dir=plan.out / "checkpoints")
    server = TrainingServer(agent, ServerConfig(host="127.0.0.1", port=0), checkpoints)
    say = Say(plan.json)
    say(f"arena gym: {plan.env} ({len(seats.names)} seats, {seats.observations.obs_dim} observations, "
        f"{space.n_logits} moves) x {plan.n_envs} games against {plan.opponent}, {plan.steps:,} moves; "
        f"mirror {'on' if mirror else 'off'} ({mirror_why}); run directory {plan.out}")  # fmt: skip
    started = time.monotonic()
    games = illegal = 0
    with ServerThread(server) as running:
        job = BotJob(running.url, plan.env, plan.n_envs, plan.seed, plan.name, plan.steps, PROGRESS_ROWS,
                     turns=True, opponent=plan.opponent, opening=plan.opening, mirror=mirror)  # fmt: skip
        done = 0
        try:
            with BotProcess(job, plan.workers) as bot:
                for played in bot:
                    done += played.steps
                    games, illegal = played.games, played.illegal_moves
                    if hasattr(agent, "set_progress"):  # PPO's learning rate falls over --steps
                        agent.set_progress(min(1.0, done / plan.steps))
                    say(f"moves={done:,}  games={games:,}  illegal moves={illegal}  "
                        f"moves/s={done / max(time.monotonic() - started, 1e-6):,.0f}")  # fmt: skip
        except BotProcessError as exc:
            print(f"arena gym: error: {exc}", file=sys.stderr, flush=True)
            return 1
    seconds = time.monotonic() - started
    version = server.trainer.version
    arch, tensors = agent.export_actor()
    policy = Policy.from_weights(Weights.pack(server.trainer.generation, version, arch, tensors))
    vs_random = {
        name: play_against(policy, factory, random_move, seat, plan.eval_episodes, seed=plan.seed + 10_000).as_dict()
        for seat, name in enumerate(("first", "second")[: len(seats.names)])
    } if plan.eval_episodes else {}  # fmt: skip
    summary = summary_of(plan, done, seconds, version, [], [], options)
    summary.update(
        kind="turn-based",
        games=games,
        opponent=plan.opponent,
        opening=plan.opening,
        mirror=mirror,
        mirror_why=mirror_why,
        vs_random=vs_random,
        illegal_moves=illegal + sum(int(r["illegal_moves"]) for r in vs_random.values()),
    )
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for seat, record in vs_random.items():
        won, drew, lost = record["win"], record["draw"], record["loss"]
        say(f"arena gym: the final policy (v{version}) as the {seat} player against a random legal one: "
            f"won {won:.0%}, drew {drew:.0%}, lost {lost:.0%} of {plan.eval_episodes}")  # fmt: skip
    say(f"arena gym: wrote {plan.out / 'summary.json'} and {plan.out / 'checkpoints'}")
    if plan.json:
        print(json.dumps(summary), flush=True)
    return 0


def _mirror(mode: str, factory: Callable[[], Any], seats: Seats) -> tuple[bool, str]:
    """``--mirror`` decided for the game: whether its rows are also sent mirrored, and why, in a few words.

    Raises:
        ValueError: ``on`` for a game that is no board, or whose rules did not hold left-right.
    """
    from ..bots.board_mirror import BoardMirror, mirror_fault

    if mode == "off":
        return False, "--mirror off"
    try:
        mirror = BoardMirror.of(seats.observations.image, seats.actions.actions.n_logits)
    except ValueError:
        if mode == "on":
            raise
        return False, "not a board with one move per column or square"
    fault = mirror_fault(mirror, factory, seats.read)
    if fault is None:
        return True, "the rules held left-right in 20 random games"
    if mode == "on":
        raise ValueError(f"--mirror on: the rules are not left-right symmetric ({fault})")
    return False, f"the rules are not left-right symmetric: {fault}"
