#!/usr/bin/env bash
# Everything an edge user takes to a board, a phone or a runtime, built in release in one go, into
# target/edge/: the edo command for x86-64 and aarch64 Linux (glibc; a Raspberry Pi OS, Jetson
# Linux, Graviton), the WASI module (edo-wasi: quantize, lookup, embed, index, query, bench, bench-suite), the
# Python wheels (manylinux2014, x86-64 and aarch64) and the npm package (browsers, Node, Deno, Bun,
# Workers). Prints each file's size raw and gzipped and
# writes SHA256SUMS. docs/edge.md says how to run the benchmark suite with them and bring the
# results back for `edo bench compare`.
#   ./scripts/edge-release.sh            # all of it (aarch64 needs gcc-aarch64-linux-gnu)
#   ./scripts/edge-release.sh --no-npm   # without the npm package (no wasm-bindgen-cli)
# Needs: rustup target add aarch64-unknown-linux-gnu wasm32-wasip1 wasm32-unknown-unknown; Debian's
# gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (the linker .cargo/config.toml names); for the
# npm package what scripts/web/build-npm.sh needs. Release builds of everything: many minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-target}
out=$target_dir/edge
rm -rf "$out"
mkdir -p "$out"

echo "== the edo command, x86-64 Linux"
cargo build -q --release -p edo-cli
cp "$target_dir/release/edo" "$out/edo-x86_64-linux"

echo "== the edo command, aarch64 Linux"
if command -v aarch64-linux-gnu-gcc >/dev/null; then
    cargo build -q --release -p edo-cli --target aarch64-unknown-linux-gnu
    cp "$target_dir/aarch64-unknown-linux-gnu/release/edo" "$out/edo-aarch64-linux"
else
    echo "no aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross" >&2
    exit 1
fi

echo "== the WASI module"
cargo build -q --profile wasi -p edo-wasi --target wasm32-wasip1
cp "$target_dir/wasm32-wasip1/wasi/edo-wasi.wasm" "$out/edo-wasi.wasm"

echo "== the Python wheels (manylinux2014: glibc 2.17 and later), x86-64 and aarch64"
# maturin links through zig (from PyPI) to glibc 2.17's symbols, so one wheel serves every
# distribution pip installs manylinux2014 wheels on; scripts/checks/test-python.sh tests the package.
tools=$target_dir/wheel-tools
if ! "$tools/bin/pip" freeze 2>/dev/null | grep -q '^ziglang==0.14.1$'; then
    rm -rf "$tools"
    python3 -m venv "$tools" && "$tools/bin/pip" install -q maturin==1.16.0 ziglang==0.14.1
fi
for target in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu; do
    PATH=$(realpath -m "$tools")/bin:$PATH "$tools/bin/maturin" build -q --release --zig --compatibility manylinux2014 \
        --target "$target" -m python/Cargo.toml --out "$out"
done
# Each wheel's tests where it runs: x86-64 here in a fresh virtual environment, aarch64 under qemu.
venv=$(mktemp -d)
python3 -m venv "$venv" && "$venv/bin/pip" install -q numpy==2.4.6 pytest==9.2.0 "$out"/edo_embeddings-*x86_64*.whl
(cd "$venv" && "$venv/bin/python" -m pytest -q -p no:cacheprovider --import-mode=importlib "$root/python/tests")
rm -rf "$venv"
./scripts/checks/python_aarch64.sh "$out"/edo_embeddings-*aarch64*.whl

if [ "${1:-}" != "--no-npm" ]; then
    echo "== the npm package"
    ./scripts/web/build-npm.sh
    cp "$target_dir"/npm/edo-embeddings-*.tgz "$out/"
fi

echo "== $out"
(
    cd "$out"
    sha256sum -- * > SHA256SUMS
    for f in *; do
        [ "$f" = SHA256SUMS ] && continue
        printf '%-34s %10d bytes  %10d gzipped\n' "$f" "$(stat -c %s "$f")" "$(gzip -9 -c "$f" | wc -c)"
    done
)
