#!/usr/bin/env bash
# edo under a WASI runtime: builds edo-wasi (edo without its GPU path) for wasm32-wasip1 and for
# this machine, runs both on the same inputs — quantize a real numpy-written table to several
# formats, look rows up, embed texts with a model2vec model, index a corpus and search it — and
# requires the outputs to be equal byte for byte, and the packed rows and the lines found equal to
# the `edo` command's. wasmtime is PyPI's (pinned below), in a virtual environment under target/.
# Then writes the benchmark suite's tiny matrix under wasmtime to target/runtimes-bench/wasmtime.json.
# With --bench, also prints the WASI module's time over the native program's on one thread for an
# INT8 gather and a model's embedding (a figure, not a test).
set -euo pipefail
cd "$(dirname "$0")/../.."
WASMTIME_VERSION=51.0.0
venv=target/wasi-venv
if [ "$("$venv/bin/pip" show wasmtime 2>/dev/null | sed -n 's/^Version: //p')" != "$WASMTIME_VERSION" ]; then
    # Exit status 3: no runtime to run the module on (scripts/test.sh says SKIPPED unless required).
    python3 -m venv "$venv" && "$venv/bin/pip" install -q "wasmtime==$WASMTIME_VERSION" || exit 3
fi
# The module in the profile it ships in (`wasi`: release with LTO, as scripts/edge-release.sh
# builds it). The native program in the test profile reuses what the tests built (the bits are the
# same in every profile: no fast-math); --bench times both in the `wasi` profile.
cargo build -q -p edo-wasi --profile wasi --target wasm32-wasip1
wasm=target/wasm32-wasip1/wasi/edo-wasi.wasm
if [ "${1:-}" = "--bench" ]; then
    cargo build -q -p edo-wasi --profile wasi
    native=target/wasi/edo-wasi
else
    cargo build -q -p edo-wasi
    native=target/debug/edo-wasi
fi
run_wasi() { "$venv/bin/python" scripts/checks/wasi_run.py "$wasm" "$@"; }
out=target/wasi-check
rm -rf "$out" && mkdir -p "$out/native" "$out/wasi"
model=tests/data/models/wordpiece
texts=("the quick brown fox" "a fast fox" "" "unbelievable tokenisation, with punctuation!")

# The packed rows of an .edo file (its `rows` tensor), to compare with the edo command's, whose
# header also records the source and the quantisation error.
rows_of() {
    python3 -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
start, end = json.loads(b[8:8 + n])["rows"]["data_offsets"]
sys.stdout.buffer.write(b[8 + n + start:8 + n + end])' "$1"
}
# The x86-64 edo command the tests built (see aarch64_check.sh).
cargo test -q --all-features --no-run
checks=0
for format in int8 int4 fp16 q8_0 q4_k binary; do
    "$native" quantize tests/data/files/table_f32.npy "$format" "$out/native/$format.edo"
    run_wasi quantize tests/data/files/table_f32.npy "$format" "$out/wasi/$format.edo"
    cmp "$out/native/$format.edo" "$out/wasi/$format.edo"
    target/debug/edo quantize tests/data/files/table_f32.npy --format "$format" -o "$out/native/$format.cli.edo" > /dev/null 2>&1
    rows_of "$out/native/$format.cli.edo" > "$out/native/$format.cli.packed"
    rows_of "$out/wasi/$format.edo" > "$out/wasi/$format.packed"
    [ -s "$out/wasi/$format.packed" ] && cmp "$out/native/$format.cli.packed" "$out/wasi/$format.packed"
    "$native" lookup "$out/native/$format.edo" 0,36,5,5,17 > "$out/native/$format.rows"
    run_wasi lookup "$out/wasi/$format.edo" 0,36,5,5,17 > "$out/wasi/$format.rows"
    cmp "$out/native/$format.rows" "$out/wasi/$format.rows"
    checks=$((checks + 3))
done
"$native" embed "$model" "${texts[@]}" > "$out/native/embed.txt"
run_wasi embed "$model" "${texts[@]}" > "$out/wasi/embed.txt"
cmp "$out/native/embed.txt" "$out/wasi/embed.txt"
checks=$((checks + 1))
# An index of the demo page's corpus (2 641 lines), and searches of it: the same file and the same
# neighbours (ids, score bits, lines) on both; the packed rows equal to `edo index`'s, and the lines
# found in the order `edo query` finds them.
"$native" index "$model" web/corpus.txt "$out/native/index.edo"
run_wasi index "$model" web/corpus.txt "$out/wasi/index.edo"
cmp "$out/native/index.edo" "$out/wasi/index.edo"
target/debug/edo index "$model" web/corpus.txt -o "$out/native/index.cli.edo" > /dev/null
cmp <(rows_of "$out/native/index.cli.edo") <(rows_of "$out/wasi/index.edo")
checks=$((checks + 2))
for query in "compress a file" "the current time in seconds" "parse command line arguments"; do
    "$native" query "$out/native/index.edo" "$model" 5 "$query" > "$out/native/query.txt"
    run_wasi query "$out/wasi/index.edo" "$model" 5 "$query" > "$out/wasi/query.txt"
    cmp "$out/native/query.txt" "$out/wasi/query.txt"
    target/debug/edo query "$out/native/index.cli.edo" --model "$model" -k 5 "$query" | sed -n 's/^ *[0-9]*\. [-+][0-9.]*  //p' > "$out/native/query.cli.txt"
    cut -f5- "$out/wasi/query.txt" | cmp - "$out/native/query.cli.txt"
    [ "$(wc -l < "$out/wasi/query.txt")" = 5 ]
    checks=$((checks + 2))
done
# A bad id is the same typed error on both (exit 1, edo's message), kept apart from usage errors.
set +e
"$native" lookup "$out/native/int8.edo" 37 2> "$out/native/bad.txt"; native_status=$?
run_wasi lookup "$out/wasi/int8.edo" 37 2> "$out/wasi/bad.txt"; status=$?
set -e
if [ "$status" != 1 ] || [ "$native_status" != 1 ] || ! grep -q "ids\[0\] = 37 is out of range for a table of 37 rows" "$out/wasi/bad.txt"; then
    echo "a bad id: exit $native_status natively, $status under WASI: $(cat "$out/wasi/bad.txt")" >&2
    exit 1
fi
cmp "$out/native/bad.txt" "$out/wasi/bad.txt"
checks=$((checks + 1))
echo "wasi: $checks checks equal to the native program's output ($(wc -c < "$wasm") bytes of .wasm, $(gzip -9c "$wasm" | wc -c) gzipped)"
# The benchmark suite's tiny matrix under wasmtime (the CPU path, one thread), for the report that
# sets the runtimes side by side (scripts/web/runtimes_check.py --benchmark target/runtimes-bench).
mkdir -p target/runtimes-bench
run_wasi bench-suite tiny "$model" target/runtimes-bench/wasmtime.json wasmtime > "$out/wasi/bench-suite.txt"

if [ "${1:-}" = "--bench" ]; then
    # Three rounds, the two programs in turn within each: this machine's noise shows as their spread.
    for round in 1 2 3; do
        "$native" bench "$model" > "$out/native/bench.txt"
        run_wasi bench "$model" > "$out/wasi/bench.txt"
        join "$out/native/bench.txt" "$out/wasi/bench.txt" | awk -v r="$round" '{ printf "round %s, %s: native %.2f ms, wasmtime %.2f ms, %.2f× native (one thread)\n", r, $1, 1000 * $2, 1000 * $3, $3 / $2 }'
    done
fi
