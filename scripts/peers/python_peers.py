#!/usr/bin/env python3
"""edo's Python package beside its peers in one Python process (scripts/peers/python_peers.sh sets up
the pinned environments and runs it; a benchmark that prints figures, not a test):

- encode: edo's StaticModel against model2vec's (0.10.0) on the same model folder and texts, in
  batches of 1, 32 and 1024 — and against the Rust library itself (`edo bench embed --cpu`'s
  figure, given with --edo): the binding's cost;
- the binding's round trip: a 1-id gather, and a 32-id one, from Python;
- binary search: edo's Hamming top-k (plain sign codes, no rescoring) against faiss's
  IndexBinaryFlat and usearch's exact binary search over the same bits;
- --bags (where torch is importable): edo's EmbeddingBag over FBGEMM's fused 8-bit rows against
  torch.ops.quantized.embedding_bag_byte_rowwise_offsets on the same bytes (sum, bags of 16).

Each case alternates the libraries for --rounds rounds and prints the median of the per-round
ratios (the machine is shared and noisy); every pair's outputs are compared first.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import edo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def best_seconds(f, reps):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def rounds_of(fs, rounds, reps):
    """Seconds of each of `fs` a round, alternating their order; returns per-f lists."""
    out = [[] for _ in fs]
    for r in range(rounds):
        order = list(range(len(fs))) if r % 2 == 0 else list(reversed(range(len(fs))))
        for i in order:
            out[i].append(best_seconds(fs[i], reps))
    return out


def ratio(a, b):
    """Median over rounds of b / a: how many times faster the first is."""
    return statistics.median(y / x for x, y in zip(a, b))


def texts_of(n):
    lines = []
    for name in ("README.md", "ARCHITECTURE.md", "docs/browser.md", "docs/models.md", "docs/lookups.md", "docs/search.md", "CHANGELOG.md"):
        for line in open(os.path.join(ROOT, name), encoding="utf-8"):
            line = line.strip()
            if len(line) > 8:
                lines.append(line[:200])
    return (lines * (n // len(lines) + 1))[:n]


def encode_case(a):
    from model2vec import StaticModel as M2V

    ours, theirs = edo.StaticModel.from_pretrained(a.model), M2V.from_pretrained(a.model)
    rust = {}
    if a.edo:
        # The Rust library's own figure, on the texts the Python encoders get too.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "texts.txt")
            out = subprocess.run([a.edo, "bench", "embed", a.model, "--cpu", "--json", "--formats", "fp32", "--texts-out", path], check=True, capture_output=True, text=True)
            texts = open(path, encoding="utf-8").read().split("\n")[:1024]
        rust = {r["batch"]: r["cpu_texts_per_second"] for r in json.loads(out.stdout)["runs"]}
        source = "`edo bench embed`'s 1024 texts"
    else:
        texts, source = texts_of(1024), "1024 lines of edo's docs"
    np.testing.assert_allclose(ours.encode(texts[:64]), theirs.encode(texts[:64]), atol=1e-6)
    print(f"encode: {a.model} ({ours.dim} dims), {source}; median of {a.rounds} rounds")
    print(f"{'batch':>6} {'edo (Python)':>13} {'model2vec':>10} {'edo / model2vec':>16} {'Rust':>10} {'Python / Rust':>14}")
    for batch in (1, 32, 1024):
        chunks = [texts[i : i + batch] for i in range(0, 1024, batch)][: max(1, min(64, 1024 // batch))]
        n = sum(len(c) for c in chunks)
        e, m = rounds_of([lambda: [ours.encode(c) for c in chunks], lambda: [theirs.encode(c) for c in chunks]], a.rounds, 5)
        tps = n / statistics.median(e)
        line = f"{batch:>6} {tps:>13.0f} {n / statistics.median(m):>10.0f} {ratio(e, m):>15.1f}×"
        if batch in rust:
            line += f" {rust[batch]:>10.0f} {tps / rust[batch]:>13.2f}×"
        print(line)


def overhead_case(a):
    t = edo.quantize(np.random.default_rng(0).standard_normal((100_000, 128), dtype=np.float32), "int8")
    one, many = np.array([5], np.uint32), np.arange(32, dtype=np.uint32)
    n = 100_000
    for name, ids in (("1 id", one), ("32 ids", many), ("1 id as a list", [5])):
        secs = min(best_seconds(lambda: [t.gather(ids) for _ in range(n)], 1) for _ in range(a.rounds))
        print(f"binding round trip, INT8 gather of {name}: {secs / n * 1e6:.2f} µs a call")


def search_case(a):
    import faiss
    from usearch.index import search as usearch_search

    rng = np.random.default_rng(1)
    rows, dim, nq, k = 100_000, 256, 1000, 10
    corpus = rng.standard_normal((rows, dim), dtype=np.float32)
    queries = corpus[rng.integers(0, rows, nq)] + 0.3 * rng.standard_normal((nq, dim), dtype=np.float32)
    codes = edo.binary_codes(corpus, transform=None)
    bits = np.packbits(corpus > 0, axis=1)
    qbits = np.packbits(queries > 0, axis=1)
    index = faiss.IndexBinaryFlat(dim)
    index.add(bits)
    ours_ids, _ = codes.search(queries, k)
    _, f_ids = index.search(qbits, k)
    # edo's order is the asymmetric score (the float query against the ±1 codes), faiss's the
    # Hamming distance: the share of faiss's top k edo also returns, a figure, not a check.
    overlap = np.mean([len(set(x) & set(y)) / k for x, y in zip(ours_ids, f_ids)])
    e, f, u = rounds_of(
        [lambda: codes.search(queries, k), lambda: index.search(qbits, k), lambda: usearch_search(bits, qbits, k, metric="hamming", exact=True)],
        a.rounds,
        3,
    )
    print(f"binary search, {rows} × {dim} bits, {nq} queries, top {k} (edo orders by the asymmetric score, the peers by Hamming distance):")
    print(f"  edo's top {k} holds {overlap:.0%} of faiss's")
    print(f"  edo {nq / statistics.median(e):.0f} queries/s; faiss IndexBinaryFlat {nq / statistics.median(f):.0f} (edo {ratio(e, f):.2f}×); usearch exact {nq / statistics.median(u):.0f} (edo {ratio(e, u):.2f}×)")


def bags_case(a):
    import torch

    rng = np.random.default_rng(2)
    print(f"bags (sum, 16 ids a bag, 65 536 ids a call), torch {torch.__version__}'s FBGEMM ops on {torch.get_num_threads()} threads:")
    for rows in (262_144, 2_097_152):
        weight = torch.from_numpy(rng.standard_normal((rows, 128), dtype=np.float32))
        packed = torch.ops.quantized.embedding_bag_byte_prepack(weight)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fused.npy")
            np.save(path, packed.numpy())
            table = edo.load(path, layout="fbgemm8")
        ids = rng.integers(0, rows, 65_536).astype(np.int64)
        offsets = np.arange(0, 65_536, 16, dtype=np.int64)
        ti, to = torch.from_numpy(ids), torch.from_numpy(offsets)
        theirs = lambda: torch.ops.quantized.embedding_bag_byte_rowwise_offsets(packed, ti, to, False, 0, False, None, None, False)  # noqa: E731
        ids32, offsets32 = ids.astype(np.uint32), offsets.astype(np.uint32)
        ours = lambda: table.bag(ids32, offsets32, mode="sum")  # noqa: E731
        np.testing.assert_allclose(ours(), theirs().numpy(), rtol=1e-4, atol=1e-3)
        e, f = rounds_of([ours, theirs], a.rounds, 5)
        print(f"  {rows} × 128 INT8: edo {65_536 / statistics.median(e) / 1e6:.0f} M ids/s, FBGEMM {65_536 / statistics.median(f) / 1e6:.0f} M ids/s: edo {ratio(e, f):.2f}×")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", help="a model2vec folder (scripts/peers/make_peer_model.py makes WordLlama's)")
    p.add_argument("--edo", help="the release `edo` command, for the Rust library's own encode figure")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bags", action="store_true", help="only the bags against FBGEMM (torch needed)")
    a = p.parse_args()
    print(f"edo {edo.__version__} (Python), numpy {np.__version__}")
    if a.bags:
        bags_case(a)
        return
    if a.model:
        encode_case(a)
    overhead_case(a)
    search_case(a)


if __name__ == "__main__":
    main()
