#!/usr/bin/env python3
"""The `gguf` package's decoding of real rows of a GGUF chunk (see gguf_reference.sh).

GGUFReader refuses a file whose tensors run past its end, so it reads a sparse copy padded to
1 GiB: the header and the rows within the chunk are the chunk's own bytes. Writes, next to the
chunk: token_embd.ids.npy (u32 rows sampled over the 84 463 present), token_embd.dequantized.npy
(`quants.dequantize` of those rows), expected.json. (The chunk holds no other tensor's bytes:
token_embd.weight, 170 MiB, comes first.)
"""
import json
import os
import shutil
import sys
from importlib.metadata import version

import gguf
import numpy as np

assert version("gguf") == "0.19.0", version("gguf")


def main(out):
    chunk = os.path.join(out, "gemma-3-270m-part00.gguf")
    padded = os.path.join(out, "padded.gguf")
    shutil.copyfile(chunk, padded)
    with open(padded, "r+b") as f:
        f.truncate(1 << 30)
    try:
        r = gguf.GGUFReader(padded)
        tensors = {t.name: t for t in r.tensors}
        emb = tensors["token_embd.weight"]
        row_bytes = emb.data.shape[1]
        present = (os.path.getsize(chunk) - int(emb.data_offset)) // row_bytes
        ids = np.unique(np.concatenate([np.arange(256), np.arange(0, present, 97), [present - 1]])).astype(np.uint32)
        rows = gguf.quants.dequantize(np.asarray(emb.data[ids]), emb.tensor_type).astype(np.float32)
        np.save(os.path.join(out, "token_embd.ids.npy"), ids)
        np.save(os.path.join(out, "token_embd.dequantized.npy"), rows)
        expected = {
            "gguf": version("gguf"),
            "token_embd": {"type": emb.tensor_type.name, "dim": int(emb.shape[0]), "rows": int(emb.shape[1]), "present_rows": int(present), "data_offset": int(emb.data_offset)},
        }
    finally:
        os.remove(padded)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(json.dumps(expected))


if __name__ == "__main__":
    main(sys.argv[1])
