"""PPO's minibatch step, one class per path; the agent picks one when it is built (:func:`choose_step`).

Every step does the same thing to one minibatch, each in its own way: the gradients of the loss
(:mod:`agents.ppo.gradients`), the guards (:mod:`agents.ppo.guards`: a step whose loss or gradient
norm is NaN, Inf or huge changes nothing), Adam, the log-std clamp, and the step's statistics added
to the update's :class:`agents.ppo.stats.Totals`.

- :class:`EagerStep`: the reference. The guards in torch; a skipped step never calls Adam.
- :class:`WrittenOutStep`: the CPU's. Written-out gradients, the guards in one compiled call
  (:mod:`agents.ppo.guard_kernel`), Adam's kernel called directly.
- :class:`MultiRankStep`: several learner ranks. The gradients averaged over the ranks between the
  backward pass and the guards, so every rank takes (or skips) the same step.
- :class:`GraphStep`: CUDA. Full minibatches replay one captured :class:`BranchlessStep`, whose skip
  is decided on the device (a graph cannot branch on the host).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from ..distributed import GradientSync
from ..guards import adam_step_unless
from ..networks import Actor, Critic, GaussianActor, MixedActor
from .batch import Minibatch, packed_width
from .config import PPOConfig
from .gradients import WrittenOutGradients, make_gradients
from .guard_kernel import guard_and_clip
from .guards import GuardLimits, clamp_log_std_where, guard_gradients
from .sequences import SequenceStep
from .stats import Totals

__all__ = [
    "BranchlessStep",
    "EagerStep",
    "GraphStep",
    "MultiRankStep",
    "Step",
    "StepKind",
    "StepParts",
    "WrittenOutStep",
    "choose_step",
]

_GRAPH_WARMUP_STEPS = 3
"""Eager minibatch steps (on a side stream) before capture, as the PyTorch CUDA-graph recipe asks."""


@dataclass(frozen=True)
class StepParts:
    """What a step works on: the networks, their optimizer and config, the update's totals, the ranks' sync."""

    config: PPOConfig
    actor: Actor
    critic: Critic
    optimizer: torch.optim.Adam
    totals: Totals
    sync: GradientSync | None = None

    @property
    def nets(self) -> tuple[Actor, Critic]:
        return self.actor, self.critic

    @property
    def limits(self) -> GuardLimits:
        cfg = self.config
        return GuardLimits(cfg.log_std_min, cfg.max_grad_norm, cfg.skip_grad_norm, cfg.clip_per_network)

    def minibatch(self, rows: Tensor) -> Minibatch:
        """The columns of packed rows; a recurrent actor's observation columns carry its state after the observation."""
        return Minibatch.of(rows, self.config.obs_dim + self.config.state_size, self.config.action_width)


class Step(Protocol):
    """One gradient step on the rollout's rows ``idx``, its statistics added to the parts' totals.

    The statistics go to the totals rather than back to the caller so that a step never reads the
    device: a CUDA graph's replay adds them too, and the update reads them once at its end.
    """

    def __call__(self, rollout: Tensor, idx: Tensor) -> None: ...


StepKind = Callable[[StepParts], Step]
"""A step class: built from the parts, again whenever the agent replaces its optimizer."""


def choose_step(config: PPOConfig, sync: GradientSync | None = None) -> StepKind:
    """The path for ``config``'s device: several ranks, a CUDA graph, the CPU's written-out step, or the reference;
    a recurrent actor's chunks take :class:`agents.ppo.sequences.SequenceStep` on every device.

    A conv torso takes the reference (or the ranks' step over the reference gradients) on every device. Discrete
    branches take every path: the written-out step holds the masked categoricals' maths by hand
    (:mod:`agents.ppo.loss_kernel`), and the graph captures the reference gradients (the fused autograd nodes
    hold the Gaussian's log-density only), whose ops are all static-shaped and sync-free.
    """
    device = torch.device(config.device).type
    if config.recurrent:
        if sync is not None:
            raise ValueError("a recurrent actor trains on one learner rank: its chunks are not split across ranks")
        return SequenceStep
    if sync is not None:
        return MultiRankStep
    if config.conv:
        return EagerStep
    if device == "cuda" and config.cuda_graph:
        return GraphStep
    if device == "cpu" and config.fused:
        return WrittenOutStep
    return EagerStep


class EagerStep:
    """The reference step: gradients, the guards in torch, and Adam only when they found the step safe.

    The decision is read back (one sync per minibatch, free on the CPU) and a skipped step never
    calls Adam, so a rollout that skips everything leaves Adam without any state, like a fresh one.
    """

    def __init__(self, parts: StepParts) -> None:
        self.parts, self.limits = parts, parts.limits
        self.gradients = make_gradients(parts.nets, parts.optimizer, parts.config)

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        parts, cfg, log_std = self.parts, self.parts.config, self.parts.actor.log_std
        terms = self.gradients.compute(parts.minibatch(rollout.index_select(0, idx)))
        ok, grad_norm = guard_gradients(torch.isfinite(terms["loss"]), self.gradients.groups(), log_std, self.limits)
        if ok:
            self.gradients.adam_step()
        clamp_log_std_where(ok, log_std, cfg.log_std_min, cfg.log_std_max)
        parts.totals.add_step(ok, terms, grad_norm)


