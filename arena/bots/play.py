"""Headless tank matches: a learning bot over websocket, or local policies, against scripted opponents.

Tank 0 of every match is the *player*; the other tanks are opponents. A learning player is
one websocket bot (``bot_protocol`` client) driving tank 0 of all ``n_matches`` matches at
once (one agent per match); it sends the raw reward terms and round scores, and the
trainer computes the seed's tick and round rewards. Opponents run in this process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from bot_protocol import Policy, RewardMode
from bot_protocol.client import BlockingBotClient, ClientConfig

from ..games.tank.actions import ACT_DIM
from ..games.tank.engine import TankBattle
from ..games.tank.engines import EngineName
from ..games.tank.events import StepInfo
from ..games.tank.observation import OBS_DIM
from ..games.tank.radar import RADAR_OBS_DIM, Sight, observation_dim
from ..games.tank.roster import make_scripted
from ..games.tank.rules import TankRules
from ..games.tank.scripted import ScriptedBot, View
from .spec import LearningBotSpec

__all__ = [
    "Controller",
    "MatchLog",
    "MatchObserver",
    "OpponentPool",
    "PolicyController",
    "RoundResult",
    "ScriptedController",
    "make_opponent",
    "play_learning_bot",
    "play_match",
]


class Controller(Protocol):
    """Anything that turns observations of its tanks into actions.

    A controller with ``observation = "radar"`` is handed the radar observation
    (:mod:`arena.games.tank.radar`) instead of the full one; without the attribute, the full one.
    """

    name: str

    def act(self, obs: NDArray[np.float32]) -> NDArray[np.float32]: ...

    def reset(self, mask: NDArray[np.bool_]) -> None: ...


class MatchObserver(Protocol):
    """Sees every state of a :func:`play_match` battle, e.g. to record it (``arena.replay.Recorder``)."""

    def round_started(self, battle: TankBattle, matches: NDArray[np.bool_]) -> None:
        """Rounds started in ``matches`` (tick 0): after construction, then after each reset of a round that counts."""

    def ticked(self, battle: TankBattle, actions: NDArray[np.float32]) -> None:
        """``battle.step(actions)`` ran (every match, counted or not); called before any reset."""


class ScriptedController:
    """A scripted opponent by name (``sitting``, ``spinner``, ``walker``, ``tracker``); ``engine="numba"``: compiled."""

    def __init__(self, name: str, n: int, seed: int = 0, engine: EngineName = "numpy") -> None:
        self.name = name
        self._bot = make_scripted(name, n, seed, engine=engine)

    @property
    def rules(self) -> TankRules:
        return self._bot.rules

    @property
    def bot(self) -> ScriptedBot:
        """The scripted bot it drives (the league asks ``drawn``'s to replay the draws the learner did not beat)."""
        return self._bot

    def act(
        self, obs: NDArray[np.float32], view: View | None = None, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float32]:
        """``view``: ``View(obs, self.rules)`` if already computed; ``rows``: which of the ``n`` tanks ``obs`` holds."""
        return self._bot.act(obs, view, rows)

    def reset(self, mask: NDArray[np.bool_]) -> None:
        self._bot.reset(mask)


class PolicyController:
    """A trained policy acting locally: sampling, as it played in training (or its mean action).

    Sampling is the default because the mean action can be degenerate in this game: a
    policy whose mean fire output is below 0 never fires with its mean, yet fires often
    (and wins) with the exploration it was trained with.
    """

    def __init__(self, name: str, policy: Policy, seed: int = 0, stochastic: bool = True) -> None:
        if policy.obs_dim not in (OBS_DIM, RADAR_OBS_DIM) or policy.act_dim != ACT_DIM:
            raise ValueError(
                f"{name}: policy sizes {policy.obs_dim}→{policy.act_dim} do not fit the tank arena ({OBS_DIM}→{ACT_DIM}, "
                f"or {RADAR_OBS_DIM}→{ACT_DIM} on the radar observation)"
            )
        self.name = name
        self.policy = policy
        self.stochastic = stochastic
        self.rng = np.random.default_rng(seed)
        self.observation = "radar" if policy.obs_dim == RADAR_OBS_DIM else "full"
        """Which observation it plays from: the policy's width says (``arena.games.tank.radar``)."""
        self._states = policy.initial_state(0)
        """A recurrent policy's state of each match it has acted in (rows grow on demand; zeros at a round start)."""

    def act(self, obs: NDArray[np.float32], rows: NDArray[np.intp] | None = None) -> NDArray[np.float32]:
        """Actions for ``obs`` (N, obs_dim); ``rows``: the matches they are (default 0..N-1), whose states a
        recurrent policy carries from tick to tick."""
        if self.policy.state_size == 0:
            return self.policy.sample(obs, self.rng, deterministic=not self.stochastic)
        rows = np.arange(len(obs)) if rows is None else np.asarray(rows, np.intp)
        need = int(rows.max()) + 1 if len(rows) else 0
        if need > len(self._states):
            grown = self.policy.initial_state(need)
            grown[: len(self._states)] = self._states
            self._states = grown
        acted, nxt = self.policy.step(obs, self._states[rows], self.rng, deterministic=not self.stochastic)
        self._states[rows] = nxt
        return np.asarray(acted[0], np.float32)

    def reset(self, mask: NDArray[np.bool_]) -> None:
        """Rounds start in ``mask``: a recurrent policy's states of those matches go back to zeros."""
        n = min(len(mask), len(self._states))
        self._states[:n][np.asarray(mask[:n], bool)] = 0.0


RoundResult = tuple[bool, float, str, bool]
"""A finished round of the learner: (won, its score, the opponent's name, drawn)."""


def make_opponent(kind: str, n: int, seed: int, engine: EngineName = "numpy") -> Controller:
    """A fixed opponent: a scripted bot by name (computed by ``engine``), else a policy file.

    A policy file is a checkpoint, a run directory or a weights file.

    Raises:
        FileNotFoundError, ValueError: ``kind`` names no scripted bot and no loadable policy.
    """
    from ..games.tank.roster import EXTRA_SCRIPTED, SCRIPTED

    if kind in SCRIPTED or kind in EXTRA_SCRIPTED:
        return ScriptedController(kind, n, seed, engine)
    from pathlib import Path

    from .policies import load_policy

    return PolicyController(kind, load_policy(Path(kind)), seed=seed)


@dataclass
class MatchLog:
    """Per-round results, appended as rounds finish."""

    rounds: int = 0
    wins: deque[bool] = field(default_factory=lambda: deque(maxlen=100))
    """Whether the player won each of the last 100 rounds."""
    all_wins: int = 0
    ticks: int = 0
    scores: list[float] = field(default_factory=list)
    opponent_of_round: list[str] = field(default_factory=list)
    won_rounds: list[bool] = field(default_factory=list)
    first_tick_at: float | None = None
    """``time.monotonic()`` when the first ticks were added: time to a skill counts from here."""
    perfect_at: tuple[float, int] | None = None
    """(seconds after the first tick, ticks played) when the last 100 rounds were first all won."""
    listener: Callable[[Sequence[RoundResult]], None] | None = None
    """Receives every batch of finished rounds after it is logged (e.g. the league's ratings)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def win_rate_last_100(self) -> float:
        with self.lock:
            return float(np.mean(self.wins)) if self.wins else float("nan")

    def record(self, info: StepInfo, opponents: Sequence[str]) -> list[RoundResult]:
        """Add the rounds that ended this tick; returns them as (won, score, opponent, drawn)."""
        results = [
            (bool(info.winner[m] == 0), float(info.scores[m, 0]), opponents[int(m)], bool(info.winner[m] < 0))
            for m in np.flatnonzero(info.round_over)
        ]
        self.add(results, len(info.round_over))
        return results

    def add(self, results: Sequence[RoundResult], ticks: int) -> None:
        """Add finished rounds (won, score, opponent, drawn) and ticks played, e.g. reported by a worker process."""
        self._add(results, ticks)
        if self.listener is not None and results:
            self.listener(results)

    def _add(self, results: Sequence[RoundResult], ticks: int) -> None:
        with self.lock:
            if self.first_tick_at is None and ticks:
                self.first_tick_at = time.monotonic()
            self.ticks += ticks
            for won, score, opponent, _ in results:
                self.rounds += 1
                self.all_wins += won
                self.wins.append(won)
                self.won_rounds.append(won)
                self.scores.append(score)
                self.opponent_of_round.append(opponent)
                if won and self.perfect_at is None and len(self.wins) == self.wins.maxlen and all(self.wins):
                    assert self.first_tick_at is not None, "rounds end after ticks"
                    self.perfect_at = (time.monotonic() - self.first_tick_at, self.ticks)


TICKS_PER_FRAME = 4
"""Ticks of all matches a learning bot sends per ``tr`` frame. A frame has a fixed cost on both sides
(the bot's hand-off to its I/O thread, the server loop's per-frame work), so four ticks a frame (512 rows
at 128 matches) cut it fourfold, for data that reaches the trainer a few milliseconds later: nothing
next to an update (docs/architecture.md, "The life of one step")."""


def _opponent_names(opponents: Sequence[str], n_matches: int) -> list[str]:
    """Spread the opponent mix over the matches, round-robin."""
    return [opponents[m % len(opponents)] for m in range(n_matches)]


class OpponentPool(Protocol):
    """Tank 1 of a learning bot's matches: a fixed mix, or a league (``arena.league.LeagueOpponents``)."""

    @property
    def names(self) -> list[str]:
        """Each match's current opponent."""

    def act(self, obs: NDArray[np.float32], out: NDArray[np.float32]) -> None:
        """Write tank 1's actions of every match into ``out`` (matches, tanks, act_dim)."""

    def rounds_ended(self, info: StepInfo) -> None:
        """Rounds ended in ``info.round_over``: their next rounds start (opponents may change)."""

    def learner(self, policy: Policy) -> None:
        """The policy the learner acts with this tick (a league plays it and freezes snapshots)."""

    def close(self) -> None:
        """The bot stops (a league saves its state)."""


class _Opponents:
    """A fixed mix: one controller per opponent kind, each driving its matches' tank 1."""

    def __init__(self, names: list[str], seed: int, factory: Callable[[str, int, int], Controller]) -> None:
        self.names = names
        self.groups: list[tuple[Controller, NDArray[np.intp]]] = []
        for i, kind in enumerate(sorted(set(names))):
            rows = np.flatnonzero(np.array(names) == kind)
            self.groups.append((factory(kind, len(rows), seed + 7919 * (i + 1)), rows))

    def act(self, obs: NDArray[np.float32], out: NDArray[np.float32]) -> None:
        for controller, rows in self.groups:
            out[rows, 1] = controller.act(obs[rows, 1])

    def rounds_ended(self, info: StepInfo) -> None:
        for controller, rows in self.groups:
            controller.reset(info.round_over[rows])

    def learner(self, policy: Policy) -> None:
        pass

    def close(self) -> None:
        pass


def play_learning_bot(
    spec: LearningBotSpec,
    stop: threading.Event | None = None,
    log: MatchLog | None = None,
    report: Callable[[list[RoundResult], int], None] | None = None,
    connected: Callable[[BlockingBotClient], None] | None = None,
    watch: Callable[[TankBattle], None] | None = None,
    opponent_factory: Callable[[str, int, int, EngineName], Controller] | None = None,
) -> MatchLog:
    """Play 1v1 rounds as the learning websocket bot ``spec`` until ``spec.rounds`` rounds end or ``stop`` is set.

    Returns the match log (wins, scores). ``report`` (if given) receives each tick's finished
    rounds and tick count, for a parent process to aggregate. ``connected`` (if given) receives
    the client once the handshake is done, e.g. to show its policy version from another thread.
    ``watch`` (if given) sees the battle after every tick, before finished rounds are reset
    (the live dashboard's match view, a pacer, the Tank Royale bridge). ``opponent_factory`` makes
    the fixed mix's controllers from (kind, matches, seed, the spec's engine) (the Tank Royale bridge supplies its
    own; by default :func:`make_opponent`).

    Raises:
        HandshakeRejected: the server refused this bot for good (token, sizes).
        OSError, TimeoutError: the server could not be reached (``arena worker`` retries).
    """
    n_matches, seed = spec.n_matches, spec.seed
    factory = opponent_factory or make_opponent
    battle = TankBattle(n_matches, 2, spec.rules, seed=seed, engine=spec.engine)
    rivals: OpponentPool = (
        spec.league.build(n_matches, seed, worker=spec.index, engine=spec.engine) if spec.league is not None
        else _Opponents(
            _opponent_names(spec.opponents, n_matches), seed,
            lambda kind, n, s: factory(kind, n, s, spec.engine),
        )
    )  # fmt: skip
    log = log or MatchLog()
    sight = Sight(battle, spec.observation == "radar")  # what the learner sees: full, or its radar's
    # wss:// verifies with the system's CAs (SSL_CERT_FILE adds others): see BotClient.connect.
    config = ClientConfig(
        spec.url, spec.name, observation_dim(spec.observation), ACT_DIM, n_agents=n_matches, reward=RewardMode.TERMS,
        token=spec.token, batch_steps=TICKS_PER_FRAME * n_matches,
    )  # fmt: skip
    actions = np.zeros((n_matches, 2, ACT_DIM), np.float32)
    bot = BlockingBotClient(config, seed=seed)
    try:  # not ``with``: its __exit__ would not run when connect() fails, leaking the I/O thread
        bot.connect()
        if connected is not None:
            connected(bot)
        obs, seen = sight.observe()
        while not (stop is not None and stop.is_set()) and (spec.rounds is None or log.rounds < spec.rounds):
            rivals.learner(bot.policy)
            actions[:, 0], logp = bot.act(seen[:, 0])
            rivals.act(obs, actions)
            info = sight.step(actions)
            if watch is not None:
                watch(battle)
            after, seen_after = sight.observe()  # before any reset: the bootstrap rows of truncated rounds
            ended = info.round_over
            bot.record(
                seen[:, 0],
                actions[:, 0],
                logp,
                terms=info.reward_terms()[:, 0],
                terminal=ended & ~info.truncated,
                truncated=info.truncated,
                next_obs=seen_after[:, 0],
                score=info.scores[:, 0],
            )
            results = log.record(info, rivals.names)
            if report is not None:
                report(results, len(ended))
            if ended.any():
                sight.reset(ended)
                rivals.rounds_ended(info)
                obs, seen = sight.observe()
            else:
                obs, seen = after, seen_after
    finally:
        rivals.close()
        bot.close()
    return log


def play_match(
    players: Sequence[Controller],
    rounds: int,
    seed: int = 0,
    n_matches: int = 50,
    rules: TankRules | None = None,
    progress: Callable[[int], None] | None = None,
    observer: MatchObserver | None = None,
    engine: EngineName = "numpy",
) -> dict[str, object]:
    """Play ``rounds`` rounds among local controllers (one tank each, all in every match).

    ``observer`` (if given) sees every tick, e.g. to record the match (with ``n_matches=1``
    the rounds are played one after another, so one recording replays them all). ``engine``
    steps the battle (the compiled "numba" plays 1v1 only; a free-for-all stays numpy).

    Returns ``{"rounds": N, "draws": D, "mean_round_ticks": T, "bots": [{"name", "wins",
    "mean_score", "mean_energy"}, ...]}``: a draw is a round no bot won (all dead in one tick,
    or still open at the tick cap).
    """
    n_tanks = len(players)
    if n_tanks < 2:
        raise ValueError("a match needs at least two bots")
    n_matches = max(1, min(n_matches, rounds))
    battle = TankBattle(n_matches, n_tanks, rules or TankRules(), seed=seed, engine=engine)
    wins = np.zeros(n_tanks, np.int64)
    score_sum = np.zeros(n_tanks)
    energy_sum = np.zeros(n_tanks)
    done = draws = 0
    round_ticks = 0  # ticks of the counted rounds, summed (each match's battle.tick at its round's end)
    # Rounds still to start in each match slot, so exactly ``rounds`` rounds are played.
    remaining = np.full(n_matches, rounds // n_matches, np.int64)
    remaining[: rounds % n_matches] += 1
    active = remaining > 0
    actions = np.zeros((n_matches, n_tanks, ACT_DIM), np.float32)
    on_radar = [getattr(player, "observation", "full") == "radar" for player in players]
    sight = Sight(battle, any(on_radar))  # ValueError for a free-for-all with a radar player: the radar is 1v1
    if observer is not None:
        observer.round_started(battle, active.copy())
    while done < rounds:
        obs, seen = sight.observe()
        for t, player in enumerate(players):
            actions[:, t] = player.act((seen if on_radar[t] else obs)[:, t])
        info = sight.step(actions)
        if observer is not None:
            observer.ticked(battle, actions)
        ended = info.round_over & active
        for m in np.flatnonzero(ended):
            if info.winner[m] >= 0:
                wins[info.winner[m]] += 1
            else:
                draws += 1
            round_ticks += int(battle.tick[m])  # before the reset below
            score_sum += info.scores[m]
            energy_sum += np.where(info.alive[m], battle.energy[m], 0.0)
            done += 1
            remaining[m] -= 1
        active &= remaining > 0
        if info.round_over.any():
            sight.reset(info.round_over)
            for player in players:
                player.reset(info.round_over)
            if observer is not None and (info.round_over & active).any():
                observer.round_started(battle, info.round_over & active)
            if progress is not None and ended.any():
                progress(done)
    return {
        "rounds": rounds,
        "draws": draws,
        "mean_round_ticks": round(round_ticks / rounds, 1),
        "bots": [
            {
                "name": player.name,
                "wins": int(wins[t]),
                "mean_score": round(float(score_sum[t] / rounds), 2),
                "mean_energy": round(float(energy_sum[t] / rounds), 2),
            }
            for t, player in enumerate(players)
        ],
    }
