"""PPO with the original arena trainer's guards: the agent and its update loop.

Paper: https://arxiv.org/abs/1707.06347 (clipped surrogate), GAE https://arxiv.org/abs/1506.02438.

Read top to bottom, :meth:`PPOAgent.update` is: take a rollout → values → GAE per segment →
guarded advantage normalization → epochs of shuffled minibatches → statistics. Each minibatch is
one :class:`~agents.ppo.steps.Step` (loss, backward, guards, Adam, log-std clamp), chosen once
when the agent is built, and again by :meth:`PPOAgent.distribute`: the reference step, the CPU's
written-out one, the multi-rank one or the CUDA graph's (:mod:`agents.ppo.steps`). Every guard is
one the Nim trainer this was ported from needed after a real failure; each one has its reason
beside it. A config with discrete ``branches`` gets a :class:`~agents.networks.MixedActor` (the CPU's
written-out step, or the reference on CUDA); its rollout's actions are the packed block the actor
splits. With ``obs_norm`` the rollout's observations are normalized once, as it is prepared, so every
path and every kernel sees normalized observations without knowing it (:meth:`PPOAgent.update` says
when the statistics move).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from ..common import Segment, SegmentEnd, compute_gae_flat, normalize_advantages, segment_rewards
from ..distributed import GradientSync
from ..networks import Actor, Critic, GaussianActor, LogStdRange, MixedActor, check_same_shapes
from ..normalization import ObsNormalizer, RunningMeanStd
from .batch import pack
from .config import PPOConfig
from .fused import actor_critic_pass
from .sequences import chunk_layout
from .stats import TERMS, Totals
from .steps import GraphStep, Step, StepKind, StepParts, choose_step

__all__ = ["PPOAgent"]


class _Rollout(NamedTuple):
    """An update's data, ready for its minibatches: the packed rows, and what its metrics read."""

    rows: Tensor
    """``obs | actions | old_logp | adv | ret`` (:func:`agents.ppo.batch.pack`), on the learner's device;
    ``obs`` normalized when ``obs_norm`` is on."""
    obs: NDArray[np.float32]
    """The rollout's raw observations, as the bots sent them (what the running statistics take in)."""
    values: NDArray[np.float32]
    returns: NDArray[np.float32]
    rewards: NDArray[np.float32]
    advantage_guard: str
    segments: int
    lengths: NDArray[np.int64]
    """Each segment's row count, in the rows' order (a recurrent actor's chunks are cut from them)."""


def _module_pass(actor: Actor, critic: Critic, obs: Tensor, cfg: PPOConfig) -> tuple[Tensor | None, Tensor]:
    """The actor's output (only where the proximal anchor reads it) and the critic's values, by the plain modules."""
    return actor(obs) if cfg.proximal_anchor else None, critic(obs)


def _fused_pass(actor: Actor, critic: Critic, obs: Tensor, cfg: PPOConfig) -> tuple[Tensor | None, Tensor]:
    """The actor's head and the critic's values in one written-out pass, a minibatch's rows at a time."""
    assert isinstance(actor, GaussianActor | MixedActor), "the written-out pass is the MLP actors'"
    return actor_critic_pass(actor, critic, obs, cfg.minibatch_size)


def new_actor(config: PPOConfig) -> Actor:
    """The actor ``config`` asks for: Gaussian for continuous actions only, mixed when it lists discrete branches."""
    if config.branches:
        return MixedActor(
            config.obs_dim,
            config.act_dim,
            config.branches,
            config.hidden,
            config.activation,
            LogStdRange(config.log_std_init, config.log_std_min, config.log_std_max),
            config.conv_shape,
            config.core,
        )
    return GaussianActor(
        config.obs_dim,
        config.act_dim,
        config.hidden,
        config.activation,
        LogStdRange(config.log_std_init, config.log_std_min, config.log_std_max),
        config.conv_shape,
        config.core,
    )


def _core_name(core: tuple[str, int] | None) -> str:
    return "none (memoryless)" if core is None else f"{core[0]} of {core[1]} units"


