#!/usr/bin/env bash
# Writes web/model.edo, the demo page's model for semantic search: WordLlama's real 32000 × 256
# model (its PyPI wheel, fetched by scripts/fixtures/wordllama_reference.sh into target/wordllama) as one
# .edo model file, table in INT8, vectors normalised (~10 MB). Never committed: the weights are
# WordLlama's. Without PyPI it fails, and the page asks for a model file to be dropped instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=target/wordllama
if [ ! -f "$src/weights.safetensors" ]; then
    bash scripts/fixtures/wordllama_reference.sh
fi
# The same features as the test command's build, so after the tests nothing is rebuilt.
cargo build -q --all-features --bin edo
"${CARGO_TARGET_DIR:-target}/debug/edo" quantize-model "$src/weights.safetensors" --wordllama --tokenizer "$src/tokenizer.json" \
    --format "${1:-int8}" --normalize true -o web/model.edo
