#!/usr/bin/env python3
"""model2vec's Python package beside edo on the same model and the same texts.

    python3 -m venv /tmp/m2v && /tmp/m2v/bin/pip install model2vec==0.10.0
    /tmp/m2v/bin/python scripts/model2vec_peer.py --model tests/data/models/wordpiece --edo target/release/edo

Runs `edo embed-bench --cpu --json` (which also writes its 1024 texts), then times model2vec's
`StaticModel.encode` on the same batches (1, 32 and 1024 texts, as edo chunks them; one thread,
as model2vec encodes batches under 10 000 texts), and prints texts per second and the ratio.
"""
import argparse
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
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = os.path.join(tmp, "texts.txt")
        out = subprocess.run([a.edo, "embed-bench", a.model, "--cpu", "--json", "--formats", "fp32", "--iters", str(a.iters), "--texts-out", texts_path], check=True, capture_output=True, text=True)
        edo = json.loads(out.stdout)
        texts = open(texts_path, encoding="utf-8").read().split("\n")[:1024]
    model = StaticModel.from_pretrained(a.model)
    print(f"model2vec {model.dim} dims, 1024 texts; edo on {edo['threads']} threads")
    print(f"{'batch':>6} {'model2vec texts/s':>18} {'edo texts/s':>12} {'edo / model2vec':>16}")
    for run in edo["runs"]:
        batch = run["batch"]
        chunks = [texts[i : i + batch] for i in range(0, 1024, batch)][: max(1, min(64, 1024 // batch))]
        n = sum(len(c) for c in chunks)
        for c in chunks:
            model.encode(c)
        times = []
        for _ in range(a.iters):
            t = time.perf_counter()
            for c in chunks:
                model.encode(c)
            times.append(time.perf_counter() - t)
        py = n / float(np.median(times))
        print(f"{batch:>6} {py:>18.0f} {run['cpu_texts_per_second']:>12.0f} {run['cpu_texts_per_second'] / py:>15.1f}×")


if __name__ == "__main__":
    main()
