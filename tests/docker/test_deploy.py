"""The deployment files, checked without a Docker engine (there is none on the CI machine).

What is validated here: the Dockerfile parses (dockerfile-parse, plus strict checks of every
instruction, exec form and HEALTHCHECK option), its COPY sources exist and survive
``.dockerignore``, the image's entrypoint and every command line it or compose runs parse with
``arena.cli.build_parser()``, the health probe works against a real server, and
``docker/compose.yaml`` validates against the Compose Specification schema plus our own rules
(token only from the env file, checkpoints in a volume, workers pointed at the server service).
What is not: building the image, starting the containers (see docs/deploy.md, "What was validated").

``tests/data/compose-spec.json`` is the official schema (compose-spec/compose-spec,
``schema/compose-spec.json``, Apache-2.0, licence beside it) as vendored in the PyPI package
check-jsonschema 0.39.0; sha256 d549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import io
import json
import os
import re
import shlex
import threading
import tomllib
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from arena.cli import build_parser
from arena.commands.options import SCRIPTED_NAMES
from tests.conftest import DATA, ROOT, running_server

ROOT = ROOT
DOCKER = ROOT / "docker"
COMPOSE_SCHEMA = DATA / "compose-spec.json"
PACKAGES = ("server", "bot_protocol", "agents", "arena")

INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
    "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip
"""Every instruction Docker's Dockerfile reference defines."""
HEALTHCHECK_OPTIONS = {"interval", "timeout", "start-period", "start-interval", "retries"}
DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
"""A Go duration, as HEALTHCHECK's options take them."""


# ── helpers ──────────────────────────────────────────────────────────────────


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, value) of docker/Dockerfile in order, comments left out."""
    parser = DockerfileParser(fileobj=io.BytesIO((DOCKER / "Dockerfile").read_bytes()))
    return [(item["instruction"], item["value"]) for item in parser.structure if item["instruction"] != "COMMENT"]


def values(name: str) -> list[str]:
    return [value for instruction, value in instructions() if instruction == name]


def exec_form(value: str) -> list[str]:
    """A JSON-array (exec form) argument list; shell form is refused, it would wrap in /bin/sh -c."""
    try:
        argv = json.loads(value)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not exec form (a JSON array): {value!r}: {exc}") from None
    assert isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv), value
    return argv


def healthcheck() -> tuple[dict[str, str], list[str]]:
    """HEALTHCHECK's options and its exec-form command."""
    (value,) = values("HEALTHCHECK")
    options_text, marker, command = value.partition("CMD")
    assert marker, f"HEALTHCHECK without CMD: {value!r}"
    options = {}
    for token in options_text.split():
        match = re.fullmatch(r"--([a-z-]+)=(\S+)", token)
        assert match, f"HEALTHCHECK option {token!r} is not --name=value"
        options[match.group(1)] = match.group(2)
    return options, exec_form(command.strip())


def load_probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arena_healthcheck", DOCKER / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dockerignore() -> list[tuple[bool, str, re.Pattern[str]]]:
    """(negated, pattern, regex) per .dockerignore line, in Docker's syntax (``**``, ``*``, ``?``)."""
    patterns = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        patterns.append((negated, pattern, re.compile(regex)))
    return patterns


