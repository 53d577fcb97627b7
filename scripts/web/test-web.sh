#!/usr/bin/env bash
# The browser tests: wasm-bindgen-test in headless Chromium with WebGPU (SwiftShader) and without
# it (the CPU fallback), then the demo page end to end (scripts/web/web_e2e.py), semantic search included,
# then the npm package in Node (node --test) and in a fresh Vite app in headless Chromium (scripts/web/test-npm.sh).
# Needs: chromium, chromium-driver (apt), wasm-bindgen-cli of the pinned version, python3, node and npm
# (Vite and TypeScript come from the npm registry).
set -euo pipefail
cd "$(dirname "$0")/../.."
chromium_bin="${CHROMIUM:-/usr/bin/chromium}"
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-300}"

webdriver() { # $1: extra Chromium flags, as a JSON list body
  cat > web/webdriver.json <<JSON
{"goog:chromeOptions": {"binary": "$chromium_bin", "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"$1]}}
JSON
}
# Chromedriver and Chromium leave a profile (~36 MB) and a socket directory in the temporary
# directory of every browser they start; over many runs they filled a CI machine's disk. Everything
# they write goes to a directory of this run's own, removed at the end.
scratch=$(mktemp -d)
export TMPDIR="$scratch"
trap 'rm -rf web/webdriver.json "$scratch"' EXIT

echo "== browser tests with WebGPU"
webdriver ', "--enable-unsafe-webgpu"'
EDO_EXPECT_BACKEND=webgpu cargo test -p edo-web --target wasm32-unknown-unknown

echo "== browser tests without WebGPU (the CPU fallback)"
webdriver ', "--disable-features=WebGPU"'
EDO_EXPECT_BACKEND=cpu cargo test -p edo-web --target wasm32-unknown-unknown

echo "== the npm package (its .wasm, wrapper and typings; staged in web/pkg for the demo page too)"
./scripts/web/build-npm.sh

echo "== the demo page, end to end (it imports the package)"
# The semantic-search section's model: WordLlama's (PyPI) as web/model.edo. Without it the page
# asks for a dropped model and the end-to-end script says SKIPPED for that section.
# A file an older edo wrote (before a change of the file format) is written again: this edo
# (the build the tests made, so nothing is rebuilt) says whether it reads it.
cargo test -q --all-features --no-run
if [ ! -f web/model.edo ] || ! "${CARGO_TARGET_DIR:-target}/debug/edo" inspect web/model.edo --no-png >/dev/null 2>&1; then
    ./scripts/web/make_web_model.sh || echo "no web/model.edo (WordLlama unavailable): semantic search will say SKIPPED"
fi
python3 scripts/web/web_e2e.py

echo "== the npm package in Node and in a fresh Vite app"
EDO_NPM_NO_WASM=1 ./scripts/web/test-npm.sh
