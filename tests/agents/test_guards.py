"""The numerical guards every learner shares (agents/guards.py): a non-finite step changes nothing."""

from __future__ import annotations

import math

import pytest
import torch

from agents.guards import adam_step_unless, step_is_finite

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_adam_step_unless_skip_changes_nothing_even_with_nan_gradients():
    """With skip set, a NaN gradient leaves parameters, moments and step counts bitwise equal; unset, it is a plain step."""
    net = torch.nn.Linear(3, 2)
    adam = torch.optim.Adam(net.parameters(), lr=0.1, fused=True)
    reference = torch.nn.Linear(3, 2)
    reference.load_state_dict(net.state_dict())
    reference_adam = torch.optim.Adam(reference.parameters(), lr=0.1, fused=True)
    for module, optimizer in ((net, adam), (reference, reference_adam)):
        module(torch.ones(4, 3)).sum().backward()
        optimizer.step()  # a real step first, so there are moments to protect
    before = [(p.detach().clone(), {k: v.clone() for k, v in adam.state[p].items()}) for p in net.parameters()]
    for p in net.parameters():
        p.grad = torch.full_like(p, math.nan)
    adam_step_unless(adam, torch.tensor(True))
    for p, (value, state) in zip(net.parameters(), before, strict=True):
        assert torch.equal(p, value)
        assert all(torch.equal(adam.state[p][k], v) for k, v in state.items())
    assert not hasattr(adam, "found_inf")  # the skip input does not outlive the call
    for module, optimizer in ((net, adam), (reference, reference_adam)):
        optimizer.zero_grad(set_to_none=True)
        module(torch.ones(4, 3)).pow(2).sum().backward()
    adam_step_unless(adam, torch.tensor(False))
    reference_adam.step()
    for p, q in zip(net.parameters(), reference.parameters(), strict=True):
        assert torch.equal(p, q)
        assert all(torch.equal(adam.state[p][k], reference_adam.state[q][k]) for k in ("step", "exp_avg", "exp_avg_sq"))


def test_adam_step_unless_needs_fused_adam():
    net = torch.nn.Linear(2, 1)
    net(torch.ones(1, 2)).sum().backward()
    with pytest.raises(AssertionError, match="fused"):
        adam_step_unless(torch.optim.Adam(net.parameters(), fused=False), torch.tensor(False))


def _with_grads(*grads: list[float]) -> list[torch.nn.Parameter]:
    params = [torch.nn.Parameter(torch.zeros(len(g))) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = torch.tensor(g)
    return params


def test_a_finite_step_is_ok_and_reports_the_total_gradient_norm():
    ok, norm = step_is_finite(torch.tensor(1.5), _with_grads([3.0], [4.0, 0.0]))
    assert ok.dim() == 0 and ok.dtype == torch.bool and bool(ok)
    assert norm.item() == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("loss", "grads"),
    [
        (math.nan, [[1.0]]),
        (math.inf, [[1.0]]),
        (1.0, [[1.0], [math.nan]]),
        (1.0, [[-math.inf]]),
        (1.0, [[1e16]]),  # finite, but above the 1e15 a sane step can reach
    ],
)
def test_a_nonfinite_loss_or_gradient_or_an_absurd_norm_is_not_ok(loss, grads):
    ok, _ = step_is_finite(torch.tensor(loss), _with_grads(*grads))
    assert not bool(ok)


def test_parameters_without_gradients_count_as_none_and_max_norm_is_the_callers():
    bare = torch.nn.Parameter(torch.ones(2))
    ok, norm = step_is_finite(torch.tensor(0.0), [bare])
    assert bool(ok) and norm.item() == 0.0
    assert not bool(step_is_finite(torch.tensor(0.0), _with_grads([3.0, 4.0]), max_norm=4.9)[0])
    assert bool(step_is_finite(torch.tensor(0.0), _with_grads([3.0, 4.0]), max_norm=5.0)[0])
