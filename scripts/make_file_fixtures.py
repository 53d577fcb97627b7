#!/usr/bin/env python3
"""Writes the reference files of tests/files.rs into tests/data/files/ with numpy and the
`safetensors` package (pip install numpy safetensors). Deterministic: rerunning it rewrites the
same bytes.

What each file is, and which real tool's convention it follows:
- table_f32.npy / table_f16.npy / table_f64.npy: numpy.save of a 37 x 13 table (and astype).
- model.safetensors: a BERT-like checkpoint fragment written by safetensors (its Rust core, as
  HuggingFace uses it): embeddings.word_embeddings.weight as BF16 (bits from round-to-nearest-even,
  as torch.bfloat16 rounds), embeddings.position_embeddings.weight as F32,
  embeddings.token_type_embeddings.weight as F16, a 1-D LayerNorm weight, metadata {"format": "pt"}.
  word_embeddings_as_f32.npy holds the BF16 values widened to f32.
- fbgemm8.npy: FBGEMM's fused 8-bit row-wise layout (embedding_bag_byte_prepack), computed with
  FBGEMM's reference algorithm (FloatToFused8BitRowwiseQuantizedSBFloatRef) in float32 numpy;
  fbgemm8_dequant.npy is its decoding (codes * scale + bias in float32).
- fbgemm4.npy: FBGEMM's fused 4-bit layout (FloatToFusedNBitRowwiseQuantizedSBHalfRef, bit_rate 4);
  fbgemm4_dequant.npy its decoding.
- fbgemm8.safetensors: fbgemm8 as tensor "weight", written by safetensors.numpy.save_file.
- ubinary.npy: numpy.packbits(x > 0, axis=-1), what sentence-transformers' quantize_embeddings
  returns for precision="ubinary"; binary_int8.npy: that minus 128 as int8 (precision="binary").
- glove.txt (GloVe: no header) and word2vec.txt (word2vec text: "rows dim" header), values printed
  with numpy's shortest float32 repr.
"""

import os

import numpy as np
from safetensors import serialize_file
from safetensors.numpy import save_file

try:
    from safetensors import TensorSpec
except ImportError:  # older safetensors: plain dicts
    TensorSpec = None

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "files")
ROWS, DIM = 37, 13


def table():
    rng = np.random.default_rng(7)
    x = rng.normal(0.0, 0.1, size=(ROWS, DIM)).astype(np.float32)
    x[3] = 0.25  # a constant row
    x[5, :] = np.linspace(-1, 1, DIM, dtype=np.float32)
    return x


def fbgemm8(x):
    """FloatToFused8BitRowwiseQuantizedSBFloatRef (fbgemm/src/QuantUtils.cc), in float32."""
    out = np.zeros((x.shape[0], x.shape[1] + 8), dtype=np.uint8)
    for r, row in enumerate(x):
        lo, hi = np.float32(row.min()), np.float32(row.max())
        rng_ = np.float32(hi - lo)
        scale = np.float32(rng_ / np.float32(255.0))
        inv = np.float32(np.float32(255.0) / np.float32(rng_ + np.float32(1e-8)))
        q = np.rint((row - lo) * inv).astype(np.float32)  # lrintf: round half to even
        out[r, : x.shape[1]] = q.astype(np.uint8)
        out[r, x.shape[1] :] = np.frombuffer(np.array([scale, lo], dtype="<f4").tobytes(), dtype=np.uint8)
    return out


def fbgemm8_dequant(p, dim):
    codes = p[:, :dim].astype(np.float32)
    sb = p[:, dim:].copy().view("<f4")
    return codes * sb[:, :1] + sb[:, 1:2]


