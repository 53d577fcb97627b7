#!/usr/bin/env bash
# The npm package as its users get it: builds the tarball (scripts/web/build-npm.sh), installs it into
# a fresh Node project and runs `node --test` there (web/npm/test/node.test.mjs: the CPU path,
# downloads with progress, abort and a cache, typed errors), then into a fresh Vite app
# (web/npm/test-app, Vite and TypeScript from npm): `tsc --noEmit --strict` over the app and the
# README's example, `vite build`, and the built app in headless Chromium with WebGPU and without it
# (scripts/web/npm_e2e.py). Between them, the same checks in Deno, Bun, workerd and Node with Dawn's
# WebGPU, from npm (scripts/web/runtimes_check.py).
# Prints the package's sizes and the app's figures.
#   EDO_NPM_NO_WASM=1 reuses web/pkg from an earlier build (scripts/web/build-web.sh or build-npm.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
./scripts/web/build-npm.sh ${EDO_NPM_NO_WASM:+--no-wasm}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
tarball=$root/target/npm/edo-embeddings-$version.tgz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet="--no-audit --no-fund --loglevel=error"

echo "== npm: the package in Node (node --test)"
mkdir "$work/node"
cp web/npm/test/node.test.mjs "$work/node/"
(cd "$work/node" && echo '{"name":"edo-node-check","private":true,"type":"module"}' > package.json && npm install $quiet "$tarball" >/dev/null)
(cd "$work/node" && EDO_MODELS="$root/tests/data/models" EDO_NODE_VECTORS="$work/node-vectors.json" node --test --test-reporter=spec node.test.mjs)

echo "== npm: the package in Deno, Bun, Cloudflare's workerd, and Node with Dawn's WebGPU"
# The native CLI's vectors are the oracle (the build the tests made: nothing is rebuilt).
cargo test -q --all-features --no-run
flags=()
if [ -f web/model.edo ]; then flags+=(--wordllama web/model.edo); fi
if [ "${EDO_REQUIRE_GPU:-}" = "1" ]; then flags+=(--require-gpu); fi
status=0
python3 scripts/web/runtimes_check.py "$tarball" "${CARGO_TARGET_DIR:-target}/debug/edo" --benchmark target/runtimes-bench "${flags[@]}" || status=$?
if [ "$status" = 3 ] && [ "${EDO_REQUIRE_WEB:-}" != "1" ]; then
    echo "SKIPPED: the JavaScript runtimes (npm could not install them; EDO_REQUIRE_WEB=1 makes this a failure)"
elif [ "$status" != 0 ]; then
    exit "$status"
fi

echo "== npm: the package in a fresh Vite app (tsc --strict, vite build, headless Chromium)"
cp -r web/npm/test-app "$work/app"
(cd "$work/app" && npm install $quiet >/dev/null && npm install $quiet "$tarball" >/dev/null)
# The README's example is type-checked with the app (not run: its model's URL is an example).
python3 - README.md "$work/app/src/readme-example.ts" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text[text.index("## In a web app"):]
block = re.search(r"```js\n(.*?)```", section, re.S).group(1)
open(sys.argv[2], "w").write("// The README's \"In a web app\" example (scripts/web/test-npm.sh copies it here).\n" + block + "export {};\n")
PY
(cd "$work/app" && npx tsc --noEmit && npx vite build --logLevel warn)
# The wrapper's size: all of it (every export kept), and what the README's app takes of it once
# its bundler drops what it does not import — minified, the wasm-bindgen glue (both modules') left out.
bundle() { (cd "$work/app" && npx esbuild --bundle --minify --format=esm --log-level=error --external:'*edo_web.js' --external:'*edo_web_suite.js' --external:'*.wasm' "$1" | wc -c); }
wrapper=$(bundle node_modules/edo-embeddings/index.js)
readme=$(bundle src/readme-example.ts)
wasm=$(gzip -9 -c "$work/app/node_modules/edo-embeddings/edo_web_bg.wasm" | wc -c)
suite=$(gzip -9 -c "$work/app/node_modules/edo-embeddings/edo_web_suite_bg.wasm" | wc -c)
printf 'package sizes: .wasm %d bytes gzipped (budget 700000); wrapper %d bytes minified with every export (budget 20000), %d in the README example'"'"'s bundle (budget 15000); the worker entry is a separate chunk; the benchmark module %d bytes gzipped, fetched by benchmark() and report() only\n' "$wasm" "$wrapper" "$readme" "$suite"
python3 scripts/web/npm_e2e.py "$work/app/dist" "$work/node-vectors.json"
# The .wasm every page loads keeps to its budget: what grows it is found and won back, or moved
# to a module loaded on use as the benchmark suite was.
if [ "$wasm" -gt 700000 ]; then
    hint=$(command -v wasm-opt >/dev/null && echo "docs/browser.md: what it holds" || echo "wasm-opt is not installed: npm install -g binaryen")
    echo "the .wasm is $wasm bytes gzipped, over its 700 000-byte budget ($hint)" >&2
    exit 1
fi
