"""One Adam step by torch's fused kernel, called without ``torch.optim``'s per-call Python.

Why: at the tank's sizes (14 tensors, ~13,000 weights) the fused kernel itself runs in
~25 us on this CPU, while ``Adam.step()`` took ~215 us around it: the profiler hook, the
state walk of ``_init_group``, grouping the tensors by device and dtype, each call's checks.
That was a tenth of a PPO minibatch step. :func:`adam_step` reads the same state the
optimizer owns (its moments, step counts, learning rate, betas and eps), so checkpoints,
``load_state_dict`` and the learning-rate schedule are untouched, and the update is the
kernel ``Adam.step()`` would run, bit for bit (``tests/agents/test_adam.py``).
"""

from __future__ import annotations

import torch

__all__ = ["adam_step"]


def adam_step(optimizer: torch.optim.Adam) -> None:
    """``optimizer.step()`` for a fused Adam of one parameter group on the CPU, by its kernel directly.

    Falls back to ``optimizer.step()`` where the kernel call would not be the same update: the
    first step (the optimizer creates its state there), a parameter without a gradient or state,
    a tensor learning rate, or options this call does not pass (amsgrad, maximize, AdamW's decay).
    """
    if len(optimizer.param_groups) != 1:
        optimizer.step()
        return
    group = optimizer.param_groups[0]
    params = group["params"]
    states = [optimizer.state.get(p) for p in params]
    simple = group["fused"] and not group["amsgrad"] and not group["maximize"] and not group.get("decoupled_weight_decay")
    ready = all(s and p.grad is not None for p, s in zip(params, states, strict=True))
    if not simple or not ready or isinstance(group["lr"], torch.Tensor):
        optimizer.step()
        return
    steps = [s["step"] for s in states]  # type: ignore[index]
    beta1, beta2 = group["betas"]
    torch._foreach_add_(steps, 1)
    torch._fused_adam_(
        params,
        [p.grad for p in params],
        [s["exp_avg"] for s in states],  # type: ignore[index]
        [s["exp_avg_sq"] for s in states],  # type: ignore[index]
        [],
        steps,
        lr=group["lr"],
        beta1=beta1,
        beta2=beta2,
        weight_decay=group["weight_decay"],
        eps=group["eps"],
        amsgrad=False,
        maximize=False,
    )
