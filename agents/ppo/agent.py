"""PPO with the original arena trainer's guards, in batched torch autograd.

Paper: https://arxiv.org/abs/1707.06347 (clipped surrogate), GAE https://arxiv.org/abs/1506.02438.

Read top to bottom, :meth:`PPOAgent.update` is: rewards → values → GAE per segment →
guarded advantage normalization → epochs of shuffled minibatches (clipped surrogate,
value loss, gated entropy bonus) → guarded gradient step → log-std clamp. Every guard
is one the Nim trainer this was ported from needed after a real failure; each one has
its reason beside it.

Every minibatch runs one step function, :meth:`PPOAgent._guarded_step`. On CUDA
(``PPOConfig.cuda_graph``) that step is captured once in a CUDA graph and replayed: a
64-row step is a few hundred tiny kernels, and launching them one by one from Python
costs far more than running them. Eagerly it is simply called. One function, so the two
paths cannot drift apart; the only thing that differs is where the skip guard acts (a
graph cannot branch on the host), and that is one line of the step. On the CPU's written-out
step (one rank, no graph) the guards after the gradients run as one compiled call instead of
~30 torch ones (:mod:`agents.guard_kernel`): the same guards, held against these by
``tests/agents/test_guard_kernel.py``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from ..adam import adam_step
from ..common import Segment, SegmentEnd, compute_gae_flat, normalize_advantages, segment_rewards
from ..distributed import GradientSync
from .fused import FlatGradients, actor_critic_forward, actor_critic_pass, clipped_surrogate, write_ppo_gradients
from .guard_kernel import GuardLimits, guard_and_clip
from ..guards import adam_step_unless
from .loss_kernel import STATS, LossWeights
from ..networks import Critic, GaussianActor, check_same_shapes
from .config import PPOConfig

__all__ = ["PPOAgent", "PPOConfig", "adam_step_unless"]

_TOTALS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "mean_excess", "grad_norm")
"""Per-minibatch statistics the step sums on the device (then its done and skipped counts)."""
assert _TOTALS[:-1] == STATS[1:], "agents.guard_kernel adds the loss kernel's statistics to the totals by position"
_GRAPH_WARMUP_STEPS = 3
"""Eager minibatch steps (on a side stream) before capture, as the PyTorch CUDA-graph recipe asks."""


def _renormalize(adv: Tensor) -> Tensor:
    """One minibatch's advantages normalized with the seed's variance guard, branch-free (CUDA graphs).

    Below a variance of 1e-8 they are only centered: dividing float32 noise by its own tiny
    std amplified it 1e4x in the seed trainer (see ``agents.common.normalize_advantages``).
    """
    centered = adv - adv.mean()
    var = centered.pow(2).mean()
    return torch.where(var < 1e-8, centered, centered * torch.rsqrt(var + 1e-8))


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
        self.actor = GaussianActor(
            config.obs_dim,
            config.act_dim,
            config.hidden,
            config.activation,
            config.log_std_init,
            config.log_std_min,
            config.log_std_max,
        ).to(self.device)
        self.critic = Critic(config.obs_dim, config.hidden, config.activation).to(self.device)
        self.use_graph = self.device.type == "cuda" and config.cuda_graph
        """Full minibatches replay :meth:`_guarded_step` from a CUDA graph, which skips on the device.
        Set on the CPU (tests only), the step runs without a graph but skips as a graph does: that is
        how the CPU tests check the graph's guard against the eager one."""
        self.progress = 0.0
        """The share of the run's budget spent, in [0, 1] (:meth:`set_progress`); it sets the learning rate."""
        self.optimizer = self._new_optimizer()
        self._flat = FlatGradients(self.actor, self.critic)
        self._written_out = config.fused and self.device.type == "cpu"
        """The minibatch's gradients by :func:`agents.fused.write_ppo_gradients` (see :meth:`_minibatch_gradients`)."""
        self._guards_compiled = self._written_out
        """The guards after those gradients by :func:`agents.guard_kernel.guard_and_clip` (one rank, no graph);
        else in torch. A test turns it off to hold the two against each other."""
        self._weights = LossWeights(
            config.clip_epsilon,
            config.max_log_ratio,
            config.value_coef,
            config.entropy_coef,
            config.mean_bound,
            config.mean_bound_coef,
            config.log_std_min,
            config.log_std_max,
        )
        self._stats = torch.zeros(len(STATS), dtype=torch.float64)
        """The written-out step's statistics (:data:`agents.loss_kernel.STATS`), refilled every minibatch."""
        self._stat_views = dict(zip(STATS, self._stats.unbind(), strict=True))
        self._limits = np.array(
            GuardLimits(config.log_std_min, config.max_grad_norm, config.skip_grad_norm, config.clip_per_network),
            dtype=np.float64,
        )
        self.updates = 0
        self._segments: list[Segment] = []
        self._held = 0
        width = config.obs_dim + config.act_dim + 3  # obs | act | old_logp | adv | ret
        self._static = torch.empty((config.minibatch_size, width), device=self.device) if self.use_graph else None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._warmup_left = _GRAPH_WARMUP_STEPS
        # Sums, then done and skipped counts. float64: summing in the order the minibatches ran,
        # it gives exactly the Python-float sums the eager loop reported before it shared the step.
        self._totals = torch.zeros(len(_TOTALS) + 2, dtype=torch.float64, device=self.device)
        self.gradient_sync: GradientSync | None = None
        """Set by :meth:`distribute`: averages each step's gradients over the learner ranks."""

    def distribute(self, sync: GradientSync) -> None:
        """Average every gradient step over learner ranks with ``sync`` (an
        :class:`agents.distributed.GradientAverager`), between the backward pass and the guard.

        Every rank must then run the same number of minibatch steps per update, which PPO does:
        an update takes exactly ``rollout_steps`` steps. The CUDA graph path is turned off (the
        all-reduce is a host call between backward and step); call this before training.
        """
        self.gradient_sync = sync
        if self.use_graph:
            self.use_graph = False
            self._static = None
            self._graph = None
            self.optimizer = self._new_optimizer()  # not capturable any more

    def _new_optimizer(self) -> torch.optim.Adam:
        params = [*self.actor.parameters(), *self.critic.parameters()]
        # fused: one kernel for all parameters instead of ~13 small ops per tensor; it made a
        # 2048-step update ~25% faster on this 2-core CPU (the Adam math is the same). The
        # device-side skip guard needs it too (see adam_step_unless), and a graph needs
        # capturable (its step counts live on the device; fused ignores the flag otherwise).
        capturable = self.use_graph and self.device.type == "cuda"
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
        """
        cfg = self.config
        segments = self._take_rollout()
        if not segments:
            return {"train/steps_trained": 0.0}
        dev = self.device

        # Rebuild tensors on this (the trainer) thread from the plain arrays.
        obs = torch.from_numpy(np.concatenate([s.obs for s in segments])).to(dev)
        actions = torch.from_numpy(np.concatenate([s.act for s in segments])).to(dev)
        old_logp = torch.from_numpy(np.concatenate([s.logp for s in segments])).to(dev)
        rewards = [segment_rewards(s) for s in segments]

        # Values with the current critic (bots never hold it), and the actor's mean where the proximal
        # anchor needs it (one pass for both when fused); bootstrap rows for truncations and cuts.
        with torch.no_grad():
            mean: Tensor | None
            if cfg.fused:
                mean, values_t = actor_critic_pass(self.actor, self.critic, obs, cfg.minibatch_size)
            else:
                mean, values_t = self.actor(obs) if cfg.proximal_anchor else None, self.critic(obs)
            values = values_t.cpu().numpy()
            boot_rows = [i for i, s in enumerate(segments) if s.end is not SegmentEnd.TERMINAL]
            last_values = np.zeros(len(segments), dtype=np.float32)
            if boot_rows:
                boot_obs = np.stack([segments[i].next_obs for i in boot_rows])  # type: ignore[misc]
                last_values[boot_rows] = self.critic(torch.from_numpy(boot_obs).to(dev)).cpu().numpy()
        lengths = np.array([s.steps for s in segments], dtype=np.int64)
        flat_rewards = np.concatenate(rewards)

        # GAE per segment: 0 after a natural end, V(next_obs) after a truncation (a time limit still has a future).
        advantages, returns = compute_gae_flat(flat_rewards, values, lengths, last_values, cfg.gamma, cfg.gae_lambda)
        norm_adv, adv_branch = normalize_advantages(advantages)
        adv_t = torch.from_numpy(norm_adv).to(dev)
        ret_t = torch.from_numpy(returns.astype(np.float32)).to(dev)
        if cfg.proximal_anchor:
            assert mean is not None, "computed above whenever the anchor is on"
            old_logp, adv_t = self._anchor_at_current_policy(mean, actions, old_logp, adv_t)

        n = len(obs)
        if cfg.final_lr_fraction != 1.0:
            self._apply_learning_rate()
        # One matrix, so a minibatch is one gather (not five): the five took ~7% of a step on the CPU.
        rollout = torch.cat([obs, actions, old_logp[:, None], adv_t[:, None], ret_t[:, None]], dim=1)
        self._totals.zero_()
        for _epoch in range(cfg.epochs):
            order = torch.randperm(n, generator=self.generator).to(dev)
            for start in range(0, n, cfg.minibatch_size):
                idx = order[start : start + cfg.minibatch_size]
                if self.use_graph and len(idx) == cfg.minibatch_size and dev.type == "cuda":
                    self._graph_step(rollout, idx)
                else:
                    # Eager, and on the graph path a partial last minibatch (n not a multiple of
                    # minibatch_size), which does not fit the graph's static shapes: it runs the same
                    # step eagerly rather than being dropped, so both paths train on every row.
                    self._guarded_step(*self._columns(rollout.index_select(0, idx)))
        totals = self._totals.tolist()  # the update's one read of the statistics
        stats = dict(zip(_TOTALS, totals, strict=False))
        done_minibatches, skipped = int(totals[-2]), int(totals[-1])
        self.updates += 1

        y_var = float(np.var(returns))
        explained = float("nan") if y_var == 0.0 else 1.0 - float(np.var(returns - values)) / y_var
        metrics = {f"train/{k}": v / max(done_minibatches, 1) for k, v in stats.items()}
        metrics.update(
            {
                "train/explained_variance": explained,
                "train/skipped_minibatches": float(skipped),
                "train/minibatches": float(done_minibatches),
                # The trainer's guard keys (every agent reports them): steps applied and skipped.
                "train/applied_steps": float(done_minibatches),
                "train/skipped_steps": float(skipped),
                "train/steps_trained": float(n),
                "train/segments": float(len(segments)),
                "train/advantage_guard": {"normalized": 0.0, "centered": 1.0, "zeroed": 2.0}[adv_branch],
                "train/std_mean": float(self.actor.clamped_log_std().detach().exp().mean()),
                "train/learning_rate": self.learning_rate,
                "train/reward_mean": float(np.mean(flat_rewards)),
            }
        )
        return metrics

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

    def _minibatch_gradients(
        self, obs: Tensor, actions: Tensor, old_logp: Tensor, adv: Tensor, ret: Tensor
    ) -> dict[str, Tensor]:
        """One minibatch's loss terms (no gradient), every parameter's gradient of the loss in its ``.grad``.

        On the CPU with ``fused`` the whole step is :func:`agents.fused.write_ppo_gradients`, the maths
        written out with no autograd; elsewhere the loss goes through autograd: the reference
        (``fused=False``), and on CUDA the fused nodes, whose graph replay already removes the
        per-call overhead the written-out step saves on the CPU.
        """
        if self._written_out:
            if self.config.advantage_norm == "minibatch":
                adv = _renormalize(adv)
            batch = (obs, actions, old_logp, adv, ret)
            write_ppo_gradients(self.actor, self.critic, self._flat, batch, self._weights, self._stats)
            return dict(self._stat_views)  # a copy: a caller may replace an entry
        mb = self._minibatch_loss(obs, actions, old_logp, adv, ret)
        # A graph zeroes in place instead of setting None: a replay writes gradients where it captured them.
        self.optimizer.zero_grad(set_to_none=not self.use_graph)
        mb["loss"].backward()  # type: ignore[no-untyped-call]
        return {key: value.detach() for key, value in mb.items()}

    def _gradient_groups(self) -> list[list[Tensor]]:
        """The gradients the clip acts on, per group: both networks as one (the seed's), or one group each.

        After the written-out step each network's gradients are one contiguous range of one buffer
        (:class:`agents.fused.FlatGradients`), so a group is one tensor; after autograd, the ``.grad`` tensors.
        """
        if self._written_out:
            flat = self._flat
            return [[flat.actor], [flat.critic]] if self.config.clip_per_network else [[flat.buffer]]
        groups = [[g for p in net.parameters() if (g := p.grad) is not None] for net in (self.actor, self.critic)]
        return groups if self.config.clip_per_network else [groups[0] + groups[1]]

    def _minibatch_loss(self, obs: Tensor, actions: Tensor, old_logp: Tensor, adv: Tensor, ret: Tensor) -> dict[str, Tensor]:
        """The minibatch's loss in autograd (see :meth:`_minibatch_gradients`)."""
        cfg = self.config
        if cfg.advantage_norm == "minibatch":
            adv = _renormalize(adv)
        log_std = self.actor.clamped_log_std()
        if cfg.fused:
            mean, value = actor_critic_forward(self.actor, self.critic, obs)
            eps, max_log_ratio = cfg.clip_epsilon, cfg.max_log_ratio
            surrogate = clipped_surrogate(mean, log_std, value, actions, old_logp, adv, ret, eps, max_log_ratio)
        else:
            mean = self.actor(obs)
            surrogate = self._surrogate_by_autograd(obs, mean, actions, old_logp, adv, ret, log_std)
        policy_loss, value_loss, approx_kl, clip_fraction = surrogate
        # entropy bonus, gated per dimension at the log-std ceiling so it cannot push std up forever
        at_ceiling = self.actor.log_std.detach() >= cfg.log_std_max
        gated = torch.where(at_ceiling, log_std.detach(), log_std)
        entropy = (gated + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum()
        # the value loss with the seed's coefficient
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        if cfg.mean_bound_coef > 0:  # autograd adds its gradient to the fused node's mean output
            mean_excess = (mean.abs() - cfg.mean_bound).clamp(min=0.0).pow(2).sum(dim=-1).mean()
            loss = loss + cfg.mean_bound_coef * mean_excess
        else:
            mean_excess = torch.zeros((), device=mean.device)
        return {
            "loss": loss,
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy.detach(),
            "approx_kl": approx_kl,
            "clip_fraction": clip_fraction,
            "mean_excess": mean_excess.detach(),
        }

    def _surrogate_by_autograd(
        self, obs: Tensor, mean: Tensor, actions: Tensor, old_logp: Tensor, adv: Tensor, ret: Tensor, log_std: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:func:`agents.fused.clipped_surrogate` of the plain modules, in autograd: the reference (``fused=False``)."""
        cfg = self.config
        new_logp = self.actor.log_prob_at(mean, actions)[0]
        log_ratio = (new_logp - old_logp).clamp(-cfg.max_log_ratio, cfg.max_log_ratio)
        ratio = log_ratio.exp()
        surr1 = ratio * adv
        surr2 = ratio.clamp(1.0 - cfg.clip_epsilon, 1.0 + cfg.clip_epsilon) * adv
        policy_loss = -torch.min(surr1, surr2).mean()
        value_loss = (self.critic(obs) - ret).pow(2).mean()
        with torch.no_grad():
            approx_kl = ((ratio - 1.0) - log_ratio).mean()  # http://joschu.net/blog/kl-approx.html
            clip_fraction = ((ratio - 1.0).abs() > cfg.clip_epsilon).float().mean()
        return policy_loss, value_loss, approx_kl, clip_fraction

    def _gate_log_std_floor(self) -> None:
        """At the floor, drop gradient that would push the log-std further down.

        The seed zeroed the whole gradient there; we keep the upward part so a std that
        touched the floor can still recover (a zero gradient made the floor absorbing).
        Gradient descent moves against the gradient, so "down" is a positive gradient.
        """
        grad = self.actor.log_std.grad
        if grad is not None:
            at_floor = self.actor.log_std.detach() <= self.config.log_std_min
            grad.copy_(torch.where(at_floor, grad.clamp(max=0.0), grad))

    # ── the minibatch step, eager or in a CUDA graph ─────────────────────────

    def _columns(self, rows: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """(obs, actions, old_logp, adv, ret) views of packed rollout rows."""
        o, a = self.config.obs_dim, self.config.act_dim
        return rows[:, :o], rows[:, o : o + a], rows[:, o + a], rows[:, o + a + 1], rows[:, o + a + 2]

    def _graph_step(self, rollout: Tensor, idx: Tensor) -> None:
        """One full minibatch on CUDA: gather its rows into the static input, replay the captured step.

        The PyTorch CUDA-graph recipe: the first few steps after the optimizer is (re)built run
        eagerly on a side stream (real steps on real minibatches; they also create Adam's
        state, which a capture would only record, not run), then the next one is captured
        over the static input. Capturing records without running, so it is then replayed.
        Gradients are set to None before capture so the graph allocates, and owns, them.
        """
        assert self._static is not None, "the static input exists whenever use_graph is set on CUDA"
        torch.index_select(rollout, 0, idx, out=self._static)
        if self._graph is None:
            current = torch.cuda.current_stream(self.device)
            if self._warmup_left > 0:
                self._warmup_left -= 1
                side = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
                side.wait_stream(current)
                with torch.cuda.stream(side):
                    self._guarded_step(*self._columns(self._static))
                current.wait_stream(side)
                return
            self.optimizer.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._guarded_step(*self._columns(self._static))
            self._graph = graph
        self._graph.replay()

    def _guarded_step(self, obs: Tensor, actions: Tensor, old_logp: Tensor, adv: Tensor, ret: Tensor) -> None:
        """One minibatch step with every guard: what the eager loop calls and the CUDA graph captures.

        Loss, backward, log-std floor gate, then the skip guard: a NaN/Inf loss, or a gradient
        norm that is NaN, Inf or above ``skip_grad_norm``, skips the step entirely. A no-op is
        safer than writing NaN into weights, which corrupts all later inference and hangs the
        bot. The guard is a device flag ``ok``, and the log-std clamp, the statistics and the
        done/skipped counts (summed in ``self._totals``) are selected on it with ``torch.where``
        rather than a Python ``if``, so they hold no host sync and can sit inside a CUDA graph.

        Only the Adam call depends on the path. A graph cannot branch on the host, so it runs
        Adam with its skip input set to ``not ok`` (:func:`adam_step_unless`): a skipped step
        moves no parameter, moment or step count. Eagerly the flag is read back (one sync per
        minibatch, free on the CPU) and a skipped step never calls Adam at all, so a rollout
        that skips everything leaves Adam without any state, like a fresh optimizer.
        """
        cfg = self.config
        mb = self._minibatch_gradients(obs, actions, old_logp, adv, ret)
        if self._guards_compiled and self.gradient_sync is None and not self.use_graph:
            self._compiled_guards(mb["loss"])
            return
        loss_ok = torch.isfinite(mb["loss"])
        if self.gradient_sync is not None:  # averaged over ranks, so every rank decides the same below
            loss_ok = self.gradient_sync(self._flat.params, loss_ok)
        self._gate_log_std_floor()
        # The clip's groups: both networks as one (the seed's), or each on its own norm. The guard reads the
        # joint norm either way, made from the groups' norms rather than a second pass over the gradients.
        groups = self._gradient_groups()
        group_norms = [torch.linalg.vector_norm(g[0]) if len(g) == 1 else torch.nn.utils.get_total_norm(g) for g in groups]
        grad_norm = group_norms[0] if len(groups) == 1 else torch.linalg.vector_norm(torch.stack(group_norms))
        ok = torch.isfinite(grad_norm) & (grad_norm <= cfg.skip_grad_norm) & loss_ok
        # Clipping a skipped step's gradients (by a NaN or huge norm) is harmless: no Adam step reads them.
        # The coefficient is clip_grads_with_norm_'s: max_norm / (norm + 1e-6), at most 1.
        for group, norm in zip(groups, group_norms, strict=True):
            torch._foreach_mul_(group, torch.clamp(cfg.max_grad_norm / (norm + 1e-6), max=1.0))
        if self.use_graph:
            adam_step_unless(self.optimizer, ~ok)
        elif ok and self._written_out:
            adam_step(self.optimizer)  # the same kernel as Adam.step(), without its per-call Python
        elif ok:
            self.optimizer.step()
        with torch.no_grad():
            log_std = self.actor.log_std  # the raw parameter may not drift past the bounds
            log_std.copy_(torch.where(ok, log_std.clamp(cfg.log_std_min, cfg.log_std_max), log_std))
            taken = torch.where(ok, torch.stack([*(mb[key] for key in _TOTALS[:-1]), grad_norm]), 0.0)
            self._totals.add_(torch.cat([taken, torch.stack([ok, ~ok]).float()]))

    def _compiled_guards(self, loss: Tensor) -> None:
        """The guards below, then Adam, for the written-out step on one rank: one compiled call, not ~30 torch ones.

        :func:`agents.guard_kernel.guard_and_clip` gates the floor, takes the norms, decides, clips and
        adds the statistics (``self._stats``, where the written-out step left them) to the totals,
        over the one buffer every ``.grad`` is a view of; ``loss`` is passed on its own because a
        test may change it. The torch guards stay for autograd, CUDA graphs and several ranks.
        """
        cfg, flat = self.config, self._flat
        log_std = self.actor.log_std.detach()
        ok = guard_and_clip(
            flat.buffer.numpy(), len(flat.actor), log_std.numpy(), loss.item(), self._stats.numpy(), self._limits,
            self._totals.numpy(),
        )  # fmt: skip
        if ok:
            adam_step(self.optimizer)
            log_std.clamp_(cfg.log_std_min, cfg.log_std_max)  # the raw parameter may not drift past the bounds

    # ── export and persistence ───────────────────────────────────────────────

    def export_actor(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        return self.actor.export()

    def explore_settings(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        config = asdict(self.config)
        config["hidden"] = list(config["hidden"])
        return {
            "algo": self.name,
            "config": config,
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "shuffle_rng": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load networks (must match this config) and Adam state (re-created if its shapes differ).

        Both networks are checked before either is touched, so a mismatch never half-loads.
        Adam's moments come from the checkpoint; its learning rate and eps from this config.
        """
        if state.get("algo") != self.name:
            raise ValueError(f"checkpoint holds a {state.get('algo')!r} agent, not {self.name!r}")
        for key, module in (("actor", self.actor), ("critic", self.critic)):
            check_same_shapes(key, module.state_dict(), state.get(key))
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor.clamp_log_std_()
        self.optimizer = self._new_optimizer()
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self._check_optimizer_shapes()
        except (ValueError, KeyError, RuntimeError) as exc:
            # A checkpoint from other layer sizes leaves Adam moments of the wrong shape:
            # start Adam fresh rather than crash (or broadcast garbage) on the next step.
            warnings.warn(f"optimizer state not reusable ({exc}); Adam re-created", stacklevel=2)
            self.optimizer = self._new_optimizer()
        for group in self.optimizer.param_groups:  # the run's config wins over the checkpoint's
            group["eps"] = self.config.adam_eps
            # So does this device's: a checkpoint from an eager or CPU run says capturable=False, and
            # load_state_dict copies that flag too, which would make the next graph capture fail.
            group["capturable"] = self.optimizer.defaults["capturable"]
            group["lr"] = self.optimizer.defaults["lr"]  # a float, or on a graph the device tensor
        self._apply_learning_rate()
        self.updates = int(state.get("updates", 0))
        self._graph = None  # it captured the replaced optimizer's state tensors: capture again
        self._warmup_left = _GRAPH_WARMUP_STEPS
        if "shuffle_rng" in state:
            self.generator.set_state(state["shuffle_rng"])

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
