"""TD3 and DDPG, one implementation: DDPG is TD3 with one critic, no target smoothing and no delay.

Papers: DDPG https://arxiv.org/abs/1509.02971, TD3 https://arxiv.org/abs/1802.09477.
The three differences are config values, not branches:

============================  ===========  ===========
                              TD3          DDPG
============================  ===========  ===========
critics (min in the target)   2            1
target policy smoothing       0.2, ±0.5    0 (none)
policy delay                  2            1
============================  ===========  ===========

Both critics live in one weight tensor per layer with a leading critic axis (one ``baddbmm``
a layer; each critic initialized on its own so their errors stay uncorrelated, as the min
needs). The smoothing noise is drawn per action dimension and the critic loss is the *sum* of
the critics' MSEs. On CUDA the whole update cycle is captured once in a CUDA graph and
replayed (docs/agents.md, "DDPG and TD3").
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from .common import Segment, SegmentEnd, segment_rewards
from .guards import adam_step_unless, step_is_finite
from .networks import check_same_shapes, linear_arrays, mlp
from .replay import ReplayBatch, ReplayBuffer

__all__ = [
    "CONTINUOUS_ONLY",
    "CriticEnsemble",
    "DeterministicActor",
    "TD3Agent",
    "TD3Config",
    "ddpg_config",
    "polyak_foreach",
    "polyak_loop",
]


CONTINUOUS_ONLY = "DDPG and TD3 learn continuous actions only; use PPO for a space with discrete branches"
"""Why a TD3 or DDPG config with discrete ``branches`` is refused."""


@dataclass(frozen=True)
class TD3Config:
    """TD3 hyperparameters (the typed seed's, plus what serving needs). DDPG: :func:`ddpg_config`."""

    obs_dim: int
    act_dim: int
    action_limit: float = 1.0
    """Actions lie in [-action_limit, action_limit] on every dimension (the actor is tanh-scaled)."""
    hidden: tuple[int, ...] = (256, 256)
    learning_rate: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    exploration_noise: float = 0.1
    """Gaussian std in ACTION UNITS, added by the bots: the policy is deterministic and has no
    exploration of its own, so this is the entire mechanism (and it does not transfer
    between action scales)."""
    target_noise: float = 0.2
    """Target policy smoothing: nearby actions get similar values, so a critic artifact
    narrower than the noise cannot be exploited."""
    target_noise_clip: float = 0.5
    policy_delay: int = 2
    """Critic steps per actor step: the actor climbs a surface that had time to settle."""
    n_critics: int = 2
    """2 for TD3 (the min in the target removes overestimation), 1 for DDPG."""
    batch_size: int = 256
    buffer_size: int = 1_000_000
    warmup_steps: int = 10_000
    """Transitions collected (uniform random actions) before the first update."""
    utd_ratio: float = 1.0
    """Gradient updates per transition received (update-to-data ratio)."""
    updates_per_publish: int = 64
    """Gradient updates per ``update()`` call; the trainer publishes the actor after each call."""
    save_replay: bool = False
    """Put the replay buffer in checkpoints (it can be large); otherwise resume re-warms."""
    cuda_graph: bool = True
    """On a CUDA device, capture the update cycle in a CUDA graph (ignored on the CPU)."""
    seed: int = 0
    device: str = "cpu"
    branches: tuple[int, ...] = ()
    """Discrete action branches: none. Here so that a run's space with branches is refused by name, not by a
    keyword this config lacks: a deterministic actor and a Q(s, a) over continuous actions have no discrete form."""

    def __post_init__(self) -> None:
        if self.branches:
            raise ValueError(CONTINUOUS_ONLY)
        # The seed's four rules, with its messages; then the rest. "not (valid)" refuses NaN too.
        if not self.action_limit > 0.0:
            raise ValueError("action limit must be positive")
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if not self.policy_delay >= 1:
            raise ValueError("policy delay must be at least one")
        if not self.target_noise_clip >= self.target_noise:
            raise ValueError("clipping below the noise scale makes the smoothing one-sided")
        problems = []
        for name in ("obs_dim", "act_dim", "batch_size", "buffer_size", "updates_per_publish"):
            if not getattr(self, name) >= 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.hidden or not all(h >= 1 for h in self.hidden):
            problems.append(f"hidden must list positive widths, got {self.hidden}")
        if self.n_critics not in (1, 2):
            problems.append(f"n_critics must be 1 (DDPG) or 2 (TD3), got {self.n_critics}")
        if not 0.0 < self.gamma <= 1.0:
            problems.append(f"gamma must be in (0, 1], got {self.gamma}")
        for name in ("learning_rate", "utd_ratio"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                problems.append(f"{name} must be a finite number > 0, got {getattr(self, name)}")
        for name in ("exploration_noise", "target_noise"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                problems.append(f"{name} must be a finite number >= 0, got {getattr(self, name)}")
        if not self.warmup_steps >= 0:
            problems.append(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.batch_size > self.buffer_size:
            problems.append(f"batch_size {self.batch_size} exceeds buffer_size {self.buffer_size}")
        if problems:
            raise ValueError("invalid TD3Config: " + "; ".join(problems))


def ddpg_config(obs_dim: int, act_dim: int, **overrides: Any) -> TD3Config:
    """DDPG: TD3 with one critic, no target smoothing and no policy delay."""
    settings: dict[str, Any] = {"n_critics": 1, "target_noise": 0.0, "target_noise_clip": 0.0, "policy_delay": 1}
    settings.update(overrides)
    return TD3Config(obs_dim=obs_dim, act_dim=act_dim, **settings)


# ── networks ─────────────────────────────────────────────────────────────────


class DeterministicActor(nn.Module):
    """One action, not a distribution: ``action_limit * tanh(mlp(obs))``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], action_limit: float) -> None:
        super().__init__()
        self.sizes = (obs_dim, *hidden, act_dim)
        self.net = mlp(self.sizes, "relu", head_gain=1.0)
        self.action_limit = action_limit

    def forward(self, obs: Tensor) -> Tensor:
        return self.action_limit * torch.tanh(self.net(obs))

    def export(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        """(architecture, tensors) in the bot-ready ``tanh_mlp`` layout of ``docs/protocol.md``."""
        arch = {"kind": "tanh_mlp", "layers": list(self.sizes), "activation": "relu", "act_limit": float(self.action_limit)}
        return arch, linear_arrays(self.net)


class CriticEnsemble(nn.Module):
    """``n`` critics Q(s, a) on [s; a] as one network with a leading critic axis.

    Layer ``i`` is ``weight{i}`` (n, fan_in, fan_out) and ``bias{i}`` (n, 1, fan_out), run as
    one ``baddbmm`` for all critics. Each critic's slice gets its own orthogonal init, so
    the critics start (and stay) independent: the min over them removes overestimation
    only if their errors are uncorrelated.
    """

    def __init__(self, n: int, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.n = n
        self.sizes = (obs_dim + act_dim, *hidden, 1)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i in range(len(self.sizes) - 1):
            fan_in, fan_out = self.sizes[i], self.sizes[i + 1]
            weight = torch.empty(n, fan_in, fan_out)
            gain = 1.0 if i == len(self.sizes) - 2 else math.sqrt(2.0)
            for k in range(n):
                nn.init.orthogonal_(weight[k].T, gain=gain)  # (fan_out, fan_in) like nn.Linear
            self.weights.append(nn.Parameter(weight))
            self.biases.append(nn.Parameter(torch.zeros(n, 1, fan_out)))

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        """Q of every critic, shape (n, batch)."""
        joint = torch.cat([obs, act], dim=-1)
        return self._run(joint.unsqueeze(0).expand(self.n, -1, -1), list(self.weights), list(self.biases))

    def q1(self, obs: Tensor, act: Tensor) -> Tensor:
        """The first critic alone, with its weights detached: the actor's objective.

        Detached because the actor step must move the actor only, and it saves computing
        critic weight gradients that the next critic step would discard.
        """
        joint = torch.cat([obs, act], dim=-1).unsqueeze(0)
        weights = [w[:1].detach() for w in self.weights]
        biases = [b[:1].detach() for b in self.biases]
        return self._run(joint, weights, biases)[0]

    @staticmethod
    def _run(x: Tensor, weights: list[Tensor], biases: list[Tensor]) -> Tensor:
        last = len(weights) - 1
        for i, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
            x = torch.baddbmm(bias, x, weight)
            if i < last:
                x = torch.relu(x)
        return x.squeeze(-1)

    def split(self) -> list[nn.Sequential]:
        """The critics as separate ``nn.Sequential`` modules with copies of these weights.

        The direct (unfused) form, for tests and the benchmark baseline.
        """
        critics = []
        for k in range(self.n):
            layers: list[nn.Module] = []
            for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
                linear = nn.Linear(weight.shape[1], weight.shape[2]).to(weight.device)
                with torch.no_grad():
                    linear.weight.copy_(weight[k].T)
                    linear.bias.copy_(bias[k, 0])
                layers.append(linear)
                if i < len(self.weights) - 1:
                    layers.append(nn.ReLU())
            critics.append(nn.Sequential(*layers))
        return critics


@torch.no_grad()
def polyak_foreach(target: list[Tensor], online: list[Tensor], tau: float) -> None:
    """target ← (1 − τ)·target + τ·online, for every tensor in two fused calls.

    A per-tensor loop launches two small kernels per parameter on every update; the
    foreach ops batch the whole list into one launch each.
    """
    torch._foreach_mul_(target, 1.0 - tau)
    torch._foreach_add_(target, online, alpha=tau)


@torch.no_grad()
def polyak_loop(target: list[Tensor], online: list[Tensor], tau: float) -> None:
    """The same update one tensor at a time: the tests' reference for :func:`polyak_foreach`."""
    for t, o in zip(target, online, strict=True):
        t.mul_(1.0 - tau).add_(o, alpha=tau)


# ── the agent ────────────────────────────────────────────────────────────────


class TD3Agent:
    """TD3 (or DDPG, per its config) behind the trainer's :class:`agents.base.Agent` interface.

    Data: each segment becomes transitions (s, a, r, s', terminal) in the replay buffer;
    s' is the next row's observation, and the segment's ``next_obs`` for its last row.
    Only a TERMINAL end sets ``terminal``: truncations and cuts bootstrap.

    Pace: every transition received adds ``utd_ratio`` updates to a budget once the warm-up
    is over; ``ready()`` while a whole cycle (``policy_delay`` updates) is owed, and one
    ``update()`` runs at most ``updates_per_publish`` of them before the trainer publishes.
    While the trainer owes updates it does not drain the queue, so the server withholds
    credit and bots slow to the trainer's pace instead of filling the buffer unlearned.
    """

    def __init__(self, config: TD3Config) -> None:
        self.config = config
        self.name = "td3" if config.n_critics == 2 else "ddpg"
        self.max_policy_lag: int | None = None  # off-policy: any policy's experience is welcome
        self.publish_steps = math.ceil(config.updates_per_publish / config.utd_ratio)
        """Transitions that earn one publish's updates: the server's default queue bound counts in these."""
        # Sizes the server's queue (4x this): room for the warm-up's bursts and bots' credit in flight.
        self.update_steps = max(2048, self.publish_steps)
        self.device = torch.device(config.device)
        torch.manual_seed(config.seed)
        self.actor = DeterministicActor(config.obs_dim, config.act_dim, config.hidden, config.action_limit).to(self.device)
        self.critic = CriticEnsemble(config.n_critics, config.obs_dim, config.act_dim, config.hidden).to(self.device)
        self.actor_target = DeterministicActor(config.obs_dim, config.act_dim, config.hidden, config.action_limit).to(
            self.device
        )
        self.critic_target = CriticEnsemble(config.n_critics, config.obs_dim, config.act_dim, config.hidden).to(self.device)
        self.actor_target.load_state_dict(self.actor.state_dict())
        self.critic_target.load_state_dict(self.critic.state_dict())
        for p in (*self.actor_target.parameters(), *self.critic_target.parameters()):
            p.requires_grad_(False)
        self._online: list[Tensor] = [*self.critic.parameters(), *self.actor.parameters()]
        self._target: list[Tensor] = [*self.critic_target.parameters(), *self.actor_target.parameters()]
        self.replay = ReplayBuffer(config.buffer_size, config.obs_dim, config.act_dim, self.device)
        # Own generators: sampling and smoothing noise replay exactly after a resume.
        self.sample_generator = torch.Generator(device=self.device).manual_seed(config.seed + 1)
        self.noise_generator = torch.Generator(device=self.device).manual_seed(config.seed + 2)
        self.use_graph = self.device.type == "cuda" and config.cuda_graph
        self._new_optimizers()
        self.updates = 0
        self.warmup_target = config.warmup_steps
        """Replay size at which updates start (raised after a resume without a saved buffer)."""
        self.received = 0
        self._budget = 0.0
        self._unreported = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._static: ReplayBatch | None = None
        self._stats = torch.zeros(3, device=self.device)  # critic loss, actor loss, mean q1
        self._skips = torch.zeros(2, device=self.device)  # non-finite critic steps, actor steps (skipped)

    def _new_optimizers(self) -> None:
        # fused: one kernel for all parameters, and its skip input lets a non-finite step
        # change nothing without a host sync (agents.guards). capturable: Adam's step counter
        # lives on the device, which a CUDA graph needs.
        kw: dict[str, Any] = {"lr": self.config.learning_rate, "fused": True, "capturable": self.use_graph}
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), **kw)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), **kw)

    # ── data in ──────────────────────────────────────────────────────────────

    def observe(self, segments: list[Segment]) -> None:
        for segment in segments:
            obs = segment.obs
            next_obs = np.empty_like(obs)
            next_obs[:-1] = obs[1:]
            terminal = np.zeros(segment.steps, dtype=np.float32)
            if segment.end is SegmentEnd.TERMINAL:
                next_obs[-1] = 0.0  # never used: the terminal mask zeroes its value
                terminal[-1] = 1.0
            else:
                assert segment.next_obs is not None
                next_obs[-1] = segment.next_obs
            self.replay.add(obs, segment.act, segment_rewards(segment), next_obs, terminal)
            self.received += segment.steps
            self._unreported += segment.steps
            # The warm-up's own transitions earn no updates (SB3's learning_starts does the same).
            if len(self.replay) >= self.warmup_target:
                self._budget += self.config.utd_ratio * segment.steps

    def ready(self) -> bool:
        return len(self.replay) >= max(self.warmup_target, self.config.batch_size) and self._budget >= self.config.policy_delay

    @property
    def pending_steps(self) -> int:
        return self._unreported

    def discard_stale(self, oldest_version: int) -> int:
        return 0  # off-policy: the replay buffer takes any policy's experience

    @property
    def drain_steps(self) -> int | None:
        """Everything during the warm-up; then a publish's worth of updates per drain."""
        if len(self.replay) < self.warmup_target:
            return None
        return math.ceil(self.config.updates_per_publish / self.config.utd_ratio)

    # ── the update ───────────────────────────────────────────────────────────

    def update(self) -> dict[str, float]:
        """Up to ``updates_per_publish`` updates, in whole cycles of ``policy_delay``."""
        cfg = self.config
        cycles = max(1, min(int(self._budget), cfg.updates_per_publish) // cfg.policy_delay)
        skips_before = self._skips.clone()
        for _ in range(cycles):
            self.run_cycle()
        done = cycles * cfg.policy_delay
        self._budget -= done
        trained, self._unreported = self._unreported, 0
        critic_loss, actor_loss, mean_q = self._stats.tolist()
        critic_skips, actor_skips = (self._skips - skips_before).tolist()
        return {
            "train/applied_steps": float(done - critic_skips),
            "train/skipped_steps": float(critic_skips + actor_skips),
            "train/steps_trained": float(trained),
            "train/critic_loss": critic_loss,
            "train/actor_loss": actor_loss,
            "train/mean_q": mean_q,
            "train/gradient_updates": float(self.updates),
            "train/replay_size": float(len(self.replay)),
            "train/updates_this_call": float(done),
        }

    def run_cycle(self) -> None:
        """``policy_delay`` critic updates, then one actor update and the Polyak step."""
        cfg = self.config
        index = self.replay.sample_index(cfg.policy_delay * cfg.batch_size, self.sample_generator)
        if not self.use_graph:
            batch = self.replay.gather(index)
            self._cycle(ReplayBatch(*(t.view(cfg.policy_delay, cfg.batch_size, *t.shape[1:]) for t in batch)))
        else:
            if self._graph is None:
                self._capture(index)
            assert self._graph is not None and self._static is not None
            self.replay.gather(index, out=self._static)
            self._graph.replay()
        self.updates += cfg.policy_delay

    def _cycle(self, batches: ReplayBatch) -> None:
        """One update cycle on ``batches`` (each field with a leading ``policy_delay`` axis)."""
        cfg = self.config
        for k in range(cfg.policy_delay):
            self._critic_step(ReplayBatch(*(t[k] for t in batches)))
        # Delayed: only now does the actor move, against a critic that had time to settle.
        # It maximizes q1 alone: the pessimism belongs in the target, where errors compound.
        obs = batches.obs[-1]
        actor_loss = -self.critic.q1(obs, self.actor(obs)).mean()
        self.actor_optimizer.zero_grad(set_to_none=not self.use_graph)
        actor_loss.backward()  # type: ignore[no-untyped-call]
        ok, _ = step_is_finite(actor_loss, self.actor.parameters())
        adam_step_unless(self.actor_optimizer, ~ok)
        polyak_foreach(self._target, self._online, cfg.tau)  # online weights are finite: a skip moved nothing
        with torch.no_grad():
            self._stats[1] = torch.where(ok, actor_loss.detach(), self._stats[1])
            self._skips[1] += (~ok).float()

    def _critic_step(self, batch: ReplayBatch) -> None:
        # Inside a CUDA graph the default generator is the graph-safe one; eager runs use ours.
        target = self.target_value(batch, None if self.use_graph else self.noise_generator)
        q = self.critic(batch.obs, batch.act)  # (n_critics, batch)
        # Sum of the critics' MSEs: each critic gets its full gradient.
        loss = (q - target).pow(2).mean(dim=1).sum()
        self.critic_optimizer.zero_grad(set_to_none=not self.use_graph)
        loss.backward()
        # A NaN/Inf loss or gradient skips the step entirely (nothing moves, not even Adam's state).
        ok, _ = step_is_finite(loss, self.critic.parameters())
        adam_step_unless(self.critic_optimizer, ~ok)
        with torch.no_grad():
            self._stats[0] = torch.where(ok, loss.detach(), self._stats[0])
            self._stats[2] = torch.where(ok, q[0].mean(), self._stats[2])
            self._skips[0] += (~ok).float()

    @torch.no_grad()
    def target_value(self, batch: ReplayBatch, generator: torch.Generator | None = None) -> Tensor:
        """r + γ·(1 − terminal)·min_i Q'_i(s', clip(μ'(s') + clip(ε, ±c), ±limit)), ε ~ N(0, σ²).

        The min deliberately biases the target *down*: an underestimated action is merely
        avoided, an overestimated one is sought by the actor, and that compounds.
        """
        cfg = self.config
        next_act = self.actor_target(batch.next_obs)
        if cfg.target_noise > 0:
            noise = torch.randn(next_act.shape, generator=generator, device=next_act.device, dtype=next_act.dtype)
            next_act = next_act + (noise * cfg.target_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
        next_act = next_act.clamp(-cfg.action_limit, cfg.action_limit)
        next_q = self.critic_target(batch.next_obs, next_act).min(dim=0).values
        target: Tensor = batch.rew + cfg.gamma * (1.0 - batch.terminal) * next_q
        return target

    def _capture(self, index: Tensor) -> None:
        """Capture one update cycle in a CUDA graph over static batch tensors.

        The recipe of the PyTorch docs: a few eager warm-up cycles on a side stream (real
        updates on real batches), then capture; gradients are set to None first so the
        graph owns them, and the optimizers are capturable (their step counts live on the device).
        """
        cfg = self.config
        shape = (cfg.policy_delay, cfg.batch_size)
        self._static = ReplayBatch(
            torch.empty((*shape, cfg.obs_dim), device=self.device),
            torch.empty((*shape, cfg.act_dim), device=self.device),
            torch.empty(shape, device=self.device),
            torch.empty((*shape, cfg.obs_dim), device=self.device),
            torch.empty(shape, device=self.device),
        )
        self.replay.gather(index, out=self._static)
        side = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self._cycle(self._static)
                self.updates += cfg.policy_delay
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.critic_optimizer.zero_grad(set_to_none=True)
        self.actor_optimizer.zero_grad(set_to_none=True)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._cycle(self._static)

    # ── export and persistence ───────────────────────────────────────────────

    def export_actor(self) -> tuple[dict[str, Any], dict[str, NDArray[np.float32]]]:
        return self.actor.export()

    def explore_settings(self) -> dict[str, float]:
        """Bots add this noise; ``random`` = 1 means uniform random actions (the first warm-up)."""
        return {"noise": float(self.config.exploration_noise), "random": 1.0 if self.updates == 0 else 0.0}

    def state_dict(self) -> dict[str, Any]:
        config = asdict(self.config)
        config["hidden"] = list(config["hidden"])
        config["branches"] = list(config["branches"])
        state: dict[str, Any] = {
            "algo": self.name,
            "config": config,
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "updates": self.updates,
            "received": self.received,
            "budget": self._budget,
            "warmup_target": self.warmup_target,
            "sample_rng": self.sample_generator.get_state(),
            "noise_rng": self.noise_generator.get_state(),
        }
        if self.config.save_replay:
            state["replay"] = self.replay.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore networks, targets, optimizers, counters and RNG (and the replay buffer if saved).

        Without a saved buffer the resumed agent re-runs a warm-up: it collects
        ``warmup_steps`` fresh transitions (with the trained actor plus noise, not uniform
        random actions) before its next update, so it never trains on a near-empty buffer.
        """
        replay = state.get("replay")
        fresh = ReplayBuffer(self.config.buffer_size, self.config.obs_dim, self.config.act_dim, self.device)
        self._check(state)
        if replay is not None:
            fresh.load_state_dict(replay)  # raises before anything else is touched
        self._load_learner(state)
        self.replay = fresh
        if replay is not None:
            self._budget = float(state.get("budget", 0.0))
            self.warmup_target = int(state.get("warmup_target", self.config.warmup_steps))
        else:
            self._budget = 0.0
            self.warmup_target = self.config.warmup_steps

    def rollback(self, state: dict[str, Any]) -> None:
        """Networks, optimizers, counters and RNG back to ``state``; the replay buffer and the
        owed-update budget stay (the experience is still good; the learner went bad)."""
        self._check(state)
        self._load_learner(state)

    def _check(self, state: dict[str, Any]) -> None:
        if state.get("algo") != self.name:
            raise ValueError(f"checkpoint holds a {state.get('algo')!r} agent, not {self.name!r}")
        for key, module in self._modules():
            check_same_shapes(key, module.state_dict(), state.get(key))

    def _modules(self) -> tuple[tuple[str, nn.Module], ...]:
        return (
            ("actor", self.actor),
            ("critic", self.critic),
            ("actor_target", self.actor_target),
            ("critic_target", self.critic_target),
        )

    def _load_learner(self, state: dict[str, Any]) -> None:
        for key, module in self._modules():
            module.load_state_dict(state[key])
        self._new_optimizers()
        try:
            self.actor_optimizer.load_state_dict(state["actor_optimizer"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        except (ValueError, KeyError, RuntimeError) as exc:
            warnings.warn(f"optimizer state not reusable ({exc}); Adam re-created", stacklevel=3)
            self._new_optimizers()
        for optimizer in (self.actor_optimizer, self.critic_optimizer):
            _adopt_run_settings(optimizer, self.config.learning_rate, capturable=self.use_graph)
        self.updates = int(state.get("updates", 0))
        self.received = int(state.get("received", 0))
        self._graph = None  # it captured the replaced optimizers' state tensors: capture again
        if "sample_rng" in state:
            self.sample_generator.set_state(state["sample_rng"])
            self.noise_generator.set_state(state["noise_rng"])


def _adopt_run_settings(optimizer: torch.optim.Optimizer, learning_rate: float, capturable: bool) -> None:
    """After loading Adam state: this run's learning rate, and this device's ``capturable``.

    ``load_state_dict`` copies the checkpoint's flags too: a checkpoint from an eager or CPU
    run says ``capturable=False`` and keeps step counts on the CPU, which makes the next CUDA
    graph capture fail (and the reverse breaks a CPU resume of a GPU run).
    """
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
        group["capturable"] = capturable
        for param in group["params"]:
            step = optimizer.state.get(param, {}).get("step")
            if isinstance(step, Tensor):
                device = param.device if capturable else torch.device("cpu")
                optimizer.state[param]["step"] = step.to(device=device, dtype=torch.float32)
