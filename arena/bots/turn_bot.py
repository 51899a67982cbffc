"""Turn-based multi-agent games (PettingZoo's AEC API) played as one websocket bot: :class:`TurnGameBot`, :func:`play_against`.

Why a bot of its own: in a turn-based game a seat's step does not end when it moves. Its reward
arrives while the others move (a win is known only when the game ends), so each seat's row is
held from its move until its next turn, or the game's end, and only then recorded with the
reward gathered in between (PettingZoo's ``last()``). Every seat of every game is one agent id of
the bot (``game * seats + seat``), so the protocol's rule that an agent's rows are in time order
holds per seat, and the final reward is each seat's round reward.

Seats are played by the learner (self-play: every seat), or split between the learner and a
fixed opponent (``random``: a uniformly random legal move; or a trained policy), the learner's
seat rotating from game to game so it learns to move first and second. Legal moves come from
the observation's ``action_mask`` (PettingZoo classic's convention) or ``info["action_mask"]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bot_protocol.client import BlockingBotClient, ClientConfig
from bot_protocol.messages import RewardMode
from bot_protocol.policy import Policy

from .board_mirror import BoardMirror
from .gym_spaces import ActionMap, ObservationMap

__all__ = ["PAST", "RANDOM", "SELF", "Seats", "TurnGameBot", "TurnPlay", "is_module_path", "load_turn_game", "play_against"]

SELF = "self"
"""Every seat is the learner."""
RANDOM = "random"
"""The other seats play a uniformly random legal move."""
PAST = "past"
"""Each new game is self-play (:data:`PAST_SELF_SHARE` of them) or the learner against one of its past versions."""
PAST_EVERY = 10
"""Versions of the policy between two that join the pool of past selves."""
PAST_POOL = 20
"""Past selves kept (the newest): with ``PAST_EVERY`` 10, the last 200 versions."""
PAST_SELF_SHARE = 0.5
"""Share of new games that are self-play when the opponent is :data:`PAST`."""

Opponent = Callable[[NDArray[np.float32], NDArray[np.bool_], np.random.Generator], int]
"""A fixed player: (its flat observation, its legal moves, a generator) → its move."""


def is_module_path(name: str) -> bool:
    """Whether ``name`` names a PettingZoo module (``pettingzoo.classic.connect_four_v3``), not a gymnasium id."""
    return "." in name and "-" not in name and "/" not in name


def load_turn_game(path: str) -> Callable[[], Any]:
    """The AEC environment factory of a PettingZoo module path (its ``env()``).

    Raises:
        ValueError: no such module, or a module without an AEC ``env()`` (one line for the user).
    """
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise ValueError(f"cannot import {path!r}: {exc} (PettingZoo games need pip install 'pettingzoo[classic]')") from None
    factory = getattr(module, "env", None)
    if not callable(factory):
        raise ValueError(f"{path!r} has no env() making a PettingZoo AEC environment")
    return factory  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Seats:
    """A game's seats as the protocol sees them: one observation map and one action space for all of them."""

    names: tuple[str, ...]
    observations: ObservationMap
    actions: ActionMap
    masked_obs: bool
    """The observation is a dict of ``observation`` and ``action_mask`` (PettingZoo classic)."""

    @classmethod
    def of(cls, env: Any) -> Seats:
        """Read the seats of ``env`` (reset) and check they share their spaces.

        Raises:
            ValueError: seats with different spaces, or an action space with no discrete branch.
        """
        gym = _gym()
        names = tuple(env.possible_agents)
        first_obs, first_act = env.observation_space(names[0]), env.action_space(names[0])
        for name in names[1:]:
            if env.observation_space(name) != first_obs or env.action_space(name) != first_act:
                raise ValueError(f"the seats of {env} have different spaces: one policy plays every seat here")
        masked = isinstance(first_obs, gym.spaces.Dict) and set(first_obs.spaces) >= {"observation", "action_mask"}
        observations = ObservationMap.from_space(first_obs["observation"] if masked else first_obs)
        actions = ActionMap.from_space(first_act)
        if actions.actions.continuous or len(actions.actions.branches) != 1:
            raise ValueError(f"turn-based games here move in one Discrete space, got {first_act}")
        return cls(names, observations, actions, masked)

    def read(self, obs: Any, info: Any) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """One seat's flat observation and legal moves (all legal when the game says nothing)."""
        raw = obs["observation"] if self.masked_obs else obs
        mask: Any = obs["action_mask"] if self.masked_obs else (info or {}).get("action_mask")
        legal = np.ones(self.actions.actions.n_logits, bool) if mask is None else np.asarray(mask).astype(bool)
        return self.observations.rows(raw, 1, False)[0], legal.reshape(-1)


