#!/usr/bin/env python3
"""Recall@10 of binary codes made by the reference implementations, on a real table, with the same
protocol as `edo eval`: the table's last --queries rows are the queries, rows and queries are
normalised (cosine), the truth is exact FP32 dot-product search, and a method's Hamming top
100 x multiplier candidates are rescored by their dot product with the query (edo eval searches
for the top 100 and reads recall@10 off its first 10).

Codes: sentence-transformers' `quantize_embeddings(..., "ubinary")` (plain signs), the same after
subtracting the corpus mean (centred), and faiss's `ITQTransform` (centre, normalise, PCA, ITQ
rotation) followed by the signs. Hamming search is faiss `IndexBinaryFlat`. Rescoring uses the
FP32 rows here (edo eval rescores with INT8 rows; the two differ by a few thousandths).

Needs numpy 1.26.4, faiss-cpu 1.9.0 and safetensors 0.4.5 from PyPI; sentence-transformers 3.3.1's
quantization.py is read from its wheel (`pip download sentence-transformers==3.3.1 --no-deps`), with
torch stubbed (the ubinary path is numpy only).

    python3 scripts/peers/binary_codes_recall.py l2_supercat_256.safetensors embedding.weight \
        --st-wheel sentence_transformers-3.3.1-py3-none-any.whl
"""
import argparse
import sys
import time
import types
import zipfile

import faiss
import numpy as np
from safetensors.numpy import load_file


def load_quantize_embeddings(wheel):
    torch = types.ModuleType("torch")

    class Tensor:  # never an input here
        pass

    torch.Tensor = Tensor
    sys.modules.setdefault("torch", torch)
    source = zipfile.ZipFile(wheel).read("sentence_transformers/quantization.py").decode()
    module = types.ModuleType("st_quantization")
    exec(compile(source, "sentence_transformers/quantization.py", "exec"), module.__dict__)
    return module.quantize_embeddings


def topk(scores, k):
    # Highest score first, ties to the lower row (as edo's CPU path).
    idx = np.argsort(-scores, axis=1, kind="stable")
    return idx[:, :k]


def recall(found, truth, k):
    return np.mean([len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("safetensors")
    p.add_argument("tensor")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--st-wheel", required=True)
    a = p.parse_args()
    quantize_embeddings = load_quantize_embeddings(a.st_wheel)

    x = load_file(a.safetensors)[a.tensor].astype(np.float32)
    corpus, queries = x[: -a.queries].copy(), x[-a.queries :].copy()
    corpus /= np.maximum(np.linalg.norm(corpus, axis=1, keepdims=True), 1e-30)
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-30)
    n, dim = corpus.shape
    truth = topk(queries @ corpus.T, 10)

    def evaluate(name, encode, train_s):
        codes, qcodes = encode(corpus), encode(queries)
        index = faiss.IndexBinaryFlat(dim)
        index.add(codes)
        row = [name, f"{train_s:.2f}"]
        _, raw = index.search(qcodes, 10)
        row.append(f"{recall(raw, truth, 10):.3f}")
        for m in (4, 10):
            _, cand = index.search(qcodes, 100 * m)
            found = []
            for q, c in zip(queries, cand):
                s = corpus[c] @ q
                order = sorted(range(len(c)), key=lambda i: (-s[i], c[i]))
                found.append([c[i] for i in order[:10]])
            row.append(f"{recall(found, truth, 10):.3f}")
        print("| " + " | ".join(row) + " |")

    print(f"{n} x {dim} corpus, {a.queries} queries; recall@10 against exact FP32 search")
    print("| codes | train s | raw | rescored x4 | rescored x10 |")
    print("|---|---|---|---|---|")
    evaluate("sentence-transformers 3.3.1 ubinary (signs)", lambda v: quantize_embeddings(v, "ubinary"), 0.0)
    mean = corpus.mean(axis=0)
    evaluate("signs of centred rows", lambda v: quantize_embeddings(v - mean, "ubinary"), 0.0)
    for do_pca in (True, False):
        t = time.perf_counter()
        itq = faiss.ITQTransform(dim, dim, do_pca)
        itq.train(corpus)
        train_s = time.perf_counter() - t
        evaluate(f"faiss {faiss.__version__} ITQTransform (do_pca={do_pca})", lambda v: quantize_embeddings(itq.apply(v), "ubinary"), train_s)


if __name__ == "__main__":
    main()
