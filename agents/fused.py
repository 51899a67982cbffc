"""The actor's mean and the critic's value in one pass, with a hand-written backward.

Why: a PPO minibatch step on the CPU is mostly the two MLPs' matrix products, and the
rest was per-call overhead around them: two graphs of ~12 autograd nodes each, a skinny
``1024 x 64 -> 1`` value head sent through a general matrix product, separate first layers
for two networks that read the same observations. Here both networks run as one
autograd node:

- their first layers are one product (the weights stacked, ``obs @ [W_actor; W_critic]^T``),
  since both read the same rows;
- the activations are applied in place and kept for the backward (tanh's derivative is
  ``1 - y^2``, ReLU's ``y > 0``: the outputs are enough, no inputs are saved);
- the critic's 1-wide head is a matrix-vector product, its backward an outer product;
- the backward is the chain rule written out: per layer one product for the weight
  gradient and one for the input's, and none for the observations (they need no gradient).

The maths is the same as ``nn.Sequential``'s to float32 rounding (``tests/agents/test_fused.py``
compares values and every gradient, and float64 against finite differences). The loss and
its guards stay in autograd on top of this node, so everything they do to the mean, the
log-std or the value is differentiated as before.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from .networks import Critic, GaussianActor

__all__ = ["actor_critic_forward", "clipped_surrogate"]


def _activate_(z: Tensor, activation: str) -> Tensor:
    """The activation in place on a fresh pre-activation (tanh as 2 sigmoid(2z) - 1: see ``FastTanh``)."""
    if activation == "tanh":
        return torch.sigmoid_(z.mul_(2.0)).mul_(2.0).sub_(1.0)
    return torch.relu_(z)


def _activation_backward(grad: Tensor, out: Tensor, activation: str) -> Tensor:
    """d(loss)/d(pre-activation) from d(loss)/d(output) and the output alone."""
    if activation == "tanh":
        return torch.ops.aten.tanh_backward(grad, out)  # type: ignore[no-any-return]
    return torch.ops.aten.threshold_backward(grad, out, 0.0)  # type: ignore[no-any-return]


class _ActorCritic(torch.autograd.Function):
    """(mean, value) of a Gaussian actor's MLP and a critic's with equal hidden widths."""

    @staticmethod
    def forward(ctx: Any, activation: str, obs: Tensor, *params: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        layers = len(params) // 4
        actor, critic = params[: 2 * layers], params[2 * layers :]
        width = actor[0].shape[0]
        first = torch.addmm(torch.cat([actor[1], critic[1]]), obs, torch.cat([actor[0], critic[0]]).t())
        first = _activate_(first, activation)
        a_outs, c_outs = [first[:, :width]], [first[:, width:]]
        for i in range(1, layers - 1):
            a_outs.append(_activate_(torch.addmm(actor[2 * i + 1], a_outs[-1], actor[2 * i].t()), activation))
            c_outs.append(_activate_(torch.addmm(critic[2 * i + 1], c_outs[-1], critic[2 * i].t()), activation))
        mean = torch.addmm(actor[-1], a_outs[-1], actor[-2].t())
        value = torch.mv(c_outs[-1], critic[-2][0]).add_(critic[-1])
        ctx.activation = activation
        ctx.layers = layers
        ctx.save_for_backward(obs, first, *a_outs[1:], *c_outs[1:], *params)
        return mean, value

    @staticmethod
    def backward(ctx: Any, grad_mean: Tensor | None, grad_value: Tensor | None) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        layers, activation = ctx.layers, ctx.activation
        saved = ctx.saved_tensors
        obs, first = saved[0], saved[1]
        inner = layers - 2
        params = saved[2 + 2 * inner :]
        actor, critic = params[: 2 * layers], params[2 * layers :]
        width = actor[0].shape[0]
        a_outs = [first[:, :width], *saved[2 : 2 + inner]]
        c_outs = [first[:, width:], *saved[2 + inner : 2 + 2 * inner]]
        if grad_mean is None:
            grad_mean = torch.zeros(obs.shape[0], actor[-1].shape[0], dtype=obs.dtype, device=obs.device)
        if grad_value is None:
            grad_value = torch.zeros(obs.shape[0], dtype=obs.dtype, device=obs.device)
        a_grads: list[Tensor] = [torch.empty(0)] * (2 * layers)
        c_grads: list[Tensor] = [torch.empty(0)] * (2 * layers)

        # The heads: the actor's a matrix product, the critic's a matrix-vector one.
        a_grads[-2] = grad_mean.t().mm(a_outs[-1])
        a_grads[-1] = grad_mean.sum(0)
        c_grads[-2] = torch.mv(c_outs[-1].t(), grad_value).unsqueeze(0)
        c_grads[-1] = grad_value.sum(0, keepdim=True)
        a_back = grad_mean.mm(actor[-2])
        c_back = torch.outer(grad_value, critic[-2][0])

        # Hidden layers, last to second: through the activation, then the linear map.
        for i in range(layers - 2, 0, -1):
            a_pre = _activation_backward(a_back, a_outs[i], activation)
            c_pre = _activation_backward(c_back, c_outs[i], activation)
            a_grads[2 * i], a_grads[2 * i + 1] = a_pre.t().mm(a_outs[i - 1]), a_pre.sum(0)
            c_grads[2 * i], c_grads[2 * i + 1] = c_pre.t().mm(c_outs[i - 1]), c_pre.sum(0)
            a_back, c_back = a_pre.mm(actor[2 * i]), c_pre.mm(critic[2 * i])

        # The shared first layer: the observations need no gradient, only the weights do.
        a_pre = _activation_backward(a_back, a_outs[0], activation)
        c_pre = _activation_backward(c_back, c_outs[0], activation)
        a_grads[0], a_grads[1] = a_pre.t().mm(obs), a_pre.sum(0)
        c_grads[0], c_grads[1] = c_pre.t().mm(obs), c_pre.sum(0)
        return (None, None, *a_grads, *c_grads)


def _linear_parameters(net: nn.Sequential) -> list[Tensor]:
    return [t for m in net if isinstance(m, nn.Linear) for t in (m.weight, m.bias)]


def actor_critic_forward(actor: GaussianActor, critic: Critic, obs: Tensor) -> tuple[Tensor, Tensor]:
    """``(actor(obs), critic(obs))`` as one autograd node (see the module docstring).

    Needs equal hidden widths and activations in both networks (a :class:`agents.ppo.PPOAgent`'s
    always are: one ``hidden`` and one ``activation`` build both) and at least one hidden layer.
    """
    mean: Tensor
    value: Tensor
    mean, value = _ActorCritic.apply(  # type: ignore[no-untyped-call]
        actor.activation, obs, *_linear_parameters(actor.net), *_linear_parameters(critic.net)
    )
    return mean, value


class _ClippedSurrogate(torch.autograd.Function):
    """PPO's clipped surrogate and squared value error from (mean, log-std, value), in one node.

    Forward, per row: the Gaussian log-density of the action, ``log_ratio`` = new - old log-prob
    clamped to ±``max_log_ratio``, ``ratio`` = exp of it, the clipped objective
    ``min(ratio A, clip(ratio, 1 ± eps) A)`` and ``(value - return)^2``; means over rows.

    Backward follows autograd's own rules at every kink, so the two agree exactly in float64:
    the log-ratio clamp passes gradient only inside its bounds (a NaN or ±inf old log-prob
    gets none, as ``clamp`` gives), the ratio clamp only inside [1 - eps, 1 + eps], and where
    both surrogate terms are equal ``minimum`` gives each half.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        mean: Tensor,
        log_std: Tensor,
        value: Tensor,
        actions: Tensor,
        old_logp: Tensor,
        adv: Tensor,
        ret: Tensor,
        clip_epsilon: float,
        max_log_ratio: float,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        inv_std = torch.exp(-log_std)
        z = (actions - mean).mul_(inv_std)
        z_sq = z * z
        log_norm = log_std.sum() + 0.5 * math.log(2.0 * math.pi) * log_std.shape[0]
        raw = z_sq.sum(1).mul_(-0.5).sub_(log_norm).sub_(old_logp)
        log_ratio = raw.clamp(-max_log_ratio, max_log_ratio)
        ratio = log_ratio.exp()
        clipped = ratio.clamp(1.0 - clip_epsilon, 1.0 + clip_epsilon)
        surr1, surr2 = ratio * adv, clipped * adv
        policy_loss = torch.minimum(surr1, surr2).mean().neg()
        error = value - ret
        value_loss = error.square().mean()
        with torch.no_grad():
            approx_kl = (ratio - 1.0).sub_(log_ratio).mean()  # http://joschu.net/blog/kl-approx.html
            clip_fraction = (ratio - 1.0).abs_().gt_(clip_epsilon).float().mean()
        # d(objective)/d(ratio) per row, as autograd's minimum and clamp give it.
        in_range = (ratio == clipped).to(ratio.dtype)
        weight = torch.where(surr1 < surr2, 1.0, torch.where(surr1 > surr2, in_range, 0.5 * (1.0 + in_range)))
        d_ratio = torch.where(log_ratio == raw, weight.mul_(adv).mul_(ratio), 0.0)
        ctx.save_for_backward(z, z_sq, inv_std, d_ratio, error)
        ctx.mark_non_differentiable(approx_kl, clip_fraction)
        return policy_loss, value_loss, approx_kl, clip_fraction

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_policy: Tensor, grad_value_loss: Tensor, _kl: Tensor, _clip: Tensor
    ) -> tuple[Tensor | None, ...]:
        z, z_sq, inv_std, d_ratio, error = ctx.saved_tensors
        rows = z.shape[0]
        grad_logp = d_ratio * (grad_policy.neg() / rows)  # policy_loss = -mean(objective)
        grad_mean = (z * grad_logp.unsqueeze(1)).mul_(inv_std)  # d logp / d mean = z / std
        grad_log_std = torch.mv(z_sq.t(), grad_logp).sub_(grad_logp.sum())  # d logp / d log_std = z^2 - 1
        grad_value = error * (grad_value_loss * (2.0 / rows))
        return grad_mean, grad_log_std, grad_value, None, None, None, None, None, None


def clipped_surrogate(
    mean: Tensor,
    log_std: Tensor,
    value: Tensor,
    actions: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    ret: Tensor,
    clip_epsilon: float,
    max_log_ratio: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(policy loss, value loss, approx. KL, clip fraction) of one minibatch: see :class:`_ClippedSurrogate`.

    ``log_std`` is the clamped log-std the actor acts with; the KL and clip fraction carry no gradient.
    """
    out: tuple[Tensor, Tensor, Tensor, Tensor] = _ClippedSurrogate.apply(  # type: ignore[no-untyped-call]
        mean, log_std, value, actions, old_logp, adv, ret, clip_epsilon, max_log_ratio
    )
    return out
