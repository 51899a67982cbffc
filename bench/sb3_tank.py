"""Stable-Baselines3's PPO on our tank arena: the anchor ``bench/throughput.py`` measures us against.

:class:`TankVecEnv` is an SB3 ``VecEnv`` over one vectorized :class:`arena.games.tank.TankBattle`: env ``i``
is tank 0 of match ``i``, its opponent the same scripted bot ``arena train`` plays, its reward the
same shaping the server computes from the bot's reward terms (``arena.games.tank.rewards``: the tick reward,
plus the round reward at each round end). Rounds that end by the tick cap are truncations
(``TimeLimit.truncated`` with ``terminal_observation``, which SB3 bootstraps), as on our side.
Needs the ``bench`` extra: ``pip install torch==2.13.0 -e ".[bench]"``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvStepReturn

from arena.bots.play import MatchLog, ScriptedController, play_match
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.engines import EngineName
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rewards import compute_round_reward, compute_tick_reward
from arena.games.tank.rules import TankRules

__all__ = ["TankVecEnv", "train_sb3"]


class TankVecEnv(VecEnv):
    """``n_envs`` 1v1 tank matches stepped as one batch; finished rounds restart by themselves.

    ``engine``: the same engine and compiled scripted bots ``arena train`` plays by default (numba), so a comparison
    with our command measures the two learners' systems, not two engines.
    """

    def __init__(
        self,
        n_envs: int,
        opponent: str = "sitting",
        seed: int = 0,
        rules: TankRules | None = None,
        engine: EngineName = "numba",
    ) -> None:
        space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.render_mode = None
        super().__init__(n_envs, space, spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32))
        self.battle = TankBattle(n_envs, 2, rules or TankRules(), seed=seed, engine=engine)
        self.opponent = ScriptedController(opponent, n=n_envs, seed=seed + 7919, engine=engine)
        self.opponent_name = opponent
        self.log = MatchLog()
        self._actions = np.zeros((n_envs, 2, ACT_DIM), np.float32)
        self._obs = self.battle.observe()

    def reset(self) -> NDArray[np.float32]:
        self._obs = self.battle.observe()
        return self._obs[:, 0].copy()

    def step_async(self, actions: NDArray[np.float32]) -> None:
        self._actions[:, 0] = actions

    def step_wait(self) -> VecEnvStepReturn:
        self._actions[:, 1] = self.opponent.act(self._obs[:, 1])
        info = self.battle.step(self._actions)
        after = self.battle.observe()
        ended = info.round_over
        rewards = compute_tick_reward(info.reward_terms()[:, 0])
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if ended.any():
            rewards[ended] += compute_round_reward(info.scores[ended, 0])
            for m in np.flatnonzero(ended):
                infos[m]["terminal_observation"] = after[m, 0].copy()
                infos[m]["TimeLimit.truncated"] = bool(info.truncated[m])
            self.log.record(info, [self.opponent_name] * self.num_envs)
            self.battle.reset(ended)
            self.opponent.reset(ended)
            after = self.battle.observe()
        else:
            self.log.add((), self.num_envs)
        self._obs = after
        return after[:, 0].copy(), rewards, ended.copy(), infos

    def close(self) -> None:
        pass

    # The VecEnv interface's per-env plumbing, unused by PPO here.
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name)] * self.num_envs

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        return [getattr(self, method_name)(*args, **kwargs)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False] * self.num_envs

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        return [None] * self.num_envs


class _SB3Controller:
    """A trained SB3 policy as an ``arena.bots.play`` controller, sampling as it trained (as ours do in ``arena match``)."""

    def __init__(self, model: Any) -> None:
        self.name = "sb3-ppo"
        self.model = model

    def act(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        actions, _ = self.model.predict(obs, deterministic=False)
        return np.clip(actions, -1.0, 1.0).astype(np.float32)

    def reset(self, mask: NDArray[np.bool_]) -> None:
        pass


def train_sb3(
    seconds: float, n_envs: int, n_steps: int, batch_size: int, n_epochs: int, opponent: str = "sitting",
    seed: int = 0, eval_rounds: int = 200,
) -> dict[str, Any]:  # fmt: skip
    """SB3 PPO (its defaults but the batch shape given) for ``seconds`` of wall time from the first env step."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    env = TankVecEnv(n_envs, opponent, seed)
    model = PPO(
        "MlpPolicy", env, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, seed=seed, device="cpu", verbose=0
    )
    training_seconds = [0.0]

    class _Budget(BaseCallback):
        """Stops at the wall budget; times the updates (everything between two rollouts)."""

        def __init__(self) -> None:
            super().__init__()
            self.rollout_ended = 0.0

        def _on_step(self) -> bool:
            first = env.log.first_tick_at
            return first is None or time.monotonic() - first < seconds

        def _on_rollout_start(self) -> None:
            if self.rollout_ended:
                training_seconds[0] += time.monotonic() - self.rollout_ended

        def _on_rollout_end(self) -> None:
            self.rollout_ended = time.monotonic()

    model.learn(total_timesteps=10**12, callback=_Budget())
    wall = time.monotonic() - (env.log.first_tick_at or time.monotonic())
    steps = env.log.ticks
    matches = min(50, eval_rounds)
    evaluation = play_match([_SB3Controller(model), ScriptedController(opponent, n=matches, seed=seed + 1)], eval_rounds,
                            seed=seed + 1, n_matches=matches)  # fmt: skip
    wins = evaluation["bots"][0]["wins"]  # type: ignore[index]
    return {
        "system": "stable-baselines3",
        "version": __import__("stable_baselines3").__version__,
        "torch_threads": torch.get_num_threads(),
        "n_envs": n_envs,
        "n_steps": n_steps,
        "rollout": n_envs * n_steps,
        "batch_size": batch_size,
        "n_epochs": n_epochs,
        "seconds": round(wall, 1),
        "steps": steps,
        "steps_per_s": round(steps / wall) if wall > 0 else None,
        "update_time_share": round(training_seconds[0] / wall, 3) if wall > 0 else None,
        "win_rate_100_after": None
        if env.log.perfect_at is None
        else {"seconds": round(env.log.perfect_at[0], 2), "steps": env.log.perfect_at[1]},
        "win_rate_last_100": round(env.log.win_rate_last_100, 3) if env.log.rounds else None,
        "eval_rounds": eval_rounds,
        "eval_win_rate": round(wins / eval_rounds, 3),
    }
