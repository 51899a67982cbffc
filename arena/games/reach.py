"""A tiny continuous-control game, "reach": steer a point to a target. Vectorized over agents.

It exists to prove the training loop end to end in seconds (tests, the quick start
before the tank arena): a random policy scores about 0, a good one about 1 + 10 x the
starting distance. Observation (4): position x, y and the offset to the target dx, dy,
all in [-2, 2]. Action (2): velocity in [-1, 1] per axis (clipped), times 0.1 per step.
Reward: 10 x the distance closed this step, plus 1 on reaching the target (terminal).
An episode is truncated after ``max_steps`` steps.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bot_protocol.client import BlockingBotClient, ClientConfig

__all__ = ["ACT_DIM", "OBS_DIM", "ReachGame", "play_reach", "play_steps"]

OBS_DIM = 4
ACT_DIM = 2
SPEED = 0.1
REACH_RADIUS = 0.1


@dataclass
class StepResult:
    obs: NDArray[np.float32]
    """Observation after the step (already reset for agents whose episode ended)."""
    final_obs: NDArray[np.float32]
    """Observation after the step before any reset (the bootstrap row for truncations)."""
    reward: NDArray[np.float32]
    terminal: NDArray[np.bool_]
    truncated: NDArray[np.bool_]


class ReachGame:
    """``n`` independent reach episodes stepped together."""

    def __init__(self, n: int, seed: int = 0, max_steps: int = 50) -> None:
        self.n = n
        self.max_steps = max_steps
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros((n, 2), np.float32)
        self.target = np.zeros((n, 2), np.float32)
        self.t = np.zeros(n, np.int64)
        self.returns = np.zeros(n, np.float64)
        self.finished: list[float] = []
        self._reset(np.ones(n, bool))

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        k = int(mask.sum())
        self.pos[mask] = self.rng.uniform(-1, 1, (k, 2))
        self.target[mask] = self.rng.uniform(-1, 1, (k, 2))
        self.t[mask] = 0
        self.returns[mask] = 0.0

    def observe(self) -> NDArray[np.float32]:
        return np.concatenate([self.pos, self.target - self.pos], axis=1).astype(np.float32)

    def step(self, actions: NDArray[np.float32]) -> StepResult:
        before = np.linalg.norm(self.target - self.pos, axis=1)
        self.pos = np.clip(self.pos + SPEED * np.clip(actions, -1.0, 1.0), -1.0, 1.0).astype(np.float32)
        after = np.linalg.norm(self.target - self.pos, axis=1)
        self.t += 1
        terminal = after < REACH_RADIUS
        truncated = ~terminal & (self.t >= self.max_steps)
        reward = (10.0 * (before - after) + terminal * 1.0).astype(np.float32)
        self.returns += reward
        final_obs = self.observe()
        ended = terminal | truncated
        self.finished.extend(self.returns[ended].tolist())
        self._reset(ended)
        return StepResult(self.observe(), final_obs, reward, terminal, truncated)


def play_reach(
    url: str,
    n_agents: int = 8,
    steps: int = 2000,
    token: str | None = None,
    seed: int = 0,
    name: str = "reach",
    stop: threading.Event | None = None,
) -> tuple[ReachGame, BlockingBotClient]:
    """Play ``steps`` ticks (or until ``stop`` is set) of ``n_agents`` reach games as one websocket bot.

    Returns the game (its ``finished`` episode returns show learning) and the closed client
    (its ``stats`` show weights swapped and steps sent).
    """
    game = ReachGame(n_agents, seed=seed)
    bot = BlockingBotClient(ClientConfig(url, name, OBS_DIM, ACT_DIM, n_agents=n_agents, token=token), seed=seed)
    with bot:
        play_steps(bot, game, steps, stop)
    return game, bot


def play_steps(bot: BlockingBotClient, game: ReachGame, steps: int, stop: threading.Event | None = None) -> None:
    """Act, step and record ``steps`` ticks (or until ``stop`` is set) with a connected bot."""
    obs = game.observe()
    for _ in range(steps):
        if stop is not None and stop.is_set():
            break
        actions, logp = bot.act(obs)
        result = game.step(actions)
        bot.record(
            obs,
            actions,
            logp,
            reward=result.reward,
            terminal=result.terminal,
            truncated=result.truncated,
            next_obs=result.final_obs,
        )
        obs = result.obs
