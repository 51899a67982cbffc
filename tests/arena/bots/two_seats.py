"""What a two-player PettingZoo AEC game of the tests needs besides its rules: :class:`TwoSeatGame`."""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv


class TwoSeatGame(AECEnv):  # type: ignore[misc]
    """Two seats (``player_0`` moves first) sharing one observation and one action space, the seats' bookkeeping
    PettingZoo's AEC API asks for, and ``illegal``: the moves received that the mask forbade."""

    def __init__(self, observation: Any, action: Any) -> None:
        super().__init__()
        self.possible_agents = ["player_0", "player_1"]
        self.observation_spaces = {a: observation for a in self.possible_agents}
        self.action_spaces = {a: action for a in self.possible_agents}
        self.illegal = 0

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[agent]

    def start_seats(self) -> None:
        """Both seats in play, unrewarded, neither ended; the first to move."""
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def close(self) -> None:
        pass
