#!/usr/bin/env python3
"""Small static embedding models saved by model2vec itself, and their reference tokens and vectors.

Writes tests/data/models/<name>/ (a model2vec folder: config.json, tokenizer.json,
model.safetensors) and tests/data/models/expected.json (the texts, and per model the token ids of
model2vec's `tokenize` and the vectors of `encode`). Pinned: model2vec 0.10.0, tokenizers 0.22.1,
numpy 2.x:

    python3 -m venv /tmp/m2v && /tmp/m2v/bin/pip install model2vec==0.10.0 tokenizers==0.22.1
    /tmp/m2v/bin/python scripts/make_model_fixtures.py

The tokenizers are trained here on a small corpus (no download): WordPiece (BERT's normaliser and
pre-tokeniser), BPE with byte fallback (Llama's Metaspace, as WordLlama's), and Unigram
(SentencePiece's). Tables are random, seeded.
"""
import json
import os
import sys

import model2vec
import numpy as np
import tokenizers
from model2vec import StaticModel
from model2vec.model import quantize_model
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

assert model2vec.__version__ == "0.10.0", model2vec.__version__
assert tokenizers.__version__ == "0.22.1", tokenizers.__version__

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "embedding tables are compressed and looked up on the GPU",
    "café naïve résumé jalapeño façade coöperate",
    "static embedding models are a table, a tokenizer and a mean",
    "Graphics processors run compute shaders written in WGSL",
    "日本語のテキストも少しあります。東京と京都",
    "emoji 🙂 🚀 and symbols ∑ ∞ ≠ are rare",
    "numbers 12345 and 3.14159 and 2026-11-30",
    "a longer sentence about retrieval, recommender systems and quantisation of vectors",
] * 20

TEXTS = [
    "",
    "the quick brown fox",
    "The Quick BROWN Fox!",
    "café naïve résumé",
    "cafe\u0301 (a combining acute accent)",
    "日本語のテキスト",
    "emoji 🙂🚀 together",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "runs   of    whitespace\t\tand\nnewlines",
    "control\u0007characters\u001b here",
    "zzzzqqqqxxxx unseen words",
    "a " * 200,
    "numbers 12345 3.14159",
]


def wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[UNK]", "[PAD]"]))
    return tok


def bpe_byte_fallback():
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens))
    return tok


def unigram():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>"], unk_token="<unk>"))
    return tok


def table(tok, dim, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((tok.get_vocab_size(), dim)) * 0.3).astype(np.float32)


def main():
    dim = 16
    made = {}
    wp = wordpiece()
    made["wordpiece"] = StaticModel(table(wp, dim, 1), wp, normalize=True, max_length=16)
    bpe = bpe_byte_fallback()
    made["bpe_f16"] = quantize_model(StaticModel(table(bpe, dim, 2), bpe, normalize=False), quantize_to="float16")
    uni = unigram()
    weights = np.random.default_rng(3).uniform(0.2, 1.5, uni.get_vocab_size()).astype(np.float32)
    # What model2vec's vocabulary quantization writes (without its k-means, which needs
    # scikit-learn): 40 rows, a row per token id (`mapping`) and a weight per token id.
    mapping = np.random.default_rng(5).integers(0, 40, uni.get_vocab_size()).astype(np.int64)
    centroids = (np.random.default_rng(3).standard_normal((40, dim)) * 0.3).astype(np.float32)
    made["unigram_vq"] = StaticModel(centroids, uni, normalize=True, weights=weights, token_mapping=mapping)
    made["wordpiece_int8"] = quantize_model(StaticModel(table(wp, dim, 4), wp, normalize=True), quantize_to="int8")

    expected = {"model2vec": model2vec.__version__, "tokenizers": tokenizers.__version__, "texts": TEXTS, "models": {}}
    for name, model in made.items():
        path = os.path.join(ROOT, name)
        model.save_pretrained(path)
        # The model card and sentence-transformers' module list are not part of what edo reads.
        for extra in ("README.md", "modules.json"):
            if os.path.exists(os.path.join(path, extra)):
                os.remove(os.path.join(path, extra))
        loaded = StaticModel.from_pretrained(path)
        expected["models"][name] = {
            "tokens": loaded.tokenize(TEXTS),
            "vectors": loaded.encode(TEXTS).astype(np.float64).tolist(),
            "dim": loaded.dim,
            "normalize": bool(loaded.normalize),
            "max_length": loaded.max_length,
        }
        print(name, "rows", len(loaded.embedding), "dtype", loaded.embedding.dtype, file=sys.stderr)
    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))


if __name__ == "__main__":
    main()
