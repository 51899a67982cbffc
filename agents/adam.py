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

import weakref

import torch

__all__ = ["adam_step"]

_COUNTS: weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple[torch.Tensor, list[torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)
"""Per optimizer: the one tensor its parameters' step counts are views of, and those views."""


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
    shared = _shared_counts(optimizer, steps)
    if shared is None:
        torch._foreach_add_(steps, 1)
    else:
        counts, steps = shared
        counts.add_(1)
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


def _shared_counts(optimizer: torch.optim.Adam, steps: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
    """One tensor whose ``add_(1)`` advances every parameter's step count and its views (now the
    state's counts), or None where the counts differ.

    Why: ``_foreach_add_`` over 14 zero-dimensional CPU tensors costs ~20 us, half the kernel's
    own time; one add over a 14-element tensor costs ~2.5 us. The counts are made views of one
    tensor, in the optimizer's own state, the first time they are all equal (as they are for a
    group that stepped together); a ``load_state_dict`` replaces them and they are joined again.
    A view reads, saves and loads as the count it was, so nothing else sees a difference.
    """
    cached = _COUNTS.get(optimizer)
    if cached is not None and len(cached[1]) == len(steps) and all(a is b for a, b in zip(cached[1], steps, strict=True)):
        return cached
    first = steps[0]
    same = all(s.dim() == 0 and s.dtype == first.dtype and s.device == first.device for s in steps)
    if not same or not all(bool(s == first) for s in steps):
        return None
    counts = torch.stack(steps)
    views = list(counts.unbind())
    for state, view in zip((optimizer.state[p] for p in optimizer.param_groups[0]["params"]), views, strict=True):
        state["step"] = view
    _COUNTS[optimizer] = (counts, views)
    return counts, views
