#!/usr/bin/env python3
"""EmbeddingBag on the CPU against FBGEMM's, as PyTorch ships it
(`torch.ops.quantized.embedding_bag_byte_rowwise_offsets` / `embedding_bag_4bit_rowwise_offsets`).

For each table (262 144 × 128: its INT8 rows, 34 MB, about fit this machine's caches; and
2 097 152 × 128, 272 MB, far out of them), format (INT8 and INT4 row-wise: FBGEMM's fused rows,
which edo reads as they are with `--layout fbgemm8` / `fbgemm4`), bag size (1, 4, 16, 64 and ragged:
1 to 31 ids, 16 on average), pooling (sum, mean — FBGEMM's quantized ops pool sums only, so its
mean is the sum divided in torch —, weighted sum) and thread count (1 and all), the
same 65 536 ids are pooled by FBGEMM (in this process) and by edo (`edo bench bags`, the CPU path,
on the same .npy files), alternately for a few rounds; each side's figure is the median of its
rounds' medians, and edo's output is checked against FBGEMM's. Prints a Markdown table of millions
of ids per second and edo / FBGEMM, and writes target/fbgemm-peer.json.

    ./scripts/peers/fbgemm_peer.sh [--quick]     # makes the pinned virtual environment, builds edo, runs this

A benchmark, not a test: torch is large (its PyPI wheel with the CUDA libraries it names), and
timings on a shared machine move between runs — compare ratios from one run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bag_offsets(n_ids, bag, rng):
    """Bag starts and the end for `n_ids` ids in bags of `bag` ids (or ragged: 1 to 31)."""
    if bag == "ragged":
        sizes = []
        total = 0
        while total < n_ids:
            s = int(rng.integers(1, 32))
            s = min(s, n_ids - total)
            sizes.append(s)
            total += s
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return np.arange(0, n_ids + 1, bag, dtype=np.int64)


def fbgemm_time(op, packed, indices, offsets, mean, weights, iters):
    """FBGEMM's bags: (median seconds of `iters` calls after one untimed, the output). The
    quantized ops pool sums only (their `mode` is not read: mode=1 gives the sum too), so a mean
    is their sum divided by the bags' lengths in torch, as a PyTorch user computes it."""
    kwargs = dict(offsets=offsets, per_sample_weights=weights, include_last_offset=True)
    lengths = (offsets[1:] - offsets[:-1]).clamp(min=1).to(torch.float32).unsqueeze(1)

    def call():
        out = op(packed, indices, **kwargs)
        return out / lengths if mean else out

    out = call()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edo", default=os.path.join(ROOT, "target", "release", "edo"))
    ap.add_argument("--quick", action="store_true", help="bags of 16, sum, both tables, formats and thread counts")
    ap.add_argument("--ids", type=int, default=65536, help="ids per call")
    ap.add_argument("--iters", type=int, default=10, help="timed calls per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    ap.add_argument("--sizes", default="262144,2097152", help="table rows, comma separated")
    args = ap.parse_args()

    dim = 128
    all_threads = os.cpu_count() or 1
    thread_counts = sorted({1, all_threads})
    bag_sizes = [16] if args.quick else [1, 4, 16, 64, "ragged"]
    poolings = ["sum"] if args.quick else ["sum", "mean", "weighted"]
    ops = {
        "int8": ("fbgemm8", torch.ops.quantized.embedding_bag_byte_prepack, torch.ops.quantized.embedding_bag_byte_rowwise_offsets),
        "int4": ("fbgemm4", torch.ops.quantized.embedding_bag_4bit_prepack, torch.ops.quantized.embedding_bag_4bit_rowwise_offsets),
    }
    rng = np.random.default_rng(0)
    results = []
    scratch = tempfile.TemporaryDirectory(prefix="edo-fbgemm-")  # the .npy files, removed at exit
    work = scratch.name
    print(f"torch {torch.__version__}, {all_threads} threads; edo: {args.edo}", file=sys.stderr)
    print("| table | format | bag | pooling | threads | FBGEMM, M ids/s | edo, M ids/s | edo / FBGEMM | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rows in (int(r) for r in args.sizes.split(",")):
        weight = torch.from_numpy(rng.standard_normal((rows, dim), dtype=np.float32))
        for fmt, (layout, prepack, op) in ops.items():
            packed = prepack(weight)
            table = os.path.join(work, f"{fmt}.npy")
            np.save(table, packed.numpy())
            for bag in bag_sizes:
                indices = rng.integers(0, rows, size=args.ids, dtype=np.int64)
                offsets = bag_offsets(args.ids, bag, rng)
                np.save(os.path.join(work, "indices.npy"), indices)
                np.save(os.path.join(work, "offsets.npy"), offsets)
                weights = rng.random(args.ids, dtype=np.float32)
                np.save(os.path.join(work, "weights.npy"), weights)
                for pooling in poolings:
                    w = torch.from_numpy(weights) if pooling == "weighted" else None
                    for threads in thread_counts:
                        torch.set_num_threads(threads)
                        fb, edo = [], []
                        diff = None
                        for _ in range(args.rounds):
                            seconds, out = fbgemm_time(op, packed, torch.from_numpy(indices), torch.from_numpy(offsets), pooling == "mean", w, args.iters)
                            fb.append(seconds)
                            expect = os.path.join(work, "expect.npy")
                            np.save(expect, out.numpy().astype(np.float32))
                            cmd = [
                                args.edo, "bench", "bags", table, "--layout", layout, "--dim", str(dim),
                                "--indices", os.path.join(work, "indices.npy"), "--offsets", os.path.join(work, "offsets.npy"),
                                "--pooling", "mean" if pooling == "mean" else "sum", "--threads", str(threads),
                                "--iters", str(args.iters), "--expect", expect,
                            ]
                            if pooling == "weighted":
                                cmd += ["--weights", os.path.join(work, "weights.npy")]
                            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                            edo.append(r["median_s"])
                            diff = r["max_abs_diff"]
                        fb_s, edo_s = float(np.median(fb)), float(np.median(edo))
                        case = dict(rows=rows, dim=dim, format=fmt, bag=bag, pooling=pooling, threads=threads, ids=args.ids,
                                    fbgemm_s=fb_s, edo_s=edo_s, ratio=fb_s / edo_s, max_abs_diff=diff, simd=r["simd"])
                        results.append(case)
                        print(f"| {rows} × {dim} | {fmt} | {bag} | {pooling} | {threads} | {args.ids / fb_s / 1e6:.0f} | "
                              f"{args.ids / edo_s / 1e6:.0f} | {fb_s / edo_s:.2f} | {diff:.1e} |", flush=True)
                        # FBGEMM and edo pool the same decoded rows; they may round the sum
                        # differently (FBGEMM fuses scale·q + bias), not more.
                        if diff is None or diff > 1e-3 * max(1.0, float(np.abs(out.numpy()).max())):
                            sys.exit(f"edo's bags differ from FBGEMM's by {diff}: {case}")
    os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)
    meta = dict(torch=torch.__version__, threads=all_threads, cpu=open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "))
    json.dump(dict(meta=meta, cases=results), open(os.path.join(ROOT, "target", "fbgemm-peer.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
