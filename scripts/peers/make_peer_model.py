#!/usr/bin/env python3
"""A real-sized model2vec model for timing edo beside its peers (scripts/peers/model2vec_peer.py):
WordLlama's 32 000 × 256 table (as f32) and its Llama-2 BPE tokenizer (byte fallback), saved by
model2vec itself as a model2vec folder (normalised, max_length 512 — model2vec's default).

    bash scripts/fixtures/wordllama_reference.sh          # target/wordllama/, from WordLlama's PyPI wheel
    /tmp/m2v/bin/python scripts/peers/make_peer_model.py target/wordllama target/peer-model

Never committed: the weights are WordLlama's. model2vec 0.10.0 (pinned by the peer script's
instructions) writes the folder; model2vec-rs and edo both read it.
"""
import sys

import numpy as np
from model2vec import StaticModel
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def main():
    src, out = sys.argv[1], sys.argv[2]
    table = load_file(f"{src}/weights.safetensors")["embedding.weight"].astype(np.float32)
    tokenizer = Tokenizer.from_file(f"{src}/tokenizer.json")
    model = StaticModel(table, tokenizer, normalize=True)
    model.save_pretrained(out)
    print(f"wrote {out}: {table.shape[0]} x {table.shape[1]} f32, {tokenizer.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
