"""``arena export`` of a PPO actor with discrete branches (``mixed_mlp``): the weights file, and what it refuses.

The weights file a checkpoint exports is the ``weights`` message bots receive, so
``bot_protocol.Policy.from_weights`` must rebuild the trainer's actor from it exactly: the same
architecture, tensors and actions. A Tank Royale bot acts in the tank's continuous dims, so
``--royale`` refuses such a policy in one line before writing anything; the bot directory it
writes for a continuous policy carries every ``bot_protocol`` module its copy imports (checked
here, without the Tank Royale API the royale tests need).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from agents import make_agent
from agents.checkpoint import CheckpointStore
from arena.bots.policies import load_weights
from arena.cli import main
from arena.games.tank.actions import ACT_DIM
from arena.royale.export import export_royale_bot
from bot_protocol import Policy, PolicyId, Weights
from bot_protocol.tensors import decode_tensors

OBS, CONTINUOUS, BRANCHES = 25, 2, (3, 2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Weights]:
    """A real checkpoint of a fresh mixed PPO agent (what a run writes), and the weights its actor exports."""
    agent = make_agent("ppo", OBS, CONTINUOUS, branches=BRANCHES, hidden=(32, 32), seed=7)
    arch, tensors = agent.export_actor()
    store = CheckpointStore(tmp_path_factory.mktemp("run") / "checkpoints")
    path = store.save({"agent": agent.state_dict(), "generation": 2, "version": 8}, PolicyId(2, 8))
    return path, Weights.pack(2, 8, arch, tensors)


def test_a_mixed_checkpoint_round_trips_through_the_weights_file(checkpoint: tuple[Path, Weights], tmp_path: Path) -> None:
    """The file's Policy is the trainer actor's: architecture, tensors, and every action under a mask."""
    path, trained = checkpoint
    out = tmp_path / "policy.weights"
    assert main(["export", str(path), "-o", str(out)]) == 0
    weights = load_weights(out)
    assert (weights.generation, weights.version, weights.arch) == (2, 8, trained.arch)
    assert weights.arch.kind == "mixed_mlp" and weights.arch.branches == BRANCHES
    got, want = decode_tensors(weights.tensors), decode_tensors(trained.tensors)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    policy, reference = Policy.from_weights(weights), Policy.from_weights(trained)
    assert policy.actions == reference.actions and policy.policy_id == PolicyId(2, 8)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((32, OBS)).astype(np.float32)
    mask = np.ones((32, sum(BRANCHES)), np.float32)
    mask[::2, 0] = 0  # every other row forbids the first action of the first branch
    for deterministic in (True, False):
        a = policy.act(obs, np.random.default_rng(1), deterministic, mask)
        b = reference.act(obs, np.random.default_rng(1), deterministic, mask)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
        assert (a[2][::2, 0] != 0).all()  # dact


def test_royale_refuses_a_mixed_policy_in_one_line(checkpoint: tuple[Path, Weights], tmp_path: Path, capsys) -> None:
    """The tank acts in continuous dims only: one line on stderr, exit 2, no bot directory."""
    path, _ = checkpoint
    capsys.readouterr()
    code = main(["export", str(path), "--royale", "-o", str(tmp_path / "MixedBot")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "mixed_mlp" in lines[0] and "continuous" in lines[0]
    assert not (tmp_path / "MixedBot").exists()


def test_the_royale_bot_carries_every_bot_protocol_module_it_imports(tmp_path: Path) -> None:
    """Read from the files, not imported: an editable install would resolve a missing module from the repository."""
    agent = make_agent("ppo", OBS, ACT_DIM, hidden=(8,), seed=1)
    path = CheckpointStore(tmp_path / "checkpoints").save(
        {"agent": agent.state_dict(), "generation": 0, "version": 1}, PolicyId(0, 1)
    )
    export_royale_bot(path, tmp_path / "Bot")
    package = tmp_path / "Bot" / "bot_protocol"
    vendored = {module.stem for module in package.glob("*.py")}
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                needed = [node.module] if node.module else [alias.name for alias in node.names]
                assert set(needed) <= vendored, f"{module.name} imports {needed}, not copied"
