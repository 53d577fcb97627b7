#!/usr/bin/env bash
# Builds edo for the browser into web/pkg: the wasm (release, size-optimised profile "wasm"),
# wasm-bindgen's JS glue and TypeScript definitions, then `wasm-opt -Os --converge` when it is
# installed (npm install -g binaryen; Debian's is too old), for the main module and the benchmark
# module. (-Os: its output gzips 3.7 KB smaller than -Oz's, the quick suite's CPU cases and
# embedding in Node as fast.) --low-memory-unused lets binaryen fold constant offsets into loads
# and stores, assuming nothing lives in the first 1 KiB of memory: rustc lays wasm32 out stack
# first (the stack is [0, 1 MiB), growing down from 1 MiB; data above it), so only a stack within
# 1 KiB of overflowing would reach there (3 KB less gzipped).
# Prints the .wasm sizes raw and gzipped.
# Needs: rustup target add wasm32-unknown-unknown; cargo install wasm-bindgen-cli --version <pinned>.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' web/Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  echo "wasm-bindgen-cli $want is needed (found: ${have:-none}): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
# Two modules: edo_web (what every page loads) and edo_web_suite (the same API and the benchmark
# suite with its reports, feature `suite`: the package fetches it only when a page benchmarks).
# The second build reuses the first's dependencies; only edo-web and the link run again.
out="${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/wasm/edo_web.wasm"
# Dependencies' source paths in the modules (panics' locations) start at `crates/`, not at this
# machine's cargo home (the workspace's own are relative already): no builder's path ships in the
# package. (This variable replaces .cargo/config.toml's flags for the target: SIMD128 again.)
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+simd128 --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}/registry/src=crates"
rm -rf web/pkg
cargo build -q -p edo-web --lib --target wasm32-unknown-unknown --profile wasm
wasm-bindgen --target web --out-dir web/pkg "$out"
cargo build -q -p edo-web --lib --target wasm32-unknown-unknown --profile wasm --features suite
wasm-bindgen --target web --out-dir web/pkg --out-name edo_web_suite "$out"
for wasm in web/pkg/edo_web_bg.wasm web/pkg/edo_web_suite_bg.wasm; do
  raw_before=$(stat -c %s "$wasm")
  if command -v wasm-opt >/dev/null; then
    # --low-memory-unused holds while the stack comes first: its pointer starts at or below
    # the first data segment (read by binaryen's wasm-dis, by name: a module stripped of its
    # names fails the check, which is safe). Refuse the flag's output otherwise.
    command -v wasm-dis >/dev/null || { echo "wasm-dis (binaryen, beside wasm-opt) is needed to check the memory layout" >&2; exit 1; }
    layout=$(wasm-dis "$wasm" | awk '
      function at(line) { match(line, /i32.const [0-9]+/); return substr(line, RSTART + 10, RLENGTH - 10) }
      /^ \(global \$__stack_pointer / && stack == "" { stack = at($0) }
      /^ \(data / && data == "" { data = at($0) }
      END { print stack, data }')
    read -r stack data <<< "$layout"
    if [ -z "${stack:-}" ] || [ -z "${data:-}" ] || [ "$stack" -gt "$data" ] || [ "$stack" -lt 1024 ]; then
      echo "$wasm: the stack is not first in memory (stack pointer ${stack:-?}, data at ${data:-?}): --low-memory-unused would not hold" >&2
      exit 1
    fi
    wasm-opt -Os --converge --low-memory-unused --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals "$wasm" -o "$wasm.opt"
    mv "$wasm.opt" "$wasm"
    opt="after wasm-opt -Os --converge --low-memory-unused (before: $raw_before bytes)"
  else
    opt="(wasm-opt not installed: npm install -g binaryen)"
  fi
  raw=$(stat -c %s "$wasm")
  gz=$(gzip -9 -c "$wasm" | wc -c)
  printf '%s: %d bytes, %d bytes gzipped %s\n' "$wasm" "$raw" "$gz" "$opt"
done
