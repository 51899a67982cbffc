"""agents/adam.py: the fused kernel called directly is ``Adam.step()``'s update, bit for bit."""

from __future__ import annotations

import io

import pytest
import torch

from agents.adam import adam_step


def _pair(**options) -> tuple[list[torch.nn.Parameter], torch.optim.Adam, list[torch.nn.Parameter], torch.optim.Adam]:
    g = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    first = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    second = [torch.nn.Parameter(p.detach().clone()) for p in first]
    make = lambda params: torch.optim.Adam(params, fused=True, **options)  # noqa: E731
    return first, make(first), second, make(second)


@pytest.mark.parametrize("options", [{"lr": 1e-2}, {"lr": 3e-4, "eps": 1e-5, "betas": (0.8, 0.9), "weight_decay": 0.1}])
def test_direct_steps_equal_the_optimizers_bit_for_bit(options):
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
        adam_step(ours_opt)
        theirs_opt.step()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(ours, theirs, strict=True):
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(ours_opt.state[a][key], theirs_opt.state[b][key])


def _saved_and_loaded(state: dict) -> dict:
    """A state as a checkpoint hands it back: saved, then loaded into new tensors."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_loaded_from_a_checkpoint_is_the_state_the_next_step_reads():
    """Moments and step counts come from the loaded state (the counts are joined into one tensor again)."""
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
            adam_step(ours_opt)
        if step == 4:  # a checkpoint of ours (its counts views of one tensor) loads as the same counts
            theirs_opt.load_state_dict(_saved_and_loaded(ours_opt.state_dict()))
            with torch.no_grad():
                for a, b in zip(ours, theirs, strict=True):
                    b.copy_(a)
            continue
        theirs_opt.step()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
        assert ours_opt.state[a]["step"].item() == theirs_opt.state[b]["step"].item() == 6


def test_the_first_step_and_a_missing_gradient_go_through_the_optimizer():
    """The optimizer creates its state on the first step; a parameter without a gradient is skipped by it."""
    ours, ours_opt, theirs, theirs_opt = _pair(lr=1e-2)
    for params in (ours, theirs):
        for p in params[1:]:
            p.grad = torch.ones_like(p)
    adam_step(ours_opt)
    theirs_opt.step()
    assert ours_opt.state.get(ours[0]) is None
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
