"""agents/adam.py: the fused kernel called directly is ``Adam.step()``'s update, bit for bit, and
so is the fallback chosen at import where torch's private kernel is missing or changed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import torch
from packaging.version import Version  # pytest's own dependency

from agents import adam
from agents.adam import ADAM_KERNEL, KERNEL_ENV, PRIVATE_KERNEL_FAILURE, adam_step
from tests.conftest import ROOT, timeout

private = pytest.param(
    adam._private_step,
    id="fused_private",
    marks=pytest.mark.skipif(PRIVATE_KERNEL_FAILURE is not None, reason=f"torch._fused_adam_: {PRIVATE_KERNEL_FAILURE}"),
)
KERNELS = [private, pytest.param(adam._public_step, id="public")]
"""Both of :func:`adam_step`'s kernels, whichever the import chose: each must be ``Adam.step()``."""


def _pair(**options) -> tuple[list[torch.nn.Parameter], torch.optim.Adam, list[torch.nn.Parameter], torch.optim.Adam]:
    g = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    first = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    second = [torch.nn.Parameter(p.detach().clone()) for p in first]
    make = lambda params: torch.optim.Adam(params, fused=True, **options)  # noqa: E731
    return first, make(first), second, make(second)


def _steps_and_compare(steps, **options) -> None:
    """Five steps of ``steps[i]`` on one optimizer and of ``Adam.step()`` on a copy; the schedule halves the rate at 3."""
    ours, ours_opt, theirs, theirs_opt = _pair(**options)
    g = torch.Generator().manual_seed(1)
    for step in range(5):
        grads = [torch.randn(p.shape, generator=g) for p in ours]
        for params, grads_ in ((ours, grads), (theirs, grads)):
            for p, grad in zip(params, grads_, strict=True):
                p.grad = grad.clone()
        if step == 3:  # the schedule writes the group's rate; the direct call reads it
            for opt in (ours_opt, theirs_opt):
                opt.param_groups[0]["lr"] *= 0.5
        steps[step % len(steps)](ours_opt)
        theirs_opt.step()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(ours, theirs, strict=True):
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(ours_opt.state[a][key], theirs_opt.state[b][key])


OPTIONS = [{"lr": 1e-2}, {"lr": 3e-4, "eps": 1e-5, "betas": (0.8, 0.9), "weight_decay": 0.1}]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("options", OPTIONS)
def test_direct_steps_equal_the_optimizers_bit_for_bit(kernel, options):
    _steps_and_compare([kernel], **options)


@pytest.mark.skipif(PRIVATE_KERNEL_FAILURE is not None, reason=f"torch._fused_adam_: {PRIVATE_KERNEL_FAILURE}")
@pytest.mark.parametrize("options", OPTIONS)
def test_the_two_kernels_taking_turns_on_one_optimizer_are_one_update(options):
    """The fallback is not merely close to the direct call: steps by either, in any order, are the same floats."""
    _steps_and_compare([adam._private_step, adam._public_step], **options)
    _steps_and_compare([adam._public_step, adam._public_step, adam._private_step], **options)


def _saved_and_loaded(state: dict) -> dict:
    """A state as a checkpoint hands it back: saved, then loaded into new tensors."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("kernel", KERNELS)
def test_state_loaded_from_a_checkpoint_is_the_state_the_next_step_reads(kernel):
    """Moments and step counts come from the loaded state (the direct call joins the counts into one tensor again)."""
    ours, ours_opt, theirs, theirs_opt = _pair(lr=1e-2)
    g = torch.Generator().manual_seed(2)
    for step in range(6):
        grads = [torch.randn(p.shape, generator=g) for p in ours]
        for params in (ours, theirs):
            for p, grad in zip(params, grads, strict=True):
                p.grad = grad.clone()
        if step == 2:  # ours takes over from a checkpoint of theirs, then both go on
            with torch.no_grad():
                for a, b in zip(ours, theirs, strict=True):
                    a.copy_(b)
            ours_opt.load_state_dict(_saved_and_loaded(theirs_opt.state_dict()))
        if step >= 2:
            kernel(ours_opt)
        if step == 4:  # a checkpoint of ours (with the direct call, its counts views of one tensor) loads as the same counts
            theirs_opt.load_state_dict(_saved_and_loaded(ours_opt.state_dict()))
            with torch.no_grad():
                for a, b in zip(ours, theirs, strict=True):
                    b.copy_(a)
            continue
        theirs_opt.step()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
        assert ours_opt.state[a]["step"].item() == theirs_opt.state[b]["step"].item() == 6
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(ours_opt.state[a][key], theirs_opt.state[b][key])


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_first_step_and_a_missing_gradient_go_through_the_optimizer(kernel):
    """The optimizer creates its state on the first step; a parameter without a gradient is skipped by it."""
    ours, ours_opt, theirs, theirs_opt = _pair(lr=1e-2)
    for params in (ours, theirs):
        for p in params[1:]:
            p.grad = torch.ones_like(p)
    kernel(ours_opt)
    theirs_opt.step()
    assert ours_opt.state.get(ours[0]) is None
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)


def test_the_import_chose_the_kernel_the_environment_asks_for():
    """Here the probe decides unless the run forces the fallback; on the torch CI pins the direct call must work."""
    assert (adam_step is adam._private_step) == (ADAM_KERNEL == "fused_private")
    if os.environ.get(KERNEL_ENV, "").strip() == "public":
        assert ADAM_KERNEL == "public"
    else:
        assert ("fused_private" if PRIVATE_KERNEL_FAILURE is None else "public") == ADAM_KERNEL
    if Version(torch.__version__).release[:2] <= (2, 13):  # the release CI runs: a silent fallback there is a slowdown
        assert PRIVATE_KERNEL_FAILURE is None


_SCENARIOS = r"""
import importlib, json, os, types
import torch
from agents import adam

