#!/usr/bin/env bash
# The Python package as its users get it: builds the abi3 wheel with maturin (python/, PyO3 and
# numpy), installs it into a fresh virtual environment beside numpy and pytest, runs python/tests
# there (from outside the source tree, so the installed package is the one imported), and checks
# the package's types — its stubs and its Python layer with mypy --strict, and the README's
# example against them. maturin, mypy, numpy and pytest are PyPI's, pinned below; without PyPI the
# script exits 3 (scripts/test.sh says SKIPPED unless EDO_REQUIRE_PYTHON=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
pins="maturin==1.16.0 mypy==2.4.1 numpy==2.4.6 pytest==9.2.0"
tools=target/python-tools
if ! "$tools/bin/pip" freeze 2>/dev/null | grep -q '^maturin==1.16.0$'; then
    rm -rf "$tools"
    python3 -m venv "$tools" && "$tools/bin/pip" install -q $pins || exit 3
fi
# The dev profile and, through the `workspace-hack` feature (hack/), the dependency features of the
# tests' build: after the tests, only PyO3, numpy and the module itself are compiled (a release
# wheel is `maturin build --release`, as scripts/edge-release.sh makes one).
rm -rf target/wheels
if [ "${EDO_EXPECT_REUSE:-}" = "1" ]; then
    # scripts/test.sh sets it, after the tests' build: if edo, edo-core, edo-gpu, half or wgpu compile again
    # for the wheel, its dependency features have drifted from the tests' (hack/Cargo.toml says how
    # to find the difference) and the wheel costs a second build of the whole graph.
    rebuilt=$(cargo build -q -p edo-python --features workspace-hack --message-format=json | python3 -c '
import json, sys
names = {"edo", "edo_core", "edo_gpu", "half", "wgpu", "wgpu_core", "naga"}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and not m["fresh"] and m["target"]["name"] in names:
        print(m["target"]["name"])')
    if [ -n "$rebuilt" ]; then
        echo "the wheel's build compiled again what the tests had built: $(echo $rebuilt) (see hack/Cargo.toml)" >&2
        exit 1
    fi
fi
"$tools/bin/maturin" build -q -m python/Cargo.toml --features workspace-hack --out target/wheels
wheel=$(ls target/wheels/edo_embeddings-*.whl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "numpy==2.4.6" "pytest==9.2.0" "$wheel" || exit 3
(cd "$work" && EDO_REQUIRE_GPU="${EDO_REQUIRE_GPU:-}" "$work/venv/bin/python" -m pytest -q -rs -p no:cacheprovider --import-mode=importlib "$root/python/tests")
# Types: the package against its native module's stubs, and the README's example against both.
# (edo/torch.py needs PyTorch's types, which CI does not install: it is checked where torch is.)
"$tools/bin/mypy" --strict --cache-dir "$work/mypy" --exclude 'edo/torch\.py$' python/edo
python3 - python/README.md "$work/readme_example.py" <<'PY'
import re, sys
block = re.search(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S).group(1)
open(sys.argv[2], "w").write(block)
PY
MYPYPATH=python "$tools/bin/mypy" --strict --cache-dir "$work/mypy" "$work/readme_example.py"
printf 'python: %s, %d bytes\n' "${wheel#target/wheels/}" "$(stat -c %s "$wheel")"
