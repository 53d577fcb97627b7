"""The edo wheel as a Python user gets it (scripts/checks/test-python.sh installs it into a fresh
virtual environment and runs these there): tables against numpy, EmbeddingBag against PyTorch's
conventions written out in numpy, files, binary search, static models against model2vec's and
sentence-transformers' own vectors (the fixtures' expected.json), the GPU against the CPU path."""

from __future__ import annotations

import functools
import http.server
import json
import re
import os
import struct
import threading
import time

import numpy as np
import pytest

import edo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "tests", "data", "models")
RNG = np.random.default_rng(7)
W = RNG.standard_normal((1000, 40), dtype=np.float32)


def embedding_bag(weight, indices, offsets, mode, per_sample_weights=None, include_last_offset=False):
    """torch.nn.functional.embedding_bag, written out: bag b is indices[offsets[b]:offsets[b+1]]
    (the last runs to the end, or to the final offset with include_last_offset); an empty bag is
    a zero row; weights multiply rows (sum only)."""
    ends = list(offsets[1:]) + ([] if include_last_offset else [len(indices)])
    starts = list(offsets[:-1]) if include_last_offset else list(offsets)
    out = np.zeros((len(starts), weight.shape[1]), dtype=np.float64)
    for b, (s, e) in enumerate(zip(starts, ends)):
        if e <= s:
            continue
        rows = weight[indices[s:e]].astype(np.float64)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights[s:e, None]
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


# ---- Tables ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "int8", "int4", "q8_0", "fp8_e4m3", "binary"])
def test_gather_equals_the_decoded_rows_and_stays_near_the_values(fmt):
    t = edo.quantize(W, fmt)
    assert (t.format, t.rows, t.dim, t.shape) == (fmt, 1000, 40, (1000, 40))
    full = t.dequantize()
    ids = RNG.integers(0, 1000, 777)
    np.testing.assert_array_equal(t.gather(ids), full[ids])
    bound = {"fp32": 0, "fp16": 2e-3, "int8": 0.02, "int4": 0.35, "q8_0": 0.02, "fp8_e4m3": 0.13}.get(fmt)
    if bound is not None:
        assert np.abs(full - W).max() <= bound, fmt
    else:
        np.testing.assert_array_equal(np.sign(full), np.where(W > 0, 1, -1))
    # Memory is the point: INT8 is about a quarter of FP32 (a scale and a bias per row besides).
    assert t.nbytes <= {"fp32": 160000, "fp16": 80000, "int8": 48000, "int4": 28000}.get(fmt, 160000)


def test_every_format_the_library_names_quantizes():
    assert len(edo.FORMATS) == 27 and "int8" in edo.FORMATS and "q4_k" in edo.FORMATS
    values = RNG.standard_normal((40, 256), dtype=np.float32)  # 256 wide: K-quant blocks fit
    for fmt in edo.FORMATS:
        t = edo.quantize(values, fmt)
        assert t.format == fmt and t.gather([3]).shape == (1, 256)


def test_values_of_any_float_dtype_and_layout_give_the_same_table():
    want = edo.quantize(W, "int8").dequantize()
    for values in (W.astype(np.float64), np.asfortranarray(W), np.repeat(W, 2, axis=1)[:, ::2]):
        np.testing.assert_array_equal(edo.quantize(values, "int8").dequantize(), want)
    half = edo.quantize(W.astype(np.float16), "fp32").dequantize()
    np.testing.assert_array_equal(half, W.astype(np.float16).astype(np.float32))


def test_ids_of_any_integer_dtype_and_shape():
    t = edo.quantize(W, "int8")
    want = t.gather([1, 2, 3])
    for ids in (np.array([1, 2, 3], np.int32), np.array([1, 2, 3], np.int64), np.array([1, 2, 3], np.uint32), np.array([1, 2, 3], np.uint8), (1, 2, 3)):
        np.testing.assert_array_equal(t.gather(ids), want)
    assert t.gather(np.arange(12).reshape(3, 4)).shape == (3, 4, 40)
    assert t.gather([]).shape == (0, 40)
    g16 = t.gather([1, 2, 3], dtype=np.float16)
    assert g16.dtype == np.float16
    np.testing.assert_array_equal(g16, want.astype(np.float16))


