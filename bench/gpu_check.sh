#!/usr/bin/env bash
# One-shot GPU check of the CUDA-graph paths: the PPO minibatch step and the TD3 update cycle.
#
#   OUT=/some/folder bash bench/gpu_check.sh      (from anywhere; OUT defaults to ./gpu_check_out)
#
# Steps, each under its own `timeout`, each continuing after a failure of the one before:
#   1. environment: GPU, python, torch/CUDA versions; `pip install torch` only if torch cannot
#      see a GPU, then any missing test dependency, then this package (editable, no deps);
#   2. tests/agents/ppo/test_steps.py and tests/agents/test_td3_graph.py (the CUDA tests compare graph and
#      eager updates);
#   3. python bench/td3.py --device cuda --quick (TD3 fused eager / graph / direct, and PPO
#      eager vs graph: the targets are graph >= 8x eager).
# Everything lands in "$OUT" (logs, junit xml, the benchmark's JSON line); a summary is printed
# last and written to "$OUT/summary.txt". Worst case about 8 minutes, typically 1-2 when torch
# with CUDA is already installed. NO_INSTALL=1 skips every pip call (a dry run on a CPU machine).
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
PY="${PYTHON:-python}"
PIP_QUICK=(--retries 1 --timeout 20)  # fail fast where the machine has no network
NO_INSTALL="${NO_INSTALL:-0}"
SUMMARY=()
STARTED=$SECONDS

# run NAME LIMIT_S CMD...: output to $OUT/NAME.log (and its tail here), exit status into the summary.
run() {
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    tail -n 25 "$OUT/$name.log"
    [ "$rc" -eq 124 ] && echo "!! $name timed out after ${limit}s"
    SUMMARY+=("$(printf '%-14s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
    return "$rc"
}

# ── 1. environment ───────────────────────────────────────────────────────────
run gpu 20 nvidia-smi
run python 10 "$PY" -c "import sys, platform; print(sys.version); print(platform.platform())"
if ! run torch 60 "$PY" -c "
import torch
print('torch', torch.__version__, 'cuda build', torch.version.cuda, 'available', torch.cuda.is_available())
assert torch.cuda.is_available(), 'torch sees no GPU'
print(torch.cuda.get_device_name(0), 'capability', torch.cuda.get_device_capability(0))
" && [ "$NO_INSTALL" != 1 ]; then
    run pip_torch 240 "$PY" -m pip install -q "${PIP_QUICK[@]}" torch
    run torch_again 60 "$PY" -c "import torch; print(torch.__version__, torch.version.cuda); assert torch.cuda.is_available()"
fi
missing=$("$PY" - <<'EOF'
import importlib.util
wanted = {"numpy": "numpy", "msgpack": "msgpack", "websockets": "websockets", "safetensors": "safetensors",
          "rich": "rich", "pytest": "pytest", "pytest_asyncio": "pytest-asyncio", "hypothesis": "hypothesis"}
print(" ".join(pkg for mod, pkg in wanted.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ] && [ "$NO_INSTALL" != 1 ]; then
    # shellcheck disable=SC2086  # one word per package
    run pip_deps 90 "$PY" -m pip install -q "${PIP_QUICK[@]}" $missing
fi
# No build isolation: it would download setuptools. PYTHONPATH above covers a failure here.
[ "$NO_INSTALL" != 1 ] && run pip_package 60 "$PY" -m pip install -q --no-deps --no-build-isolation -e .

# ── 2. tests ─────────────────────────────────────────────────────────────────
PYTEST=("$PY" -m pytest tests/agents/ppo/test_steps.py tests/agents/test_td3_graph.py -v -rs -p no:cacheprovider --junitxml="$OUT/pytest.xml")
if ! "$PY" -c "import tests.conftest" >/dev/null 2>&1; then
    # The shared conftest needs the server's dependencies; without them, provide its one
    # fixture these tests use from a plugin and skip the conftest.
    plugin_dir=$(mktemp -d)
    cat >"$plugin_dir/gpu_check_fixtures.py" <<'EOF'
import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
EOF
    echo "tests/conftest.py does not import here: running with --noconftest and a fixture plugin"
    PYTEST+=(--noconftest -p gpu_check_fixtures -W "ignore::pytest.PytestConfigWarning")
    export PYTHONPATH="$PYTHONPATH:$plugin_dir"
fi
run tests 150 "${PYTEST[@]}"

# ── 3. benchmark ─────────────────────────────────────────────────────────────
run bench_td3 200 bash -c "'$PY' bench/td3.py --device cuda --quick > '$OUT/bench_td3_cuda.json'"

# ── summary ──────────────────────────────────────────────────────────────────
{
    echo "== summary ($((SECONDS - STARTED)) s in all)"
    printf '%s\n' "${SUMMARY[@]}"
    grep -E "passed|failed|error" "$OUT/tests.log" | tail -n 1
    if [ -s "$OUT/bench_td3_cuda.json" ]; then
        "$PY" - "$OUT/bench_td3_cuda.json" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().strip().splitlines()
out = json.loads(lines[-1])
print("td3 updates/s:", out["td3"]["updates_per_s"])
print("td3 ratios:   ", out["td3"]["ratios"])
if "ppo" in out:
    print("ppo minibatch step us:", out["ppo"]["minibatch_step_us"], " update ms:", out["ppo"]["update_ms"])
    print("ppo graph/eager: minibatch", out["ppo"]["graph_vs_eager_minibatch"], " update", out["ppo"]["graph_vs_eager_update"])
print("verdict:", out["verdict"])
EOF
    else
        echo "no benchmark JSON (see $OUT/bench_td3.log)"
    fi
} | tee "$OUT/summary.txt"
