#!/usr/bin/env python3
"""Reference MurmurHash3 x86_32 values from the `mmh3` package (pip install mmh3), for
tests/hashing.rs. Regenerate with: python3 scripts/mmh3_vectors.py > tests/data/mmh3_vectors.tsv

Columns: kind (u64 | str), input (decimal id, or the string escaped as JSON), seed, hash (u32).
A u64 id is hashed as its 8 little-endian bytes, as edo hashes raw ids."""
import json
import random

import mmh3

rng = random.Random(2026)
ids = [0, 1, 2, 255, 256, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**63, 2**64 - 1]
ids += [rng.getrandbits(64) for _ in range(40)] + [rng.getrandbits(20) for _ in range(20)]
seeds = [0, 1, 42, 0x9747B28C, 2**32 - 1]
strings = ["", "a", "ab", "abc", "abcd", "abcde", "hello world", "user:123456", "naïve café",
           "日本語のテキスト", "x" * 31, "y" * 64]

print("kind\tinput\tseed\thash")
for i in ids:
    for s in seeds:
        h = mmh3.hash(i.to_bytes(8, "little"), s, signed=False)
        print(f"u64\t{i}\t{s}\t{h}")
for t in strings:
    for s in seeds:
        h = mmh3.hash(t.encode("utf-8"), s, signed=False)
        print(f"str\t{json.dumps(t, ensure_ascii=True)}\t{s}\t{h}")