def _gym() -> Any:
    from .gym_bot import require_gymnasium

    return require_gymnasium()


@dataclass
class _Held:
    """A learner seat's move, held until its reward is known (its next turn or the game's end)."""

    obs: NDArray[np.float32]
    logp: float
    dact: NDArray[np.int64]
    mask: NDArray[np.bool_]
    actions: NDArray[np.float32]


@dataclass
class _Rows:
    """The rows one tick completes, recorded in one call (at most one per agent id)."""

    agents: list[int] = field(default_factory=list)
    held: list[_Held] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminal: list[bool] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    next_obs: list[NDArray[np.float32]] = field(default_factory=list)


@dataclass(frozen=True)
class TurnPlay:
    """How the learner's games are played: who sits opposite, how each game opens, whether rows are also mirrored.

    Args:
        opponent: :data:`SELF` (self-play), :data:`RANDOM`, :data:`PAST` (self-play or a past self, drawn
            per game), or a :class:`Policy` that plays the other seats.
        opening: each game opens with 0 to ``opening`` uniformly random legal moves (either seat's, never
            recorded), drawn per game. Why: a self-play policy sharpens until the games it plays follow a
            few lines, and it never trains on the positions off them; in connect four, one policy trained
            without openings blocked 26% of the threats a one-move-lookahead player left open.
        mirror: also send every learner row left-right mirrored (:class:`~.board_mirror.BoardMirror`), as the
            rows of agent ids ``n_games * seats`` on: for a board game whose rules are symmetric. The bot's
            ``steps`` counts the moves made, not the rows sent.

    Raises:
        ValueError: a negative ``opening``.
    """

    opponent: str | Policy = SELF
    opening: int = 0
    mirror: bool = False

    def __post_init__(self) -> None:
        if self.opening < 0:
            raise ValueError(f"opening must be >= 0 random moves, got {self.opening}")


