#!/usr/bin/env python3
"""A byte-level BPE tokenizer (GPT-2's kind: the ByteLevel pre-tokenizer and byte alphabet) trained by
HF `tokenizers` itself, for the tests of edo's own tokenizer against `tokenizers` (tests/model.rs
builds the Llama 3 and Qwen 2 kinds from it: a regex Split before a ByteLevel without its regex).

Trained on the type stubs the `tokenizers` wheel ships (`tokenizers/**/*.pyi`, fixed by the pinned
version), 800 tokens, with GPT-2's `<|endoftext|>` as a special token. Writes, in
tests/data/models/bytelevel_bpe/: tokenizer.json; tokenizer_llama3.json, the same model behind Llama
3's regex Split and a ByteLevel without its own regex; a model2vec folder's other files for the
package's tests (config.json, model.safetensors: 800 × 8 f32, seeded); expected.json, hard texts
and the ids `tokenizers` gives them with each tokenizer. Pinned: tokenizers 0.23.3 —

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers==0.23.3
    /tmp/tok/bin/python scripts/make_bytelevel_fixture.py
"""
import glob
import json
import os
import random
import struct

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

assert tokenizers.__version__ == "0.23.3", tokenizers.__version__
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# Scripts, emoji, combining marks, whitespace runs, contractions in any case, digits, a long word.
TEXTS = [
    "Hello world, it's 2026!",
    "We'LL see: I'M sure they'REthere 12345678",
    "caf\u00e9 cafe\u0301 na\u00efve \u00c5ngstr\u00f6m \u212a \u017f",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4 \u0645\u0631\u062d\u0628\u0627 \u0928\u092e\u0938\u094d\u0924\u0947",
    "emoji \U0001f642\U0001f680 together \U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7",
    "runs   of    whitespace\t\tand\nnewlines\r\n\r\n  end  ",
    "def f(x):\n    return x**2  # squared\n",
    "<|endoftext|> and text<|endoftext|>again",
    "supercalifragilisticexpialidocious" * 4,
    "",
]


def main():
    package = os.path.dirname(tokenizers.__file__)
    files = sorted(glob.glob(os.path.join(package, "**", "*.pyi"), recursive=True))
    texts = [open(f, encoding="utf-8").read() for f in files]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    out = os.path.join(ROOT, "tests", "data", "models", "bytelevel_bpe")
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    llama3 = Tokenizer.from_str(tok.to_str())
    llama3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    llama3.save(os.path.join(out, "tokenizer_llama3.json"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"normalize": False}, f)
    rows, dim = tok.get_vocab_size(), 8
    rng = random.Random(7)
    values = struct.pack(f"<{rows * dim}f", *(rng.uniform(-1, 1) for _ in range(rows * dim)))
    header = json.dumps({"embeddings": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [0, len(values)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + values)
    expected = {"tokenizers": tokenizers.__version__, "texts": TEXTS}
    for name, t in (("gpt2", tok), ("llama3", llama3)):
        expected[name] = [t.encode(text, add_special_tokens=False).ids for text in TEXTS]
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=True, indent=0)
    print(f"{os.path.relpath(out, ROOT)}/tokenizer.json: {tok.get_vocab_size()} tokens from {len(files)} stubs of tokenizers {tokenizers.__version__}")
    print(tok.encode("Hello world, it's 2026!").tokens)


if __name__ == "__main__":
    main()
