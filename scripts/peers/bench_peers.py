#!/usr/bin/env python3
"""The peers of `edo bench suite`, on the same shapes, written in the same results schema
(docs/bench-schema.md), so that `edo bench compare` draws them beside edo's backends:

- gather: numpy's `take` of f32 rows (fp32), and `q[ids] * s + b` of row-wise INT8 rows (int8);
- search: faiss `IndexBinaryFlat` over the same number of sign-bit codes, top 4 × 10 candidates
  rescored against INT8 rows in numpy (edo's search with rescoring);
- embed (with --model): model2vec's `StaticModel.encode` of the same sentences as edo's suite.

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install numpy faiss-cpu model2vec==0.10.0
    /tmp/peers/bin/python scripts/peers/bench_peers.py --quick -o peers.json [--model tests/data/models/wordpiece]
    edo bench compare edo-bench.json peers.json --html compare.html

Each peer is a backend of kind "peer" with its own reference copy (numpy's copyto of 64 MiB on one
thread), so its ratios mean what edo's CPU path's mean. numpy runs one thread; faiss runs on one
thread and on all.
"""
import argparse
import json
import os
import platform
import time

import numpy as np

SCHEMA, SCHEMA_VERSION, SUITE_VERSION = "edo-bench", 1, 1
# edo_bench::suite::sizes (suite version 1).
SIZES = {
    "tiny": [("small", 1000, 24, 1000), ("medium", 5003, 40, 3001), ("large", 20011, 32, 4099)],
    "quick": [("small", 16384, 64, 16384), ("medium", 262144, 128, 65536)],
    "full": [("small", 16384, 64, 16384), ("medium", 262144, 128, 65536), ("large", 2097152, 128, 65536)],
    "server": [("small", 16384, 64, 16384), ("medium", 262144, 128, 1048576), ("large", 2097152, 128, 1048576)],
}
# edo_bench::suite's embed sentences, cycled.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Embedding tables map tokens to vectors.",
    "How do I reset my password?",
    "GPU kernels decode compressed rows on the fly.",
    "A cup of coffee in the morning helps me think.",
    "The train to Berlin leaves at nine.",
    "Quantisation trades a little accuracy for a lot of memory.",
    "Where is the nearest pharmacy?",
    "Static models pool token vectors into sentence vectors.",
    "The cat sat on the warm windowsill.",
    "Search results are ranked by cosine similarity.",
    "Please send the invoice by Friday.",
    "Browsers run WebGPU compute shaders.",
    "Rain is expected over the weekend.",
    "The museum opens its new wing next spring.",
    "Recommender systems look up millions of ids per second.",
]


def timed(reps, f):
    t = time.perf_counter()
    f()
    first = time.perf_counter() - t
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return first, sorted(times)


