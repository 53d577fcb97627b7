#!/usr/bin/env bash
# WordLlama's real model and its own vectors, for tests/model.rs: installs wordllama (pinned, from
# PyPI) into a virtual environment under target/, and writes target/wordllama/ (the model's
# weights and tokenizer, and WordLlama's vectors for the test texts). Never committed: the weights
# are WordLlama's. Without it, the test says SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/wordllama-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q wordllama==0.4.0.post1
"$venv/bin/python" scripts/wordllama_reference.py target/wordllama
