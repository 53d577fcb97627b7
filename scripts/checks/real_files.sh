#!/usr/bin/env bash
# Runs `edo quantize` and `edo inspect` on real embedding files made by other tools, fetched with
# pip (not committed): the trained token embeddings WordLlama ships in its wheel (a safetensors
# checkpoint, F16 32000 × 256, tensor embedding.weight), the word2vec, GloVe and fastText vectors
# of gensim's test data, and a BERT-shaped BF16 checkpoint written by the safetensors package. Needs python3 with numpy and
# safetensors, and pip access to PyPI.
#   ./scripts/checks/real_files.sh [work dir]        (default: a fresh temporary directory)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work" && cd "$work"
cargo build --release --manifest-path "$root/Cargo.toml" -q
edo="$root/target/release/edo"

pip download gensim wordllama --no-deps -q -d wheels
python3 - <<'PY'
import glob, zipfile
w = zipfile.ZipFile(glob.glob("wheels/wordllama-*.whl")[0])
open("l2_supercat_256.safetensors", "wb").write(w.read("wordllama/weights/l2_supercat_256.safetensors"))
z = zipfile.ZipFile(glob.glob("wheels/gensim-*.whl")[0])
for n in ["lee_fasttext.vec", "test_glove.txt", "EN.1-10.cbow1_wind5_hs0_neg10_size300_smpl1e-05.txt",
          "pang_lee_polarity_fasttext.vec", "crime-and-punishment.vec"]:
    open(n, "wb").write(z.read("gensim/test/test_data/" + n))

import numpy as np
from safetensors import serialize_file
try:
    from safetensors import TensorSpec
except ImportError:
    TensorSpec = None
rng = np.random.default_rng(1)
w = (rng.standard_normal((30522, 768)) * 0.045).astype(np.float32)
w[:1000] *= 0.3
b = w.view(np.uint32).astype(np.uint64)
b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
name = "embeddings.word_embeddings.weight"
spec = (TensorSpec(dtype="bfloat16", shape=b.shape, data_ptr=b.ctypes.data, data_len=b.nbytes) if TensorSpec
        else {"dtype": "bfloat16", "shape": b.shape, "data": b.tobytes()})
serialize_file({name: spec}, "bert_like.safetensors", metadata={"format": "pt"})
PY

for f in lee_fasttext.vec test_glove.txt EN.1-10.cbow1_wind5_hs0_neg10_size300_smpl1e-05.txt \
         pang_lee_polarity_fasttext.vec crime-and-punishment.vec; do
  "$edo" quantize "$f" --format int8 -o "${f%.*}.edo"
done
"$edo" quantize l2_supercat_256.safetensors --tensor embedding.weight --format int8 -o wordllama.edo
"$edo" inspect wordllama.edo
"$edo" quantize bert_like.safetensors --tensor embeddings.word_embeddings.weight --format int8 -o bert.edo
"$edo" inspect bert.edo --no-png
"$edo" eval --input l2_supercat_256.safetensors --tensor embedding.weight --queries 200 --iters 1
"$edo" lookup lee_fasttext.edo --tokens the,of
echo "files in $work"
