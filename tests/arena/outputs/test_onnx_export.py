"""``arena export --onnx`` (arena/outputs/onnx_export.py): the ONNX model acts as the numpy Policy and the torch actor do.

For each algorithm: a fresh agent's actor (random weights, and for PPO a log-std moved off its
initial value), exported to ONNX, run with onnxruntime on random observations of several batch
sizes, against ``bot_protocol.Policy`` (what bots run) and the agent's own torch actor, within
float32 tolerance. PPO's discrete actors (``mixed_mlp``: discrete, multi-discrete and mixed spaces)
are checked the same way with random masks: masked logits and each branch's deterministic action.
The file passes ``onnx.checker``; the CLI writes it from a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agents import make_agent
from agents.checkpoint import CheckpointStore
from bot_protocol import ActionSpace, PolicyId, Weights
from tests.conftest import TinyRun

onnx = pytest.importorskip("onnx", reason="the export extra: pip install -e '.[export]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (test extra)")
pytest.importorskip("onnxscript", reason="the export extra: pip install -e '.[export]'")

from arena.outputs.onnx_export import MASKED_LOGIT, OPSET, export_onnx, reference_actions  # noqa: E402

OBS, ACT = 25, 5


def exported(algo: str) -> tuple[Weights, torch.nn.Module]:
    torch.manual_seed(3)
    agent = make_agent(algo, OBS, ACT)
    actor = agent.actor  # type: ignore[attr-defined]
    if algo == "ppo":
        with torch.no_grad():
            actor.log_std.copy_(torch.linspace(-1.5, 0.3, ACT))
    arch, tensors = agent.export_actor()
    return Weights.pack(2, 17, arch, tensors), actor


def run(path: Path, obs: np.ndarray, mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    feed = {"obs": obs} if mask is None else {"obs": obs, "mask": mask}
    return dict(zip(names, session.run(None, feed), strict=True))


@pytest.mark.parametrize("algo", ["ppo", "ddpg", "td3"])
def test_onnx_actions_match_the_numpy_policy_and_the_torch_actor(algo: str, tmp_path: Path) -> None:
    weights, actor = exported(algo)
    path = tmp_path / "policy.onnx"
    export_onnx(weights, path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert [i.name for i in model.graph.input] == ["obs"]
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["arena.obs_dim"] == str(OBS) and meta["arena.act_dim"] == str(ACT)
    assert meta["arena.generation"] == "2" and meta["arena.version"] == "17"
    rng = np.random.default_rng(0)
    for batch in (1, 7, 256):  # the batch axis is dynamic
        obs = (3 * rng.standard_normal((batch, OBS))).astype(np.float32)
        got = run(path, obs)
        want = reference_actions(weights, obs)
        assert set(got) == set(want)
        for name in want:
            assert got[name].shape == (batch, ACT) and got[name].dtype == np.float32
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
        with torch.no_grad():
            torch_action = actor(torch.from_numpy(obs)).numpy()
        first = "mean" if algo == "ppo" else "action"
        np.testing.assert_allclose(got[first], torch_action, rtol=1e-5, atol=1e-5)
    if algo == "ppo":
        arch = weights.arch  # 0.3 is past the ceiling: the model's log_std is clamped as the trainer's is
        clamped = np.clip(np.linspace(-1.5, 0.3, ACT), arch.log_std_min, arch.log_std_max)
        np.testing.assert_allclose(got["log_std"][0], clamped, rtol=1e-6)
        assert meta["arena.kind"] == "gaussian_mlp" and "mean" in meta["arena.outputs"]
    else:
        limit = float(weights.arch.act_limit)
        assert meta["arena.action_low"] == f"{-limit:g}" and np.abs(got["action"]).max() <= limit


def test_cli_exports_a_checkpoint_and_a_weights_file(tmp_path: Path, tiny_run: TinyRun, capsys) -> None:
    """A run's checkpoint and the same policy's weights file give the same model; bad input is one line, exit 2."""
    from arena.cli import main

    run_dir = tiny_run.out  # `arena export` through its entry point, in this process (torch is imported already)
    for source, out in ((run_dir, "a.onnx"), (tmp_path / "p.weights", "b.onnx")):
        if source.suffix == ".weights":
            assert main(["export", str(run_dir), "-o", str(source)]) == 0
        capsys.readouterr()
        code = main(["export", str(source), "--onnx", "-o", str(tmp_path / out)])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert "ONNX opset" in printed.out and "outputs mean, log_std" in printed.out
    obs = np.random.default_rng(1).standard_normal((5, OBS)).astype(np.float32)
    a, b = run(tmp_path / "a.onnx", obs), run(tmp_path / "b.onnx", obs)
    np.testing.assert_array_equal(a["mean"], b["mean"])
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "a.onnx")).metadata_props}
    assert meta["arena.game"] == "tank" and meta["arena.action_low"] == "-1"
    bad = tmp_path / "bad.weights"
    bad.write_bytes(b"not a weights message")
    capsys.readouterr()
    for source in (tmp_path / "missing", bad):  # refused before anything is written: the entry point, in this process
        code = main(["export", str(source), "--onnx", "-o", str(tmp_path / "c.onnx")])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "error" in lines[0], err
        assert not (tmp_path / "c.onnx").exists()


SPACES = {"discrete": (0, (4,)), "multi-discrete": (0, (3, 2, 5)), "mixed": (2, (3, 2))}


def exported_mixed(continuous: int, branches: tuple[int, ...]) -> tuple[Weights, torch.nn.Module]:
    """A PPO ``mixed_mlp`` with weights spread wide (logits of order 1, not near-ties) and a log-std past its clamp."""
    torch.manual_seed(5)
    agent = make_agent("ppo", OBS, continuous, branches=branches, hidden=(32, 32))
    actor = agent.actor  # type: ignore[attr-defined]
    with torch.no_grad():
        for param in actor.net.parameters():
            param.normal_(0.0, 0.5)
        actor.log_std.copy_(torch.linspace(-1.5, 0.3, continuous))
    arch, tensors = agent.export_actor()
    return Weights.pack(3, 9, arch, tensors), actor


def random_mask(rng: np.random.Generator, batch: int, space: ActionSpace) -> np.ndarray:
    """About 60% of actions legal, at least one per branch (a mask the server accepts), as float32 0/1."""
    mask = rng.random((batch, space.n_logits)) < 0.6
    for start, size in zip(space.offsets, space.branches, strict=True):
        mask[np.arange(batch), start + rng.integers(0, size, batch)] = True
    mask[0] = True  # one row with every action legal
    return mask.astype(np.float32)


def assert_same_modes(got: np.ndarray, want: np.ndarray, logits: np.ndarray, space: ActionSpace) -> None:
    """Each branch's action is the Policy's, but where its two best legal logits tie within float32 noise.

    There the two forward passes may round apart, so the model's pick need only be (one of) the best.
    """
    for b, part in enumerate(space.split(logits)):
        picked = np.take_along_axis(part, got[:, b : b + 1], axis=1)[:, 0]
        assert (picked >= part.max(axis=1) - 1e-5).all(), f"branch {b} picks a worse or forbidden action"
        top = np.sort(part, axis=1)[:, -2:] if part.shape[1] > 1 else np.stack([part[:, 0] - np.inf, part[:, 0]], 1)
        clear = top[:, 1] - top[:, 0] > 1e-4
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(got[clear, b], want[clear, b])


@pytest.mark.parametrize("name", list(SPACES))
def test_onnx_discrete_actions_match_the_numpy_policy_under_masks(name: str, tmp_path: Path) -> None:
    continuous, branches = SPACES[name]
    space = ActionSpace(continuous, branches)
    weights, actor = exported_mixed(continuous, branches)
    path = tmp_path / "policy.onnx"
    export_onnx(weights, path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [("obs", "tensor(float)"), ("mask", "tensor(float)")]
    gaussian = ["mean", "log_std"] if continuous else []
    assert [o.name for o in session.get_outputs()] == [*gaussian, "logits", "action"]
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["arena.kind"] == "mixed_mlp" and meta["arena.act_dim"] == str(continuous)
    assert meta["arena.branches"] == ",".join(map(str, branches)) and float(meta["arena.masked_logit"]) < -1e38
    rng = np.random.default_rng(1)
    for batch in (1, 7, 256):
        obs = (3 * rng.standard_normal((batch, OBS))).astype(np.float32)
        mask = random_mask(rng, batch, space)
        got, want = run(path, obs, mask), reference_actions(weights, obs, mask)
        assert set(got) == set(want)
        for key in gaussian:
            assert got[key].shape == (batch, continuous) and got[key].dtype == np.float32
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5)
        assert got["logits"].shape == (batch, space.n_logits) and got["logits"].dtype == np.float32
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got["logits"][mask == 0], np.float32(MASKED_LOGIT))
        assert got["action"].shape == (batch, space.n_branches) and got["action"].dtype == np.int64
        assert_same_modes(got["action"], want["action"], want["logits"], space)
        with torch.no_grad():
            torch_out = actor(torch.from_numpy(obs)).numpy()
        legal = mask != 0
        np.testing.assert_allclose(got["logits"][legal], torch_out[:, continuous:][legal], rtol=1e-5, atol=1e-5)
        if continuous:
            np.testing.assert_allclose(got["mean"], torch_out[:, :continuous], rtol=1e-5, atol=1e-5)
    if continuous:
        arch = weights.arch
        clamped = np.clip(np.linspace(-1.5, 0.3, continuous), arch.log_std_min, arch.log_std_max)
        np.testing.assert_allclose(got["log_std"][0], clamped, rtol=1e-6)


def test_onnx_all_ones_mask_is_no_mask(tmp_path: Path) -> None:
    """An all-ones mask leaves the logits the actor's own, and the actions their plain argmax."""
    continuous, branches = SPACES["multi-discrete"]
    space = ActionSpace(continuous, branches)
    weights, _ = exported_mixed(continuous, branches)
    export_onnx(weights, tmp_path / "policy.onnx")
    obs = np.random.default_rng(2).standard_normal((64, OBS)).astype(np.float32)
    got = run(tmp_path / "policy.onnx", obs, np.ones((64, space.n_logits), np.float32))
    want = reference_actions(weights, obs)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-5, atol=1e-5)
    assert np.isfinite(got["logits"]).all()
    assert_same_modes(got["action"], want["action"], want["logits"], space)