def test_bad_input_is_a_clear_error_and_changes_nothing():
    t = edo.quantize(W, "int8")
    with pytest.raises(IndexError, match="out of range for a table of 1000 rows"):
        t.gather([0, 1000])
    with pytest.raises(ValueError, match="ids holds -1"):
        t.gather([-1])
    # int64 arrays (numpy's and PyTorch's ids) are checked natively, in one pass.
    for bad in (-1, 2**32, 2**32 + 5):
        with pytest.raises(edo.InvalidArgumentError, match=f"ids holds {bad}"):
            t.gather(np.array([3, bad], np.int64))
    np.testing.assert_array_equal(t.gather(np.array([[3, 7]], np.int64)), t.gather([[3, 7]]))
    with pytest.raises(TypeError, match="must be integers"):
        t.gather([1.5])
    with pytest.raises(ValueError, match="unknown format"):
        edo.quantize(W, "int9")
    bad = W.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError):
        edo.quantize(bad, "int8")
    with pytest.raises(ValueError, match="2-D"):
        edo.quantize(W[0], "int8")
    with pytest.raises(edo.EdoError):
        edo.load(os.path.join(MODELS, "no such file.npy"))
    np.testing.assert_array_equal(t.gather([5]), edo.quantize(W, "int8").gather([5]))


def test_errors_are_sorted_by_kind_and_carry_edos_code(tmp_path):
    t = edo.quantize(W, "int8")
    cases = [
        (lambda: t.gather([1000]), edo.IdOutOfRangeError, IndexError, "ID_OUT_OF_RANGE"),
        (lambda: t.bag([1, 2], [0, 5]), edo.InvalidArgumentError, ValueError, "BAD_OFFSETS"),
        (lambda: edo.quantize(np.full((2, 2), np.inf, np.float32), "int8"), edo.InvalidArgumentError, ValueError, "NON_FINITE"),
        (lambda: edo.quantize(W, "int9"), edo.InvalidArgumentError, ValueError, "INVALID_ARGUMENT"),
        (lambda: edo.load(tmp_path / "missing.edo"), edo.EdoIOError, OSError, "IO"),
        (lambda: edo.StaticModel.from_pretrained(tmp_path), edo.EdoError, edo.EdoError, None),
    ]
    (tmp_path / "bad.edo").write_bytes(b"EDO\x00" + bytes(60))
    cases.append((lambda: edo.load(tmp_path / "bad.edo"), edo.BadFileError, edo.EdoError, None))
    for call, kind, builtin, code in cases:
        with pytest.raises(kind) as caught:
            call()
        assert isinstance(caught.value, builtin) and isinstance(caught.value, edo.EdoError)
        assert code is None or caught.value.code == code, (caught.value.code, caught.value)
        assert str(caught.value)


# ---- EmbeddingBag ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("fmt", ["fp32", "int8", "int4"])
def test_bags_follow_pytorchs_conventions(mode, fmt):
    t = edo.quantize(W, fmt)
    full = t.dequantize()
    indices = RNG.integers(0, 1000, 300)
    offsets = np.array([0, 0, 5, 21, 21, 100, 299])  # empty bags among them
    got = t.bag(indices, offsets, mode=mode)
    np.testing.assert_allclose(got, embedding_bag(full, indices, offsets, mode), rtol=1e-5, atol=1e-5)
    # include_last_offset: the final offset ends the last bag (FBGEMM's layout).
    last = np.append(offsets, 300)  # the number of indices (CSR), as PyTorch documents it
    np.testing.assert_allclose(t.bag(indices, last, mode=mode, include_last_offset=True), embedding_bag(full, indices, last, mode, include_last_offset=True), rtol=1e-5, atol=1e-5)
    # 2-D indices: B bags of N, no offsets.
    two = indices[:280].reshape(20, 14)
    np.testing.assert_allclose(t.bag(two, mode=mode), embedding_bag(full, two.reshape(-1), np.arange(0, 280, 14), mode), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.bag(two, mode=mode, include_last_offset=True), t.bag(two, mode=mode), rtol=0, atol=0)
    np.testing.assert_array_equal(t.bag(np.zeros((3, 0), np.int64), mode=mode), np.zeros((3, 40), np.float32))


