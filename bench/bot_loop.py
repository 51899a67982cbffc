"""The learning bot's side of ``arena train`` alone, on the calling thread: microseconds per step.

What ``arena.bots.play.play_learning_bot`` does every tick, without the server, the socket or its
I/O thread: the policy's action for every match in one call (numpy, as the bot acts), the
opponents' actions (``sitting`` alone, or the league as ``arena train --opponent league`` seats
it: the four scripted bots drawn per round by PFSP, on their rows), the engine's step and
observation, the round resets, the recorder's batching and each batch's msgpack frame. One step
is one match advanced one tick: the unit of the trainer's steps/s. Used by ``bench/arena.py``
(the bot side's target) and ``bench/throughput.py`` (its one-core figures).
"""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np

__all__ = ["bot_side"]


def bot_side(seconds: float, n_matches: int = 128, opponent: Literal["sitting", "league"] = "sitting") -> dict[str, Any]:
    """The learning bot's loop for ``seconds`` of this thread's CPU time; its cost per step, and the policy's share."""
    from agents import make_agent
    from arena.bots.play import TICKS_PER_FRAME, ScriptedController
    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.engine import TankBattle
    from arena.games.tank.observation import OBS_DIM
    from arena.league.commands import league_spec
    from bot_protocol import Policy, RewardMode, Step, StepRecorder, Weights, encode

    arch, tensors = make_agent("ppo", OBS_DIM, ACT_DIM).export_actor()
    policy = Policy.from_weights(Weights.pack(0, 0, arch, tensors))
    battle = TankBattle(n_matches, 2, seed=0, engine="numba")  # arena train's default engine and bots
    if opponent == "league":  # as arena train builds it (no directory: nothing saved)
        league = league_spec((), (), None, False).build(n_matches, seed=0, engine="numba")  # type: ignore[arg-type]
        rival_act, rival_reset = league.act, league.rounds_ended
    else:
        rival = ScriptedController(opponent, n=n_matches, engine="numba")

        def rival_act(obs: np.ndarray, out: np.ndarray) -> None:
            out[:, 1] = rival.act(obs[:, 1])

        def rival_reset(info: Any) -> None:
            rival.reset(info.round_over)

    recorder = StepRecorder(OBS_DIM, ACT_DIM, n_matches, RewardMode.TERMS, TICKS_PER_FRAME * n_matches)
    rng = np.random.default_rng(0)
    actions = np.zeros((n_matches, 2, ACT_DIM), np.float32)
    obs, ticks, in_policy = battle.observe(), 0, 0.0
    started = time.process_time()
    while time.process_time() - started < seconds:
        before = time.process_time()
        actions[:, 0], logp = policy.act(obs[:, 0], rng)
        in_policy += time.process_time() - before
        rival_act(obs, actions)
        info = battle.step(actions)
        after = battle.observe()
        ended = info.round_over
        step = Step(obs[:, 0], actions[:, 0], logp, terms=info.reward_terms()[:, 0], terminal=ended & ~info.truncated,
                    truncated=info.truncated, next_obs=after[:, 0], score=info.scores[:, 0])  # fmt: skip
        batch = recorder.record(step, policy.policy_id)
        if batch is not None:
            encode(batch)
        if ended.any():
            battle.reset(ended)
            rival_reset(info)
            obs = battle.observe()
        else:
            obs = after
        ticks += 1
    spent = time.process_time() - started
    steps = ticks * n_matches
    return {
        "opponent": opponent,
        "matches": n_matches,
        "us_per_step": round(spent / steps * 1e6, 2),
        "policy_us_per_step": round(in_policy / steps * 1e6, 2),
    }
