#!/usr/bin/env python3
"""ONNX Runtime's GatherBlockQuantized, run on random tables: the oracle of edo's file::gbq.

Writes tests/data/gbq/<case>.safetensors, each with the operator's inputs — data (U8), scales (F32
or F16), zero_points (U8, when the case has them), metadata bits and block_size — and
  indices   I64 [m]     rows gathered (every row, shuffled, some twice)
  expected  F32/F16     onnxruntime's output for them (CPU execution provider)
The cases cover 4- and 8-bit codes, blocks of 16 to 256, f32 and f16 scales (f32 ones both exact
in fp16 and not), explicit and default zero points, and an odd number of blocks per row (zero
points packed half a byte short).
Pinned: onnxruntime 1.23.2, onnx 1.x, numpy 2.x:

    python3 -m venv /tmp/ort && /tmp/ort/bin/pip install onnxruntime==1.23.2 onnx numpy
    /tmp/ort/bin/python scripts/make_gbq_fixtures.py
"""
import json
import os
import struct
from importlib.metadata import version

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper

assert version("onnxruntime") == "1.23.2", version("onnxruntime")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gbq")
# name: bits, block_size, dim, scale type, zero points, scales exact in fp16
CASES = {
    "b4_g32_f16_zp": (4, 32, 96, np.float16, True),
    "b4_g128_f32exact": (4, 128, 256, "f32exact", False),
    "b8_g64_f16_zp": (8, 64, 192, np.float16, True),
    "b8_g128_f16": (8, 128, 128, np.float16, False),
    "b4_g64_f32exact_zp": (4, 64, 320, "f32exact", True),
    "b8_g16_f32_zp": (8, 16, 48, np.float32, True),
    "b4_g256_f16": (4, 256, 512, np.float16, False),
    "b4_g32_f32_zp": (4, 32, 64, np.float32, True),
}
ROWS = 9


def session(bits, block, scale_type, with_zp, dim):
    st = TP.FLOAT16 if scale_type == np.float16 else TP.FLOAT
    blocks = -(-dim // block)
    inputs = [helper.make_tensor_value_info("data", TP.UINT8, [ROWS, dim * bits // 8]),
              helper.make_tensor_value_info("indices", TP.INT64, ["m"]),
              helper.make_tensor_value_info("scales", st, [ROWS, blocks])]
    names = ["data", "indices", "scales"]
    if with_zp:
        inputs.append(helper.make_tensor_value_info("zero_points", TP.UINT8, [ROWS, -(-blocks * bits // 8)]))
        names.append("zero_points")
    node = helper.make_node("GatherBlockQuantized", names, ["y"], domain="com.microsoft", bits=bits, block_size=block, gather_axis=0, quantize_axis=1)
    graph = helper.make_graph([node], "gbq", inputs, [helper.make_tensor_value_info("y", st, ["m", dim])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def save(path, tensors, meta):
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.uint8): "U8", np.dtype(np.int64): "I64"}[a.dtype]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    rng = np.random.default_rng(21)
    os.makedirs(OUT, exist_ok=True)
    for name, (bits, block, dim, scale_type, with_zp) in CASES.items():
        blocks = -(-dim // block)
        data = rng.integers(0, 256, (ROWS, dim * bits // 8), dtype=np.uint8)
        raw = (rng.standard_normal((ROWS, blocks)) * 10.0 ** rng.uniform(-3, 1, (ROWS, blocks)))
        if scale_type == "f32exact":
            scales, dtype = raw.astype(np.float16).astype(np.float32), np.float32
        else:
            scales, dtype = raw.astype(scale_type), scale_type
        scales[0, 0] = 0.0  # a zero scale
        feed = {"data": data, "indices": np.concatenate([rng.permutation(ROWS), [0, ROWS - 1]]).astype(np.int64), "scales": scales}
        if with_zp:
            feed["zero_points"] = rng.integers(0, 256, (ROWS, -(-blocks * bits // 8)), dtype=np.uint8)
        y = session(bits, block, dtype, with_zp, dim).run(None, feed)[0]
        tensors = dict(feed)
        tensors["expected"] = y
        save(os.path.join(OUT, name + ".safetensors"), tensors, {"bits": str(bits), "block_size": str(block), "made_by": "scripts/make_gbq_fixtures.py", "onnxruntime": version("onnxruntime")})
        print(name, y.dtype, y.shape)


if __name__ == "__main__":
    main()
