#!/usr/bin/env bash
# All of edo's tests: formatting (rustfmt), formats and CPU path, shader validation for every
# backend, the GPU path against the CPU oracle (needs a Vulkan/Metal/DX12 adapter; lavapipe works —
# without one the GPU tests print "SKIPPED: no adapter", and EDO_REQUIRE_GPU=1 turns that into a
# failure), the doc examples, the docs with warnings denied, clippy with warnings denied (native,
# and wasm32 for the library and the browser crate; edo-core, the CPU-path crate, for WASI and
# aarch64 too, with no wgpu in its dependencies; its tests on aarch64 under qemu-user, and the
# edo command's files and vectors there against x86-64's (scripts/checks/aarch64_check.sh), where
# qemu-aarch64 and the cross linker are installed — EDO_REQUIRE_AARCH64=1 makes their absence a
# failure), edo without its GPU path for WASI and edo-wasi under wasmtime against the native
# program (scripts/checks/wasi_check.sh), edo-core's tests under wasmtime, the Python wheel in a
# fresh virtual environment (scripts/checks/test-python.sh: pytest and mypy; PyPI's packages,
# EDO_REQUIRE_PYTHON=1 makes their absence a failure), and the browser tests (headless Chromium;
# they need chromium, chromium-driver and the pinned wasm-bindgen-cli — without them they print
# "SKIPPED", and EDO_REQUIRE_WEB=1 turns that into a failure), and a 30-second soak (examples/soak.rs:
# threads mixing every kind of lookup on one engine, checked against the CPU path, memory sampled,
# the device lost and the engine rebuilt every 5 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
# Mesa's device-select layer prints "XDG_RUNTIME_DIR is invalid" on headless machines and picks
# nothing wgpu needs; keep it quiet unless the user steers it.
if [ -z "${MESA_VK_DEVICE_SELECT:-}" ]; then export NODEVICE_SELECT=1; fi
# Each step's title with the seconds since the start, so a slow step shows in CI's log.
step() { echo "== $* [${SECONDS} s]"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo test (unit, integration, GPU, doctests)"
cargo test --all-features

step "soak: 30 s of threads mixing every kind of lookup, checked against the CPU path, the device lost every 5 s"
MALLOC_ARENA_MAX=2 cargo run --quiet --all-features --example soak -- --seconds 30 --threads 4 --lose-every 5

step "cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --quiet

step "cargo clippy (warnings denied), with all features"
cargo clippy --all-features --all-targets --quiet -- -D warnings
step "cargo clippy (warnings denied), with the default features"
cargo clippy --all-targets --quiet -- -D warnings

# Targets the checks below build for (.ci/run installs them; a developer's rustup adds them here).
for target in wasm32-unknown-unknown wasm32-wasip1 aarch64-unknown-linux-gnu; do
    if command -v rustup >/dev/null && ! rustup target list --installed | grep -q "^$target\$"; then
        rustup target add "$target"
    fi
done

# Fails if wgpu is among the normal dependencies `cargo tree ARGS…` lists (a failed cargo tree fails
# too: its output is taken whole before it is searched).
no_wgpu() {
    local deps
    deps=$(cargo tree -e normal --prefix none "$@")
    if grep -q '^wgpu' <<< "$deps"; then
        echo "wgpu is a dependency of: cargo tree $*" >&2
        exit 1
    fi
}

step "edo-core: no wgpu among its dependencies on any platform, and clippy for WASI and aarch64"
no_wgpu -p edo-core --target all
for target in wasm32-wasip1 aarch64-unknown-linux-gnu wasm32-unknown-unknown; do
    cargo clippy -p edo-core --target "$target" --all-targets --quiet -- -D warnings
done

step "edo-core's tests on aarch64 under qemu: NEON on an ARMv8.0 core and a recent one, and the portable level"
if command -v qemu-aarch64 >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null; then
    # The runner (.cargo/config.toml) is qemu-aarch64; QEMU_CPU picks the CPU model, and
    # EDO_EXPECT_SIMD makes the run fail if the level it is meant for is not the one found.
    QEMU_CPU=max EDO_EXPECT_SIMD=neon cargo test -p edo-core --target aarch64-unknown-linux-gnu --quiet
    QEMU_CPU=cortex-a53 EDO_EXPECT_SIMD=neon cargo test -p edo-core --target aarch64-unknown-linux-gnu --quiet
    QEMU_CPU=max EDO_CPU_SIMD=scalar cargo test -p edo-core --target aarch64-unknown-linux-gnu --quiet
    step "the edo command on aarch64 (release) under qemu: files and vectors equal to x86-64's"
    ./scripts/checks/aarch64_check.sh
elif [ "${EDO_REQUIRE_AARCH64:-}" = "1" ]; then
    echo "EDO_REQUIRE_AARCH64=1 but qemu-aarch64 or aarch64-linux-gnu-gcc is missing (apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2
    exit 1
else
    echo "SKIPPED: aarch64 tests (apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
fi

step "WASI: edo without its GPU path builds for wasm32-wasip1; edo-wasi under wasmtime equals the native program; edo-core's tests under wasmtime"
cargo clippy -p edo --no-default-features --target wasm32-wasip1 --lib --quiet -- -D warnings
cargo clippy -p edo-wasi --quiet -- -D warnings
cargo clippy -p edo-wasi --target wasm32-wasip1 --quiet -- -D warnings
no_wgpu -p edo --no-default-features --target wasm32-wasip1
no_wgpu -p edo-wasi --target wasm32-wasip1
status=0
./scripts/checks/wasi_check.sh || status=$?
if [ "$status" = 3 ] && [ "${EDO_REQUIRE_WASI:-}" != "1" ]; then
    echo "SKIPPED: WASI run (PyPI's wasmtime could not be installed; EDO_REQUIRE_WASI=1 makes this a failure)"
elif [ "$status" != 0 ]; then
    exit "$status"
else
    # edo-core's tests as WASI modules under the same wasmtime (SIMD128, one thread; `--dir /`:
    # the tests read their fixtures by absolute path).
    CARGO_TARGET_WASM32_WASIP1_RUNNER="$PWD/target/wasi-venv/bin/python $PWD/scripts/checks/wasi_run.py --dir /" \
        EDO_EXPECT_SIMD=simd128 cargo test -p edo-core --target wasm32-wasip1 --quiet
fi

step "Python: the wheel (maturin) in a fresh virtual environment: pytest, mypy --strict"
cargo clippy -p edo-python --features workspace-hack --all-targets --quiet -- -D warnings
status=0
EDO_EXPECT_REUSE=1 ./scripts/checks/test-python.sh || status=$?
if [ "$status" = 3 ] && [ "${EDO_REQUIRE_PYTHON:-}" != "1" ]; then
    echo "SKIPPED: the Python package (PyPI's maturin, numpy, pytest or mypy could not be installed; EDO_REQUIRE_PYTHON=1 makes this a failure)"
elif [ "$status" != 0 ]; then
    exit "$status"
fi

step "wasm32: cargo clippy of the library and the browser crate (warnings denied)"
cargo clippy --lib --target wasm32-unknown-unknown --quiet -- -D warnings
cargo clippy -p edo-web --target wasm32-unknown-unknown --all-targets --quiet -- -D warnings
cargo clippy -p edo-web --target wasm32-unknown-unknown --lib --features suite --quiet -- -D warnings

step "browser (WASM + WebGPU in headless Chromium)"
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' web/Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ -x "${CHROMIUM:-/usr/bin/chromium}" ] && [ -x "${CHROMEDRIVER:-/usr/bin/chromedriver}" ] && [ "$have" = "$want" ]; then
    ./scripts/web/test-web.sh
elif [ "${EDO_REQUIRE_WEB:-}" = "1" ]; then
    echo "EDO_REQUIRE_WEB=1 but the browser tests cannot run: need chromium, chromium-driver and wasm-bindgen-cli $want (found: ${have:-none})" >&2
    exit 1
else
    echo "SKIPPED: browser tests (apt-get install chromium chromium-driver; cargo install wasm-bindgen-cli --version $want)"
fi

step "all tests passed"
