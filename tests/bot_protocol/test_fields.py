"""Sans-I/O tests of bot_protocol.fields: the float checks every message's float fields go through."""

from __future__ import annotations

import numpy as np
import pytest

from bot_protocol import ErrorCode
from tests.bot_protocol.helpers import assert_code, make_batch
from tests.bot_protocol.helpers import mutate as _mutate


@pytest.mark.parametrize("field", ["obs", "act", "logp", "rew"])
@pytest.mark.parametrize(
    ("value", "code"),
    [(np.nan, ErrorCode.NONFINITE), (np.inf, ErrorCode.NONFINITE), (-np.inf, ErrorCode.NONFINITE), (2e6, ErrorCode.RANGE)],
)
def test_nonfinite_and_out_of_range_values(field, value, code):
    """NaN, ±Inf and |x| > max_abs in any float field are refused."""
    batch = make_batch()
    array = getattr(batch, field).copy()
    array.flat[-1] = value
    assert_code(code, _mutate(batch, **{field: array.astype(np.float32).tobytes()}))
