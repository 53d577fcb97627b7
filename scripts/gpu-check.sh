#!/usr/bin/env bash
# The figures only a real GPU gives, in one run that fits one command on a lent GPU machine (no
# network there, nothing installed; 10 minutes a command, 15 in all with the machine's start): its
# steps' timeouts add up to 450 s, the GPU tests take what is left of 470 s, and a machine without
# the adapter stops within 30 s (89 s in all on an H200). Steps: a probe
# that stops at once unless an NVIDIA adapter is found (printing the adapters wgpu sees), the
# benchmark suite (`edo bench suite` on that adapter only, the server matrix — a million ids a
# call, its large table and 1 GiB copy out of the GPU's L2, timed by the device's timestamps —
# within a 170 s budget; its
# JSON and HTML report come back, compared with the peers measured here), the gather against the
# device's own copy (`edo bench gather`: 2 M × 128, 1 M ids, and bags of 16; INT8 again with rows
# aligned to 16 bytes), the Hamming scan (`edo bench
# search`, 1 M × 256 bits, 100 queries, k = 10) against faiss IndexBinaryFlat on 2 CPU threads
# measured here, the table-batched hashed bags of `bench/examples/recsys.rs`, and then, in the
# time left, the GPU tests (tests/gpu against the CPU oracle, EDO_REQUIRE_GPU=1) on the adapter
# wgpu picks first for high performance (on an NVIDIA machine, the NVIDIA GPU).
#
#   ./scripts/gpu-check.sh prepare    here: release binaries, the GPU test binary, the faiss
#                                     baseline and the suite's peers (needs numpy and faiss-cpu)
#                                     and the .debs of the Vulkan and GL loaders NVIDIA's driver
#                                     needs into .gpu/ (git ignores it; about 45 MiB)
#   ./scripts/gpu-check.sh run [dir]  there, with .gpu/ carried: at most 6 files into dir (default
#                                     $OUT, else ./gpu-check): summary.txt, suite.json, suite.html,
#                                     compare.md, compare.html, search.json. GPU_CHECK_ADAPTER
#                                     (default nvidia) names the adapter; =llvmpipe rehearses it on
#                                     lavapipe with the same timeouts
#
# On the device tool: carry [".gpu"], command `./scripts/gpu-check.sh run`, timeout_s 540.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gpu="$root/.gpu"

