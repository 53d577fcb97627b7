#!/usr/bin/env python3
"""FP8 casts by ml_dtypes, the oracle of edo's fp8_e4m3 and fp8_e5m2 formats.

Writes tests/data/fp8/fp8.safetensors with the tensors:
  values          F32 [n]     hard values in FP8's own range: zeros of both signs, every
                              subnormal and the ties between them, ties between normals, ±max, just
                              past ±max, far beyond it, below half the smallest subnormal, random
  e4m3 e5m2       U8  [n]     ml_dtypes' casts (float8_e4m3fn, float8_e5m2) of the values clipped to
                              ±max (edo saturates; ml_dtypes would give NaN or inf)
  rows            F32 [r, d]  hard rows (tiny, huge, constant, zero, one outlier, random)
  <fmt>.scales    F32 [r]     per row: max|x| / max, rounded to 20 significant bits (1 for a zero row)
  <fmt>.codes     U8  [r, d]  the casts of clip(row / scale)
  <fmt>.decoded   F32 [r, d]  the codes as f32 (ml_dtypes) times the scale
Pinned: ml_dtypes 0.6.0, numpy 2.x:

    python3 -m venv /tmp/f8 && /tmp/f8/bin/pip install ml_dtypes==0.6.0 numpy
    /tmp/f8/bin/python scripts/make_fp8_fixtures.py
"""
import json
import os
import struct
from importlib.metadata import version

import ml_dtypes
import numpy as np

assert version("ml_dtypes") == "0.6.0", version("ml_dtypes")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fp8", "fp8.safetensors")
FORMATS = {"e4m3": (ml_dtypes.float8_e4m3fn, 448.0), "e5m2": (ml_dtypes.float8_e5m2, 57344.0)}


def hard_values(rng):
    v = [0.0, -0.0, 1.0, -1.0]
    for dtype, top in FORMATS.values():
        info = ml_dtypes.finfo(dtype)
        tiny = float(info.smallest_subnormal)
        # Every subnormal and normal code's value, and the midpoints between neighbours (ties).
        codes = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
        finite = np.sort(codes[np.isfinite(codes)])
        v += list(finite)
        v += list((finite[1:] + finite[:-1]) / 2)
        v += [top, -top, top * 1.01, -top * 1.01, top * 1.0625, top * 1e6, -3e38, tiny / 2, -tiny / 2, tiny * 0.49, tiny * 0.51, tiny * 1.5]
    v += list(rng.standard_normal(200) * 10.0 ** rng.uniform(-8, 5, 200))
    return np.array(v, dtype=np.float32)


def hard_rows(rng, dim=37):
    rows = [rng.standard_normal(dim) * s for s in [1e-30, 1e-6, 1.0, 1e4, 1e30]]
    rows.append(np.zeros(dim))
    rows.append(-np.zeros(dim))
    rows.append(np.full(dim, 0.3))
    one = rng.standard_normal(dim) * 1e-3
    one[7] = -500.0
    rows.append(one)
    rows.append(np.linspace(-1.0, 1.0, dim))
    for _ in range(6):
        rows.append(rng.standard_normal(dim) * rng.uniform(0.01, 100.0))
    return np.array(rows, dtype=np.float32)


def scale(row, top):
    m = np.float32(np.max(np.abs(row)))
    if m == 0:
        return np.float32(1.0)
    s = np.float32(m / np.float32(top))
    bits = (np.array([s]).view(np.uint32)[0] + np.uint32(8)) & np.uint32(0xFFFFFFF0)
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def cast(values, dtype, top):
    return np.clip(values, np.float32(-top), np.float32(top)).astype(dtype).view(np.uint8)


def save(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.uint8): "U8"}[a.dtype]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    header["__metadata__"] = {"made_by": "scripts/make_fp8_fixtures.py", "ml_dtypes": version("ml_dtypes")}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    rng = np.random.default_rng(8)
    values = hard_values(rng)
    rows = hard_rows(rng)
    tensors = {"values": values, "rows": rows}
    for name, (dtype, top) in FORMATS.items():
        tensors[name] = cast(values, dtype, top)
        scales = np.array([scale(r, top) for r in rows], dtype=np.float32)
        codes = np.stack([cast(r / s, dtype, top) for r, s in zip(rows, scales)])
        tensors[name + ".scales"] = scales
        tensors[name + ".codes"] = codes
        tensors[name + ".decoded"] = codes.view(dtype).astype(np.float32) * scales[:, None]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save(tensors, OUT)
    print(OUT, os.path.getsize(OUT), "bytes,", len(values), "values,", len(rows), "rows")


if __name__ == "__main__":
    main()
