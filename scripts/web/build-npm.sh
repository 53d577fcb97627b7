#!/usr/bin/env bash
# Builds the npm package edo-embeddings and packs it: the browser build of edo (scripts/web/build-web.sh:
# wasm, wasm-bindgen's glue, wasm-opt), the wrapper and worker of web/npm/src compiled from
# TypeScript (`tsc --strict`: JavaScript and the package's .d.ts files; TypeScript and the type
# packages it reads are pinned below and installed into target/npm), package.json with the crate's
# version; then `npm pack`. Prints the tarball's path and the sizes
# (the .wasm gzipped, the wrapper unminified; scripts/web/test-npm.sh gives it minified). web/pkg gets the
# package's files too, for the demo page.
#
#   ./scripts/web/build-npm.sh            # target/npm/edo-embeddings-<version>.tgz
#   ./scripts/web/build-npm.sh --no-wasm  # reuse web/pkg from an earlier build-web.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" != "--no-wasm" ]; then
    ./scripts/web/build-web.sh
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
out=target/npm
stage=$out/package
rm -rf "$stage"
mkdir -p "$stage"
cp web/pkg/edo_web{,_suite}.js web/pkg/edo_web{,_suite}.d.ts web/pkg/edo_web{,_suite}_bg.wasm web/npm/README.md "$stage/"
# The wrapper: web/npm/src's TypeScript compiled beside wasm-bindgen's glue (whose .d.ts types the
# calls into the module) and the version, into the package's .js and .d.ts files.
tools="typescript@5.9.3 @webgpu/types@0.1.74 @types/node@20.19.25"
if [ "$(cat "$out/node_modules/.edo-tools" 2>/dev/null)" != "$tools" ]; then
    (cd "$out" && npm install --no-save --no-audit --no-fund --loglevel=error $tools >/dev/null)
    echo "$tools" > "$out/node_modules/.edo-tools"
fi
build=$out/build
rm -rf "$build"
mkdir -p "$build"
cp web/npm/src/*.ts web/npm/tsconfig.json web/pkg/edo_web{,_suite}.js web/pkg/edo_web{,_suite}.d.ts "$build/"
printf '// Written by scripts/web/build-npm.sh from Cargo.toml.\nexport const VERSION: string = %s;\n' "\"$version\"" > "$build/version.ts"
"$out/node_modules/.bin/tsc" -p "$build" --outDir "$stage"
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
cp "$stage"/{index,node,core,client,worker,version}.js "$stage"/{index,core,client,version}.d.ts web/pkg/
tarball=$(cd "$out" && npm pack --silent ./package)
wasm_gz=$(gzip -9 -c "$stage/edo_web_bg.wasm" | wc -c)
suite_gz=$(gzip -9 -c "$stage/edo_web_suite_bg.wasm" | wc -c)
wrapper=$(cat "$stage"/{index,node,core,client,worker,version}.js | wc -c)
printf '%s: %d bytes; .wasm %d bytes gzipped (the benchmark module, loaded by benchmark() and report() only: %d); wrapper %d bytes unminified\n' "$out/$tarball" "$(stat -c %s "$out/$tarball")" "$wasm_gz" "$suite_gz" "$wrapper"
