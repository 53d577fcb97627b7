#!/usr/bin/env python3
"""ggml block formats quantised by the `gguf` package itself, in one small GGUF file.

Writes tests/data/ggml/blocks.gguf with the tensors:
  input            F32  [rows, 96]  hard values (ties, constant and zero blocks, signed extremes,
                                    magnitudes from 1e-30 to 6e4, equal-magnitude opposite signs)
  q8_0 q4_0 q4_1 q5_0 q5_1          `gguf.quants.quantize(input, type)`: the bytes edo must equal
  <type>.dequantized F32            `gguf.quants.dequantize` of those bytes: the values edo must equal
  f16 bf16                          the input as F16 and as BF16 (`quants.quantize`)
  q4_k q6_k     [8, 512]            k-quant super-blocks with random codes and sub-block scales and
                                    hard fp16 scales (subnormal, negative, ±65504, zero); the
                                    `gguf` package has no k-quant quantiser, only `dequantize`
  <k type>.dequantized F32          `quants.dequantize` of those bytes: the values edo must equal
Pinned: gguf 0.19.0, numpy 2.x:

    python3 -m venv /tmp/gg && /tmp/gg/bin/pip install gguf==0.19.0 numpy
    /tmp/gg/bin/python scripts/make_ggml_fixtures.py
"""
import os
from importlib.metadata import version

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

assert version("gguf") == "0.19.0", version("gguf")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "ggml", "blocks.gguf")
SEEDS = os.path.join(ROOT, "fuzz", "corpus", "gguf")
DIM = 96  # three blocks of 32
TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1}


def hard_rows(rng):
    rows = []
    for scale in [1e-30, 1e-6, 1e-3, 1.0, 37.0, 6e4 / 8]:
        rows.append(rng.standard_normal(DIM) * scale)
    rows.append(np.zeros(DIM))
    rows.append(np.full(DIM, 0.7))
    rows.append(np.full(DIM, -60000.0))
    one = np.zeros(DIM)
    one[[5, 40, 95]] = [1.0, -2.5, 3e-3]
    rows.append(one)
    # Equal magnitudes, opposite signs: the first of greatest magnitude sets q4_0's sign.
    rows.append(np.tile([3.0, -3.0, 1.0, -1.0], DIM // 4))
    rows.append(np.tile([-3.0, 3.0, 1.0, -1.0], DIM // 4))
    # Values on the rounding boundaries of each format's steps: k/2 of the step.
    rows.append(np.arange(DIM) % 64 / 2.0 - 16.0)
    rows.append((np.arange(DIM) % 32 - 16) * (127.0 / 254.0))
    rows.append(np.linspace(-8.5, 7.5, DIM))
    # Huge and tiny in one block, positives only, negatives only.
    mixed = rng.standard_normal(DIM) * 1e-4
    mixed[::32] = 5e4
    rows.append(mixed)
    rows.append(np.abs(rng.standard_normal(DIM)) + 10.0)
    rows.append(-np.abs(rng.standard_normal(DIM)) * 1e3)
    for _ in range(6):
        rows.append(rng.standard_normal(DIM) * rng.uniform(0.01, 10.0))
    return np.array(rows, dtype=np.float32)


def k_blocks(rng, t, block_bytes, rows=8, dim=512):
    """Random super-blocks of type `t`: random codes and 6- or 8-bit sub-block scales, and fp16
    scales (d, and dmin for Q4_K) from a list of hard values and random finite ones."""
    blocks = rng.integers(0, 256, size=(rows * dim // 256, block_bytes), dtype=np.uint8)
    hard = np.array([0.0, -0.0, 6e-8, -6e-8, 1e-5, 65504.0, -65504.0, 1.0, -1.0, 0.5], dtype=np.float16)
    for i, b in enumerate(blocks):
        for at in ([0, 2] if t == T.Q4_K else [208]):
            h = hard[(i + at) % len(hard)] if i % 3 == 0 else np.float16(rng.standard_normal() * 10.0 ** rng.uniform(-4, 2))
            b[at:at + 2] = np.frombuffer(np.float16(h).tobytes(), dtype=np.uint8)
    return blocks.reshape(rows, dim // 256 * block_bytes)


def main():
    rng = np.random.default_rng(2026)
    data = hard_rows(rng)
    w = gguf.GGUFWriter(OUT, arch="edo-fixture")
    w.add_string("edo.fixture", "ggml block formats, gguf 0.19.0 quants.quantize")
    w.add_tensor("input", data)
    for name, t in TYPES.items():
        q = quants.quantize(data, t)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
        w.add_tensor(name + ".dequantized", quants.dequantize(q, t).astype(np.float32))
    for name, t, block in [("q4_k", T.Q4_K, 144), ("q6_k", T.Q6_K, 210)]:
        q = k_blocks(rng, t, block)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
        w.add_tensor(name + ".dequantized", quants.dequantize(q, t).astype(np.float32))
    w.add_tensor("f16", data.astype(np.float16))
    bf = quants.quantize(data, T.BF16)
    w.add_tensor("bf16", bf, raw_shape=bf.shape, raw_dtype=T.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(OUT)
    print(OUT, os.path.getsize(OUT), "bytes,", len(r.tensors), "tensors")
    fuzz_seeds(data)


def fuzz_seeds(data):
    """Small GGUF files for the `gguf` fuzz target: each tensor type edo reads, 2 rows of 32, and
    key-values of every value type (arrays of numbers and of strings)."""
    os.makedirs(SEEDS, exist_ok=True)
    small = data[:2, :32]
    for name, t in [("f32", T.F32), ("f16", T.F16), ("bf16", T.BF16), *TYPES.items()]:
        path = os.path.join(SEEDS, name + ".gguf")
        w = gguf.GGUFWriter(path, arch="seed")
        w.add_uint8("k.u8", 7)
        w.add_int16("k.i16", -3)
        w.add_uint32("k.u32", 70000)
        w.add_int64("k.i64", -1 << 40)
        w.add_float32("k.f32", 0.5)
        w.add_float64("k.f64", 1e300)
        w.add_bool("k.bool", True)
        w.add_array("k.tokens", ["a", "bb", "ccc"])
        w.add_array("k.scores", [1.0, 2.0, 3.0])
        q = quants.quantize(small, t) if t not in (T.F32, T.F16) else small.astype(np.float32 if t == T.F32 else np.float16)
        if t in (T.F32, T.F16):
            w.add_tensor("token_embd.weight", q)
        else:
            w.add_tensor("token_embd.weight", q, raw_shape=q.shape, raw_dtype=t)
        w.add_tensor("norm", small[0].copy())
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    print(SEEDS, len(os.listdir(SEEDS)), "seeds")


if __name__ == "__main__":
    main()