def copy_gbps(nbytes, reps):
    src = np.arange(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    _, times = timed(reps, lambda: np.copyto(dst, src))
    return 2 * nbytes / max(times[len(times) // 2], 1e-9) / 1e9


def machine():
    cpu, mem = None, None
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        mem = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal:"))) * 1024
    except (OSError, StopIteration):
        pass
    return {"os": f"{platform.system().lower()} {platform.machine()}", "cpu": cpu, "cores": os.cpu_count() or 1, "memory_bytes": mem, "user_agent": None}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the quick matrix (small and medium)")
    p.add_argument("--scale", choices=["full", "server", "quick", "tiny"], help="the matrix (default full, or quick with --quick)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--model", help="a model2vec model folder for the embed cases")
    p.add_argument("--label", default="peers")
    p.add_argument("-o", "--output", default="peers.json")
    a = p.parse_args()
    scale = a.scale or ("quick" if a.quick else "full")
    start, created = time.perf_counter(), int(time.time())
    copy_bytes = (1 << 20) if scale == "tiny" else (64 << 20)
    ref = copy_gbps(copy_bytes, a.reps)
    versions = [f"numpy {np.__version__}"]
    backends = [{"id": "numpy1", "kind": "peer", "name": f"numpy {np.__version__} (1 thread)", "api": None, "device_type": None, "driver": None,
                 "threads": 1, "limits": None, "copy_gbps": ref, "copy_bytes": copy_bytes}]
    try:
        import faiss
        versions.append(f"faiss {faiss.__version__}")
        for t in sorted({1, os.cpu_count() or 1}):
            backends.append({"id": f"faiss{t}", "kind": "peer", "name": f"faiss {faiss.__version__} ({t} thread{'s' if t > 1 else ''})", "api": None,
                             "device_type": None, "driver": None, "threads": t, "limits": None, "copy_gbps": ref, "copy_bytes": copy_bytes})
    except ImportError:
        faiss = None
        print("faiss is not installed (pip install faiss-cpu): no search cases")
    cases = []

    def case(op, fmt, size, rows, dim, items, unit, backend, first, times, moved, table_bytes, note=None, timing="host"):
        med = max(times[len(times) // 2], 1e-9)
        gbps = moved / med / 1e9
        be = next(b for b in backends if b["id"] == backend)
        cases.append({"op": op, "format": fmt, "size": size, "rows": rows, "dim": dim, "items": items, "unit": unit, "batch": items,
                      "backend": backend, "timing": timing, "reps": len(times), "median_s": med, "min_s": times[0], "max_s": times[-1],
                      "first_call_s": first, "items_per_s": items / med, "moved_bytes": int(moved), "gbps": gbps,
                      "ratio_to_copy": gbps / be["copy_gbps"], "table_bytes": int(table_bytes), "shards": None, "note": note})

    rng = np.random.default_rng(0xED0)
    for size, rows, dim, n in SIZES[scale]:
        print(f"{size}: {rows} x {dim}")
        data = rng.standard_normal((rows, dim), dtype=np.float32)
        ids = rng.integers(0, rows, n, dtype=np.int64)
        # fp32: numpy take.
        out = np.empty((n, dim), np.float32)
        first, times = timed(a.reps, lambda: np.take(data, ids, axis=0, out=out))
        case("gather", "fp32", size, rows, dim, n, "ids", "numpy1", first, times, n * (dim * 4 + 4) + n * dim * 4, data.nbytes)
        # int8, row-wise scale and bias as edo's INT8: q[ids] * s + b.
        lo, hi = data.min(axis=1), data.max(axis=1)
        s = np.maximum((hi - lo) / 255.0, 1e-12).astype(np.float32)
        q = np.clip(np.round((data - lo[:, None]) / s[:, None]), 0, 255).astype(np.uint8)
        b = lo.astype(np.float32)
        row_bytes = -(-(dim + 8) // 4) * 4

        def int8_gather():
            np.multiply(q[ids], s[ids, None], out=out)
            np.add(out, b[ids, None], out=out)

        first, times = timed(a.reps, int8_gather)
        case("gather", "int8", size, rows, dim, n, "ids", "numpy1", first, times, n * (row_bytes + 4) + n * dim * 4, rows * row_bytes)
        if size == "small":
            for m in (1, 64, 1024, max(n, 2048)):
                lid = rng.integers(0, rows, m, dtype=np.int64)
                first, times = timed(a.reps, lambda: q[lid] * s[lid, None] + b[lid, None])
                case("latency", "int8", size, rows, dim, m, "ids", "numpy1", first, times, m * (row_bytes + 4 + dim * 4), rows * row_bytes)
        if faiss is not None and dim % 8 == 0:
            codes = np.packbits(data > 0, axis=1, bitorder="little")
            nq = 8 if rows < 10000 else 32
            queries = data[(np.arange(nq) * 997) % rows] + 0.3 * rng.standard_normal((nq, dim), dtype=np.float32)
            qcodes = np.packbits(queries > 0, axis=1, bitorder="little")
            index = faiss.IndexBinaryFlat(dim)
            index.add(codes)

            def search():
                _, cand = index.search(qcodes, 40)
                rows_ = q[cand].astype(np.float32) * s[cand][..., None] + b[cand][..., None]
                scores = np.einsum("qkd,qd->qk", rows_, queries)
                top = np.argsort(-scores, axis=1)[:, :10]
                return np.take_along_axis(cand, top, axis=1)

            for be in [b_ for b_ in backends if b_["id"].startswith("faiss")]:
                faiss.omp_set_num_threads(be["threads"])
                first, times = timed(a.reps, search)
                case("search", "binary+int8", size, rows, dim, nq, "queries", be["id"], first, times, codes.nbytes * nq, codes.nbytes + rows * row_bytes,
                     note="top-10, 4× candidates rescored")
        del data, q
    if a.model:
        from model2vec import StaticModel
        import model2vec
        versions.append(f"model2vec {model2vec.__version__}")
        backends.append({"id": "model2vec1", "kind": "peer", "name": f"model2vec {model2vec.__version__} (1 thread)", "api": None, "device_type": None,
                         "driver": None, "threads": 1, "limits": None, "copy_gbps": ref, "copy_bytes": copy_bytes})
        model = StaticModel.from_pretrained(a.model)
        texts = (TEXTS * 64)[:1024]
        dim = model.dim
        for m in (1, 32, 1024):
            batch = texts[:m]
            first, times = timed(a.reps, lambda: model.encode(batch))
            case("embed", "fp32", "model", model.embedding.shape[0], dim, m, "texts", "model2vec1", first, times, m * dim * 4, model.embedding.nbytes)
    results = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "suite_version": SUITE_VERSION, "scale": scale,
               "tool": f"bench_peers.py ({', '.join(versions)})", "label": a.label, "created_unix": created,
               "seconds": time.perf_counter() - start, "machine": machine(), "backends": backends, "cases": cases, "skipped": []}
    with open(a.output, "w") as f:
        json.dump(results, f, indent=1)
    print(f"{len(cases)} cases: {a.output}")


if __name__ == "__main__":
    main()