case "${1:-}" in
prepare)
    mkdir -p "$gpu/bin" "$gpu/deb"
    cargo build --release --manifest-path "$root/Cargo.toml" --bin edo --example recsys
    cp "$root/target/release/edo" "$root/target/release/examples/recsys" "$gpu/bin/"
    # The GPU tests as CI builds them, stripped (debug info would triple it). They read their
    # data under the checkout's path here, which `run` links to the checkout there.
    tests=$(cargo test --manifest-path "$root/Cargo.toml" --all-features --test gpu --no-run --message-format=json |
        python3 -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "gpu"][-1])')
    cp "$tests" "$gpu/bin/gpu-tests" && strip "$gpu/bin/gpu-tests"
    echo "$root" >"$gpu/checkout"
    # faiss on the same shape of codes, 2 threads, on this machine (the issue's baseline).
    rm -f "$gpu/faiss.json"
    OMP_NUM_THREADS=2 python3 - "$gpu/faiss.json" <<'PY' || echo "no faiss baseline (needs numpy and faiss-cpu)"
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
    # The suite's peers (numpy, faiss) on the server matrix's shapes, for `edo bench compare` there.
    python3 "$root/scripts/peers/bench_peers.py" --scale server --reps 3 -o "$gpu/peers.json" || echo "no peers (bench_peers.py needs numpy and faiss-cpu)"
    # The loaders, for a machine that has NVIDIA's driver but not them: Vulkan's, and the GL ones
    # (glvnd, EGL) its Vulkan driver links. amd64 whatever this machine is, from a list of its own.
    rm -f "$gpu"/deb/*.deb
    mkdir -p /tmp/gpu-check-apt/partial
    apt_amd64=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-check-apt)
    if apt-get "${apt_amd64[@]}" update -qq >/dev/null 2>&1 &&
        (cd "$gpu/deb" && apt-get "${apt_amd64[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1); then
        ls "$gpu/deb"
    else
        echo "the loaders' .debs could not be downloaded; the GPU machine must have them" >&2
    fi
    du -sh "$gpu"
    ;;
run)
    out="${2:-${OUT:-$root/gpu-check}}"
    mkdir -p "$out"
    [ -x "$gpu/bin/edo" ] || { echo "no $gpu/bin/edo: run '$0 prepare' first and carry .gpu" >&2; exit 2; }
    # The loaders, unless the machine has them (the .debs unpack into / on that bare machine).
    if ! ldconfig -p | grep -q libvulkan.so.1 || ! ldconfig -p | grep -q libEGL.so.1; then
        for f in "$gpu"/deb/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    fi
    if [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ] && [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ]; then
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
    export NODEVICE_SELECT=1 WGPU_BACKEND=vulkan
    adapter="${GPU_CHECK_ADAPTER:-nvidia}"
    log="$out/summary.txt"
    : >"$log"
    {
        echo "== $(date -u +%FT%TZ) on $(nproc) cores"
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
        echo "== probe: a Vulkan adapter named like \"$adapter\" (nothing else runs without one)"
        # The tiny suite's latency cases on that adapter only: seconds where it exists; where it
        # does not, edo names the adapters it sees and the run stops here.
        if ! timeout 30 "$gpu/bin/edo" bench suite --scale tiny --adapter "$adapter" --no-cpu --ops latency --reps 2 -o /tmp/gpu-check-probe.json --html /tmp/gpu-check-probe.html >/tmp/gpu-check-probe.txt 2>&1; then
            cat /tmp/gpu-check-probe.txt
            echo
            echo "no $adapter adapter: stopping (ldconfig: $(ldconfig -p | grep -c 'libvulkan\|libEGL') loader libraries; VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset})"
            exit 3
        fi
        grep -i "$adapter" /tmp/gpu-check-probe.txt | head -2 || true
        # The server matrix: a million ids a call on the medium and large tables (the full
        # matrix's 65 536 take tens of microseconds on an H200: launch-bound ratios).
        echo "== edo bench suite (issue 16: the server matrix on the $adapter adapter only, 170 s budget)"
        timeout 220 "$gpu/bin/edo" bench suite --scale server --budget-seconds 170 --adapter "$adapter" --no-cpu --label "$(hostname) $(nproc) cores" -o "$out/suite.json" --html "$out/suite.html" \
            >/tmp/gpu-check-suite.txt 2>&1 || echo "suite failed: $(tail -3 /tmp/gpu-check-suite.txt)"
        sed -n '1,/^results:/p' /tmp/gpu-check-suite.txt | grep -v '^results:' || true
        if [ -f "$gpu/peers.json" ] && [ -f "$out/suite.json" ]; then
            timeout 15 "$gpu/bin/edo" bench compare "$out/suite.json" "$gpu/peers.json" --html "$out/compare.html" --markdown "$out/compare.md" 2>&1 | tail -20 || true
        fi
        echo "== edo bench gather (issues 2, 32: ≥ 85 % of the device copy; 2 M × 128, 1 M ids, two id sets in turn)"
        timeout 75 "$gpu/bin/edo" bench gather --formats fp32,int8 --iters 5 2>&1 | grep -v XDG_RUNTIME_DIR || echo "gather bench failed or timed out"
        # Only while the run keeps to time (about 40 s in on an H200), so that steps which all run
        # into their timeouts still end within 8 minutes.
        if [ "$SECONDS" -le 300 ]; then
            echo "== the same INT8 gather and bags with rows aligned to 16 bytes (issue 32: sixteen codes a load; compare with the int8 line above)"
            timeout 40 "$gpu/bin/edo" bench gather --formats int8 --iters 5 --row-alignment 16 2>&1 | grep -E "^(int8|GPU rows)" || echo "aligned gather bench failed or timed out"
        else
            echo "== the aligned INT8 gather: skipped ($SECONDS s in)"
        fi
        echo "== edo bench search (issue 4: GPU ≥ 10 × faiss on 2 CPU threads)"
        timeout 65 "$gpu/bin/edo" bench search --json >"$out/search.json" 2>/tmp/gpu-check-search.log || echo "search bench failed: $(tail -3 /tmp/gpu-check-search.log)"
        if [ -f "$gpu/faiss.json" ] && [ -s "$out/search.json" ] && command -v python3 >/dev/null; then
            python3 - "$gpu/faiss.json" "$out/search.json" <<'PY'
import json, sys
f, e = (json.load(open(p)) for p in sys.argv[1:3])
print(f"faiss (2 threads, measured at prepare): {1e3 * f['seconds']:.2f} ms")
print(f"edo CPU ({e['threads']} threads): {1e3 * e['cpu_seconds']:.2f} ms")
if e.get("gpu_seconds"):
    print(f"edo GPU ({e['adapter']}): {1e3 * e['gpu_seconds']:.2f} ms = {f['seconds'] / e['gpu_seconds']:.1f} × faiss; "
          f"scan {e['gpu_scan_gbps']:.0f} GB/s = {100 * e['gpu_scan_ratio_to_copy']:.0f} % of the device copy; equals the CPU path: {e['gpu_equals_cpu']}")
PY
        fi || echo "the search comparison failed"
        echo "== recsys (issue 3: GPU INT8 ≥ 2 × FP32 lookups/s)"
        timeout 45 "$gpu/bin/recsys" 2>&1 | grep -v XDG_RUNTIME_DIR || echo "recsys failed or timed out"
        echo "== edo bench live (issue 65: a live table's keys found on the host or by the probe kernel, 1 / 1 000 / 100 000 keys)"
        timeout 60 "$gpu/bin/edo" bench live --seconds 0.5 2>&1 | grep -v XDG_RUNTIME_DIR | sed -n '/^GPU:/,$p' || echo "live bench failed or timed out"
        # The GPU tests in what is left of 470 s (about a minute on an H200), their summary and
        # any failure's message in this summary.
        left=$((470 - SECONDS))
        if [ -x "$gpu/bin/gpu-tests" ] && [ "$left" -ge 60 ]; then
            echo "== the GPU tests (tests/gpu against the CPU oracle, wgpu's high-performance adapter; $left s at most)"
            checkout=$(cat "$gpu/checkout" 2>/dev/null || true)
            if [ -n "$checkout" ] && [ ! -e "$checkout" ]; then
                { mkdir -p "$(dirname "$checkout")" && ln -sfn "$root" "$checkout"; } ||
                    echo "could not link $checkout to $root: the tests that read tests/data will fail"
            fi
            EDO_REQUIRE_GPU=1 timeout "$left" "$gpu/bin/gpu-tests" --test-threads 8 >/tmp/gpu-check-tests.txt 2>&1 ||
                echo "the GPU tests failed or timed out (exit $?)"
            grep -E "^test result|FAILED|panicked|SKIPPED" /tmp/gpu-check-tests.txt | head -20 || true
            sed -n '/^failures:$/,/^failures:$/p' /tmp/gpu-check-tests.txt | head -60 || true
        else
            echo "== the GPU tests: skipped (no $gpu/bin/gpu-tests, or $left s left)"
        fi
        echo "== done in $SECONDS s"
    } 2>&1 | tee -a "$log"
    exit "${PIPESTATUS[0]}"
    ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
