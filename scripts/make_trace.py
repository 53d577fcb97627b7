#!/usr/bin/env python3
"""A real id trace for the cache benchmarks (issue 35): real English text through a real
tokenizer, whose token ids follow the Zipf-like law of words.

The text is CPython's own documentation topics (`pydoc_data.topics`, shipped with the
interpreter: about 465 000 characters of prose and code; 122 191 tokens with Python 3.11), the
tokenizer WordLlama's (Llama 2's 32 000-token BPE, from the pinned wordllama wheel that
scripts/wordllama_reference.sh installs). Each token id is one lookup of a 32 000-row embedding
table, in reading order.

    bash scripts/wordllama_reference.sh          # once: target/wordllama-venv, target/wordllama
    target/wordllama-venv/bin/python scripts/make_trace.py target/traces/pydoc-llama2.txt

Writes one id a line (`edo bench cache --trace`, examples/cache_hit_rates.rs). Never committed:
it is made again from the two packages.
"""

import os
import sys

import pydoc_data.topics
from tokenizers import Tokenizer


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "target/traces/pydoc-llama2.txt"
    tokenizer = Tokenizer.from_file(os.environ.get("EDO_TRACE_TOKENIZER", "target/wordllama/tokenizer.json"))
    ids = []
    # Topics in name order: the same text, so the same trace, on every run.
    for name in sorted(pydoc_data.topics.topics):
        ids.extend(tokenizer.encode(pydoc_data.topics.topics[name], add_special_tokens=False).ids)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# pydoc_data.topics (Python {sys.version.split()[0]}) through WordLlama's tokenizer ({tokenizer.get_vocab_size()} tokens)\n")
        f.write("\n".join(map(str, ids)))
        f.write("\n")
    print(f"{out}: {len(ids)} ids, {len(set(ids))} distinct of {tokenizer.get_vocab_size()}")


if __name__ == "__main__":
    main()
