#!/usr/bin/env python3
"""SentencePiece's `nmt_nfkc` precompiled charsmap, as a SentencePiece model embeds it (and a
tokenizer.json's `Precompiled` normaliser holds it, base64): tests/data/models/nmt_nfkc.charsmap.
Pinned: sentencepiece 0.2.3 with protobuf (no download; the table is built into sentencepiece):

    python3 -m venv /tmp/spm && /tmp/spm/bin/pip install sentencepiece==0.2.3 protobuf
    /tmp/spm/bin/python scripts/make_charsmap_fixture.py
"""
import io
import os

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

assert spm.__version__ == "0.2.3", spm.__version__

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models", "nmt_nfkc.charsmap")

corpus = ["the quick brown fox jumps over the lazy dog", "café naïve résumé", "日本語のテキスト", "emoji 🙂 and symbols ∑ ∞"] * 50
model = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(corpus), model_writer=model, vocab_size=60, normalization_rule_name="nmt_nfkc", hard_vocab_limit=False, minloglevel=2
)
proto = sentencepiece_model_pb2.ModelProto()
proto.ParseFromString(model.getvalue())
with open(OUT, "wb") as f:
    f.write(proto.normalizer_spec.precompiled_charsmap)
print(OUT, len(proto.normalizer_spec.precompiled_charsmap), "bytes")