def fbgemm4(x):
    """FloatToFusedNBitRowwiseQuantizedSBHalfRef with bit_rate 4, in float32."""
    dim = x.shape[1]
    cb = (dim + 1) // 2
    out = np.zeros((x.shape[0], cb + 4), dtype=np.uint8)
    for r, row in enumerate(x):
        lo = np.float32(np.float16(row.min()))
        hi = np.float32(row.max())
        rng_ = np.float32(hi - lo)
        scale = np.float16(np.float32(1.0) if rng_ == 0 else rng_ / np.float32(15.0))
        if scale == 0 or np.isinf(np.float32(1.0) / np.float32(scale)):
            scale = np.float16(1.0)
        inv = np.float32(np.float32(1.0) / np.float32(scale))
        q = np.clip(np.rint((row - lo) * inv), 0, 15).astype(np.uint8)
        for c in range(dim):
            out[r, c // 2] |= q[c] << (4 * (c % 2))
        out[r, cb:] = np.frombuffer(np.array([scale, np.float16(lo)], dtype="<f2").tobytes(), dtype=np.uint8)
    return out


def fbgemm4_dequant(p, dim):
    cb = (dim + 1) // 2
    codes = np.zeros((p.shape[0], dim), dtype=np.float32)
    for c in range(dim):
        codes[:, c] = (p[:, c // 2] >> (4 * (c % 2))) & 15
    sb = p[:, cb:].copy().view("<f2").astype(np.float32)
    return codes * sb[:, :1] + sb[:, 1:2]


def bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bits (as torch.Tensor.to(torch.bfloat16))."""
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def text_lines(x, header):
    lines = [f"{x.shape[0]} {x.shape[1]}"] if header else []
    for r, row in enumerate(x):
        vals = " ".join(np.format_float_positional(v, unique=True, trim="-") for v in row)
        lines.append(f"word{r} {vals}")
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    x = table()
    np.save(os.path.join(OUT, "table_f32.npy"), x)
    np.save(os.path.join(OUT, "table_f16.npy"), x.astype(np.float16))
    np.save(os.path.join(OUT, "table_f64.npy"), x.astype(np.float64))

    words = (x * 3).astype(np.float32)
    wb = bf16_bits(words)
    np.save(os.path.join(OUT, "word_embeddings_as_f32.npy"), (wb.astype(np.uint32) << 16).view(np.float32))
    pos = x[:8].copy()
    types = x[:2].astype(np.float16)
    ln = np.ones(DIM, dtype=np.float32)
    arrays = {
        "embeddings.word_embeddings.weight": ("bfloat16", wb),
        "embeddings.position_embeddings.weight": ("float32", pos),
        "embeddings.token_type_embeddings.weight": ("float16", types),
        "embeddings.LayerNorm.weight": ("float32", ln),
    }
    specs = {}
    for name, (dtype, a) in arrays.items():
        a = np.ascontiguousarray(a)
        if TensorSpec is not None:
            specs[name] = TensorSpec(dtype=dtype, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
        else:
            specs[name] = {"dtype": dtype, "shape": a.shape, "data": a.tobytes()}
    serialize_file(specs, os.path.join(OUT, "model.safetensors"), metadata={"format": "pt"})

    p8 = fbgemm8(x)
    np.save(os.path.join(OUT, "fbgemm8.npy"), p8)
    np.save(os.path.join(OUT, "fbgemm8_dequant.npy"), fbgemm8_dequant(p8, DIM))
    save_file({"weight": p8}, os.path.join(OUT, "fbgemm8.safetensors"))
    p4 = fbgemm4(x)
    np.save(os.path.join(OUT, "fbgemm4.npy"), p4)
    np.save(os.path.join(OUT, "fbgemm4_dequant.npy"), fbgemm4_dequant(p4, DIM))

    ub = np.packbits(x > 0, axis=-1)
    np.save(os.path.join(OUT, "ubinary.npy"), ub)
    np.save(os.path.join(OUT, "binary_int8.npy"), (ub.astype(np.int16) - 128).astype(np.int8))

    with open(os.path.join(OUT, "glove.txt"), "w") as f:
        f.write(text_lines(x, header=False))
    with open(os.path.join(OUT, "word2vec.txt"), "w") as f:
        f.write(text_lines(x, header=True))


if __name__ == "__main__":
    main()
