"""bench/provenance.py: the measured code is a clean export of a named commit, a dirty tree is refused unless asked,
and the record names the commit, the dirty state and the versions the runs import."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.provenance import DirtyTree, Source, arena_command, prepare_source, versions
from tests.conftest import ROOT


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    _git(repo, "add", "a.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    return repo


def test_a_clean_tree_is_exported_at_its_commit(repo: Path, tmp_path: Path) -> None:
    source = prepare_source(repo, None, allow_dirty=False, into=tmp_path / "export")
    assert source.record["commit"] == _git(repo, "rev-parse", "HEAD").strip()
    assert source.record["dirty"] is False and source.record["exported"] is True
    assert (source.root / "a.txt").read_text() == "one\n"
    assert source.env()["PYTHONPATH"].split(":")[0] == str(source.root)


def test_a_dirty_tree_is_refused_unless_asked_and_then_said(repo: Path, tmp_path: Path) -> None:
    (repo / "a.txt").write_text("two\n")
    (repo / "new.py").write_text("x = 1\n")
    with pytest.raises(DirtyTree, match=r"uncommitted changes \(a\.txt, new\.py\).*--allow-dirty"):
        prepare_source(repo, None, allow_dirty=False)
    source = prepare_source(repo, None, allow_dirty=True)
    assert source.root == repo and source.record["dirty"] is True and source.record["exported"] is False
    assert source.record["changed"] == ["a.txt", "new.py"] and len(source.record["diff_sha256"]) == 64
    (repo / "new.py").write_text("x = 2\n")  # an untracked file's content is part of what runs
    assert prepare_source(repo, None, allow_dirty=True).record["diff_sha256"] != source.record["diff_sha256"]
    named = prepare_source(repo, "HEAD", allow_dirty=False, into=tmp_path / "named")  # a named commit: edits not measured
    assert (named.root / "a.txt").read_text() == "one\n" and named.record["working_tree"]["uncommitted_changes"] == 2


def test_an_unknown_commit_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(RuntimeError, match="rev-parse"):
        prepare_source(repo, "no-such-commit", allow_dirty=False)


def test_a_commit_holding_a_link_out_of_the_tree_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    """A committed absolute symlink (a venv linked in by mistake) is refused by the safe extraction: one message."""
    (repo / ".venv").symlink_to(tmp_path)
    _git(repo, "add", ".venv")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "link")
    with pytest.raises(RuntimeError, match=r"cannot be exported: .*\.venv"):
        prepare_source(repo, "HEAD", allow_dirty=False, into=tmp_path / "export")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_runs_import_the_project_from_the_export_and_the_versions_are_recorded(tmp_path: Path) -> None:
    """The export of this repository's HEAD: every package comes from it, ahead of the editable install."""
    source = prepare_source(ROOT, "HEAD", allow_dirty=False, into=tmp_path / "export")
    found = versions(source)
    for name in ("python", "torch", "numpy", "numba"):
        assert isinstance(found[name], str) and found[name][0].isdigit(), (name, found[name])
    usage = subprocess.run([*arena_command(source), "--help"], capture_output=True, text=True, env=source.env())
    assert usage.returncode == 0 and usage.stdout.startswith("usage: arena "), usage.stderr
    with pytest.raises(RuntimeError, match="would not come from"):
        versions(Source(tmp_path / "empty"))