class TurnGameBot:
    """``n_games`` copies of a PettingZoo AEC game played as one websocket bot.

    Args:
        url: the server, ``ws://host:port``.
        factory: makes one AEC environment (:func:`load_turn_game`).
        n_games: games played side by side (each of its seats is an agent id of the bot).
        seed: seeds the games (game ``g`` starts from ``seed + g``), the bot's sampling and the opponent's.
        play: who sits opposite the learner, the openings, the mirror (:class:`TurnPlay`).

    Raises:
        ValueError: the game's spaces do not fit (see :meth:`Seats.of`), or ``play.mirror`` for a game that is
            not a board (see :meth:`BoardMirror.of`).
    """

    def __init__(
        self,
        url: str,
        factory: Callable[[], Any],
        *,
        n_games: int = 8,
        seed: int = 0,
        token: str | None = None,
        name: str = "turns",
        play: TurnPlay = TurnPlay(),  # frozen: one shared default is safe
    ) -> None:
        if n_games < 1:
            raise ValueError(f"n_games must be >= 1, got {n_games}")
        opponent, opening, mirror = play.opponent, play.opening, play.mirror
        self.games = [factory() for _ in range(n_games)]
        for g, env in enumerate(self.games):
            env.reset(seed=seed + g)
        self.seats = Seats.of(self.games[0])
        self.n_seats = len(self.seats.names)
        self.mirror = BoardMirror.of(self.seats.observations.image, self.seats.actions.actions.n_logits) if mirror else None
        self._mirror_offset = n_games * self.n_seats
        """``mirror``: a seat's mirrored rows go to its agent id plus this."""
        self._seat = {name: i for i, name in enumerate(self.seats.names)}
        self.opponent = opponent
        self.rng = np.random.default_rng(seed + 1_000_003)
        self._next_seed = seed + n_games
        self.learner_seat = [g % self.n_seats for g in range(n_games)]
        """Each game's learner seat when it plays a fixed opponent; it rotates at every new game."""
        self.past: list[Policy] = []
        """:data:`PAST`: the pool of past selves, oldest first."""
        self.past_opponent: list[Policy | None] = [None] * n_games
        """:data:`PAST`: who plays each game's other seats (None: self-play)."""
        self.opening = opening
        self._opening_left = [self._draw_opening() for _ in range(n_games)]
        """Random moves each game still opens with."""
        space = self.seats.actions.actions
        config = ClientConfig(
            url,
            name,
            self.seats.observations.obs_dim,
            0,
            n_agents=n_games * self.n_seats * (2 if mirror else 1),
            reward=RewardMode.SCALAR,
            token=token,
            branches=space.branches,
        )
        self.bot = BlockingBotClient(config, seed=seed)
        self._held: dict[int, _Held] = {}
        self.steps = 0
        self.games_played = 0
        self.illegal_moves = 0
        """Moves the learner made that its mask forbade: 0 unless a policy ignores its masks."""

    def __enter__(self) -> TurnGameBot:
        self.bot.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.bot.close()
        finally:
            for env in self.games:
                env.close()

    def _is_learner(self, game: int, seat: int) -> bool:
        if self.opponent == PAST:
            return self.past_opponent[game] is None or seat == self.learner_seat[game]
        return self.opponent == SELF or seat == self.learner_seat[game]

    def _draw_opening(self) -> int:
        return int(self.rng.integers(self.opening + 1)) if self.opening else 0

    def _new_game(self, game: int) -> None:
        """Draw the game's opening; :data:`PAST`: keep every :data:`PAST_EVERY`-th version, then draw its opponent."""
        self._opening_left[game] = self._draw_opening()
        if self.opponent != PAST:
            return
        policy = self.bot.policy
        if policy is not None and (not self.past or policy.version >= self.past[-1].version + PAST_EVERY):
            self.past = [*self.past[-(PAST_POOL - 1) :], policy]
        self_play = not self.past or self.rng.random() < PAST_SELF_SHARE
        self.past_opponent[game] = None if self_play else self.past[int(self.rng.integers(len(self.past)))]

    def run(self, steps: int) -> int:
        """Play until ``steps`` more learner rows are recorded, then flush; the rows recorded."""
        target = self.steps + steps
        start = self.steps
        while self.steps < target:
            self.tick()
        self.bot.flush()
        return self.steps - start

    def tick(self) -> None:
        """Every game to its next move, every move made, every completed row recorded."""
        rows = _Rows()
        waiting = [self._advance(g, rows) for g in range(len(self.games))]
        self._record(rows)
        learner = [(g, s, o, m) for g, s, o, m in waiting if not self._opening_left[g] and self._is_learner(g, s)]
        if learner:
            obs = np.stack([o for _, _, o, _ in learner])
            mask = np.stack([m for _, _, _, m in learner])
            actions, logp, dact = self.bot.act(obs, mask=mask)
            for i, (g, s, o, m) in enumerate(learner):
                move = int(dact[i, 0])
                self.illegal_moves += not m[move]
                self._held[g * self.n_seats + s] = _Held(o, float(logp[i]), dact[i].copy(), m, actions[i])
                self.games[g].step(move)
        for g, s, o, m in waiting:
            if self._opening_left[g]:
                self._opening_left[g] -= 1
                self.games[g].step(random_move(o, m, self.rng))
            elif not self._is_learner(g, s):
                self.games[g].step(self._opponent_move(g, o, m))

    def _advance(self, g: int, rows: _Rows) -> tuple[int, int, NDArray[np.float32], NDArray[np.bool_]]:
        """Step game ``g`` past ended seats (and into a new game when it is over) to the seat that moves next."""
        env = self.games[g]
        while True:
            name = env.agent_selection
            obs, reward, terminated, truncated, info = env.last()
            seat = self._seat[name]
            flat, legal = self.seats.read(obs, info)
            ended = bool(terminated or truncated)
            self._complete(g * self.n_seats + seat, float(reward), bool(terminated), ended and not terminated, flat, rows)
            if not ended:
                return g, seat, flat, legal
            env.step(None)
            if not env.agents:
                self.games_played += 1
                env.reset(seed=self._next_seed)
                self._next_seed += 1
                self.learner_seat[g] = (self.learner_seat[g] + 1) % self.n_seats
                self._new_game(g)

    def _complete(
        self, agent: int, reward: float, terminal: bool, truncated: bool, obs: NDArray[np.float32], rows: _Rows
    ) -> None:
        held = self._held.pop(agent, None)
        if held is None:  # a fixed opponent's seat, or the learner's first move of a game
            return
        rows.agents.append(agent)
        rows.held.append(held)
        rows.rewards.append(reward)
        rows.terminal.append(terminal)
        rows.truncated.append(truncated)
        rows.next_obs.append(obs)  # read for the truncated rows only, but the batcher takes one per row

    def _record(self, rows: _Rows) -> None:
        if not rows.agents:
            return
        held = rows.held
        obs = np.stack([h.obs for h in held])
        actions = np.stack([h.actions for h in held])
        logp = np.array([h.logp for h in held], np.float32)
        dact = np.stack([h.dact for h in held])
        mask = np.stack([h.mask for h in held])
        reward = np.array(rows.rewards, np.float32)
        terminal = np.array(rows.terminal)
        truncated = np.array(rows.truncated)
        next_obs = np.stack(rows.next_obs)
        agents = np.array(rows.agents)
        if self.mirror is not None:  # the same rows in the looking-glass, as the mirror agents' rows
            # Each keeps its original's log-prob: the mirrored move was drawn with the original's probability,
            # so PPO's ratio is then the true importance weight. (The policy's own log-prob of the mirrored move
            # in the mirrored position, tried first, treats those moves as drawn from it; in connect four the
            # policy lost its symmetry and its entropy: 39.5 / 29.5% against the lookahead player, seed 11.)
            m = self.mirror
            obs = np.concatenate([obs, m.observations(obs)])
            actions = np.concatenate([actions, actions])
            logp = np.concatenate([logp, logp])
            dact = np.concatenate([dact, m.moves(dact)])
            mask = np.concatenate([mask, m.masks(mask)])
            reward, terminal, truncated = (np.concatenate([a, a]) for a in (reward, terminal, truncated))
            next_obs = np.concatenate([next_obs, m.observations(next_obs)])
            agents = np.concatenate([agents, agents + self._mirror_offset])
        self.bot.record(
            obs, actions, logp, dact=dact, mask=mask, reward=reward, terminal=terminal, truncated=truncated,
            next_obs=next_obs, agents=agents,
        )  # fmt: skip
        self.steps += len(rows.agents)

    def _opponent_move(self, game: int, obs: NDArray[np.float32], legal: NDArray[np.bool_]) -> int:
        player = self.past_opponent[game] if self.opponent == PAST else self.opponent
        if isinstance(player, Policy):
            _, _, dact = player.act(obs[None], self.rng, mask=legal[None])
            return int(dact[0, 0])
        return random_move(obs, legal, self.rng)


