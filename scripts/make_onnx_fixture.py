#!/usr/bin/env python3
"""The ONNX model the npm package's test app feeds edo's GPU rows to (web/npm/test-app/public/
dense.onnx): y = Relu(rows · W + b), rows float32 [n, 70], W [70, 8] and b [8] exact in float32 by
formula (the app computes the same on the CPU path's rows to compare). Made with the `onnx`
package (PyPI, 1.20.0), opset 17:

    python3 -m venv /tmp/onnx && /tmp/onnx/bin/pip install onnx==1.20.0
    /tmp/onnx/bin/python scripts/make_onnx_fixture.py
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DIM, OUT = 70, 8
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    i, j = np.meshgrid(np.arange(DIM), np.arange(OUT), indexing="ij")
    w = (((i * 7 + j * 3) % 11) - 5).astype(np.float32) / 8  # the app's weight(i, j)
    b = (np.arange(OUT, dtype=np.float32) - 4) / 4  # the app's bias(j)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["rows", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["pre"]),
            helper.make_node("Relu", ["pre"], ["y"]),
        ],
        "edo_rows_dense",
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", OUT])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="edo scripts/make_onnx_fixture.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    out = os.path.join(ROOT, "web", "npm", "test-app", "public", "dense.onnx")
    onnx.save(model, out)
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
