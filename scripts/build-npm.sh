#!/usr/bin/env bash
# Builds the npm package edo-embeddings and packs it: the browser build of edo (scripts/build-web.sh:
# wasm, wasm-bindgen's glue, wasm-opt), the hand-written wrapper, worker and typings of web/npm/src,
# package.json with the crate's version; then `npm pack`. Prints the tarball's path and the sizes
# (the .wasm gzipped, the wrapper unminified; scripts/test-npm.sh gives it minified). web/pkg gets the
# package's files too, for the demo page.
#
#   ./scripts/build-npm.sh            # target/npm/edo-embeddings-<version>.tgz
#   ./scripts/build-npm.sh --no-wasm  # reuse web/pkg from an earlier build-web.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-wasm" ]; then
    ./scripts/build-web.sh
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
out=target/npm
stage=$out/package
rm -rf "$stage"
mkdir -p "$stage"
cp web/pkg/edo_web.js web/pkg/edo_web_bg.wasm "$stage/"
cp web/npm/src/*.js web/npm/src/index.d.ts web/npm/README.md "$stage/"
printf '// Written by scripts/build-npm.sh from Cargo.toml.\nexport const VERSION = %s;\n' "\"$version\"" > "$stage/version.js"
python3 - "$version" web/npm/package.json "$stage/package.json" <<'PY'
import json, sys
version, src, dst = sys.argv[1:]
p = json.load(open(src))
p["version"] = version
json.dump(p, open(dst, "w"), indent=2)
open(dst, "a").write("\n")
PY
# Every file package.json lists is there, and nothing else is packed.
python3 - "$stage" <<'PY'
import json, os, sys
stage = sys.argv[1]
listed = set(json.load(open(os.path.join(stage, "package.json")))["files"])
present = set(os.listdir(stage)) - {"package.json"}
if listed != present:
    sys.exit(f"package.json's files {sorted(listed)} differ from the staged files {sorted(present)}")
PY
# The demo page (web/index.html) imports the package as an app without a bundler would: web/pkg
# gets the package's own files beside the wasm-bindgen output.
cp "$stage"/{index,node,core,client,worker,version}.js "$stage/index.d.ts" web/pkg/
tarball=$(cd "$out" && npm pack --silent ./package)
wasm_gz=$(gzip -9 -c "$stage/edo_web_bg.wasm" | wc -c)
wrapper=$(cat "$stage"/{index,node,core,client,worker,version}.js | wc -c)
printf '%s: %d bytes; .wasm %d bytes gzipped; wrapper %d bytes unminified\n' "$out/$tarball" "$(stat -c %s "$out/$tarball")" "$wasm_gz" "$wrapper"
