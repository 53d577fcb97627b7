#!/usr/bin/env python3
"""The peer of `edo bench search`: faiss IndexBinaryFlat on the same binary codes.

Makes random packbits codes (1M x 256 bits and 100 queries by default) with numpy, runs faiss
IndexBinaryFlat (exact Hamming k-NN) with the same thread count as edo's CPU path, then runs
`edo bench search --codes ... --query-codes ... --json` on the same files, checks that edo's
distances equal faiss's rank by rank (ids may differ only among equal distances: the two break
ties differently, edo by lower row), and prints the ratios.

    pip install numpy faiss-cpu
    python3 scripts/peers/faiss_peer.py [--rows 1000000] [--bits 256] [--queries 100] [--k 10]

Hamming distances do not depend on the order of the bits within a byte, so faiss reads edo's
packbits bytes as they are.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import faiss
except ImportError:
    sys.exit("faiss is not installed: pip install faiss-cpu")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--bits", type=int, default=256)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--edo", default=None, help="the edo binary (default: cargo run --release)")
    a = p.parse_args()
    if a.bits % 8:
        sys.exit("faiss IndexBinaryFlat needs bits divisible by 8")

    rng = np.random.default_rng(0)
    corpus = rng.integers(0, 256, size=(a.rows, a.bits // 8), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(a.queries, a.bits // 8), dtype=np.uint8)

    threads = os.cpu_count() or 1
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexBinaryFlat(a.bits)
    index.add(corpus)
    index.search(queries, a.k)  # warm-up
    times = []
    for _ in range(a.iters):
        t = time.perf_counter()
        fd, fi = index.search(queries, a.k)
        times.append(time.perf_counter() - t)
    faiss_s = sorted(times)[len(times) // 2]

    with tempfile.TemporaryDirectory() as d:
        cpath, qpath = os.path.join(d, "corpus.npy"), os.path.join(d, "queries.npy")
        np.save(cpath, corpus)
        np.save(qpath, queries)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cmd = [a.edo] if a.edo else ["cargo", "run", "--release", "--quiet", "--manifest-path", os.path.join(root, "Cargo.toml"), "--"]
        cmd += ["bench", "search", "--codes", cpath, "--query-codes", qpath, "--k", str(a.k), "--iters", str(a.iters), "--json"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        edo = json.loads(out.stdout)

    ed = np.array(edo["distances"], dtype=np.int64).reshape(a.queries, -1)
    ei = np.array(edo["ids"], dtype=np.int64).reshape(a.queries, -1)
    same_distances = bool(np.array_equal(ed, fd.astype(np.int64)))
    same_ids = bool(np.array_equal(ei, fi.astype(np.int64)))
    print(f"faiss {faiss.__version__} IndexBinaryFlat, {threads} threads: {a.queries} queries x {a.rows} codes of {a.bits} bits, k = {a.k}")
    print(f"  faiss      {1e3 * faiss_s:9.2f} ms  {a.queries / faiss_s:9.1f} queries/s")
    print(f"  edo CPU    {1e3 * edo['cpu_seconds']:9.2f} ms  {edo['cpu_queries_per_second']:9.1f} queries/s  "
          f"= {faiss_s / edo['cpu_seconds']:.2f} x faiss")
    if edo.get("gpu_seconds"):
        print(f"  edo GPU    {1e3 * edo['gpu_seconds']:9.2f} ms  {edo['gpu_queries_per_second']:9.1f} queries/s  "
              f"= {faiss_s / edo['gpu_seconds']:.2f} x faiss   ({edo['adapter']})")
    print(f"  distances equal faiss's, rank by rank: {'yes' if same_distances else 'NO'}; "
          f"ids equal: {'yes' if same_ids else 'no (ties ordered differently)'}")
    if not same_distances:
        sys.exit(1)


if __name__ == "__main__":
    main()
