"""The requirements say what we need: every lower bound in pyproject.toml is pinned in
tests/data/lowest-requirements.txt, the constraints file of a run of the suite against the lowest
releases allowed (README, "Tests and benchmarks"). A bound raised or added without that file is
caught here, so the next lowest-versions run tests the bound that ships."""

from __future__ import annotations

import re
import tomllib

from packaging.version import Version  # pytest's own dependency

from tests.conftest import DATA, ROOT

BOUND = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)$")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def lower_bounds() -> dict[str, Version]:
    """name -> its ">=" bound, over the dependencies and the test extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        match = BOUND.match(requirement.strip())
        assert match, f"{requirement!r}: every requirement has one '>=' lower bound"
        bounds[_name(match.group(1))] = Version(match.group(2))
    return bounds


def pinned() -> dict[str, Version]:
    pins = {}
    for line in (DATA / "lowest-requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[_name(name)] = Version(version)
    return pins


def test_every_lower_bound_is_pinned_for_the_lowest_versions_run() -> None:
    """torch too: its bound is the release the run installs, not an older one nothing tests."""
    assert pinned() == lower_bounds()
