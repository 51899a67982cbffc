"""``arena export --onnx`` (arena/outputs/onnx_export.py): the ONNX model acts as the numpy Policy and the torch actor do.

For each algorithm: a fresh agent's actor (random weights, and for PPO a log-std moved off its
initial value), exported to ONNX, run with onnxruntime on random observations of several batch
sizes, against ``bot_protocol.Policy`` (what bots run) and the agent's own torch actor, within
float32 tolerance. The file passes ``onnx.checker``; the CLI writes it from a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agents import make_agent
from bot_protocol import Weights
from tests.conftest import TinyRun

onnx = pytest.importorskip("onnx", reason="the export extra: pip install -e '.[export]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (test extra)")
pytest.importorskip("onnxscript", reason="the export extra: pip install -e '.[export]'")

from arena.outputs.onnx_export import OPSET, export_onnx, reference_actions  # noqa: E402

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


def run(path: Path, obs: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"obs": obs}), strict=True))


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
