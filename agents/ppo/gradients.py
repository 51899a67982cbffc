"""Where a step's gradients come from: autograd over the loss, or the CPU's written-out maths.

A :class:`Gradients` computes one minibatch's loss terms with every parameter's gradient left in
its ``.grad``, says how the clip groups those gradients, and takes Adam's eager step over them.
The steps (:mod:`agents.ppo.steps`) run the guards on what it leaves, whatever made it:

- :class:`AutogradGradients`: :func:`agents.ppo.loss.minibatch_loss`, then ``backward``. With the
  plain modules it is the reference; with the fused autograd nodes, CUDA's form.
- :class:`WrittenOutGradients`: :func:`agents.ppo.fused.write_ppo_gradients`, no autograd at all,
  every gradient in one flat buffer; Adam's kernel called directly (:func:`agents.adam.adam_step`).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from ..adam import adam_step
from ..networks import Actor, Critic, GaussianActor, MixedActor
from .batch import Minibatch
from .config import PPOConfig
from .fused import FlatGradients, MlpActor, fused_surrogate, learner_parameters, write_ppo_gradients
from .loss import Surrogate, minibatch_loss, reference_surrogate, renormalize
from .loss_kernel import LossWeights
from .stats import STEP_STATS

__all__ = ["AutogradGradients", "Gradients", "WrittenOutGradients", "make_gradients"]


class Gradients(Protocol):
    """One minibatch's gradients, and the groups and Adam step that go with where they are kept."""

    params: list[Tensor]
    """Every trained tensor, in :func:`agents.ppo.fused.learner_parameters`' order (the ranks average them so)."""

    def compute(self, batch: Minibatch) -> dict[str, Tensor]:
        """The minibatch's ``loss`` and terms (no gradient); every parameter's gradient in its ``.grad``."""
        ...

    def groups(self) -> list[list[Tensor]]:
        """The gradients the clip acts on, per group: both networks as one, or one group each (``clip_per_network``)."""
        ...

    def adam_step(self) -> None:
        """Adam's step over these gradients (an eager step that the guards found safe)."""
        ...


class AutogradGradients:
    """The loss through autograd: the reference with :func:`agents.ppo.loss.reference_surrogate`.

    ``keep_grad_tensors``: zero the ``.grad`` tensors in place rather than setting them to None, as a
    CUDA graph needs (a replay writes gradients where it captured them).
    """

    def __init__(
        self,
        nets: tuple[Actor, Critic],
        optimizer: torch.optim.Adam,
        config: PPOConfig,
        surrogate: Surrogate,
        keep_grad_tensors: bool,
    ) -> None:
        self.actor, self.critic = nets
        self.optimizer, self.config, self.surrogate = optimizer, config, surrogate
        self.set_to_none = not keep_grad_tensors
        self.params = learner_parameters(*nets)

    def compute(self, batch: Minibatch) -> dict[str, Tensor]:
        terms = minibatch_loss(self.actor, self.critic, batch, self.config, self.surrogate)
        self.optimizer.zero_grad(set_to_none=self.set_to_none)
        terms["loss"].backward()  # type: ignore[no-untyped-call]
        return {key: value.detach() for key, value in terms.items()}

    def groups(self) -> list[list[Tensor]]:
        groups = [[g for p in net.parameters() if (g := p.grad) is not None] for net in (self.actor, self.critic)]
        return groups if self.config.clip_per_network else [groups[0] + groups[1]]

    def adam_step(self) -> None:
        self.optimizer.step()


class WrittenOutGradients:
    """The loss and its gradients written out (CPU): the loss kernel, then the networks' backward by hand.

    The statistics land in :attr:`stats` (a :data:`agents.ppo.stats.STEP_STATS` vector) and every
    ``.grad`` is a view of one buffer (:attr:`flat`): the compiled guards read both as arrays.
    """

    def __init__(self, nets: tuple[MlpActor, Critic], optimizer: torch.optim.Adam, config: PPOConfig) -> None:
        self.actor, self.critic = nets
        self.optimizer, self.config = optimizer, config
        self.flat = FlatGradients(*nets)
        self.params = self.flat.params
        self.weights = LossWeights(
            config.clip_epsilon,
            config.max_log_ratio,
            config.value_coef,
            config.entropy_coef,
            config.mean_bound,
            config.mean_bound_coef,
            config.log_std_min,
            config.log_std_max,
        )
        self.stats = torch.zeros(len(STEP_STATS), dtype=torch.float64)
        self._stat_views = dict(zip(STEP_STATS, self.stats.unbind(), strict=True))

    def compute(self, batch: Minibatch) -> dict[str, Tensor]:
        if self.config.advantage_norm == "minibatch":
            batch = batch._replace(adv=renormalize(batch.adv))
        write_ppo_gradients(self.actor, self.critic, self.flat, batch, self.weights, self.stats)
        return dict(self._stat_views)  # a copy: a caller may replace an entry

    def groups(self) -> list[list[Tensor]]:
        flat = self.flat  # each network's gradients are one contiguous range of the buffer
        return [[flat.actor], [flat.critic]] if self.config.clip_per_network else [[flat.buffer]]

    def adam_step(self) -> None:
        adam_step(self.optimizer)  # the same kernel as Adam.step(), without its per-call Python


def make_gradients(
    nets: tuple[Actor, Critic], optimizer: torch.optim.Adam, config: PPOConfig, keep_grad_tensors: bool = False
) -> Gradients:
    """The gradients ``config`` asks for on its device: written out on the CPU with ``fused`` (an MLP actor,
    Gaussian or mixed), else autograd (over the fused nodes with ``fused``, the plain modules without, or
    with discrete branches: the fused nodes hold the Gaussian's log-density only)."""
    actor, critic = nets
    cpu = torch.device(config.device).type == "cpu"
    if config.fused and cpu and not (config.conv or config.recurrent):
        assert isinstance(actor, GaussianActor | MixedActor), "a config without conv or core builds an MLP actor"
        return WrittenOutGradients((actor, critic), optimizer, config)
    surrogate = fused_surrogate if config.fused and not config.branches else reference_surrogate
    return AutogradGradients(nets, optimizer, config, surrogate, keep_grad_tensors)
