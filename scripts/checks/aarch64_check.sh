#!/usr/bin/env bash
# The edo command built for aarch64 Linux and run under qemu-aarch64, on an ARMv9 core (`-cpu max`,
# FEAT_FP16) and an ARMv8.0 one (`-cpu cortex-a53`, a Raspberry Pi 3's): `edo quantize` of a real
# numpy-written table to six formats, `edo lookup` of rows from each file, `edo quantize-model` and
# `edo embed` with a model2vec model and with the .edo model written — every file and every vector
# equal byte for byte to what the x86-64 build writes, and a bad id the same typed error.
# Prints the number of runs compared; fails at the first difference. Then writes the benchmark
# suite's tiny matrix under qemu to target/runtimes-bench/aarch64-qemu.json (marked emulated).
# Needs the aarch64 target, Debian's cross linker (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and
# qemu-user. The aarch64 command is built in release, as scripts/edge-release.sh builds the one users
# take to a board (the x86-64 one is the tests' build: the bits are the same in every profile, as
# edo uses no fast-math); qemu's timings mean nothing anyway.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=aarch64-unknown-linux-gnu
# The x86-64 command the tests built (a no-op after scripts/test.sh's `cargo test`): a build of its
# own, with other features, would compile the workspace and wgpu a second time.
cargo test -q --all-features --no-run
cargo build -q --release -p edo-cli --target "$target"
x86="${CARGO_TARGET_DIR:-target}/debug/edo"
arm="${CARGO_TARGET_DIR:-target}/$target/release/edo"
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=tests/data/models/wordpiece
texts=(--text "the quick brown fox" --text "a fast fox" --text "" --text "unbelievable tokenisation, with punctuation!")

# Runs one command with each build into $out/x86/ and $out/$cpu/ (paths named OUT/… there), and
# requires every file and the standard output to be the same.
checks=0
same() {
    local cpu=$1 name=$2
    shift 2
    mkdir -p "$out/x86" "$out/$cpu"
    "$x86" "${@//OUT/$out/x86}" > "$out/x86/$name.stdout" 2> "$out/x86.stderr"
    QEMU_CPU=$cpu qemu-aarch64 "$arm" "${@//OUT/$out/$cpu}" > "$out/$cpu/$name.stdout" 2> "$out/$cpu.stderr"
    # Paths and timings in the summaries differ by design; the files and vectors may not.
    for f in "$out/x86"/*; do
        case "$f" in *.stdout) continue ;; esac
        cmp "$f" "$out/$cpu/$(basename "$f")"
    done
    checks=$((checks + 1))
}

for cpu in max cortex-a53; do
    rm -rf "$out/x86" # written again beside each CPU model's files
    for format in int8 int4 fp16 q8_0 q4_k binary; do
        same "$cpu" "quantize-$format" quantize tests/data/files/table_f32.npy --format "$format" -o "OUT/$format.edo"
        same "$cpu" "lookup-$format" lookup "OUT/$format.edo" --ids 0,36,5,5,17 --json
        cmp "$out/x86/lookup-$format.stdout" "$out/$cpu/lookup-$format.stdout"
    done
    same "$cpu" embed-folder embed "$model" "${texts[@]}" -o OUT/folder.npy
    same "$cpu" quantize-model quantize-model "$model" --format int8 -o OUT/model.edo
    same "$cpu" embed-edo embed OUT/model.edo "${texts[@]}" -o OUT/model.npy
    # A bad id: the same typed error (edo's exit status and message) on both.
    set +e
    "$x86" lookup "$out/x86/int8.edo" --ids 37 2> "$out/x86.bad"; x86_status=$?
    QEMU_CPU=$cpu qemu-aarch64 "$arm" lookup "$out/$cpu/int8.edo" --ids 37 2> "$out/$cpu.bad"; arm_status=$?
    set -e
    if [ "$x86_status" = 0 ] || [ "$arm_status" != "$x86_status" ] || ! grep -q "ids\[0\] = 37 is out of range" "$out/$cpu.bad" || ! cmp -s "$out/x86.bad" "$out/$cpu.bad"; then
        echo "a bad id: exit $x86_status on x86-64, $arm_status on aarch64 ($cpu): $(cat "$out/$cpu.bad")" >&2
        exit 1
    fi
    checks=$((checks + 1))
done
echo "aarch64: $checks runs of the edo command under qemu (-cpu max and cortex-a53) equal to x86-64's, byte for byte"
# The benchmark suite's tiny matrix under qemu, marked emulated (EDO_EMULATED), for the report that
# sets the runtimes side by side (scripts/web/runtimes_check.py --benchmark target/runtimes-bench).
mkdir -p target/runtimes-bench
EDO_EMULATED=1 QEMU_CPU=max qemu-aarch64 "$arm" bench suite --scale tiny --cpu --reps 1 --label "aarch64 under qemu" \
    -o target/runtimes-bench/aarch64-qemu.json --html "$out/aarch64.html" > /dev/null
