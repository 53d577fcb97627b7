#!/usr/bin/env python3
"""model2vec's Python package, and optionally model2vec-rs, beside edo on the same model and the
same texts.

    python3 -m venv /tmp/m2v && /tmp/m2v/bin/pip install model2vec==0.10.0
    /tmp/m2v/bin/python scripts/peers/model2vec_peer.py --model tests/data/models/wordpiece --edo target/release/edo \
        [--model2vec-rs] [--rounds 5]

Runs `edo bench embed --cpu --json` (which also writes its 1024 texts), then times model2vec's
`StaticModel.encode` on the same batches (1, 32 and 1024 texts, as edo chunks them; one thread,
as model2vec encodes batches under 10 000 texts), and with `--model2vec-rs` builds and runs
scripts/peers/model2vec-rs-peer (model2vec-rs 0.4.0, its rayon pool on all cores, as edo uses all
cores): `--pairs` pairs of processes a round, one timing model2vec-rs and one edo through the same
harness, the order alternating; the edo / model2vec-rs column is the ratio of the medians of all
those processes (a process's threads can land well or badly for its whole life, so each library
gets many). The machine is shared and noisy, so edo and its peers run in alternation for
`--rounds` rounds, and the Python ratio is the median of the rounds' ratios (each round's edo
figure against the peer figure of the same round).
"""
import argparse
import collections
import json
import os
import subprocess
import tempfile
import time

import numpy as np
from model2vec import StaticModel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--edo", required=True)
    p.add_argument("--iters", type=int, default=7)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model2vec-rs", action="store_true", help="build and run scripts/peers/model2vec-rs-peer too")
    p.add_argument("--pairs", type=int, default=3, help="model2vec-rs-peer process pairs a round")
    a = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    peer_rs = None
    if a.model2vec_rs:
        target = os.path.join(root, "target", "model2vec-rs-peer")
        subprocess.run(["cargo", "build", "--quiet", "--release", "--manifest-path", os.path.join(root, "scripts", "peers", "model2vec-rs-peer", "Cargo.toml"),
                        "--target-dir", target], check=True)
        peer_rs = os.path.join(target, "release", "model2vec-rs-peer")
    model = StaticModel.from_pretrained(a.model)
    rounds = []
    peer = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = os.path.join(tmp, "texts.txt")
        for _ in range(a.rounds):
            out = subprocess.run([a.edo, "bench", "embed", a.model, "--cpu", "--json", "--formats", "fp32", "--iters", str(a.iters), "--texts-out", texts_path],
                                 check=True, capture_output=True, text=True)
            edo = json.loads(out.stdout)
            texts = open(texts_path, encoding="utf-8").read().split("\n")[:1024]
            figures = {run["batch"]: {"edo": run["cpu_texts_per_second"], "python": python_texts_per_second(model, texts, run["batch"], a.iters)}
                       for run in edo["runs"]}
            if peer_rs:
                for pair in range(a.pairs):
                    order = ["model2vec-rs", "edo"] if (len(rounds) * a.pairs + pair) % 2 == 0 else ["edo", "model2vec-rs"]
                    for which in order:
                        out = subprocess.run([peer_rs, a.model, texts_path, str(a.iters), which], check=True, capture_output=True, text=True)
                        for line in out.stdout.split("\n"):
                            if line.strip():
                                batch, tps = line.split()
                                peer[(which, int(batch))].append(float(tps))
            rounds.append(figures)
    print(f"model2vec {model.dim} dims, 1024 texts; edo on {edo['threads']} threads; median of {a.rounds} alternating rounds")
    head = f"{'batch':>6} {'edo texts/s':>12} {'model2vec (Python)':>19} {'edo / Python':>13}"
    if peer_rs:
        head += f" {'model2vec-rs':>13} {'edo / model2vec-rs':>19}"
    print(head)
    med = lambda xs: float(np.median(xs))
    for batch in sorted(rounds[0]):
        r = [f[batch] for f in rounds]
        line = f"{batch:>6} {med([x['edo'] for x in r]):>12.0f} {med([x['python'] for x in r]):>19.0f} {med([x['edo'] / x['python'] for x in r]):>12.1f}×"
        if peer_rs:
            rs, edo_in_peer = med(peer[("model2vec-rs", batch)]), med(peer[("edo", batch)])
            line += f" {rs:>13.0f} {edo_in_peer / rs:>18.2f}×"
        print(line)


def python_texts_per_second(model, texts, batch, iters):
    chunks = [texts[i : i + batch] for i in range(0, 1024, batch)][: max(1, min(64, 1024 // batch))]
    n = sum(len(c) for c in chunks)
    for c in chunks:
        model.encode(c)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        for c in chunks:
            model.encode(c)
        times.append(time.perf_counter() - t)
    return n / float(np.median(times))


if __name__ == "__main__":
    main()