def test_cli_exports_a_mixed_checkpoint_and_its_weights_file_alike(tmp_path: Path, capsys) -> None:
    """A mixed_mlp checkpoint and its exported weights file give the same model; the CLI names the mask input."""
    from arena.cli import main

    agent = make_agent("ppo", OBS, 2, branches=(3, 2), hidden=(32, 32), seed=4)
    checkpoint = CheckpointStore(tmp_path / "checkpoints").save(
        {"agent": agent.state_dict(), "generation": 1, "version": 6}, PolicyId(1, 6)
    )
    assert main(["export", str(checkpoint), "-o", str(tmp_path / "p.weights")]) == 0
    for source, out in ((checkpoint, "a.onnx"), (tmp_path / "p.weights", "b.onnx")):
        capsys.readouterr()
        code = main(["export", str(source), "--onnx", "-o", str(tmp_path / out)])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert "inputs obs (batch, 25), mask (batch, 5), outputs mean, log_std, logits, action" in printed.out
    rng = np.random.default_rng(3)
    obs = rng.standard_normal((9, OBS)).astype(np.float32)
    mask = random_mask(rng, 9, ActionSpace(2, (3, 2)))
    a, b = run(tmp_path / "a.onnx", obs, mask), run(tmp_path / "b.onnx", obs, mask)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "a.onnx")).metadata_props}
    assert "arena.game" not in meta  # 25 → 7 outputs are not the tank's five continuous dims