class WrittenOutStep:
    """The CPU's step on one rank: written-out gradients, then the guards as one compiled call.

    :func:`agents.ppo.guard_kernel.guard_and_clip` gates the floor, takes the norms, decides, clips and
    adds the statistics to the totals over the one buffer every ``.grad`` is a view of. The loss is
    passed on its own (a test may change the one the gradients report).
    """

    def __init__(self, parts: StepParts) -> None:
        cfg = parts.config
        self.parts = parts
        assert isinstance(parts.actor, GaussianActor | MixedActor), "the written-out step holds an MLP actor's maths"
        self.gradients = WrittenOutGradients((parts.actor, parts.critic), parts.optimizer, cfg)
        self.limits = np.array(parts.limits, dtype=np.float64)

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        parts, cfg, flat = self.parts, self.parts.config, self.gradients.flat
        terms = self.gradients.compute(parts.minibatch(rollout.index_select(0, idx)))
        log_std = parts.actor.log_std.detach()
        ok = guard_and_clip(
            flat.buffer.numpy(), len(flat.actor), log_std.numpy(), terms["loss"].item(), self.gradients.stats.numpy(),
            self.limits, parts.totals.vector.numpy(),
        )  # fmt: skip
        if ok:
            self.gradients.adam_step()
            log_std.clamp_(cfg.log_std_min, cfg.log_std_max)  # the raw parameter may not drift past the bounds


class MultiRankStep:
    """A step on one of several learner ranks: the gradients averaged over the ranks before the guards.

    The loss's finite flag travels with the gradients, so every rank sees the same gradients and the
    same flag, decides the same, and the ranks' weights stay identical (:mod:`agents.distributed`).
    """

    def __init__(self, parts: StepParts) -> None:
        assert parts.sync is not None, "a multi-rank step needs the ranks' gradient sync"
        self.parts, self.sync, self.limits = parts, parts.sync, parts.limits
        self.gradients = make_gradients(parts.nets, parts.optimizer, parts.config)

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        parts, cfg, log_std = self.parts, self.parts.config, self.parts.actor.log_std
        terms = self.gradients.compute(parts.minibatch(rollout.index_select(0, idx)))
        loss_ok = self.sync(self.gradients.params, torch.isfinite(terms["loss"]))  # every rank's loss finite
        ok, grad_norm = guard_gradients(loss_ok, self.gradients.groups(), log_std, self.limits)
        if ok:
            self.gradients.adam_step()
        clamp_log_std_where(ok, log_std, cfg.log_std_min, cfg.log_std_max)
        parts.totals.add_step(ok, terms, grad_norm)


class BranchlessStep:
    """The step a CUDA graph captures: the guards' decision stays on the device, and Adam is told to skip.

    Adam runs with its skip input set to ``not ok`` (:func:`agents.guards.adam_step_unless`): a skipped
    step moves no parameter, moment or step count. The log-std clamp and the statistics are selected on
    ``ok`` too, so nothing reads the device. On the CPU it runs as it is (the tests hold it against
    :class:`EagerStep` there).
    """

    def __init__(self, parts: StepParts) -> None:
        self.parts, self.limits = parts, parts.limits
        self.gradients = make_gradients(parts.nets, parts.optimizer, parts.config, keep_grad_tensors=True)

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        self.run(self.parts.minibatch(rollout.index_select(0, idx)))

    def run(self, batch: Minibatch) -> None:
        parts, cfg, log_std = self.parts, self.parts.config, self.parts.actor.log_std
        terms = self.gradients.compute(batch)
        ok, grad_norm = guard_gradients(torch.isfinite(terms["loss"]), self.gradients.groups(), log_std, self.limits)
        adam_step_unless(parts.optimizer, ~ok)
        clamp_log_std_where(ok, log_std, cfg.log_std_min, cfg.log_std_max)
        parts.totals.add_step(ok, terms, grad_norm)


class GraphStep:
    """CUDA: every full minibatch gathered into one static input and the captured :class:`BranchlessStep` replayed.

    Why: a minibatch step is a few hundred tiny kernels, and launching them one by one from Python
    costs far more than running them. The PyTorch CUDA-graph recipe: the first few steps after the
    optimizer is (re)built run eagerly on a side stream (real steps on real minibatches; they also
    create Adam's state, which a capture would only record, not run), then the next one is captured
    over the static input. Capturing records without running, so it is then replayed. Gradients are
    set to None before capture so the graph allocates, and owns, them. A partial last minibatch does
    not fit the static shapes: it runs the same step eagerly, so every row is trained on.
    """

    def __init__(self, parts: StepParts) -> None:
        cfg = parts.config
        self.parts = parts
        self.branchless = BranchlessStep(parts)
        self.device = torch.device(cfg.device)
        self.static = torch.empty((cfg.minibatch_size, packed_width(cfg.obs_dim, cfg.action_width)), device=self.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.warmup_left = _GRAPH_WARMUP_STEPS

    def __call__(self, rollout: Tensor, idx: Tensor) -> None:
        if len(idx) < len(self.static):
            self.branchless(rollout, idx)
            return
        torch.index_select(rollout, 0, idx, out=self.static)
        if self.graph is None and self.warmup_left > 0:
            self.warmup_left -= 1
            self._warm_up()
            return
        if self.graph is None:
            self.graph = self._capture()
        self.graph.replay()

    def _warm_up(self) -> None:
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        side.wait_stream(current)
        with torch.cuda.stream(side):
            self.branchless.run(self.parts.minibatch(self.static))
        current.wait_stream(side)

    def _capture(self) -> torch.cuda.CUDAGraph:
        self.parts.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.branchless.run(self.parts.minibatch(self.static))
        return graph