def ignored(path: str, patterns: list[tuple[bool, str, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for negated, _, regex in patterns:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            result = not negated
    return result


def build_context() -> dict[str, int]:
    """Every file `docker build` would send from the repository root → its size."""
    patterns = dockerignore()
    # The literal start of each negation (up to its first wildcard) tells which folders it can reach into.
    literals = [re.split(r"[*?\[]", pattern, maxsplit=1)[0] for negated, pattern, _ in patterns if negated]
    files: dict[str, int] = {}
    for folder, dirs, names in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT).as_posix()
        prefix = "" if here == "." else here + "/"
        # Skip an excluded folder unless a negation could re-include something inside it.
        dirs[:] = [
            d
            for d in dirs
            if not ignored(prefix + d, patterns)
            or any(lit.startswith(prefix + d + "/") or (prefix + d + "/").startswith(lit) for lit in literals)
        ]
        for name in names:
            path = prefix + name
            if not ignored(path, patterns):
                files[path] = (Path(folder) / name).stat().st_size
    return files


def _glob_matches(path: Path, glob: str) -> bool:
    """setuptools' package-data glob (relative to its package) against a path relative to the same."""
    return len(path.parts) == len(Path(glob).parts) and path.match(glob)


def compose() -> dict[str, Any]:
    data = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


@functools.cache
def compose_validator() -> Any:
    """The Compose Specification's validator (its draft, 2020-12, read from ``$schema``), schema checked once."""
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema)


def compose_schema_errors(document: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in compose_validator().iter_errors(document)]


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose()["services"]
    return found


def workers() -> dict[str, dict[str, Any]]:
    return {name: service for name, service in services().items() if command_of(service)[0] == "worker"}


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's argv after the image's ENTRYPOINT (compose's ``command:``, else the image's CMD)."""
    command = service.get("command")
    if command is None:
        return exec_form(values("CMD")[-1])
    return shlex.split(command) if isinstance(command, str) else [str(arg) for arg in command]


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == flag]


def parse_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    """Parse ``arena ARGV`` exactly as the container would start it, without running anything."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"`arena {shlex.join(argv)}` does not parse (exit {exc.code}): {capsys.readouterr().err.strip()}")


# ── Dockerfile ───────────────────────────────────────────────────────────────


def test_dockerfile_parses_with_known_instructions_only() -> None:
    """Every instruction is a real Dockerfile instruction, the first one is FROM, and exec forms are JSON."""
    parsed = instructions()
    assert parsed, "docker/Dockerfile has no instructions"
    unknown = [name for name, _ in parsed if name not in INSTRUCTIONS]
    assert not unknown, f"unknown Dockerfile instructions: {unknown}"
    assert next(name for name, _ in parsed if name != "ARG") == "FROM"
    for name in ("ENTRYPOINT", "CMD"):
        for value in values(name):
            exec_form(value)


def test_base_image_matches_requires_python() -> None:
    """FROM is an official python image of the version pyproject.toml requires, slim."""
    (base,) = values("FROM")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = re.fullmatch(r">=\s*(\d+\.\d+)", requires)
    assert minimum, requires
    assert re.fullmatch(rf"python:{re.escape(minimum.group(1))}(\.\d+)?-slim(-\w+)?", base), base


def test_torch_is_the_cpu_wheel_installed_before_the_package() -> None:
    """torch 2.13.0 comes from the CPU index, before `pip install .` could pull the CUDA build from PyPI."""
    runs = values("RUN")
    torch_at = next(i for i, run in enumerate(runs) if "torch==" in run)
    package_at = next(i for i, run in enumerate(runs) if re.search(r"pip install (\S+ )*\.(\s|$)", run))
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs[torch_at] and "torch==2.13.0" in runs[torch_at]
    assert torch_at < package_at


def test_runs_as_a_non_root_user_it_creates() -> None:
    """The last USER is not root, and a RUN creates that user."""
    users = values("USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    assert any(re.search(rf"useradd\b.*\b{re.escape(user)}\b", run) for run in values("RUN")), f"no RUN creates {user!r}"


def test_healthcheck_probes_healthz_within_its_timeout() -> None:
    """HEALTHCHECK has valid options and runs the probe copied into the image, which GETs /healthz."""
    options, command = healthcheck()
    assert set(options) <= HEALTHCHECK_OPTIONS, options
    for name, value in options.items():
        assert DURATION.fullmatch(value) if name != "retries" else value.isdigit(), (name, value)
    assert command[0] == "python", command
    destinations = {shlex.split(copy_)[-1] for copy_ in values("COPY")}
    assert command[-1] in destinations, f"the probe {command[-1]} is not copied into the image"
    probe = load_probe()
    assert urllib.parse.urlsplit(probe.DEFAULT_URL).path == "/healthz"
    assert urllib.parse.urlsplit(probe.DEFAULT_URL).port == 8765 == int(values("EXPOSE")[0])
    timeout = float(options["timeout"].rstrip("s"))
    assert timeout > probe.TIMEOUT_S, "the probe must give up before Docker kills it"


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    """COPY sources exist in the repository and no .dockerignore pattern drops a file of theirs."""
    patterns = dockerignore()
    for line in values("COPY"):
        args = [arg for arg in shlex.split(line) if not arg.startswith("--")]
        assert "--from" not in line, line
        for source in args[:-1]:
            path = ROOT / source
            assert path.exists(), f"COPY {source}: no such file in the repository"
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
            dropped = [p.relative_to(ROOT).as_posix() for p in files if ignored(p.relative_to(ROOT).as_posix(), patterns)]
            assert not dropped, f"COPY {source}: .dockerignore drops {dropped[:5]}"


def test_build_context_is_small_and_holds_no_secrets_or_runs() -> None:
    """The build context is the package sources only (well under 5 MiB): no runs/, .git, env files."""
    patterns = dockerignore()
    for private in ("docker/arena.env", ".env", "docker/.env", "runs/latest/checkpoints/x.pt", ".git/config", "tests/x.py"):
        assert ignored(private, patterns), f"{private} would be sent to the Docker daemon"
    files = build_context()
    assert "pyproject.toml" in files and "arena/cli.py" in files
    assert sum(files.values()) < 5 << 20, sorted(files, key=files.get)[-5:]  # type: ignore[arg-type]


def test_package_data_reaches_the_installed_package() -> None:
    """The image installs the package non-editable, so each non-Python file the packages read must be package data."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"].get("package-data", {})
    missing = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".py", ".pyc", ".pyi"):
                continue
            rel = path.relative_to(ROOT)
            # package-data globs are relative to the package (dotted path) that holds the file.
            covered = False
            for depth in range(1, len(rel.parts)):
                owner = ".".join(rel.parts[:depth])
                inner = Path(*rel.parts[depth:])
                for key, globs in patterns.items():
                    if key in ("*", owner) and any(_glob_matches(inner, glob) for glob in globs):
                        covered = True
            if not covered:
                missing.append(rel.as_posix())
    assert not missing, f"not package data, so absent from the image: {missing} ([tool.setuptools.package-data])"


# ── entrypoints and command lines ────────────────────────────────────────────


def test_entrypoint_is_the_declared_console_script() -> None:
    """ENTRYPOINT is `arena`, which pyproject.toml declares as arena.cli:main."""
    (entrypoint,) = values("ENTRYPOINT")
    assert exec_form(entrypoint) == ["arena"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get("arena") == "arena.cli:main"


def test_image_cmd_serves_the_tank_arena_into_the_volume(capsys: pytest.CaptureFixture[str]) -> None:
    """The default CMD parses, binds all interfaces, keeps the tank sizes and writes to the /data volume."""
    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM

    argv = exec_form(values("CMD")[-1])
    args = parse_command(argv, capsys)
    assert args.command == "serve" and args.host == "0.0.0.0"
    assert args.obs_dim in (None, OBS_DIM) and args.act_dim in (None, ACT_DIM), "the workers play the tank arena"
    assert str(args.out) in [v.strip() for v in values("VOLUME")]
    assert "--token" not in argv, "the token comes from $ARENA_TOKEN, never from the image"
    if args.resume:  # `serve --resume` refuses a missing checkpoints folder: the image must create it
        assert any(f"{args.out}/checkpoints" in run for run in values("RUN"))


def test_image_compiles_the_numba_kernels_at_build_into_a_cache_it_keeps(capsys: pytest.CaptureFixture[str]) -> None:
    """A new container compiles nothing: `arena compile` fills ENV NUMBA_CACHE_DIR at build, after the package is
    installed, as the user the container runs as, in a folder that user owns (numba caches only where it can write)
    and that no VOLUME hides."""
    parsed = instructions()
    user = values("USER")[-1].split(":")[0]
    user_at = max(i for i, (name, _) in enumerate(parsed) if name == "USER")
    package_at = next(
        i for i, (name, v) in enumerate(parsed) if name == "RUN" and re.search(r"pip install (\S+ )*\.(\s|$)", v)
    )
    runs = [(i, exec_form(v) if v.lstrip().startswith("[") else shlex.split(v)) for i, (name, v) in enumerate(parsed)
            if name == "RUN"]  # fmt: skip
    compiles = [(i, argv) for i, argv in runs if argv[:1] == ["arena"]]
    assert len(compiles) == 1, "one RUN of `arena compile`"
    ((compile_at, argv),) = compiles
    assert parse_command(argv[1:], capsys).command == "compile"
    assert compile_at > package_at and compile_at > user_at, f"`arena compile` must run after `pip install .`, as {user}"
    settings = [dict(pair.partition("=")[::2] for pair in shlex.split(v)) for name, v in parsed[:compile_at] if name == "ENV"]
    cache = next((env["NUMBA_CACHE_DIR"] for env in reversed(settings) if "NUMBA_CACHE_DIR" in env), None)
    assert cache, "no ENV NUMBA_CACHE_DIR before `arena compile`: the containers must look where the build cached"
    assert DockerfileParser(fileobj=io.BytesIO((DOCKER / "Dockerfile").read_bytes())).envs["NUMBA_CACHE_DIR"] == cache
    assert any(re.search(rf"install -d -o {user} (-\S+ \S+ )*{re.escape(cache)}(\s|$)", v) for _, v in parsed[:compile_at]), (
        f"{cache} must be created owned by {user}"
    )
    assert not any(Path(cache).is_relative_to(v.strip()) for v in values("VOLUME")), f"a VOLUME would hide {cache}"


def test_every_compose_command_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """Each service's command line parses with the real `arena` parser (parse only, nothing runs).

    The worker services need the `arena worker` subcommand."""
    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM

    for name, service in services().items():
        argv = command_of(service)
        args = parse_command(argv, capsys)
        assert args.command == argv[0], name
        if args.command == "serve":
            assert args.obs_dim in (None, OBS_DIM) and args.act_dim in (None, ACT_DIM), name
        if args.command == "worker":
            assert args.url == flag_values(argv, "--url")[0], name


# ── compose ──────────────────────────────────────────────────────────────────


def test_compose_validates_against_the_compose_specification() -> None:
    """docker/compose.yaml is valid under the official schema, and the schema does reject a typo."""
    document = compose()
    assert compose_schema_errors(document) == []
    broken = copy.deepcopy(document)
    broken["services"]["server"]["comand"] = ["serve"]
    assert compose_schema_errors(broken), "the schema check accepts anything: it is not validating"


def test_token_only_from_the_git_ignored_env_file() -> None:
    """Every service reads the token from arena.env; no token, `--token` or env literal is in the repository."""
    text = (DOCKER / "compose.yaml").read_text()
    assert not re.search(r"ARENA_TOKEN\s*[:=]\s*\S", text), "a token literal in compose.yaml"
    for name, service in services().items():
        env_files = service.get("env_file")
        env_files = [env_files] if isinstance(env_files, str | dict) else env_files or []
        paths = [f if isinstance(f, str) else f["path"] for f in env_files]
        assert "arena.env" in paths, f"{name} does not read the token from arena.env"
        assert "ARENA_TOKEN" not in json.dumps(service.get("environment", {})), name
        assert "--token" not in command_of(service), f"{name} puts the token on its command line (visible in ps)"
    example = dict(
        line.split("=", 1) for line in (DOCKER / "arena.env.example").read_text().splitlines() if line and line[0] != "#"
    )
    assert example == {"ARENA_TOKEN": ""}, "the example must not carry a usable token"
    ignores = (DOCKER / ".gitignore").read_text().split()
    assert "arena.env" in ignores and ".env" in ignores
    assert not (DOCKER / "arena.env").exists() or "arena.env" in ignores


def test_checkpoints_live_in_a_named_volume() -> None:
    """The server writes --out into a declared named volume, so checkpoints survive a container."""
    document = compose()
    (server_name,) = [name for name, service in services().items() if command_of(service)[0] == "serve"]
    server = services()[server_name]
    out = flag_values(command_of(server), "--out")[0]
    mounts = {target: source for source, target in (v.split(":")[:2] for v in server["volumes"])}
    assert out in mounts, f"--out {out} is not a volume: checkpoints would die with the container"
    assert mounts[out] in document.get("volumes", {}), f"{mounts[out]} is not a declared named volume"


def test_workers_reach_the_server_service_once_it_is_healthy() -> None:
    """Workers dial the server by its service name and port, and start only when its healthcheck passes."""
    all_services = services()
    (server_name,) = [name for name, service in all_services.items() if command_of(service)[0] == "serve"]
    server = all_services[server_name]
    assert not server.get("healthcheck", {}).get("disable"), "the server must keep the image's /healthz check"
    port = int(flag_values(command_of(server), "--port")[0])
    assert flag_values(command_of(server), "--host") == ["0.0.0.0"]
    found = workers()
    assert found, "no worker service"
    for name, worker in found.items():
        argv = command_of(worker)
        url = urllib.parse.urlsplit(flag_values(argv, "--url")[0])
        assert (url.scheme, url.hostname, url.port) == ("ws", server_name, port), (name, url)
        assert worker["depends_on"][server_name]["condition"] == "service_healthy", name
        assert worker.get("healthcheck", {}).get("disable") is True, f"{name} would inherit the server's probe"
        assert set(flag_values(argv, "--opponent")) <= set(SCRIPTED_NAMES), name
        # Replicas (and --scale) run one command line: a fixed --seed would have them all play the same
        # games, a fixed --name would show them as one bot. Left out, each replica draws its own.
        assert not {"--seed", "--name"} & set(argv), f"{name}: replicas would share its --seed/--name"


def test_restart_policy_resource_limits_and_loopback_only_ports() -> None:
    """Every service restarts, has CPU and memory limits, and publishes plain ws:// on loopback only."""
    for name, service in services().items():
        assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert {"cpus", "memory"} <= set(limits), f"{name} has no CPU/memory limit"
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback without TLS"
    assert any(w.get("deploy", {}).get("replicas", 1) > 1 for w in workers().values()), "N workers: deploy.replicas"


# ── the health probe, for real ───────────────────────────────────────────────


@pytest.fixture
def http_503() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status": "degraded"}\n'
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/healthz"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_probe_is_healthy_on_a_real_server_without_the_token() -> None:
    """docker/healthcheck.py gets 200 from a token-protected server's /healthz without sending the token."""
    probe = load_probe()
    with running_server(token="deploy-test-token") as server:
        healthy, line = probe.probe(server.url.replace("ws://", "http://") + "/healthz")
    assert healthy, line
    assert line.startswith("200 ") and json.loads(line[4:])["status"] == "ok"


def test_probe_is_unhealthy_on_503_and_on_a_closed_port(http_503: str) -> None:
    """A degraded server (503) and no server at all both fail the probe, each with a readable line."""
    probe = load_probe()
    healthy, line = probe.probe(http_503)
    assert not healthy and line.startswith("503 "), line
    healthy, line = probe.probe("http://127.0.0.1:1/healthz", timeout=1.0)
    assert not healthy and line.startswith("unreachable"), line


def test_readme_links_the_deploy_guide() -> None:
    assert (ROOT / "docs" / "deploy.md").is_file()
    assert "(docs/deploy.md)" in (ROOT / "README.md").read_text()


# ── compose.distributed.yaml: several learners ───────────────────────────────


def distributed_compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.distributed.yaml").read_text())
    return data


def test_distributed_compose_validates_and_its_learners_command_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """The learners run `torchrun … -m arena.cli serve --distributed`, which parses; N ranks publish N ports on loopback."""
    document = distributed_compose()
    assert compose_schema_errors(document) == []
    learners = document["services"]["learners"]
    launcher = [str(arg) for arg in learners["entrypoint"]]
    assert launcher[:3] == ["python", "-m", "torch.distributed.run"]
    ranks = int(flag_values(launcher, "--nproc-per-node")[0])
    argv = [str(arg) for arg in learners["command"]]
    assert argv[:2] == ["-m", "arena.cli"]
    args = parse_command(argv[2:], capsys)
    assert args.command == "serve" and args.distributed and args.host == "0.0.0.0"
    published = sorted(port.split(":")[:2] for port in learners["ports"])
    assert published == [["127.0.0.1", str(args.port + r)] for r in range(ranks)], "one loopback port per rank"
    mounts = {target: source for source, target in (v.split(":")[:2] for v in learners["volumes"])}
    assert mounts[str(args.out)] in document["volumes"], "rank 0's checkpoints must live in a named volume"


def test_distributed_compose_has_workers_for_every_rank_and_the_token_from_the_env_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = distributed_compose()
    learners = document["services"]["learners"]
    port = int(flag_values([str(a) for a in learners["command"]], "--port")[0])
    ranks = int(flag_values([str(a) for a in learners["entrypoint"]], "--nproc-per-node")[0])
    reached = set()
    for name, service in document["services"].items():
        assert service.get("env_file") == "arena.env", name
        assert "--token" not in [str(a) for a in service.get("command", [])], name
        if name == "learners":
            continue
        argv = [str(a) for a in service["command"]]
        args = parse_command(argv, capsys)
        url = urllib.parse.urlsplit(args.url)
        assert (url.scheme, url.hostname) == ("ws", "learners"), name
        reached.add(url.port)
        assert service["depends_on"]["learners"]["condition"] == "service_healthy", name
    assert reached == {port + r for r in range(ranks)}, "every rank needs its bots"
    assert not re.search(r"ARENA_TOKEN\s*[:=]\s*\S", (DOCKER / "compose.distributed.yaml").read_text())
