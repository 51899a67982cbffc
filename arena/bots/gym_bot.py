"""Play any gymnasium environment as a websocket bot: :func:`play_gym`, :class:`GymBot`, :func:`evaluate`.

gymnasium is an optional extra (``pip install gymnasium``); it is imported only when
one of these is used. The mapping between an environment and our protocol
(:mod:`arena.bots.gym_spaces` holds it):

* **Observations**: any space gymnasium can flatten, as float32 rows (``Discrete`` one-hot,
  ``Dict`` and ``Tuple`` concatenated in order); ``obs_dim`` is the flat size.
* **Actions**: each ``Box`` leaf adds continuous dims, each ``Discrete`` one discrete branch,
  a ``MultiDiscrete`` one branch per entry and a ``MultiBinary`` one branch of two per bit
  (``hello``'s ``act_dim`` and ``branches``). On a ``Box`` the policy acts in [-1, 1] and the bot
  maps that linearly onto ``[low, high]``: ``low + (a + 1) / 2 · (high − low)`` (``a`` clipped
  to [-1, 1] first). So TD3/DDPG run with ``action_limit=1`` (their default; other limits are
  refused), and PPO's raw Gaussian samples are clipped before the mapping, as the protocol says
  a game does. Unbounded boxes are refused: there is no box to map onto. The rows sent carry
  the action the policy produced (normalized units, and for PPO the raw unclipped sample whose
  ``logp`` is sent), never the rescaled one.
* **Legal actions**: ``info["action_mask"]``, or the env's ``action_masks()`` method
  (sb3-contrib's convention), is the mask the policy samples under and the bot sends.
* **Rewards**: scalar rewards (``RewardMode.SCALAR``) as float32.
* **Episode ends**: ``terminated`` → the terminal flag (no bootstrap), ``truncated`` →
  the truncated flag with ``next_obs`` = the true final observation (never the reset one).
  A single environment is one agent (``n_agents=1``), reset by hand when its episode ends;
  a vector environment of ``n`` sub-environments is ``n`` agents of one bot, in any of
  gymnasium's autoreset modes (``SAME_STEP``, which :func:`make_env` builds, reads the final
  observation from ``infos["final_obs"]``; ``NEXT_STEP`` skips the reset step, whose action
  is ignored; ``DISABLED`` is reset here with ``reset_mask``).

Seeds: the environment is reset with ``seed`` once (a vector environment seeds its
sub-environments ``seed, seed + 1, …``) and the bot's exploration RNG is seeded with it,
so a run against fixed weights replays exactly. Against a training server the weights
arrive at times that depend on thread scheduling, so training runs are not bit-exact.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bot_protocol.client import BlockingBotClient, ClientConfig, ClientStats
from bot_protocol.messages import RewardMode
from bot_protocol.policy import Policy

from .gym_spaces import ActionMap, ObservationMap, action_masks

if TYPE_CHECKING:
    import gymnasium

__all__ = ["ActionScaling", "GymBot", "GymResult", "evaluate", "make_env", "play_gym", "require_gymnasium"]

EnvFactory = Callable[[], "gymnasium.Env[Any, Any]"]
"""Builds one environment (e.g. ``lambda: gymnasium.make("Pendulum-v1")``)."""
EnvSpec = str | EnvFactory
"""A registered environment id, or a factory of one environment."""
ActFn = Callable[[NDArray[np.float32]], ArrayLike]
"""Observations (n, obs_dim) float32 → normalized actions (n, act_dim) in [-1, 1]."""


def require_gymnasium() -> ModuleType:
    """Import gymnasium, or fail with one message saying how to get it.

    Raises:
        ImportError: gymnasium is not installed.
    """
    try:
        import gymnasium
    except ImportError:
        raise ImportError(
            "arena.bots.gym_bot needs gymnasium, an optional extra: pip install 'gymnasium>=1.0' (or arena-trainer[gym])"
        ) from None
    return gymnasium


# ── the mapping ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ActionScaling:
    """The linear map from the policy's [-1, 1] box onto a bounded ``Box`` action space."""

    low: NDArray[np.float64]
    """Flat (act_dim,) lower bounds."""
    high: NDArray[np.float64]
    shape: tuple[int, ...]
    """The space's shape; actions are reshaped to (n, *shape)."""
    dtype: np.dtype[Any]

    @classmethod
    def from_space(cls, space: Any) -> ActionScaling:
        """Check ``space`` is a bounded ``Box`` and build its map.

        Raises:
            ValueError: not a ``Box``, or some bound is infinite or NaN.
        """
        gym = require_gymnasium()
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"GymBot plays continuous control: the action space must be a Box, got {space}")
        low = np.asarray(space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(space.high, dtype=np.float64).reshape(-1)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(
                f"unbounded action space {space}: GymBot maps the policy's [-1, 1] onto [low, high], "
                "so every bound must be finite (wrap the env with gymnasium.wrappers.ClipAction over a bounded Box)"
            )
        if not (low <= high).all():
            raise ValueError(f"action space {space} has low > high")
        return cls(low, high, tuple(space.shape), np.dtype(space.dtype))

    @property
    def act_dim(self) -> int:
        return len(self.low)

    def to_env(self, actions: ArrayLike) -> NDArray[Any]:
        """(n, act_dim) normalized actions → (n, *shape) in the space's dtype, within [low, high]."""
        a = np.clip(np.asarray(actions, dtype=np.float64).reshape(-1, self.act_dim), -1.0, 1.0)
        scaled = np.clip(self.low + (a + 1.0) * 0.5 * (self.high - self.low), self.low, self.high)
        return scaled.astype(self.dtype).reshape(-1, *self.shape)

    def to_policy(self, env_actions: ArrayLike) -> NDArray[np.float32]:
        """The inverse map, env units → [-1, 1] (for comparisons; a zero-width dimension maps to 0)."""
        x = np.asarray(env_actions, dtype=np.float64).reshape(-1, self.act_dim)
        width = self.high - self.low
        safe = np.where(width > 0, width, 1.0)
        return np.where(width > 0, 2.0 * (x - self.low) / safe - 1.0, 0.0).astype(np.float32)


def _check_limit(policy: Policy) -> None:
    if policy.deterministic_kind and not math.isclose(float(policy.arch.act_limit), 1.0):
        raise ValueError(
            f"the policy acts in ±{policy.arch.act_limit}, but GymBot maps [-1, 1] onto the env's bounds: "
            "train TD3/DDPG with action_limit=1 (the default)"
        )


def make_env(
    env: EnvSpec, n_envs: int = 1, vectorized: bool | None = None, env_kwargs: Mapping[str, Any] | None = None
) -> Any:
    """One environment, or a ``SyncVectorEnv`` of ``n_envs`` in ``SAME_STEP`` autoreset mode.

    Returns a ``gymnasium.Env``, or a ``gymnasium.vector.SyncVectorEnv`` when vectorized.

    Args:
        env: a registered id (``"Pendulum-v1"``) or a factory of one environment.
        n_envs: sub-environments of the vector environment.
        vectorized: build a vector environment; ``None`` means ``n_envs > 1``.
        env_kwargs: keyword arguments for ``gymnasium.make`` (or the factory).

    Raises:
        ValueError: ``n_envs > 1`` without vectorizing, or ``n_envs < 1``.
    """
    gym = require_gymnasium()
    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    vectorized = n_envs > 1 if vectorized is None else vectorized
    if n_envs > 1 and not vectorized:
        raise ValueError(f"n_envs={n_envs} needs vectorized=True (one bot drives a vector env as n agents)")
    kwargs = dict(env_kwargs or {})
    factory: EnvFactory = (
        functools.partial(gym.make, env, **kwargs) if isinstance(env, str) else functools.partial(env, **kwargs)
    )
    if not vectorized:
        return factory()
    return gym.vector.SyncVectorEnv([factory] * n_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


# ── the bot ──────────────────────────────────────────────────────────────────


@dataclass
class GymResult:
    """What a :meth:`GymBot.run` (or :func:`play_gym`) played."""

    episode_returns: list[float]
    """Undiscounted return of every episode that ended, in the order they ended."""
    episode_lengths: list[int]
    """Their lengths in environment steps, same order."""
    steps: int
    """Environment steps recorded and sent, summed over sub-environments (SB3's ``total_timesteps``)."""
    ticks: int
    """Calls to ``env.step``."""
    seconds: float
    stats: ClientStats = field(repr=False)
    """The bot's counters (``steps_sent``, ``weights_swapped``, …)."""
    policy: Policy | None = field(default=None, repr=False)
    """The newest weights the bot held at the end (for :func:`evaluate`)."""


class _Taken(NamedTuple):
    """What the policy chose for every sub-environment at one tick, as recorded."""

    actions: NDArray[np.float32]
    logp: NDArray[np.float32]
    dact: NDArray[np.int64] | None
    mask: NDArray[np.bool_] | None

    def rows(self, rows: NDArray[np.intp]) -> _Taken:
        def pick(a: Any) -> Any:
            return None if a is None else a[rows]

        return _Taken(self.actions[rows], self.logp[rows], pick(self.dact), pick(self.mask))


class GymBot:
    """One gymnasium environment, single or vector, played as one websocket bot.

    A single environment is one agent; a vector environment is ``num_envs`` agents of one
    bot (``n_agents``). Call order: construct (checks the spaces, resets the env with
    ``seed``), :meth:`connect` (or ``with GymBot(...) as bot:``), :meth:`run` as often as
    wanted (it continues where the last call stopped), :meth:`close` (flushes, says
    ``bye`` and closes the environment too).

    Args:
        url: the server, ``ws://host:port``.
        env: a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv`` (see :func:`make_env`).
            The bot owns it from now on and closes it.
        token: bearer token, if the server wants one.
        seed: resets the environment once and seeds the exploration RNG.
        name: the bot's name in ``hello``.
        batch_steps: rows per ``tr`` message.

    Raises:
        ValueError: an observation space that is not a ``Box``, an action space that is not
            a bounded ``Box``, or a vector environment without a known autoreset mode.
    """

    def __init__(
        self,
        url: str,
        env: Any,
        *,
        token: str | None = None,
        seed: int = 0,
        name: str = "gym",
        batch_steps: int = 64,
    ) -> None:
        gym = require_gymnasium()
        self.env = env
        self.vectorized = isinstance(env, gym.vector.VectorEnv)
        if self.vectorized:
            self.n_envs = int(env.num_envs)
            obs_space, act_space = env.single_observation_space, env.single_action_space
            if "autoreset_mode" not in env.metadata:
                raise ValueError(
                    "vector env has no metadata['autoreset_mode']: GymBot cannot tell a reset step from a real one"
                )
            self.autoreset_mode = gym.vector.AutoresetMode(env.metadata["autoreset_mode"])
        else:
            self.n_envs = 1
            obs_space, act_space = env.observation_space, env.action_space
            self.autoreset_mode = None
        self.observations = ObservationMap.from_space(obs_space)
        self.action_map = ActionMap.from_space(act_space)
        self.actions = self.action_map.actions
        self.scaling = ActionScaling.from_space(act_space) if isinstance(act_space, gym.spaces.Box) else None
        """A plain ``Box``: its actions map in one vectorized step (the other spaces map row by row)."""
        self.obs_dim = self.observations.obs_dim
        self.act_dim = self.actions.continuous
        config = ClientConfig(
            url,
            name,
            self.obs_dim,
            self.act_dim,
            n_agents=self.n_envs,
            reward=RewardMode.SCALAR,
            token=token,
            batch_steps=batch_steps,
            branches=self.actions.branches,
        )
        self.bot = BlockingBotClient(config, seed=seed)
        self._gym = gym
        obs, info = env.reset(seed=seed)
        self._obs = self._flat(obs)
        self._mask = self._masks(info)
        self._skip = np.zeros(self.n_envs, dtype=bool)
        """NEXT_STEP mode: sub-environments whose next step is gymnasium's reset step (not a transition)."""
        self._returns = np.zeros(self.n_envs, dtype=np.float64)
        self._lengths = np.zeros(self.n_envs, dtype=np.int64)
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.steps = 0
        self.ticks = 0

    def __enter__(self) -> GymBot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Connect and complete the handshake.

        Raises:
            ValueError: the server trains a TD3/DDPG actor whose ``action_limit`` is not 1.
            HandshakeRejected, OSError, TimeoutError: as :meth:`BlockingBotClient.connect`.
        """
        self.bot.connect()
        try:
            _check_limit(self.bot.policy)
        except ValueError:
            self.bot.close()
            raise

    def close(self) -> None:
        """Flush held rows, say ``bye``, close the connection and the environment (idempotent)."""
        try:
            self.bot.close()
        finally:
            self.env.close()

    def _flat(self, obs: Any) -> NDArray[np.float32]:
        return self.observations.rows(obs, self.n_envs, self.vectorized)

    def _masks(self, info: Any) -> NDArray[np.bool_] | None:
        """The legal actions the game reports for the next step (None: it reports none, or acts in no branch)."""
        if not self.actions.branches:
            return None
        return action_masks(self.env, info, self.n_envs, self.actions.n_logits, self.vectorized)

    def _act(self, obs: NDArray[np.float32]) -> tuple[Any, NDArray[np.float32], NDArray[np.float32], Any]:
        """The policy's choice for every sub-environment: (what ``env.step`` takes, actions, logp, dact or None).

        ``env.step``'s argument is one action for a single environment, the batch for a vector one.
        """
        if self.scaling is not None:  # a plain Box: one vectorized map
            actions, logp = self.bot.act(obs)
            env_actions: Any = self.scaling.to_env(actions)
            return (env_actions if self.vectorized else env_actions[0]), actions, logp, None
        dact: NDArray[np.int64] | None = None
        if self.actions.branches:
            actions, logp, dact = self.bot.act(obs, mask=self._mask)
        else:
            actions, logp = self.bot.act(obs)
        rows = self.action_map.to_env(actions, dact if dact is not None else np.zeros((len(obs), 0), np.int64))
        return (self.action_map.batch(rows) if self.vectorized else rows[0]), actions, logp, dact

    def run(self, steps: int, stop: threading.Event | None = None) -> GymResult:
        """Play until ``steps`` more environment steps are recorded (or ``stop`` is set), then flush.

        ``steps`` counts over all sub-environments, so a vector environment of ``n`` may
        overshoot by up to ``n - 1``. The result holds the episodes that ended in this call.
        """
        first_episode = len(self.episode_returns)
        start_steps, start_ticks = self.steps, self.ticks
        started = time.perf_counter()
        target = self.steps + steps
        while self.steps < target and not (stop is not None and stop.is_set()):
            self.tick()
        self.bot.flush()
        return GymResult(
            episode_returns=self.episode_returns[first_episode:],
            episode_lengths=self.episode_lengths[first_episode:],
            steps=self.steps - start_steps,
            ticks=self.ticks - start_ticks,
            seconds=time.perf_counter() - started,
            stats=self.bot.stats,
            policy=self.bot.policy,
        )

    def tick(self) -> None:
        """Act for every sub-environment, step the environment once and record the transitions."""
        obs = self._obs
        self.ticks += 1
        env_actions, actions, logp, dact = self._act(obs)
        taken = _Taken(actions, logp, dact, self._mask)
        if not self.vectorized:
            next_obs, reward, terminated, truncated, info = self.env.step(env_actions)
            final = self._flat(next_obs)
            done = bool(terminated or truncated)
            self._record(obs, taken, np.array([reward]), np.array([terminated]), np.array([truncated]), final, None)
            if done:
                next_obs, info = self.env.reset()
            self._obs = self._flat(next_obs)
            self._mask = self._masks(info)
            return
        next_obs, reward, terminated, truncated, infos = self.env.step(env_actions)
        terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
        mode = self.autoreset_mode
        modes = self._gym.vector.AutoresetMode
        if mode is modes.SAME_STEP:
            # Ended sub-environments were already reset: their observation here is the reset
            # one, and the true final observation is in infos["final_obs"] (masked by "_final_obs").
            self._obs = self._flat(next_obs)
            final = self._obs.copy()
            mask = np.asarray(infos.get("_final_obs", np.zeros(self.n_envs, dtype=bool)), dtype=bool)
            for i in np.flatnonzero(mask):
                final[i] = self.observations.rows(infos["final_obs"][i], 1, False)[0]
            self._record(obs, taken, reward, terminated, truncated, final, None)
        elif mode is modes.NEXT_STEP:
            # A sub-environment that ended last step was reset by this one, which ignored its
            # action and returned its first observation: that row is no transition.
            active = ~self._skip
            self._obs = self._flat(next_obs)
            self._record(obs, taken, reward, terminated, truncated, self._obs, active)
            if not active.all():  # a recurrent policy stepped on the reset step: the new episode starts from zeros
                self.bot.reset_states(np.flatnonzero(~active))
            self._skip = terminated | truncated
        else:  # DISABLED: reset the ended ones ourselves
            final = self._flat(next_obs)
            self._record(obs, taken, reward, terminated, truncated, final, None)
            ended = terminated | truncated
            if ended.any():
                reset_obs, infos = self.env.reset(options={"reset_mask": ended})
                self._obs = self._flat(reset_obs)
            else:
                self._obs = final
        self._mask = self._masks(infos)

    def _record(
        self,
        obs: NDArray[np.float32],
        taken: _Taken,
        reward: ArrayLike,
        terminated: ArrayLike,
        truncated: ArrayLike,
        next_obs: NDArray[np.float32],
        active: NDArray[np.bool_] | None,
    ) -> None:
        """Send the rows of ``active`` sub-environments (all when ``None``) and count their episodes."""
        reward_a = np.asarray(reward, dtype=np.float64).reshape(self.n_envs)
        term = np.asarray(terminated, dtype=bool).reshape(self.n_envs)
        trunc = np.asarray(truncated, dtype=bool).reshape(self.n_envs)
        if active is None:
            active = np.ones(self.n_envs, dtype=bool)
        rows = np.flatnonzero(active)
        if len(rows) == 0:
            return
        every = len(rows) == self.n_envs
        if not every:
            taken = taken.rows(rows)
        discrete = {} if taken.dact is None else {"dact": taken.dact, "mask": taken.mask}
        self.bot.record(
            obs if every else obs[rows],
            taken.actions,
            taken.logp,
            **discrete,
            reward=reward_a[rows].astype(np.float32),
            terminal=term[rows],
            truncated=trunc[rows],
            next_obs=next_obs if every else next_obs[rows],
            agents=None if every else rows,
        )
        self.steps += len(rows)
        self._returns[rows] += reward_a[rows]
        self._lengths[rows] += 1
        for i in rows[(term | trunc)[rows]]:
            self.episode_returns.append(float(self._returns[i]))
            self.episode_lengths.append(int(self._lengths[i]))
            self._returns[i] = 0.0
            self._lengths[i] = 0


def play_gym(
    url: str,
    env: EnvSpec,
    n_envs: int = 1,
    steps: int = 10_000,
    token: str | None = None,
    seed: int = 0,
    name: str = "gym",
    stop: threading.Event | None = None,
) -> GymResult:
    """Play ``steps`` environment steps (or until ``stop`` is set) of ``env`` as one websocket bot.

    ``env`` is built by :func:`make_env` (a vector environment in ``SAME_STEP`` mode when
    ``n_envs > 1``), played by a :class:`GymBot`, and closed at the end. The result's ``stats``
    show the weights swapped and steps sent. For other environment settings or frame sizes,
    build with :func:`make_env` and play a :class:`GymBot` yourself, as ``arena gym`` does.
    """
    environment = make_env(env, n_envs)
    try:
        bot = GymBot(url, environment, token=token, seed=seed, name=name)
    except BaseException:
        environment.close()
        raise
    with bot:
        return bot.run(steps, stop)


def evaluate(
    policy: Policy | ActFn,
    env: EnvSpec,
    episodes: int = 10,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[float]:
    """Returns of ``episodes`` episodes played locally (no server) with deterministic actions.

    Args:
        policy: our :class:`Policy` (it acts with its mean and, in discrete branches, the likeliest
            legal action: no noise, no sampling), or any function from observations (n, obs_dim) to
            normalized actions in [-1, 1] (a ``Box`` action space only).
        env: a registered id or a factory of one environment.
        seed: the environment is reset with it once, then episodes follow on.

    Raises:
        ValueError: the spaces do not fit the policy (see :class:`GymBot`).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    one = make_env(env, 1, False, env_kwargs)
    try:
        observations = ObservationMap.from_space(one.observation_space)
        action_map = ActionMap.from_space(one.action_space)
        space = action_map.actions
        if isinstance(policy, Policy):
            _check_limit(policy)
            if policy.obs_dim != observations.obs_dim or policy.actions != space:
                raise ValueError(
                    f"policy is {policy.obs_dim}→{_outputs(policy.actions)}, the env {observations.obs_dim}→{_outputs(space)}"
                )
        elif space.branches:
            raise ValueError(f"a function of observations acts in a Box only; {one.action_space} has discrete actions")
        returns = []
        obs, info = one.reset(seed=seed)
        for _ in range(episodes):
            total, done = 0.0, False
            state = policy.initial_state(1) if isinstance(policy, Policy) else np.zeros((1, 0), np.float32)  # its memory
            while not done:
                row = observations.rows(obs, 1, False)
                mask = action_masks(one, info, 1, space.n_logits, False) if space.branches else None
                if isinstance(policy, Policy):
                    chosen, state = policy.step(row, state, _NO_RNG, deterministic=True, mask=mask)
                    actions, dact = chosen[0], (chosen[2] if space.branches else np.zeros((1, 0), np.int64))
                else:
                    actions, dact = np.asarray(policy(row), dtype=np.float32).reshape(1, -1), np.zeros((1, 0), np.int64)
                obs, reward, terminated, truncated, info = one.step(action_map.to_env(actions, dact)[0])
                total += float(reward)
                done = bool(terminated or truncated)
            returns.append(total)
            obs, info = one.reset()
        return returns
    finally:
        one.close()


def _outputs(space: Any) -> str:
    """A space's outputs in short: ``1`` (continuous dims), or ``0 + branches [3, 2]``."""
    return f"{space.continuous} + branches {list(space.branches)}" if space.branches else str(space.continuous)


_NO_RNG = np.random.default_rng(0)
"""Deterministic play draws nothing; :meth:`Policy.act` still takes a generator."""
