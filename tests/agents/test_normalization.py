"""agents/normalization.py: running statistics equal numpy's over all rows, and the scaling is the bots' formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.normalization import OBS_NORM_EPS, ObsNormalizer, RunningMeanStd

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DIM = 5


def features(n: int, seed: int = 0) -> np.ndarray:
    """Rows whose features differ in scale and offset by orders of magnitude, as a game's do."""
    rng = np.random.default_rng(seed)
    scale = np.array([1e-3, 0.5, 1.0, 40.0, 900.0])
    offset = np.array([0.0, -2.0, 5.0, 300.0, -1e4])
    return (offset + scale * rng.normal(size=(n, DIM))).astype(np.float32)


@pytest.mark.parametrize("chunks", [(1,), (7, 1, 30, 2), (64, 64, 64), (1, 1, 1, 1, 100)])
def test_running_moments_equal_numpys_over_all_rows_however_chunked(chunks):
    rows = features(sum(chunks))
    stats = RunningMeanStd(DIM)
    for part in np.split(rows, np.cumsum(chunks)[:-1]):
        assert stats.update(part)
    whole = rows.astype(np.float64)
    np.testing.assert_allclose(stats.mean, whole.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.var, whole.var(axis=0), rtol=1e-10, atol=1e-18)
    assert stats.count == len(rows)
    assert stats.mean.dtype == stats.var.dtype == np.float64


def test_before_any_data_the_stats_are_the_identitys_prior():
    stats = RunningMeanStd(DIM)
    assert (stats.mean == 0).all() and (stats.var == 1).all() and stats.count == 0


@pytest.mark.parametrize("bad", [np.zeros((0, DIM)), np.array([[0.0, 1.0, np.nan, 0.0, 0.0]]), np.full((2, DIM), np.inf)])
def test_empty_or_non_finite_rows_change_nothing(bad):
    stats = RunningMeanStd(DIM)
    stats.update(features(10))
    before = (stats.mean.copy(), stats.var.copy(), stats.count)
    assert not stats.update(bad)
    assert (stats.mean == before[0]).all() and (stats.var == before[1]).all() and stats.count == before[2]


def test_state_round_trip_is_bitwise_and_continues_exactly():
    a = RunningMeanStd(DIM)
    a.update(features(33, seed=1))
    b = RunningMeanStd.from_state(a.state_dict(), DIM)
    for stats in (a, b):
        stats.update(features(17, seed=2))
    assert a.mean.tobytes() == b.mean.tobytes() and a.var.tobytes() == b.var.tobytes() and a.count == b.count


@pytest.mark.parametrize(
    "state", [None, {}, {"mean": torch.zeros(DIM)}, {"mean": torch.zeros(DIM + 1), "var": torch.ones(DIM + 1), "count": 3.0}]
)
def test_a_state_of_another_width_or_shape_is_refused(state):
    with pytest.raises(ValueError, match="checkpoint obs_norm"):
        RunningMeanStd.from_state(state, DIM)


def test_the_normalizer_scales_clips_and_exports_what_it_applies():
    norm = ObsNormalizer(DIM, clip=2.5, device=torch.device("cpu"))
    norm.update(features(200))
    obs = features(50, seed=3)
    obs[0] = 1e6  # far past the clip
    out = norm(torch.from_numpy(obs)).numpy()
    exported = norm.export()
    assert set(exported) == {"obs_norm.mean", "obs_norm.std"}
    assert all(v.dtype == np.float32 and v.shape == (DIM,) for v in exported.values())
    np.testing.assert_array_equal(exported["obs_norm.std"], np.sqrt(norm.stats.var + OBS_NORM_EPS).astype(np.float32))
    expected = np.clip((obs - exported["obs_norm.mean"]) / exported["obs_norm.std"], np.float32(-2.5), np.float32(2.5))
    np.testing.assert_array_equal(out, expected)
    assert (out[0] == 2.5).all() and np.abs(out).max() <= 2.5


def test_the_normalizer_leaves_its_input_alone():
    norm = ObsNormalizer(DIM, clip=10.0, device=torch.device("cpu"))
    norm.update(features(20))
    obs = torch.from_numpy(features(4))
    before = obs.clone()
    norm(obs)
    assert torch.equal(obs, before)
