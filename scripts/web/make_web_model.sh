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
# The command the tests built (a no-op after scripts/test.sh's `cargo test`; `cargo build` would
# build the workspace again, with its dev-dependencies' features left out).
cargo test -q --all-features --no-run
"${CARGO_TARGET_DIR:-target}/debug/edo" quantize-model "$src/weights.safetensors" --wordllama --tokenizer "$src/tokenizer.json" \
    --format "${1:-int8}" --normalize true -o web/model.edo