@pytest.mark.parametrize("branches", [(), (3, 2)])
def test_onnx_scales_observations_as_the_policy_does_when_the_trainer_normalizes_them(
    branches: tuple[int, ...], tmp_path: Path
) -> None:
    """With obs_norm the model holds the published mean, std and clip: an engine feeds raw observations."""
    torch.manual_seed(4)
    extra = {"branches": branches} if branches else {}
    agent = make_agent("ppo", OBS, 2, obs_norm=True, obs_norm_clip=2.0, **extra)
    rng = np.random.default_rng(5)
    assert agent.obs_norm is not None and agent.obs_norm.update(rng.normal(3.0, 4.0, (500, OBS)))  # type: ignore[attr-defined]
    arch, tensors = agent.export_actor()
    weights = Weights.pack(0, 1, arch, tensors)
    assert weights.arch.obs_clip == 2.0
    path = tmp_path / "policy.onnx"
    export_onnx(weights, path)
    obs = rng.normal(3.0, 8.0, (64, OBS)).astype(np.float32)  # many features past the clip
    mask = np.ones((64, sum(branches)), np.float32) if branches else None
    got, want = run(path, obs, mask), reference_actions(weights, obs, mask)
    for name in ("mean", "log_std", *(("logits",) if branches else ())):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("branches", [(), (7,)])
