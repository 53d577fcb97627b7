#!/usr/bin/env bash
# The measured pages of docs/ from results files, by command, never by hand:
#
#   ./scripts/peers/bench_docs.sh measure   run the quick suite natively (every adapter and the CPU
#                                     path), in headless Chromium's demo page (WebGPU, then the CPU
#                                     path) and the peers (numpy, faiss, model2vec: needs them in
#                                     $PYTHON, default python3), into docs/bench/*.json; then:
#   ./scripts/peers/bench_docs.sh           docs/bench-results.md and docs/bench-report.html from
#                                     docs/bench/*.json (edo bench compare)
set -euo pipefail
cd "$(dirname "$0")/../.."
edo=(cargo run --release --quiet -p edo-cli --)
if [ "${1:-}" = measure ]; then
    mkdir -p docs/bench
    "${edo[@]}" bench suite --quick --label "native, $(nproc) cores" --model tests/data/models/wordpiece -o docs/bench/native.json --html /dev/null
    ./scripts/web/build-web.sh
    cargo build -q --all-features --bin edo
    { [ -f web/model.edo ] && "${CARGO_TARGET_DIR:-target}/debug/edo" inspect web/model.edo --no-png >/dev/null 2>&1; } || ./scripts/web/make_web_model.sh
    EDO_BENCH_SCALE=quick python3 scripts/web/web_e2e.py >/dev/null || echo "the page's checks failed; its results are still kept if it wrote them"
    cp target/web-e2e/bench-webgpu.json docs/bench/browser-webgpu.json
    cp target/web-e2e/bench-cpu.json docs/bench/browser-cpu.json
    "${PYTHON:-python3}" scripts/peers/bench_peers.py --quick --model tests/data/models/wordpiece -o docs/bench/peers.json
fi
# Native first, then the browser's, the peers' and any others, so series keep their colours.
files=()
for f in docs/bench/native.json docs/bench/browser-webgpu.json docs/bench/browser-cpu.json docs/bench/peers.json docs/bench/*.json; do
    [ -f "$f" ] && [[ " ${files[*]} " != *" $f "* ]] && files+=("$f")
done
"${edo[@]}" bench compare "${files[@]}" --markdown docs/bench-results.md --html docs/bench-report.html
