#!/usr/bin/env bash
# Builds edo for the browser into web/pkg: the wasm (release, size-optimised profile "wasm"),
# wasm-bindgen's JS glue and TypeScript definitions, then `wasm-opt -Oz` when it is installed
# (npm install -g binaryen; Debian's is too old). Prints the .wasm size raw and gzipped.
# Needs: rustup target add wasm32-unknown-unknown; cargo install wasm-bindgen-cli --version <pinned>.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' web/Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  echo "wasm-bindgen-cli $want is needed (found: ${have:-none}): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
cargo build -q -p edo-web --lib --target wasm32-unknown-unknown --profile wasm
rm -rf web/pkg
wasm-bindgen --target web --out-dir web/pkg "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/wasm/edo_web.wasm"
wasm=web/pkg/edo_web_bg.wasm
raw_before=$(stat -c %s "$wasm")
if command -v wasm-opt >/dev/null; then
  wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals "$wasm" -o "$wasm.opt"
  mv "$wasm.opt" "$wasm"
  opt="after wasm-opt -Oz (before: $raw_before bytes)"
else
  opt="(wasm-opt not installed: npm install -g binaryen)"
fi
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
printf 'web/pkg/edo_web_bg.wasm: %d bytes, %d bytes gzipped %s\n' "$raw" "$gz" "$opt"
