"""One Adam step by torch's fused kernel, called without ``torch.optim``'s per-call Python.

Why: at the tank's sizes (14 tensors, ~13,000 weights) ``Adam.step()`` spends several times the
fused kernel's own time around it (the profiler hook, the state walk of ``_init_group``, grouping
the tensors by device and dtype, each call's checks; docs/agents.md, "The update's cost on the
CPU"). :func:`adam_step` reads the same state the
optimizer owns (its moments, step counts, learning rate, betas and eps), so checkpoints,
``load_state_dict`` and the learning-rate schedule are untouched, and the update is the
kernel ``Adam.step()`` would run, bit for bit (``tests/agents/test_adam.py``).

``torch._fused_adam_`` is private: a torch release may rename it or change its arguments. So
the kernel is chosen once, at import. A probe runs the direct call next to a public fused
``Adam.step()`` on two tiny tensors; unless it runs and matches bit for bit, :func:`adam_step`
is the optimizer's own ``step()`` (the public ``Adam(fused=True)``: the same update, only
slower). ``ARENA_ADAM_KERNEL=public`` forces that fallback (the lowest-versions CI run uses it,
so both paths are tested); ``=fused_private`` refuses to import without the direct call.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, Literal

import torch

__all__ = ["ADAM_KERNEL", "KERNEL_ENV", "PRIVATE_KERNEL_FAILURE", "AdamKernel", "adam_step"]

AdamKernel = Literal["fused_private", "public"]
"""``fused_private``: ``torch._fused_adam_`` called directly; ``public``: ``optimizer.step()``."""

KERNEL_ENV = "ARENA_ADAM_KERNEL"
"""Read at import: unset or ``auto`` (the probe decides), ``public`` or ``fused_private``."""

_COUNTS: weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple[torch.Tensor, list[torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)
"""Per optimizer: the one tensor its parameters' step counts are views of, and those views."""


def _private_step(optimizer: torch.optim.Adam) -> None:
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
    shared = _shared_counts(optimizer, steps)
    if shared is None:
        torch._foreach_add_(steps, 1)
    else:
        counts, steps = shared
        counts.add_(1)
    _fused_adam(
        params,
        [p.grad for p in params],
        [s["exp_avg"] for s in states],  # type: ignore[index]
        [s["exp_avg_sq"] for s in states],  # type: ignore[index]
        steps,
        group,
    )


def _public_step(optimizer: torch.optim.Adam) -> None:
    """``optimizer.step()``: for the fused Adam the learners make, the kernel :func:`_private_step` calls."""
    optimizer.step()


def _fused_adam(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    group: dict[str, Any],
) -> None:
    """The private kernel with a group's options: the one call both the step and the probe make."""
    beta1, beta2 = group["betas"]
    torch._fused_adam_(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
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

    Why: ``_foreach_add_`` over 14 zero-dimensional CPU tensors costs about half the kernel's own
    time, one add over a 14-element tensor a small fraction of it. The counts are made views of one
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


def _probe() -> str | None:
    """Why the direct kernel call is not ``Adam.step()``'s update with this torch, or None where it is.

    Two steps of a public fused Adam on two weights (decay, betas and eps not the defaults), the
    second also taken by :func:`_fused_adam` on copies of the state: the call must run and agree
    bit for bit in the weights and both moments.
    """
    try:
        weight = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        optimizer = torch.optim.Adam([weight], lr=1e-2, betas=(0.8, 0.9), eps=1e-5, weight_decay=0.1, fused=True)
        weight.grad = torch.tensor([0.5, -0.25])
        optimizer.step()  # creates the state the direct call reads
        weight.grad = torch.tensor([-0.75, 0.125])
        state = optimizer.state[weight]
        ours = [weight.detach().clone(), state["exp_avg"].clone(), state["exp_avg_sq"].clone()]
        step = state["step"].clone() + 1
        _fused_adam([ours[0]], [weight.grad.clone()], [ours[1]], [ours[2]], [step], optimizer.param_groups[0])
        optimizer.step()
        theirs = [weight.detach(), state["exp_avg"], state["exp_avg_sq"]]
    except Exception as error:  # any failure means: use the public step
        return f"{type(error).__name__}: {error}"
    if not all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True)):
        return "its update differs from Adam.step()'s"
    return None


def _choose(request: str, failure: str | None) -> AdamKernel:
    """The kernel for ``ARENA_ADAM_KERNEL=request`` when the probe reported ``failure``."""
    if request in ("", "auto"):
        return "fused_private" if failure is None else "public"
    if request == "public":
        return "public"
    if request == "fused_private":
        if failure is not None:
            raise RuntimeError(f"{KERNEL_ENV}=fused_private, but torch {torch.__version__}'s fused Adam kernel: {failure}")
        return "fused_private"
    raise ValueError(f"{KERNEL_ENV}={request!r}: expected auto, public or fused_private")


PRIVATE_KERNEL_FAILURE: str | None = _probe()
"""Why ``torch._fused_adam_`` cannot stand in for ``Adam.step()`` here, or None where it can."""

ADAM_KERNEL: AdamKernel = _choose(os.environ.get(KERNEL_ENV, "").strip(), PRIVATE_KERNEL_FAILURE)
"""The kernel :func:`adam_step` runs, chosen once at import."""

adam_step: Callable[[torch.optim.Adam], None] = _private_step if ADAM_KERNEL == "fused_private" else _public_step
"""``optimizer.step()``'s update for the learners' fused Adam, by the kernel :data:`ADAM_KERNEL` names."""

if PRIVATE_KERNEL_FAILURE is not None:
    logging.getLogger(__name__).info("Adam: Adam.step() (torch._fused_adam_ unusable: %s)", PRIVATE_KERNEL_FAILURE)
