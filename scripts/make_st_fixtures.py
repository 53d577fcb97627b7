#!/usr/bin/env python3
"""Small sentence-transformers `StaticEmbedding` models saved by sentence-transformers itself, and
the token ids and vectors its forward pass gives.

Writes tests/data/models/st_*/ and tests/data/models/st_expected.json (the texts, and per model
the ids `StaticEmbedding.preprocess` gives each text and the vectors of
`SentenceTransformer.encode`). Pinned: sentence-transformers 6.2.0, torch 2.15.0,
tokenizers 0.23.3 (PyPI's torch wheel pulls in CUDA libraries, about 3 GB; no GPU is needed):

    python3 -m venv /tmp/st && /tmp/st/bin/pip install sentence-transformers==6.2.0 torch==2.15.0 tokenizers==0.23.3
    /tmp/st/bin/python scripts/make_st_fixtures.py

The tokenizers are the model2vec fixtures' (tests/data/models/*/tokenizer.json), each given a
truncation of its own, which sentence-transformers keeps (model2vec sets its own instead):
- st_wordpiece: WordPiece (BERT's), first 24 tokens, then a Normalize module — saved by
  sentence-transformers 6.2 (its files at the top of the folder);
- st_unigram: Unigram (SentencePiece's, with an unknown token), last 10 tokens, not normalised —
  moved into 0_StaticEmbedding/ with sentence-transformers 3.x's module type, the layout of the
  static models on the Hugging Face hub (sentence-transformers 6.2 loads it, and encodes with it).
Tables are random, seeded.
"""
import json
import os
import shutil
import sys

import numpy as np
import sentence_transformers
import tokenizers
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding
from tokenizers import Tokenizer

assert sentence_transformers.__version__ == "6.2.0", sentence_transformers.__version__
assert torch.__version__.split("+")[0] == "2.15.0", torch.__version__
assert tokenizers.__version__ == "0.23.3", tokenizers.__version__

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")

# The model2vec fixtures' hard texts, and two long enough for both truncations.
with open(os.path.join(ROOT, "expected.json")) as f:
    TEXTS = json.load(f)["texts"] + [
        "the quick brown fox jumps over the lazy dog " * 4,
        "zzzz qqqq unseen 🙂 words then café naïve résumé and the quick brown fox at the end",
    ]


def table(tok, dim, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((tok.get_vocab_size(), dim)) * 0.3).astype(np.float32)


def save(name, tok, weights, normalize):
    path = os.path.join(ROOT, name)
    shutil.rmtree(path, ignore_errors=True)
    modules = [StaticEmbedding(tok, embedding_weights=weights)] + ([Normalize()] if normalize else [])
    SentenceTransformer(modules=modules, device="cpu").save(path)
    os.remove(os.path.join(path, "README.md"))
    return path


def nest(path):
    """sentence-transformers 3.x's layout: the StaticEmbedding module's files in 0_StaticEmbedding/."""
    sub = os.path.join(path, "0_StaticEmbedding")
    os.makedirs(sub)
    for f in ("model.safetensors", "tokenizer.json"):
        os.rename(os.path.join(path, f), os.path.join(sub, f))
    with open(os.path.join(path, "modules.json")) as f:
        modules = json.load(f)
    modules[0]["path"] = "0_StaticEmbedding"
    modules[0]["type"] = "sentence_transformers.models.StaticEmbedding"
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)


def main():
    dim = 16
    wp = Tokenizer.from_file(os.path.join(ROOT, "wordpiece", "tokenizer.json"))
    wp.enable_truncation(24)
    paths = {"st_wordpiece": save("st_wordpiece", wp, table(wp, dim, 11), normalize=True)}
    uni = Tokenizer.from_file(os.path.join(ROOT, "unigram_vq", "tokenizer.json"))
    uni.enable_truncation(10, direction="left")
    paths["st_unigram"] = save("st_unigram", uni, table(uni, dim, 12), normalize=False)
    nest(paths["st_unigram"])

    expected = {
        "sentence_transformers": sentence_transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "tokenizers": tokenizers.__version__,
        "texts": TEXTS,
        "models": {},
    }
    for name, path in paths.items():
        model = SentenceTransformer(path, device="cpu")
        features = model[0].preprocess(TEXTS)
        ids, offsets = features["input_ids"].tolist(), features["offsets"].tolist() + [len(features["input_ids"])]
        expected["models"][name] = {
            "tokens": [ids[a:b] for a, b in zip(offsets, offsets[1:])],
            "vectors": model.encode(TEXTS, convert_to_numpy=True).astype(np.float64).tolist(),
            "normalize": any(type(m).__name__ == "Normalize" for m in model),
        }
        print(name, [type(m).__name__ for m in model], "truncation", model[0].tokenizer.truncation, file=sys.stderr)
    with open(os.path.join(ROOT, "st_expected.json"), "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))


if __name__ == "__main__":
    main()
