"""Gradient averaging over learner ranks (agents/distributed.py), in a world of one gloo rank.

Several real ranks are exercised by tests/arena/commands/test_serve_distributed.py; one rank is
enough for the averager's own contract: the mean over one rank is the gradient itself, the
finite flag travels with it, and a failing collective is reported as ``CollectiveFailed``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from agents.distributed import CollectiveFailed, GradientAverager

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def world_of_one() -> Iterator[None]:
    if dist.is_initialized():
        pytest.skip("a default process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_the_mean_over_one_rank_is_each_gradient_itself(world_of_one):
    weight, bias, unused = (
        torch.nn.Parameter(torch.ones(2, 3)),
        torch.nn.Parameter(torch.ones(2)),
        torch.nn.Parameter(torch.ones(4)),
    )
    weight.grad = torch.arange(6.0).reshape(2, 3) / 7.0
    bias.grad = torch.tensor([-1.5, 1e-30])
    expected = weight.grad.clone(), bias.grad.clone()
    grad_storage = weight.grad.data_ptr()
    averager = GradientAverager()
    assert averager.world_size == 1
    finite = averager([weight, bias, unused], torch.tensor(True))
    assert finite.dim() == 0 and finite.dtype == torch.bool and bool(finite)
    assert torch.equal(weight.grad, expected[0]) and torch.equal(bias.grad, expected[1])  # bitwise: x / 1 == x
    assert weight.grad.data_ptr() == grad_storage  # written in place
    assert torch.equal(unused.grad, torch.zeros(4))  # no gradient counts as a zero gradient
    assert averager.calls == 1 and averager.seconds > 0.0


def test_a_nonfinite_loss_on_any_rank_clears_the_flag_even_with_finite_gradients(world_of_one):
    param = torch.nn.Parameter(torch.zeros(3))
    param.grad = torch.ones(3)
    averager = GradientAverager()
    assert not bool(averager([param], torch.tensor(False)))
    assert torch.equal(param.grad, torch.ones(3))
    param.grad = torch.tensor([math.nan, 0.0, 0.0])  # a NaN gradient travels as itself
    assert bool(averager([param], torch.tensor(True))) and math.isnan(param.grad[0].item())
    assert averager.calls == 2


def test_a_failing_all_reduce_is_raised_as_collective_failed(world_of_one):
    """A dead peer cannot be staged in one process; a gradient dtype gloo cannot reduce fails the same call."""
    averager = GradientAverager()
    with pytest.raises(CollectiveFailed) as failed:
        averager([torch.zeros(2, dtype=torch.uint16)], torch.tensor(True))
    assert isinstance(failed.value.__cause__, RuntimeError) and str(failed.value) == str(failed.value.__cause__)
    assert averager.calls == 0