class PPOAgent:
    """Clipped PPO over segments streamed by many bots (see :class:`agents.base.Agent`)."""

    name = "ppo"

    def __init__(self, config: PPOConfig) -> None:
        self.config = config
        self.max_policy_lag = config.max_policy_lag
        self.update_steps = config.rollout_steps
        self.device = torch.device(config.device)
        self.generator = torch.Generator().manual_seed(config.seed)  # CPU generator: shuffles are device-independent
        torch.manual_seed(config.seed)
        self.actor: Actor = new_actor(config).to(self.device)
        # A recurrent run's critic reads the observation and the state the bot acted from (its memory), no core of its own.
        critic_in = config.obs_dim + config.state_size
        self.critic = Critic(critic_in, config.hidden, config.activation, config.conv_shape).to(self.device)
        self.obs_norm = ObsNormalizer(config.obs_dim, config.obs_norm_clip, self.device) if config.obs_norm else None
        """The running observation statistics both networks' inputs are scaled by (``obs_norm``), else None."""
        self.progress = 0.0
        """The share of the run's budget spent, in [0, 1] (:meth:`set_progress`); it sets the learning rate."""
        plain = not (config.conv or config.recurrent)  # an MLP on the observation itself
        self._evaluate = _fused_pass if config.fused and plain else _module_pass
        self.gradient_sync: GradientSync | None = None
        """Set by :meth:`distribute`: averages each step's gradients over the learner ranks."""
        self.totals = Totals(self.device)
        """The update's statistics, summed by the steps on the device (:mod:`agents.ppo.stats`)."""
        self._step_kind = choose_step(config)
        self.optimizer = self._new_optimizer(capturable=self._step_kind is GraphStep)
        self.step: Step = self._step_kind(self._step_parts())
        """Every minibatch's step, of the path :func:`agents.ppo.steps.choose_step` picked."""
        self.updates = 0
        self._segments: list[Segment] = []
        self._held = 0

    def distribute(self, sync: GradientSync) -> None:
        """Average every gradient step over learner ranks with ``sync`` (an
        :class:`agents.distributed.GradientAverager`), between the backward pass and the guard.

        Every rank must then run the same number of minibatch steps per update, which PPO does:
        an update takes exactly ``rollout_steps`` steps. The CUDA graph path is turned off (the
        all-reduce is a host call between backward and step); call this before training.

        Raises:
            ValueError: with ``obs_norm``: each rank's statistics would follow its own bots' observations,
                and the ranks would then train the same weights on differently scaled inputs.
        """
        if self.obs_norm is not None:
            raise ValueError("obs_norm is not available with several learner ranks: each rank's statistics would differ")
        self.gradient_sync = sync
        if self.optimizer.defaults["capturable"]:  # a graph's: not capturable any more
            self.optimizer = self._new_optimizer(capturable=False)
        self.use_step(choose_step(self.config, sync))

    def use_step(self, kind: StepKind) -> None:
        """Run every minibatch with a step of ``kind`` from now on (kept across :meth:`load_state_dict`).

        :meth:`distribute` calls it; tests use it to run one path beside another on the same data.
        """
        self._step_kind = kind
        self.step = kind(self._step_parts())

    def _step_parts(self) -> StepParts:
        return StepParts(self.config, self.actor, self.critic, self.optimizer, self.totals, self.gradient_sync)

    def _new_optimizer(self, capturable: bool) -> torch.optim.Adam:
        """Adam over both networks. ``capturable``: for a CUDA graph (its step counts live on the device).

        fused: one kernel for all parameters instead of a dozen small ops per tensor (the Adam maths is
        the same). The device-side skip guard needs it too (see :func:`agents.guards.adam_step_unless`).
        """
        params = [*self.actor.parameters(), *self.critic.parameters()]
        # A captured graph replays the Adam step with the learning rate it saw, unless that rate is a
        # tensor it reads on the device (fused and capturable Adam take one): then an annealed rate is seen.
        lr: float | Tensor = torch.tensor(self.learning_rate, device=self.device) if capturable else self.learning_rate
        return torch.optim.Adam(params, lr=lr, eps=self.config.adam_eps, fused=True, capturable=capturable)

    @property
    def learning_rate(self) -> float:
        """The learning rate now: ``learning_rate`` falling linearly to ``final_lr_fraction`` of it with :attr:`progress`."""
        cfg = self.config
        return cfg.learning_rate * (1.0 - (1.0 - cfg.final_lr_fraction) * self.progress)

    def set_progress(self, fraction: float) -> None:
        """The share of the run's budget spent (clipped to [0, 1]); the next update runs at the rate it sets.

        Called by whoever knows the budget (``arena train``'s watch loop, from any thread): a plain float
        the trainer thread reads once per update.
        """
        self.progress = min(max(float(fraction), 0.0), 1.0) if math.isfinite(fraction) else self.progress

    def _apply_learning_rate(self) -> None:
        rate = self.learning_rate
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], Tensor):
                group["lr"].fill_(rate)
            else:
                group["lr"] = rate

    # ── data in ──────────────────────────────────────────────────────────────

    def observe(self, segments: list[Segment]) -> None:
        for segment in segments:
            self._segments.append(segment)
            self._held += segment.steps

    def ready(self) -> bool:
        return self._held >= self.config.rollout_steps

    def discard_stale(self, oldest_version: int) -> int:
        kept = [s for s in self._segments if s.version >= oldest_version]
        dropped = self._held - sum(s.steps for s in kept)
        self._segments, self._held = kept, self._held - dropped
        return dropped

    @property
    def drain_steps(self) -> int | None:
        # On-policy: take just what the next rollout lacks. The rest waits in the queue, which
        # is bounded and accounted (and withholds credit when full) rather than in the agent,
        # where it would age past an update and be trained on at a larger policy lag.
        return max(1, self.config.rollout_steps - self._held)

    @property
    def pending_steps(self) -> int:
        return self._held

    def _take_rollout(self) -> list[Segment]:
        """The oldest ``rollout_steps`` steps held (all of them, if fewer), splitting the segment that crosses the end."""
        taken = steps = 0
        while taken < len(self._segments) and steps < self.config.rollout_steps:
            steps += self._segments[taken].steps
            taken += 1
        rollout, self._segments = self._segments[:taken], self._segments[taken:]
        excess = steps - self.config.rollout_steps
        if excess > 0:
            head, tail = rollout[-1].split(rollout[-1].steps - excess)
            rollout[-1] = head
            self._segments.insert(0, tail)
            steps -= excess
        self._held -= steps
        return rollout

    # ── the update ───────────────────────────────────────────────────────────

    def update(self) -> dict[str, float]:
        """One PPO update over the oldest held segments totalling at least ``rollout_steps`` steps.

        Newer segments wait for the next update, so every update has about the same size
        (and the same duration) however fast bots produce.

        With ``obs_norm`` the running statistics take in the rollout's observations after its
        epochs, not before: the update then trains on the normalization published with the
        weights the bots acted with, so the ratio pi / pi_old starts at 1 (without lag) and
        measures the gradient steps alone, not a change of the inputs' scale the clip never
        bounded. The weights and statistics exported next are published together as one version.
        """
        cfg = self.config
        segments = self._take_rollout()
        if not segments:
            return {"train/steps_trained": 0.0}
        rollout = self._prepare(segments)
        if cfg.final_lr_fraction != 1.0:
            self._apply_learning_rate()
        # epochs of shuffled minibatches, one step each; the steps sum their statistics on the device
        self.totals.zero_()
        if cfg.recurrent:
            self._chunk_epochs(rollout)
        else:
            n = len(rollout.rows)
            for _epoch in range(cfg.epochs):
                order = torch.randperm(n, generator=self.generator).to(self.device)
                for start in range(0, n, cfg.minibatch_size):
                    self.step(rollout.rows, order[start : start + cfg.minibatch_size])
        if self.obs_norm is not None:
            self.obs_norm.update(rollout.obs)
        self.updates += 1
        return self._metrics(rollout, self.totals.read())

    def _chunk_epochs(self, rollout: _Rollout) -> None:
        """A recurrent actor's epochs: shuffled minibatches of ``minibatch_size // sequence_length`` whole chunks."""
        cfg = self.config
        chunks = chunk_layout(rollout.lengths, cfg.sequence_length).to(self.device)
        per_step = max(1, cfg.minibatch_size // cfg.sequence_length)
        for _epoch in range(cfg.epochs):
            order = torch.randperm(len(chunks), generator=self.generator).to(self.device)
            for start in range(0, len(chunks), per_step):
                self.step(rollout.rows, chunks.index_select(0, order[start : start + per_step]))

    def _prepare(self, segments: list[Segment]) -> _Rollout:
        """The rollout's rows with their advantages and returns: values, GAE per segment, normalization, anchor."""
        cfg, dev = self.config, self.device
        # Rebuild tensors on this (the trainer) thread from the plain arrays.
        raw_obs = np.concatenate([s.obs for s in segments])
        obs = self._with_state(self._normalized(torch.from_numpy(raw_obs).to(dev)), segments)
        actions = torch.from_numpy(np.concatenate([s.act for s in segments])).to(dev)
        if actions.shape[1] != cfg.action_width:
            raise ValueError(f"the rollout's actions are {actions.shape[1]} wide, this agent's {cfg.action_width}")
        old_logp = torch.from_numpy(np.concatenate([s.logp for s in segments])).to(dev)
        rewards = np.concatenate([segment_rewards(s) for s in segments])
        mean, values, last_values = self._values(segments, obs)
        lengths = np.array([s.steps for s in segments], dtype=np.int64)

        # GAE per segment: 0 after a natural end, V(next_obs) after a truncation (a time limit still has a future).
        advantages, returns = compute_gae_flat(rewards, values, lengths, last_values, cfg.gamma, cfg.gae_lambda)
        norm_adv, adv_branch = normalize_advantages(advantages)
        adv_t = torch.from_numpy(norm_adv).to(dev)
        ret_t = torch.from_numpy(returns.astype(np.float32)).to(dev)
        if cfg.proximal_anchor:
            assert mean is not None, "computed whenever the anchor is on"
            old_logp, adv_t = self._anchor_at_current_policy(mean, actions, old_logp, adv_t)
        # One matrix, so a minibatch is one gather, not five.
        rows = pack(obs, actions, old_logp, adv_t, ret_t)
        return _Rollout(rows, raw_obs, values, returns, rewards, adv_branch, len(segments), lengths)

    def _with_state(self, obs: Tensor, segments: list[Segment]) -> Tensor:
        """A recurrent actor's rows: each observation, then the state its bot acted from (``obs`` itself without a core).

        Raises:
            ValueError: a segment without states, or with states of another size, for a recurrent actor.
        """
        size = self.config.state_size
        if size == 0:
            return obs
        for s in segments:
            if s.state is None or s.state.shape != (s.steps, size):
                found = "none" if s.state is None else f"shape {list(s.state.shape)}"
                raise ValueError(f"a recurrent actor needs each row's state ({size} entries); a segment has {found}")
        state = torch.from_numpy(np.concatenate([s.state for s in segments])).to(obs.device)  # type: ignore[misc]
        return torch.cat([obs, state], dim=1)

    def _normalized(self, obs: Tensor) -> Tensor:
        """``obs`` as both networks see it: normalized with ``obs_norm``, else as it is (the same tensor)."""
        return obs if self.obs_norm is None else self.obs_norm(obs)

    def _values(self, segments: list[Segment], obs: Tensor) -> tuple[Tensor | None, NDArray[np.float32], NDArray[np.float32]]:
        """(the actor's mean where the anchor reads it, every step's value, each segment's bootstrap value).

        Values come from the current critic (bots never hold it). The bootstrap value is V(next_obs)
        for a truncated or cut segment, 0 after a natural end. ``obs`` is already normalized; the
        raw ``next_obs`` is normalized here the same way.
        """
        with torch.no_grad():
            mean, values_t = self._evaluate(self.actor, self.critic, obs, self.config)
            values = values_t.cpu().numpy()
            boot_rows = [i for i, s in enumerate(segments) if s.end is not SegmentEnd.TERMINAL]
            last_values = np.zeros(len(segments), dtype=np.float32)
            if boot_rows:
                boot_obs = np.stack([segments[i].next_obs for i in boot_rows])  # type: ignore[misc]
                boot_t = self._normalized(torch.from_numpy(boot_obs).to(self.device))
                if self.config.state_size:
                    boot_t = torch.cat([boot_t, self._next_states(segments, boot_rows, obs)], dim=1)
                last_values[boot_rows] = self.critic(boot_t).cpu().numpy()
        return mean, values, last_values

    def _next_states(self, segments: list[Segment], which: list[int], rows: Tensor) -> Tensor:
        """The state after the last step of each segment in ``which``: the one it carries, else one step of the core.

        ``rows`` are the rollout's (observation, state) rows, the segments' one after another. Under ``no_grad``.
        """
        ends = np.cumsum([s.steps for s in segments]) - 1
        body = self.actor.body
        assert body.core is not None
        last = rows[torch.from_numpy(ends[which]).to(rows.device)]
        stepped = body.core.step(body.features(last[:, : body.obs_dim]), last[:, body.obs_dim :])[1]
        carried = [(k, s.next_state) for k, s in enumerate(segments[i] for i in which) if s.next_state is not None]
        for k, state in carried:
            stepped[k] = torch.from_numpy(state).to(rows.device)
        return stepped

    def _metrics(self, rollout: _Rollout, sums: dict[str, float]) -> dict[str, float]:
        """The update's metrics: each term and the gradient norm averaged over the steps taken, and the rest."""
        applied, skipped = int(sums["applied"]), int(sums["skipped"])
        returns, values = rollout.returns, rollout.values
        y_var = float(np.var(returns))
        explained = float("nan") if y_var == 0.0 else 1.0 - float(np.var(returns - values)) / y_var
        metrics = {f"train/{key}": sums[key] / max(applied, 1) for key in (*TERMS, "grad_norm")}
        metrics.update(
            {
                "train/explained_variance": explained,
                "train/skipped_minibatches": float(skipped),
                "train/minibatches": float(applied),
                # The trainer's guard keys (every agent reports them): steps applied and skipped.
                "train/applied_steps": float(applied),
                "train/skipped_steps": float(skipped),
                "train/steps_trained": float(len(rollout.rows)),
                "train/segments": float(rollout.segments),
                "train/advantage_guard": {"normalized": 0.0, "centered": 1.0, "zeroed": 2.0}[rollout.advantage_guard],
                "train/std_mean": self._std_mean(),
                "train/learning_rate": self.learning_rate,
                "train/reward_mean": float(np.mean(rollout.rewards)),
            }
        )
        return metrics

    def _std_mean(self) -> float:
        """The continuous dims' mean std; NaN without any (as ``explained_variance`` without variance)."""
        if self.config.act_dim == 0:
            return float("nan")
        return float(self.actor.clamped_log_std().detach().exp().mean())

    def _anchor_at_current_policy(
        self, mean: Tensor, actions: Tensor, behaviour_logp: Tensor, adv: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Decoupled PPO: clip against the policy this update starts from, weight by how likely it finds the data.

        Bots act while the trainer trains, so a rollout was acted by a policy one or two versions
        behind the one being updated. The clipped surrogate then bounds pi / mu (mu: the bots'
        policy), and a step's worth of that trust region is spent before the update begins. Here
        the ratio is pi / pi_prox, with pi_prox the current policy, and each sample's advantage is
        weighted by min(1, pi_prox / mu) (V-trace's rho-bar = 1), the importance weight that makes
        it an estimate under pi_prox. A weight w >= 0 on the advantage is the same as on the whole
        clipped term: w * min(r A, clip(r) A) = min(r wA, clip(r) wA). With no lag, pi_prox = mu
        and this is plain PPO. Hilton et al. 2021, https://arxiv.org/abs/2110.00641.

        A non-finite behaviour log-prob makes its weight non-finite, so the minibatch guard still skips it.
        """
        with torch.no_grad():
            proximal = self.actor.log_prob_at(mean, actions)[0]
            weight = (proximal - behaviour_logp).clamp(max=0.0).exp()
        return proximal, adv * weight

    # ── export and persistence ───────────────────────────────────────────────

    def export_actor(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """The actor in the bot-ready layout; with ``obs_norm`` also ``obs_norm.mean``, ``obs_norm.std`` and ``obs_clip``."""
        arch, tensors = self.actor.export()
        if self.obs_norm is not None:
            arch["obs_clip"] = self.obs_norm.clip
            tensors.update(self.obs_norm.export())
        return arch, tensors

    def explore_settings(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        config = asdict(self.config)
        config["hidden"] = list(config["hidden"])
        for name in ("branches", "conv", "image"):
            config[name] = list(config[name])
        state = {
            "algo": self.name,
            "config": config,
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "shuffle_rng": self.generator.get_state(),
        }
        if self.obs_norm is not None:
            state["obs_norm"] = self.obs_norm.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load networks (must match this config) and Adam state (re-created if its shapes differ).

        Both networks and the observation statistics are checked before any is touched, so a mismatch
        never half-loads.
        Adam's moments come from the checkpoint; its learning rate and eps from this config.
        """
        if state.get("algo") != self.name:
            raise ValueError(f"checkpoint holds a {state.get('algo')!r} agent, not {self.name!r}")
        branches = tuple(state.get("config", {}).get("branches", ()))
        if branches != self.config.branches:  # another kind of actor: say so, not just that shapes differ
            raise ValueError(f"checkpoint's actor has discrete branches {branches}, this run's {self.config.branches}")
        saved = state.get("config", {})
        core = (saved.get("recurrent", ""), saved.get("recurrent_size", 64)) if saved.get("recurrent") else None
        if core != self.config.core:
            ours = _core_name(self.config.core)
            raise ValueError(f"checkpoint's actor has recurrent core {_core_name(core)}, this run's {ours}")
        for key, module in (("actor", self.actor), ("critic", self.critic)):
            check_same_shapes(key, module.state_dict(), state.get(key))
        obs_stats = self._checkpoint_obs_stats(state)
        if self.obs_norm is not None and obs_stats is not None:
            self.obs_norm.load_stats(obs_stats)
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor.clamp_log_std_()
        capturable = bool(self.optimizer.defaults["capturable"])  # this path's, whatever the checkpoint's
        self.optimizer = self._new_optimizer(capturable)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self._check_optimizer_shapes()
        except (ValueError, KeyError, RuntimeError) as exc:
            # A checkpoint from other layer sizes leaves Adam moments of the wrong shape:
            # start Adam fresh rather than crash (or broadcast garbage) on the next step.
            warnings.warn(f"optimizer state not reusable ({exc}); Adam re-created", stacklevel=2)
            self.optimizer = self._new_optimizer(capturable)
        for group in self.optimizer.param_groups:  # the run's config wins over the checkpoint's
            group["eps"] = self.config.adam_eps
            # So does this device's: a checkpoint from an eager or CPU run says capturable=False, and
            # load_state_dict copies that flag too, which would make the next graph capture fail.
            group["capturable"] = self.optimizer.defaults["capturable"]
            group["lr"] = self.optimizer.defaults["lr"]  # a float, or on a graph the device tensor
        self._apply_learning_rate()
        self.updates = int(state.get("updates", 0))
        # The same path over the new optimizer (a CUDA graph captured the old one's state: it captures again).
        self.step = self._step_kind(self._step_parts())
        if "shuffle_rng" in state:
            self.generator.set_state(state["shuffle_rng"])

    def _checkpoint_obs_stats(self, state: dict[str, Any]) -> RunningMeanStd | None:
        """The checkpoint's observation statistics, checked, or None when neither it nor this run normalizes.

        Networks trained on normalized inputs act otherwise on raw ones (and the reverse), so a
        checkpoint that normalized loaded into a run that does not (or the reverse) is refused by name.
        """
        saved = "obs_norm" in state
        if saved != (self.obs_norm is not None):
            said = "normalizes" if saved else "does not normalize"
            raise ValueError(f"checkpoint {said} observations (obs_norm), this run's config says obs_norm={not saved}")
        return RunningMeanStd.from_state(state["obs_norm"], self.config.obs_dim) if saved else None

    def rollback(self, state: dict[str, Any]) -> None:
        """Networks and Adam back to ``state``; the segments held for the next rollout stay."""
        self.load_state_dict(state)

    def _check_optimizer_shapes(self) -> None:
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                st = self.optimizer.state.get(p, {})
                for key in ("exp_avg", "exp_avg_sq"):
                    if key in st and st[key].shape != p.shape:
                        raise ValueError(f"Adam {key} shape {tuple(st[key].shape)} != parameter {tuple(p.shape)}")
