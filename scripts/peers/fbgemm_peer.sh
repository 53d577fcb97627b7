#!/usr/bin/env bash
# EmbeddingBag on the CPU against FBGEMM's (scripts/peers/fbgemm_peer.py): makes the pinned virtual
# environment (PyPI's torch, which runs on a machine without a GPU, and numpy) in target/, builds
# edo in release, and runs the comparison. Arguments go to the script (--quick: bags of 16, sum).
set -euo pipefail
cd "$(dirname "$0")/../.."
TORCH_VERSION=2.15.0
NUMPY_VERSION=2.4.6
venv=target/fbgemm-venv
if [ "$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" != "$TORCH_VERSION" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION"
fi
cargo build -q --release -p edo-cli
"$venv/bin/python" scripts/peers/fbgemm_peer.py --edo "${CARGO_TARGET_DIR:-target}/release/edo" "$@"
