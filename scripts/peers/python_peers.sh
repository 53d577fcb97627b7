#!/usr/bin/env bash
# edo's Python package beside model2vec, faiss and usearch (and FBGEMM through torch where
# scripts/peers/fbgemm_peer.sh made its environment) in one process: scripts/peers/python_peers.py. Builds the
# release wheel, makes the pinned virtual environment target/python-peers-venv, and WordLlama's
# model as a model2vec folder (target/peer-model, from scripts/fixtures/wordllama_reference.sh's files).
# A benchmark that prints figures (docs/python.md has them), not a test.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
venv=$root/target/python-peers-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q numpy==2.4.6 model2vec==0.10.0 faiss-cpu==1.15.1 usearch==2.26.6 maturin==1.16.0
fi
rm -rf target/wheels-release
"$venv/bin/maturin" build -q --release -m python/Cargo.toml --out target/wheels-release
wheel=$(ls "$root"/target/wheels-release/edo_embeddings-*.whl)
"$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
[ -d target/wordllama ] || bash scripts/fixtures/wordllama_reference.sh
[ -d target/peer-model ] || "$venv/bin/python" scripts/peers/make_peer_model.py target/wordllama target/peer-model
cargo build -q --release -p edo-cli
cd target  # not the source tree: the installed package is the one imported
"$venv/bin/python" ../scripts/peers/python_peers.py --model peer-model --edo release/edo "$@"
if [ -x fbgemm-venv/bin/python ]; then
    fbgemm-venv/bin/pip install -q --force-reinstall --no-deps "$wheel"
    fbgemm-venv/bin/python ../scripts/peers/python_peers.py --bags "$@"
else
    echo "SKIPPED: bags against FBGEMM (no target/fbgemm-venv: scripts/peers/fbgemm_peer.sh makes it)"
fi
