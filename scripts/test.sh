#!/usr/bin/env bash
# All of edo's tests: formats and CPU path, shader validation for every backend, the GPU path
# against the CPU oracle (needs a Vulkan/Metal/DX12 adapter; lavapipe works — without one the GPU
# tests print "SKIPPED: no adapter", and EDO_REQUIRE_GPU=1 turns that into a failure), the doc
# examples, the docs with warnings denied, and the library checked for wasm32.
set -euo pipefail
cd "$(dirname "$0")/.."
# Mesa's device-select layer prints "XDG_RUNTIME_DIR is invalid" on headless machines and picks
# nothing wgpu needs; keep it quiet unless the user steers it.
if [ -z "${MESA_VK_DEVICE_SELECT:-}" ]; then export NODEVICE_SELECT=1; fi

echo "== cargo test (unit, integration, GPU, doctests)"
cargo test --all-features

echo "== cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --quiet

echo "== wasm32: cargo check of the library"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -q '^wasm32-unknown-unknown$'; then
    rustup target add wasm32-unknown-unknown
fi
cargo check --lib --target wasm32-unknown-unknown --quiet

echo "== all tests passed"