def random_move(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
    """A uniformly random legal move (PettingZoo's usual baseline player)."""
    return int(rng.choice(np.flatnonzero(legal)))


@dataclass(frozen=True)
class Record:
    """A policy's results over games against one opponent in one seat."""

    win: float
    draw: float
    loss: float
    illegal_moves: int

    def as_dict(self) -> dict[str, float | int]:
        return {"win": self.win, "draw": self.draw, "loss": self.loss, "illegal_moves": self.illegal_moves}


def play_against(
    policy: Policy | Opponent, factory: Callable[[], Any], opponent: Opponent, seat: int, games: int, seed: int = 0
) -> Record:
    """``games`` games of ``policy`` in ``seat`` against ``opponent`` in the others.

    ``policy``: our :class:`Policy` (deterministic, masked), or any move function (another
    library's model, for a side-by-side figure). A game's outcome is the policy's final reward:
    above 0 a win, 0 a draw, below a loss.
    """
    mover = _deterministic(policy) if isinstance(policy, Policy) else policy
    rng = np.random.default_rng(seed)
    env = factory()
    env.reset(seed=seed)
    seats = Seats.of(env)
    outcomes = {"win": 0, "draw": 0, "loss": 0}
    illegal = 0
    try:
        for game in range(games):
            env.reset(seed=seed + game)
            final = 0.0
            for name in env.agent_iter():
                obs, reward, terminated, truncated, info = env.last()
                mine = seats.names.index(name) == seat
                if terminated or truncated:
                    final = float(reward) if mine else final
                    env.step(None)
                    continue
                flat, legal = seats.read(obs, info)
                move = (mover if mine else opponent)(flat, legal, rng)
                illegal += mine and not legal[move]
                env.step(move)
            outcomes["win" if final > 0 else "draw" if final == 0 else "loss"] += 1
    finally:
        env.close()
    return Record(outcomes["win"] / games, outcomes["draw"] / games, outcomes["loss"] / games, illegal)


def _deterministic(policy: Policy) -> Opponent:
    """``policy``'s likeliest legal move, as a move function."""

    def move(obs: NDArray[np.float32], legal: NDArray[np.bool_], rng: np.random.Generator) -> int:
        _, _, dact = policy.act(obs[None], rng, deterministic=True, mask=legal[None])
        return int(dact[0, 0])

    return move