def test_onnx_runs_a_conv_torso_as_the_policy_does(branches: tuple[int, ...], tmp_path: Path) -> None:
    """A board read through ``conv`` (channels last, two entries after the image): the model's outputs are the Policy's."""
    torch.manual_seed(6)
    extra = {"branches": branches} if branches else {}
    agent = make_agent("ppo", 6 * 7 * 2 + 2, 0 if branches else 2, image=(6, 7, 2), conv=(8, 4, 4, 4, 2, 2), **extra)
    weights = Weights.pack(0, 1, *agent.export_actor())
    assert weights.arch.conv is not None and weights.arch.obs_dim == 86
    path = tmp_path / "policy.onnx"
    export_onnx(weights, path)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    rng = np.random.default_rng(7)
    obs = rng.integers(0, 2, (33, 86)).astype(np.float32)
    mask = np.ones((33, 7), np.float32) if branches else None
    got, want = run(path, obs, mask), reference_actions(weights, obs, mask)
    for name in ("logits",) if branches else ("mean", "log_std"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_onnx_carries_a_recurrent_state_in_and_out_as_the_policy_does(cell: str, tmp_path: Path) -> None:
    """``state`` in, ``state_out`` out: three steps fed back through the model follow the numpy Policy's steps."""
    torch.manual_seed(8)
    agent = make_agent("ppo", OBS, 0, branches=(3, 2), recurrent=cell, recurrent_size=6)
    weights = Weights.pack(0, 1, *agent.export_actor())
    path = tmp_path / "policy.onnx"
    export_onnx(weights, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs", "mask", "state"]
    assert [o.name for o in session.get_outputs()] == ["logits", "action", "state_out"]
    rng = np.random.default_rng(9)
    state = np.zeros((4, 12 if cell == "lstm" else 6), np.float32)
    for _ in range(3):
        obs = rng.normal(size=(4, OBS)).astype(np.float32)
        mask = random_mask(rng, 4, ActionSpace(0, (3, 2)))
        outputs = session.run(None, {"obs": obs, "mask": mask, "state": state})
        got = dict(zip(["logits", "action", "state_out"], outputs, strict=True))
        want = reference_actions(weights, obs, mask, state)
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["state_out"], want["state_out"], rtol=1e-5, atol=1e-5)
        state = got["state_out"]