def test_weighted_bags_and_their_errors():
    t = edo.quantize(W, "fp32")
    indices = RNG.integers(0, 1000, 64)
    offsets = np.arange(0, 64, 8)
    weights = RNG.random(64).astype(np.float32)
    np.testing.assert_allclose(t.bag(indices, offsets, per_sample_weights=weights), embedding_bag(W, indices, offsets, "sum", weights), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="mode='sum'"):
        t.bag(indices, offsets, mode="mean", per_sample_weights=weights)
    with pytest.raises(ValueError, match="offsets is required"):
        t.bag(indices)
    with pytest.raises(ValueError, match="mode must be one of"):
        t.bag(indices, offsets, mode="median")
    with pytest.raises(ValueError):
        t.bag(indices, [0, 70])  # an offset past the indices
    with pytest.raises(IndexError):
        t.bag([1, 2, 1000], [0])


# ---- Files -------------------------------------------------------------------------------------


def write_safetensors(path, name, array):
    header = json.dumps({name: {"dtype": "F32", "shape": list(array.shape), "data_offsets": [0, array.nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + np.ascontiguousarray(array, np.float32).tobytes())


def test_files_round_trip(tmp_path):
    t = edo.quantize(W, "int4")
    t.save(tmp_path / "t.edo")
    back = edo.load(tmp_path / "t.edo")
    assert (back.format, back.shape) == ("int4", (1000, 40))
    np.testing.assert_array_equal(back.dequantize(), t.dequantize())
    assert edo.load(tmp_path / "t.edo", "fp32").format == "fp32"
    np.save(tmp_path / "w.npy", W)
    np.testing.assert_array_equal(edo.load(tmp_path / "w.npy").dequantize(), W)
    np.testing.assert_array_equal(edo.load(tmp_path / "w.npy", "int8").dequantize(), edo.quantize(W, "int8").dequantize())
    write_safetensors(tmp_path / "w.safetensors", "embeddings", W)
    np.testing.assert_array_equal(edo.load(tmp_path / "w.safetensors", tensor="embeddings").dequantize(), W)
    (tmp_path / "junk.edo").write_bytes(b"not an edo file at all, but long enough")
    with pytest.raises(edo.EdoError):
        edo.load(tmp_path / "junk.edo")


# ---- Binary codes and search -------------------------------------------------------------------


@pytest.mark.parametrize("transform", [None, "centered", "itq"])
def test_search_finds_each_row_itself(transform):
    codes = edo.binary_codes(W, transform=transform)
    assert (codes.rows, codes.dim, codes.transform) == (1000, 40, transform)
    assert codes.nbytes <= 1000 * 8
    table = edo.quantize(W, "int8")
    ids, scores = codes.search(W[:50], 10, rescore=table)
    assert ids.shape == scores.shape == (50, 10) and ids.dtype == np.int64
    np.testing.assert_array_equal(ids[:, 0], np.arange(50))
    assert np.all(np.diff(scores, axis=1) <= 0)
    one_ids, one_scores = codes.search(W[7], 3, rescore=table)
    assert one_ids.shape == (3,) and one_ids[0] == 7
    assert codes.search(W[:2], 1024, rescore=table)[0].shape == (2, 1000)
    with pytest.raises(edo.InvalidArgumentError, match="exceeds the limit of 1024"):
        codes.search(W[:2], 5000, rescore=table)


# ---- Static models -----------------------------------------------------------------------------


FILES = os.path.join(ROOT, "tests", "data", "files")


def test_files_from_other_tools_load_as_their_tools_read_them():
    want = np.load(os.path.join(FILES, "table_f32.npy"))
    # word2vec and GloVe text (the fixtures' words hold table_f32's rows).
    for name in ("word2vec.txt", "glove.txt"):
        t = edo.load(os.path.join(FILES, name))
        assert t.format == "fp32" and np.array_equal(t.dequantize(), want), name
        assert edo.load(os.path.join(FILES, name), "int8").format == "int8"
    # FBGEMM's fused rows, as torch's quantized ops decode them.
    t = edo.load(os.path.join(FILES, "fbgemm4.npy"), layout="fbgemm4", dim=13)
    assert (t.format, t.dim) == ("int4", 13)
    assert np.array_equal(t.dequantize(), np.load(os.path.join(FILES, "fbgemm4_dequant.npy")))
    assert edo.load(os.path.join(FILES, "fbgemm4.npy"), layout="fbgemm4").dim == 14  # the width's larger dim
    t = edo.load(os.path.join(FILES, "fbgemm8.npy"), layout="fbgemm8")
    assert np.array_equal(t.dequantize(), np.load(os.path.join(FILES, "fbgemm8_dequant.npy")))
    with pytest.raises(edo.InvalidArgumentError):
        edo.load(os.path.join(FILES, "fbgemm8.npy"), layout="fbgemm8", dim=13)
    with pytest.raises(edo.BadFileError):
        edo.load(os.path.join(FILES, "fbgemm4.npy"), layout="fbgemm4", dim=20)
    # GGUF's block formats as stored, decoded as the gguf package's quants.dequantize.
    gguf = os.path.join(ROOT, "tests", "data", "ggml", "blocks.gguf")
    for fmt in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q6_k"):
        t = edo.load(gguf, tensor=fmt)
        assert t.format == fmt
        decoded = edo.load(gguf, tensor=f"{fmt}.dequantized").dequantize()
        assert np.array_equal(t.dequantize().view(np.uint32), decoded.view(np.uint32)), fmt
    with pytest.raises(edo.EdoError, match="q8_0"):
        edo.load(gguf, tensor="no such")


def test_models_give_model2vecs_vectors():
    expected = json.load(open(os.path.join(MODELS, "expected.json")))
    for name in ("wordpiece", "bpe_f16", "unigram_vq"):
        model = edo.StaticModel.from_pretrained(os.path.join(MODELS, name))
        want = np.array(expected["models"][name]["vectors"], dtype=np.float32)
        got = model.encode(expected["texts"], batch_size=3)
        tol = 1e-5 if name != "bpe_f16" else 1e-3
        np.testing.assert_allclose(got, want, atol=tol, err_msg=name)
        assert model.encode(expected["texts"][1]).shape == (model.dim,)
        for text, ids in zip(expected["texts"], expected["models"][name]["tokens"]):
            assert model.tokenize(text) == ids, (name, text)


def test_sentence_transformers_models_give_its_vectors():
    expected = json.load(open(os.path.join(MODELS, "st_expected.json")))
    for name in ("st_wordpiece", "st_unigram"):
        model = edo.StaticModel.from_pretrained(os.path.join(MODELS, name))
        np.testing.assert_allclose(model.encode(expected["texts"]), np.array(expected["models"][name]["vectors"], np.float32), atol=1e-5, err_msg=name)
        assert model.normalize == expected["models"][name]["normalize"]


def test_models_quantize_and_save(tmp_path):
    model = edo.StaticModel.from_pretrained(os.path.join(MODELS, "wordpiece"))
    texts = ["the quick brown fox", "a fast fox", "zzz"]
    full = model.encode(texts)
    small = model.quantize("int8")
    assert small.format == "int8"
    cos = (small.encode(texts) * full).sum(1)
    assert cos.min() > 0.99, cos
    small.save(tmp_path / "m.edo")
    np.testing.assert_array_equal(edo.StaticModel.from_pretrained(tmp_path / "m.edo").encode(texts), small.encode(texts))
    raw = model.encode(texts, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1)
    # One string (non-ASCII ones too: their UTF-8 is borrowed from the str) is its batch row.
    texts += ["héllo wörld 日本語 😀", "ß" * 300]
    batch, raw = model.encode(texts), model.encode(texts, normalize=False)
    for i, text in enumerate(texts):
        assert np.array_equal(model.encode(text), batch[i]) and np.array_equal(model.encode(text, normalize=False), raw[i]), text
    with pytest.raises(TypeError):
        model.encode([1, 2])


# ---- Threads and the GIL -----------------------------------------------------------------------


def test_lookups_release_the_gil_and_are_safe_from_threads():
    big = edo.quantize(RNG.standard_normal((20000, 256), dtype=np.float32), "int8")
    ids = RNG.integers(0, 20000, 400_000)
    want = big.gather(ids[:1000])
    results = []
    threads = [threading.Thread(target=lambda: results.append(big.gather(ids[:1000]))) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 8 and all(np.array_equal(r, want) for r in results)
    # A Python thread notes the time while one long bag runs: it can run during the call only if
    # the call let go of the GIL (holding it, the thread would wait until the call returns).
    stamps, stop = [], threading.Event()

    def clock():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            for _ in range(1000):
                pass

    th = threading.Thread(target=clock)
    th.start()
    time.sleep(0.02)
    # A bag long enough to have a middle (more ids on a faster machine).
    for copies in (1, 4, 16):
        many = np.tile(ids, copies)
        start = time.perf_counter()
        big.bag(many, np.arange(0, len(many), 16))
        end = time.perf_counter()
        if end - start > 0.05:
            break
    stop.set()
    th.join()
    # The middle fifth of the call: a thread waiting for a held GIL still gets a switch interval
    # (5 ms) at the call's edges, never in its middle.
    third = (end - start) * 0.4
    inside = sum(start + third < t < end - third for t in stamps)
    assert end - start > 0.03 and inside >= 5, f"the other thread ran {inside} times in the middle of {end - start:.3f} s of bags"


# ---- The GPU -----------------------------------------------------------------------------------


def test_the_gpu_gives_the_cpu_paths_rows():
    if not edo.Engine.available():
        if os.environ.get("EDO_REQUIRE_GPU") == "1":
            pytest.fail("no adapter, and EDO_REQUIRE_GPU=1")
        print("SKIPPED: no adapter")
        pytest.skip("SKIPPED: no adapter")
    engine = edo.Engine("gpu", memory_budget=256 << 20)
    assert engine.backend == "gpu" and engine.adapter and engine.note == engine.adapter
    for fmt in ("fp32", "int8", "int4"):
        t = edo.quantize(W, fmt)
        gpu = t.to(engine)
        ids = RNG.integers(0, 1000, 1500)  # several workgroups, not a multiple of their size
        np.testing.assert_array_equal(gpu.gather(ids), t.gather(ids), err_msg=fmt)
        offsets = np.array([0, 3, 3, 40, 900])
        for mode in ("sum", "mean", "max"):
            np.testing.assert_allclose(gpu.bag(ids, offsets, mode=mode), t.bag(ids, offsets, mode=mode), rtol=1e-5, atol=1e-5, err_msg=f"{fmt} {mode}")
        with pytest.raises(IndexError):
            gpu.gather([1000])
        assert gpu.backend == "gpu"
    # A mixed-precision table from the planner, resident on the GPU in both its formats.
    counts = (1e6 / np.arange(1, 1001) ** 1.2).astype(np.uint64)
    p = edo.plan({"words": W}, 40_000, access={"words": counts}, formats=("fp16", "int8", "int4"), min_hit_rate=2.0)
    mixed = p.build("words")
    assert mixed.choice.startswith("mixed")
    ids = RNG.integers(0, 1000, 1500)
    on_gpu = mixed.to(engine)
    assert isinstance(on_gpu, edo.GpuTable) and on_gpu.backend == "gpu"
    np.testing.assert_array_equal(on_gpu.gather(ids), mixed.gather(ids))
    report = engine.memory_report()
    assert report is not None and report["text"] and report["budget"] == 256 << 20, report


def test_caches_on_the_gpu(tmp_path, served):
    if not edo.Engine.available():
        if os.environ.get("EDO_REQUIRE_GPU") == "1":
            pytest.fail("no adapter, and EDO_REQUIRE_GPU=1")
        print("SKIPPED: no adapter")
        pytest.skip("SKIPPED: no adapter")
    caches_on(edo.Engine("gpu"), tmp_path, served)


def test_an_engine_without_a_gpu_is_the_cpu_path_with_a_note():
    cpu = edo.Engine("cpu")
    assert cpu.backend == "cpu" and "CPU path" in cpu.note and cpu.adapter is None and cpu.memory_report() is None
    t = edo.quantize(W, "int4")
    placed = t.to(cpu)
    assert placed.backend == "cpu"
    ids = RNG.integers(0, 1000, 333)
    assert np.array_equal(placed.gather(ids), t.gather(ids))
    assert np.array_equal(placed.bag(ids, [0, 5, 5, 100], mode="mean"), t.bag(ids, [0, 5, 5, 100], mode="mean"))
    with pytest.raises(IndexError):
        placed.gather([1000])
    # "auto" takes the GPU exactly when there is one, and says which or why not.
    auto = edo.Engine()
    assert auto.backend == ("gpu" if edo.Engine.available() else "cpu") and auto.note
    with pytest.raises(edo.InvalidArgumentError):
        edo.Engine("tpu")
    if not edo.Engine.available():
        with pytest.raises(edo.GpuError):
            edo.Engine("gpu")


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with HTTP range requests (Python's own server ignores ``Range``)."""

    def do_GET(self):
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        spec = self.headers.get("Range")
        if spec is None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        first, last = spec.removeprefix("bytes=").split("-")
        first, last = int(first), min(int(last or len(data) - 1), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        self.wfile.write(data[first : last + 1])

    def log_message(self, *args):
        pass


@pytest.fixture
def served(tmp_path):
    """``tmp_path`` served over HTTP on loopback, with ranges: yields its base URL."""
    handler = functools.partial(_RangeHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def check_cache(cache, table, what):
    """A cache's lookups against the resident table's, bit for bit, and its counters."""
    assert cache.rows == table.rows and cache.dim == table.dim and cache.format == table.format
    cache.reset_stats()
    ids = RNG.zipf(1.3, 3000) % table.rows
    for batch in np.array_split(ids, 7):  # batches with more distinct rows than slots, too
        assert np.array_equal(cache.gather(batch), table.gather(batch)), what
    stats = cache.stats()
    assert stats["lookups"] == 3000 and stats["hits"] + stats["misses"] == 3000 and stats["hits"] > 0, (what, stats)
    assert cache.occupancy == (64, 64), what
    offsets = np.array([0, 4, 4, 300, 1999])
    w = RNG.random(3000, dtype=np.float32)
    if cache.backend == "cpu":
        for mode in ("sum", "mean", "max"):
            assert np.array_equal(cache.bag(ids, offsets, mode=mode), table.bag(ids, offsets, mode=mode)), (what, mode)
        assert np.array_equal(cache.bag(ids, offsets, per_sample_weights=w), table.bag(ids, offsets, per_sample_weights=w)), what
    else:
        for mode in ("sum", "mean", "max"):
            np.testing.assert_allclose(cache.bag(ids, offsets, mode=mode), table.bag(ids, offsets, mode=mode), rtol=1e-5, atol=1e-4, err_msg=f"{what} {mode}")
    assert cache.prefetch(np.arange(500, 520)) <= 20
    with pytest.raises(IndexError):
        cache.gather([table.rows])
    with pytest.raises(edo.InvalidArgumentError):
        cache.bag(ids, offsets, per_sample_weights=w[:5])


def caches_on(engine, tmp_path, served):
    """Caches over a table in memory, a mapped .edo file and the same file served over HTTP."""
    t = edo.quantize(W, "int8")
    t.save(tmp_path / "t.edo")
    mapped = edo.load(tmp_path / "t.edo")
    for source, what in ((t, "table"), (mapped, "mapped file"), (f"{served}/t.edo", "remote file")):
        cache = engine.cache(source, 64, policy="lru+tinylfu")
        assert cache.backend == engine.backend
        check_cache(cache, t, f"{engine.backend}: {what}")
    with pytest.raises(edo.NetworkError):
        engine.cache(f"{served}/missing.edo", 64)
    with pytest.raises(TypeError):
        engine.cache(str(tmp_path / "t.edo"), 64)
    with pytest.raises(edo.InvalidArgumentError):
        engine.cache(t, 64, policy="fifo")


def test_caches_over_tables_mapped_files_and_remote_files_on_the_cpu_path(tmp_path, served):
    caches_on(edo.Engine("cpu"), tmp_path, served)


def test_the_planner_fits_the_budget_and_builds_what_it_chose():
    # A generous budget: every table resident in the most precise format.
    p = edo.plan({"words": W, "users": (50_000, 40)}, 1 << 30, access={"words": 1.1})
    assert [t["choice"] for t in p.tables] == ["resident fp16", "resident fp16"], str(p)
    assert p.nbytes <= p.budget and p.expected_error < p.int8_error and "int8 error" in str(p)
    assert p.to_json()["tables"][0]["name"] == "words"
    words = p.build("words")
    assert np.array_equal(words.gather([3, 999]), edo.quantize(W, "fp16").gather([3, 999]))
    with pytest.raises(edo.InvalidArgumentError):
        p.build("users")  # planned from its shape: no values
    # A tight budget under a skewed stream, caches ruled out: mixed precision, the most
    # looked-up rows in the more precise format.
    counts = (1e6 / np.arange(1, 1001) ** 1.2).astype(np.uint64)
    p = edo.plan({"words": W}, 40_000, access={"words": counts}, formats=("fp16", "int8", "int4"), min_hit_rate=2.0)
    (t,) = p.tables
    assert p.nbytes <= 40_000 and t["choice"].startswith("mixed"), str(p)
    built = p.build("words")
    hot, cold = [0, 1, 2], [998, 999]
    n_hot, hot_f, cold_f = re.fullmatch(r"mixed: (\d+) hot rows (\w+), rest (\w+)", t["choice"]).groups()
    assert int(n_hot) > 3 and hot_f != cold_f, t
    assert np.array_equal(built.gather(hot), edo.quantize(W, hot_f).gather(hot)), t
    assert np.array_equal(built.gather(cold), edo.quantize(W, cold_f).gather(cold)), t
    offsets = [0, 2]
    assert np.array_equal(built.bag(hot + cold, offsets), edo.quantize(built.gather(np.arange(1000)), "fp32").bag(hot + cold, offsets))
    placed = built.to(edo.Engine("cpu"))
    assert np.array_equal(placed.gather(hot + cold), built.gather(hot + cold))
    # Cached: the plan's capacity, LFU.
    p = edo.plan({"words": W}, 12_000, access={"words": counts}, formats=("int8",), mixed=False, min_hit_rate=0.5)
    (t,) = p.tables
    assert t["choice"].startswith("cached int8") and t["cache_capacity"] and t["hit_rate"] >= 0.5, str(p)
    cache = p.build("words").to(edo.Engine("cpu"))
    assert isinstance(cache, edo.Cache) and cache.occupancy == (0, t["cache_capacity"])
    assert np.array_equal(cache.gather([0, 5, 999]), edo.quantize(W, "int8").gather([0, 5, 999]))
    # What cannot be planned is said.
    with pytest.raises(edo.InvalidArgumentError):
        edo.plan({"words": W}, 100)
    with pytest.raises(edo.InvalidArgumentError):
        edo.plan({"words": W}, 1 << 20, access={"words": counts[:10]})
    with pytest.raises(edo.InvalidArgumentError):
        edo.plan({"words": W}, 1 << 20, access={"users": 1.1})
    with pytest.raises(edo.InvalidArgumentError):
        edo.plan({"words": W}, 1 << 20, formats=("int9",))
    with pytest.raises(TypeError):
        edo.plan({"words": W}, 1 << 20, access={"words": counts.astype(np.float64)})
    with pytest.raises(edo.InvalidArgumentError):
        edo.plan({"words": W}, 1 << 20, access={"words": -counts.astype(np.int64)})
    # numpy integers as a shape and as an exponent.
    p = edo.plan({"users": (np.int64(50_000), np.int32(40))}, 1 << 30, access={"users": np.float32(1.1)})
    assert p.tables[0]["choice"] == "resident fp16"


def test_live_table_takes_new_keys_updates_and_swaps(tmp_path):
    t = edo.LiveTable("int8", 40, capacity=4, max_rows=1000, policy="lru+tinylfu", init=np.full(40, 0.25, np.float32))
    keys = np.array([2**63 + 5, 7, 123456789012], dtype=np.uint64)
    rows = t.find_or_insert(keys)
    assert rows.shape == (3, 40) and np.allclose(rows, 0.25, atol=1e-3)
    assert len(t) == 3 and 7 in t and 8 not in t and -1 not in t
    # Updates: an upsert, applied whole; the rows read back as INT8 holds them.
    report = t.update([7, 99], W[:2])
    assert report == {"sequence": 1, "inserted": 1, "evicted": 0}
    want = edo.quantize(W[:2], "int8").gather([0, 1])
    assert np.array_equal(t.gather([7, 99]), want)
    assert t.gather(np.array([[7], [99]])).shape == (2, 1, 40)
    bad = W[:2].copy()
    bad[1, 3] = np.nan
    with pytest.raises(edo.InvalidArgumentError):
        t.update([7, 500], bad)
    assert 500 not in t and np.array_equal(t.gather([7]), want[:1])
    # Unknown keys: an IndexError, zeros, or the initial row.
    with pytest.raises(edo.IdOutOfRangeError, match="keys\\[1\\] = 8 is not in the table"):
        t.gather([7, 8])
    assert not t.gather([8], missing="zero").any()
    assert np.allclose(t.gather([8], missing="init"), 0.25, atol=1e-3)
    with pytest.raises(ValueError):
        t.gather([-3])
    # Bags over keys, PyTorch's conventions.
    got = t.bag(np.array([7, 99, 99]), np.array([0, 1]), mode="sum")
    assert np.allclose(got, embedding_bag(want, np.array([0, 1, 1]), [0, 1], "sum"), atol=1e-5)
    assert t.usage([7, 99, 8]).tolist()[2] == 0
    # A snapshot, swapped into another table; a damaged one refused.
    path = tmp_path / "live.edo"
    t.save(path)
    u = edo.LiveTable.open(path)
    assert u.format == "int8" and len(u) == len(t) and np.array_equal(u.gather([7, 99]), want)
    v = edo.LiveTable("int8", 40)
    report = v.swap(path)
    assert report["version"] == 1 and report["keys"] == 4 and v.version == 1
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    (tmp_path / "bad.edo").write_bytes(bytes(data))
    with pytest.raises(edo.BadFileError):
        v.swap(tmp_path / "bad.edo")
    assert v.version == 1 and np.array_equal(v.gather([7, 99]), want)
    with pytest.raises(edo.UnsupportedError):
        edo.load(path)  # a keyed file is no plain table
    # The update log, appended batch by batch, replayed.
    log = tmp_path / "updates.edolog"
    edo.append_updates(log, [7], W[5:6])
    edo.append_updates(log, [1000, 1001], W[6:8])
    assert v.apply_log(log) == 2
    assert np.array_equal(v.gather([1001]), edo.quantize(W[7:8], "int8").gather([0]))
    assert v.stats()["update_batches"] == 2


def test_live_table_serves_reads_while_python_threads_update():
    dim, n = 16, 64
    t = edo.LiveTable("fp32", dim)
    keys = np.arange(n, dtype=np.uint64)
    t.update(keys, np.zeros((n, dim), np.float32))
    errors = []

    def writer():
        for g in range(1, 200):
            t.update(keys, np.full((n, dim), g, np.float32))

    def reader():
        last = 0.0
        try:
            for _ in range(400):
                rows = t.gather(keys)
                assert (rows == rows[0, 0]).all(), "a lookup read rows of two updates"
                assert rows[0, 0] >= last
                last = rows[0, 0]
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert (t.gather(keys) == 199).all()
