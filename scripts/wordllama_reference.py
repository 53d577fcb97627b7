#!/usr/bin/env python3
"""WordLlama's own vectors for edo's comparison: run inside an environment with
wordllama==0.4.0.post1 installed (scripts/wordllama_reference.sh makes one).

Copies the wheel's real model — l2_supercat_256.safetensors (embedding.weight, 32000 × 256 f16)
and its tokenizer.json (Llama-2 BPE with byte fallback) — to OUT, and writes OUT/expected.json:
texts, and WordLlama's vectors for them: dense, normalised, Matryoshka-truncated to 64 dims, and
binarised (packbits of x > 0, as bytes). Never commit OUT: the weights are WordLlama's.
"""
import json
import os
import shutil
import sys

import numpy as np
import wordllama
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from wordllama.inference import WordLlamaInference

OUT = sys.argv[1]
PKG = os.path.dirname(wordllama.__file__)
WEIGHTS = os.path.join(PKG, "weights", "l2_supercat_256.safetensors")
TOKENIZER = os.path.join(PKG, "tokenizers", "l2_supercat_tokenizer_config.json")

TEXTS = [
    "",
    "the quick brown fox jumps over the lazy dog",
    "Embedding tables compressed on the GPU",
    "café naïve résumé jalapeño",
    "cafe\u0301 with a combining accent",
    "日本語のテキストと東京",
    "emoji 🙂🚀 and ∑ ∞ ≠",
    "supercalifragilisticexpialidocious",
    "runs   of    whitespace\t\tand\nnewlines",
    "control\u0007characters\u001b here",
    "What is the capital of France? Paris is the capital of France.",
    "a " * 300,
]


def main():
    os.makedirs(OUT, exist_ok=True)
    shutil.copy(WEIGHTS, os.path.join(OUT, "weights.safetensors"))
    shutil.copy(TOKENIZER, os.path.join(OUT, "tokenizer.json"))
    emb = load_file(WEIGHTS)["embedding.weight"]
    dense = WordLlamaInference(emb, Tokenizer.from_file(TOKENIZER))
    trunc = WordLlamaInference(emb[:, :64], Tokenizer.from_file(TOKENIZER))
    binary = WordLlamaInference(emb, Tokenizer.from_file(TOKENIZER), binary=True)
    out = {
        "wordllama": "0.4.0.post1",
        "texts": TEXTS,
        # Without the padding WordLlama adds to the batch's longest (its attention mask is 0 there).
        "tokens": [e.ids[: sum(e.attention_mask)] for e in dense.tokenize(TEXTS)],
        "dense": dense.embed(TEXTS).astype(np.float64).tolist(),
        "normalized": dense.embed(TEXTS[1:], norm=True).astype(np.float64).tolist(),
        "dim64": trunc.embed(TEXTS).astype(np.float64).tolist(),
        "binary": [list(row.view(np.uint8)) for row in binary.embed(TEXTS)],
    }
    out["binary"] = [[int(b) for b in row] for row in out["binary"]]
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f)
    print(f"wrote {OUT}: {emb.shape} {emb.dtype}", file=sys.stderr)


if __name__ == "__main__":
    main()