fresh = {"kernel": adam.ADAM_KERNEL, "public": adam.adam_step is adam._public_step}
real = torch._fused_adam_


class TorchOfTheOptimizer(types.ModuleType):
    '''torch as torch.optim sees it: in a release without the private name, its Adam calls the kernel by the new one.'''

    def __getattr__(self, name):
        return real if name == "_fused_adam_" else getattr(torch, name)


importlib.import_module("torch.optim.adam").torch = TorchOfTheOptimizer("torch")


def load(env, op):
    '''Import agents.adam again with ARENA_ADAM_KERNEL=env and torch._fused_adam_ = op (None: missing).'''
    os.environ[adam.KERNEL_ENV] = env
    if op is None:
        delattr(torch, "_fused_adam_")
    else:
        torch._fused_adam_ = op
    try:
        module = importlib.reload(adam)
        return {"kernel": module.ADAM_KERNEL, "failure": module.PRIVATE_KERNEL_FAILURE}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}


def fallback_steps_equal_the_optimizers():
    '''Four steps of adam_step and of Adam.step() on copies of one network, with the private name still missing.'''
    weights = [torch.randn(4, 3), torch.randn(3)]
    ours, theirs = ([torch.nn.Parameter(w.clone()) for w in weights] for _ in range(2))
    optimizers = [torch.optim.Adam(params, lr=1e-2, weight_decay=0.1, fused=True) for params in (ours, theirs)]
    for _ in range(4):
        grads = [torch.randn(w.shape) for w in weights]
        for params in (ours, theirs):
            for p, grad in zip(params, grads):
                p.grad = grad.clone()
        adam.adam_step(optimizers[0])
        optimizers[1].step()
    return all(torch.equal(a, b) for a, b in zip(ours, theirs))


def renamed(*args, **kwargs):  # the name kept for a kernel that now wants other arguments
    raise TypeError("test: this kernel takes other arguments now")


results = {"fresh": fresh, "auto": load("", real), "missing": load("auto", None)}
results["missing"]["steps_equal"] = fallback_steps_equal_the_optimizers()
results |= {
    "changed": load("", renamed),
    "wrong": load("", lambda params, *args, **kwargs: torch._foreach_add_(params, 1.0)),
    "forced": load("public", real),
    "required": load("fused_private", real),
    "required_missing": load("fused_private", None),
    "unknown": load("fast", real),
}
print(json.dumps(results))
"""


def test_the_import_falls_back_where_the_private_kernel_is_missing_changed_or_wrong():
    """A real interpreter, started with the fallback forced, then agents.adam imported again under each case."""
    env = {**os.environ, KERNEL_ENV: "public"}
    result = subprocess.run(
        [sys.executable, "-c", _SCENARIOS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout(120)
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.splitlines()[-1])
    assert got["fresh"] == {"kernel": "public", "public": True}
    if PRIVATE_KERNEL_FAILURE is None:
        assert got["auto"] == {"kernel": "fused_private", "failure": None}
        assert got["required"] == {"kernel": "fused_private", "failure": None}
    assert got["missing"]["kernel"] == "public"
    assert got["missing"]["failure"].startswith("AttributeError")
    assert got["missing"]["steps_equal"] is True
    assert got["changed"] == {"kernel": "public", "failure": "TypeError: test: this kernel takes other arguments now"}
    assert got["wrong"] == {"kernel": "public", "failure": "its update differs from Adam.step()'s"}
    assert got["forced"] == {"kernel": "public", "failure": PRIVATE_KERNEL_FAILURE}
    assert got["required_missing"]["error"] == "RuntimeError"
    assert got["unknown"]["error"] == "ValueError"
