#!/usr/bin/env bash
# The figures only a real GPU gives, in one run that fits a 10-minute slot on a lent GPU machine
# (no network there, nothing installed): the benchmark suite (`edo bench suite`, the full matrix
# within a 240 s budget; its JSON and HTML report come back, compared with the peers measured
# here), the gather against the device's own buffer copy (`edo bench gather`, 1 M × 128), the
# Hamming scan (`edo bench search`, 1 M × 256 bits, 100 queries, k = 10) against faiss
# IndexBinaryFlat on 2 CPU threads measured here, and the table-batched hashed bags of
# `bench/examples/recsys.rs`.
#
#   ./scripts/gpu-check.sh prepare    here: release binaries, the faiss baseline and the suite's
#                                     peers (needs numpy and faiss-cpu) and the Vulkan loader's
#                                     .deb into .gpu/ (git ignores it; about 15 MiB)
#   ./scripts/gpu-check.sh run [dir]  there, with .gpu/ carried: figures into dir (default $OUT,
#                                     else ./gpu-check); also runs on lavapipe, as a rehearsal
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gpu="$root/.gpu"

case "${1:-}" in
prepare)
    mkdir -p "$gpu/bin" "$gpu/deb"
    cargo build --release --manifest-path "$root/Cargo.toml" --bin edo --example recsys
    cp "$root/target/release/edo" "$root/target/release/examples/recsys" "$gpu/bin/"
    # faiss on the same shape of codes, 2 threads, on this machine (the issue's baseline).
    OMP_NUM_THREADS=2 python3 - "$gpu/faiss.json" <<'PY'
import json, sys, time
import faiss, numpy as np
rows, bits, queries, k = 1_000_000, 256, 100, 10
rng = np.random.default_rng(0)
index = faiss.IndexBinaryFlat(bits)
index.add(rng.integers(0, 256, size=(rows, bits // 8), dtype=np.uint8))
q = rng.integers(0, 256, size=(queries, bits // 8), dtype=np.uint8)
faiss.omp_set_num_threads(2)
index.search(q, k)
times = []
for _ in range(5):
    t = time.perf_counter(); index.search(q, k); times.append(time.perf_counter() - t)
s = sorted(times)[2]
json.dump({"faiss": faiss.__version__, "threads": 2, "rows": rows, "bits": bits, "queries": queries, "k": k, "seconds": s}, open(sys.argv[1], "w"))
print(f"faiss IndexBinaryFlat, 2 threads: {1e3 * s:.2f} ms for {queries} queries over {rows} codes")
PY
    # The suite's peers (numpy, faiss) on the full matrix's shapes, for `edo bench compare` there.
    python3 "$root/scripts/bench_peers.py" --reps 3 -o "$gpu/peers.json" || echo "no peers (bench_peers.py needs numpy and faiss-cpu)"
    # The Vulkan loader, for a machine that has the driver but not the loader.
    (cd "$gpu/deb" && apt-get download libvulkan1 >/dev/null 2>&1) || echo "no libvulkan1 .deb (apt-get download failed); the GPU machine must have the loader"
    du -sh "$gpu"
    ;;
run)
    out="${2:-${OUT:-$root/gpu-check}}"
    mkdir -p "$out"
    [ -x "$gpu/bin/edo" ] || { echo "no $gpu/bin/edo: run '$0 prepare' first and carry .gpu" >&2; exit 2; }
    if ! ldconfig -p | grep -q libvulkan.so.1; then
        for f in "$gpu"/deb/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    if [ -d /usr/local/nvidia/share/vulkan/icd.d ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    fi
    export NODEVICE_SELECT=1
    {
        echo "== $(date -u +%FT%TZ) on $(nproc) cores"
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
        echo "== edo bench suite (issue 16: the full matrix, 240 s budget)"
        timeout 330 "$gpu/bin/edo" bench suite --budget-seconds 240 --label "$(hostname) $(nproc) cores" -o "$out/suite.json" --html "$out/suite.html" \
            >"$out/suite.txt" 2>"$out/suite.log" || echo "suite failed: $(tail -3 "$out/suite.log")"
        head -8 "$out/suite.txt" 2>/dev/null || true
        if [ -f "$gpu/peers.json" ] && [ -f "$out/suite.json" ]; then
            "$gpu/bin/edo" bench compare "$out/suite.json" "$gpu/peers.json" --html "$out/compare.html" --markdown "$out/compare.md" >"$out/compare.txt" 2>&1 || true
        fi
        echo "== edo bench gather (issue 2: ≥ 80 % of the device copy, INT8 time ≤ 0.5 × FP32)"
        timeout 120 "$gpu/bin/edo" bench gather --formats fp32,int8 2>&1 | tail -12
        echo "== edo bench search (issue 4: GPU ≥ 10 × faiss on 2 CPU threads)"
        timeout 120 "$gpu/bin/edo" bench search --json >"$out/search.json" 2>"$out/search.log" || echo "search bench failed: $(tail -3 "$out/search.log")"
        if [ -f "$gpu/faiss.json" ] && command -v python3 >/dev/null; then
            python3 - "$gpu/faiss.json" "$out/search.json" <<'PY'
import json, sys
f, e = (json.load(open(p)) for p in sys.argv[1:3])
print(f"faiss (2 threads, measured at prepare): {1e3 * f['seconds']:.2f} ms")
print(f"edo CPU ({e['threads']} threads): {1e3 * e['cpu_seconds']:.2f} ms")
if e.get("gpu_seconds"):
    print(f"edo GPU ({e['adapter']}): {1e3 * e['gpu_seconds']:.2f} ms = {f['seconds'] / e['gpu_seconds']:.1f} × faiss; "
          f"scan {e['gpu_scan_gbps']:.0f} GB/s = {100 * e['gpu_scan_ratio_to_copy']:.0f} % of the device copy; equals the CPU path: {e['gpu_equals_cpu']}")
PY
        fi
        echo "== recsys (issue 3: GPU INT8 ≥ 2 × FP32 lookups/s)"
        timeout 180 "$gpu/bin/recsys" 2>&1 | grep -v XDG_RUNTIME_DIR
    } 2>&1 | tee "$out/summary.txt"
    ;;
*)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
