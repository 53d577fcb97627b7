//! The browser build in headless Chromium (`scripts/web/test-web.sh`): WebGPU against the CPU path
//! inside the browser, every format, one shard and many. Run once with WebGPU and once without;
//! `EDO_EXPECT_BACKEND` (set at build time by the script) says which backend the engine must pick.
#![cfg(target_arch = "wasm32")]

use std::future::Future;

use edo_web::{EdoEngine, EdoModel, EdoNeighbors, EdoTable};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

const FORMATS: [&str; 27] = [
    "fp32",
    "fp16",
    "int8",
    "int4",
    "binary",
    "binary+scale",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "int4_g32",
    "int4_g64",
    "int4_g128",
    "int8_g32",
    "int8_g64",
    "int8_g128",
    "q4_k",
    "q6_k",
    "fp8_e4m3",
    "fp8_e5m2",
    "int4_zp32",
    "int4_zp64",
    "int4_zp128",
    "int8_zp32",
    "int8_zp64",
    "int8_zp128",
];

fn data(rows: usize, dim: usize, seed: u32) -> Vec<f32> {
    // A small deterministic generator: values in (−1, 1).
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..rows * dim)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

fn ids(n: usize, rows: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % rows) as u32).collect()
}

async fn search(e: &EdoEngine, codes: &EdoTable, queries: Vec<f32>) -> (Vec<u32>, Vec<u32>) {
    search_k(e, codes, queries, 17).await
}

async fn search_k(e: &EdoEngine, codes: &EdoTable, queries: Vec<f32>, k: usize) -> (Vec<u32>, Vec<u32>) {
    let c = e.upload_codes(codes).await.unwrap();
    let n: EdoNeighbors = c.search(queries, k).await.unwrap();
    (n.ids(), n.distances())
}

#[wasm_bindgen_test]
async fn the_engine_picks_the_expected_backend() {
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    if let Some(want) = option_env!("EDO_EXPECT_BACKEND") {
        assert_eq!(engine.backend(), want, "{}", engine.note());
    }
    let cpu = EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await;
    assert_eq!(cpu.backend(), "cpu");
    // A `GPU` object given (the page's own here) is asked instead of navigator.gpu, which is put
    // back afterwards: the same object, still the page's.
    let global = js_sys::global();
    let navigator = js_sys::Reflect::get(&global, &"navigator".into()).unwrap();
    let gpu = js_sys::Reflect::get(&navigator, &"gpu".into()).unwrap();
    if !gpu.is_undefined() {
        let given = EdoEngine::create(None, None, gpu).await;
        if let Some(want) = option_env!("EDO_EXPECT_BACKEND") {
            assert_eq!(given.backend(), want, "{}", given.note());
        }
        assert_eq!(js_sys::Reflect::get(&global, &"navigator".into()).unwrap(), navigator);
        assert!(!js_sys::Reflect::has(&global, &"WorkerGlobalScope".into()).unwrap());
    }
}

#[wasm_bindgen_test]
async fn gather_equals_the_cpu_path_for_every_format_sharded_and_not() {
    let (rows, dim) = (3001, 37);
    let values = data(rows, dim, 1);
    let lookup = ids(2049, rows);
    for shard in [None, Some(16384.0)] {
        let engine = EdoEngine::create(None, shard, JsValue::UNDEFINED).await;
        for format in FORMATS {
            let table = EdoTable::from_float32(&values, rows, dim, format, None, None).unwrap();
            let resident = engine.upload(&table).await.unwrap();
            if engine.backend() == "webgpu" && shard.is_some() {
                assert!(resident.shards() > 1, "{format}: {} shards", resident.shards());
            }
            let got = resident.gather(lookup.clone()).await.unwrap();
            let want = table.gather(&lookup).unwrap();
            assert_eq!(got.len(), want.len());
            let first = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(first.is_none(), "{format} ({} backend, shard {shard:?}): first difference at {first:?}", engine.backend());
        }
    }
}

/// The CPU path's decoders in the browser build: SIMD128 and the portable level (forced) equal
/// each format's one-value-at-a-time reference bit for bit, on quantised rows and on random words
/// (every code and parameter pattern), at widths in and out of step with the formats' groups.
#[wasm_bindgen_test]
fn decoders_equal_the_reference_on_every_simd_level() {
    use edo::cpu::Simd;
    let levels = Simd::supported();
    assert_eq!(levels, vec![Simd::Scalar, Simd::Simd128], "the browser build runs SIMD128");
    assert_eq!(Simd::active(), Simd::Simd128);
    let mut s = 7u32;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    };
    let sentinel = f32::from_bits(0x7fa5_a5a5);
    for name in FORMATS {
        let format = edo::Format::from_name(name).unwrap();
        for dim in [1, 7, 40, 128, 384] {
            let rows = 4;
            let quantized = edo::PackedTable::quantize(format, &data(rows, dim, dim as u32), rows, dim).unwrap();
            let words = (0..rows * format.row_words(dim)).map(|_| next()).collect();
            let random = edo::PackedTable::from_words(format, rows, dim, words).unwrap();
            for (kind, table) in [("quantised", &quantized), ("random", &random)] {
                for r in 0..rows {
                    let mut want = vec![sentinel; dim];
                    format.decode_row_reference(table.row(r), &mut want);
                    for &level in &levels {
                        let mut got = vec![sentinel; dim];
                        format.decode_row_at(level, table.row(r), &mut got);
                        let differ = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()));
                        assert!(differ.is_none(), "{name} dim {dim} {kind} row {r} at {level}: value {differ:?}");
                    }
                }
            }
        }
    }
}

#[wasm_bindgen_test]
async fn the_synthetic_table_and_a_prepared_kernel_serve_the_first_lookup() {
    let (rows, dim) = (1001, 37);
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    engine.prepare("int8".into(), dim, None).await.unwrap();
    assert!(engine.prepare("int9".into(), dim, None).await.is_err());
    // Aligned rows: the kernels that read them sixteen codes a load; a bad alignment is refused.
    engine.prepare("fp8_e4m3".into(), 48, Some(16)).await.unwrap();
    assert!(engine.prepare("int8".into(), 48, Some(12)).await.is_err());
    let source = EdoTable::synthetic(rows, dim, 7).unwrap();
    let exact = edo::synth::embedding_table(rows, dim, 7);
    let lookup = ids(777, rows);
    let want: Vec<f32> = lookup.iter().flat_map(|&r| exact[r as usize * dim..(r as usize + 1) * dim].to_vec()).collect();
    assert_eq!(source.gather(&lookup).unwrap(), want);
    let table = source.quantize("int8").unwrap();
    let got = engine.upload(&table).await.unwrap().gather(lookup.clone()).await.unwrap();
    assert_eq!(got, table.gather(&lookup).unwrap());
    // Shapes past WASM's memory are errors, not an aborted module.
    assert!(EdoTable::synthetic(1 << 20, 1 << 13, 7).is_err(), "overflows the words");
    assert!(EdoTable::synthetic(1 << 16, 1 << 14, 7).is_err(), "4 GiB");
    assert_eq!(EdoTable::synthetic(3, 2, 7).unwrap().rows(), 3, "the module still works");
}

#[wasm_bindgen_test]
async fn bags_and_search_agree_with_the_cpu_path() {
    let (rows, dim) = (2500, 64);
    let values = data(rows, dim, 2);
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    let cpu = EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await;
    let table = EdoTable::from_float32(&values, rows, dim, "int8", None, None).unwrap();
    let (indices, offsets) = (ids(600, rows), vec![0, 5, 5, 100, 599]);
    let got = engine.upload(&table).await.unwrap().bag(indices.clone(), offsets.clone(), "max", None).await.unwrap();
    let want = cpu.upload(&table).await.unwrap().bag(indices, offsets, "max", None).await.unwrap();
    assert_eq!(got, want, "max pooling is exact");

    let codes = EdoTable::from_float32(&values, rows, dim, "binary", None, None).unwrap();
    let queries = data(9, dim, 3);
    assert_eq!(search(&engine, &codes, queries.clone()).await, search(&cpu, &codes, queries.clone()).await, "Hamming top-k is exact");
    // Past 64 results the one pass takes blocks of 4096 rows (16 an invocation): three blocks,
    // then a merge.
    let rows = 9_000;
    let codes = EdoTable::from_float32(&data(rows, dim, 4), rows, dim, "binary", None, None).unwrap();
    assert_eq!(search_k(&engine, &codes, queries.clone(), 600).await, search_k(&cpu, &codes, queries, 600).await, "k = 600 is exact");
}

/// Centred and ITQ codes made in the browser equal the library's, search with queries through
/// their transform (on WebGPU and on the CPU path alike), and keep it through `.edo` bytes.
#[wasm_bindgen_test]
async fn centred_and_itq_codes_search_through_their_transform() {
    use edo::search::{CodeTransform, ItqOptions};
    let (rows, dim) = (1200, 32);
    let values: Vec<f32> = data(rows, dim, 6).iter().enumerate().map(|(i, x)| x + 0.05 * (i % 5) as f32).collect();
    let queries = data(11, dim, 7);
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    let cpu = EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await;
    let table = EdoTable::from_float32(&values, rows, dim, "fp32", None, None).unwrap();
    assert_eq!(table.codes(), None);
    let f32_table = edo::PackedTable::quantize(edo::Format::F32, &values, rows, dim).unwrap();
    let values = f32_table.dequantize();
    for (kind, want) in [
        ("centered", CodeTransform::centered(&values, dim).unwrap()),
        ("itq", CodeTransform::itq(&values, dim, &ItqOptions { iterations: 8, ..Default::default() }).unwrap()),
    ] {
        let codes = table.quantize_codes(kind, Some(8)).unwrap();
        assert_eq!((codes.format(), codes.codes().as_deref()), ("binary".to_string(), Some(kind)));
        let (ids, distances) = search(&engine, &codes, queries.clone()).await;
        assert_eq!((ids.clone(), distances.clone()), search(&cpu, &codes, queries.clone()).await, "{kind}: WebGPU and CPU path");
        let lib = edo::search::hamming_topk(&want.encode(&values).unwrap(), &want.encode(&queries).unwrap(), 17).unwrap();
        assert_eq!((ids.clone(), distances), (lib.ids, lib.distances), "{kind}: the library's codes and queries");
        let back = EdoTable::from_bytes(codes.to_bytes(None).unwrap(), "codes.edo", None, None, None, None).unwrap();
        assert_eq!(back.codes().as_deref(), Some(kind));
        assert_eq!(search(&cpu, &back, queries.clone()).await.0, ids, "{kind}: through .edo bytes");
        // Codes stay binary: another format would lose the transform.
        assert!(codes.quantize("int8").is_err());
        assert!(EdoTable::from_bytes(codes.to_bytes(None).unwrap(), "codes.edo", Some("binary+scale".into()), None, None, None).is_err());
        assert_eq!(codes.quantize("binary").unwrap().codes().as_deref(), Some(kind));
    }
    assert!(table.quantize_codes("pca", None).is_err());
    // Codes are signs already: no codes of codes.
    let signs = EdoTable::from_float32(&values, rows, dim, "binary", None, None).unwrap();
    let e = signs.quantize_codes("centered", None).err().expect("codes of codes");
    assert_eq!(js_sys::Reflect::get(&JsValue::from(e), &"code".into()).unwrap().as_string().as_deref(), Some("INVALID_ARGUMENT"));
    let few = EdoTable::from_float32(&values[..10 * dim], 10, dim, "fp32", None, None).unwrap();
    let e = few.quantize_codes("itq", None).err().expect("too few rows");
    assert_eq!(js_sys::Reflect::get(&JsValue::from(e), &"code".into()).unwrap().as_string().as_deref(), Some("INVALID_ARGUMENT"));
}

#[wasm_bindgen_test]
async fn errors_arrive_as_exceptions_with_the_typed_message() {
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    let table = EdoTable::from_float32(&data(10, 4, 4), 10, 4, "int4", None, None).unwrap();
    let resident = engine.upload(&table).await.unwrap();
    let e = resident.gather(vec![3, 10]).await.expect_err("id 10 of 10 rows");
    assert_eq!(e.code, "ID_OUT_OF_RANGE");
    // JavaScript gets an Error named EdoError with the code and the typed message.
    let js = JsValue::from(e).dyn_into::<js_sys::Error>().expect("an Error");
    assert_eq!(String::from(js.name()), "EdoError");
    assert_eq!(js_sys::Reflect::get(&js, &"code".into()).unwrap().as_string().as_deref(), Some("ID_OUT_OF_RANGE"));
    let message = String::from(js.message());
    assert!(message.contains("ids[1] = 10 is out of range"), "{message}");
    assert!(EdoTable::from_float32(&[f32::NAN; 4], 1, 4, "int8", None, None).is_err());
    // An output larger than WASM memory can hold (600 000 rows of 4096 values, 9.8 GB) is an
    // exception, not an aborted module.
    let wide = EdoTable::from_float32(&data(1, 4096, 5), 1, 4096, "int8", None, None).unwrap();
    let e = wide.gather(&vec![0; 600_000]).expect_err("9.8 GB of output");
    let message = JsValue::from(e).dyn_into::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_default();
    assert!(message.contains("out of host memory"), "{message}");
    assert_eq!(wide.gather(&[0]).unwrap().len(), 4096, "the table still serves after the refusal");
    assert!(EdoTable::from_bytes(b"not a table".to_vec(), "x.edo", None, None, None, None).is_err());
    // An .edo file made in the browser reads back.
    let bytes = table.to_bytes(None).unwrap();
    let back = EdoTable::from_bytes(bytes, "t.edo", None, None, None, None).unwrap();
    assert_eq!(back.gather(&[7]).unwrap(), table.gather(&[7]).unwrap());
    // A .npy of q8_0 rows as `edo export` writes them (dim 13: one whole block a row) reads back
    // with its format as the layout and its dim; without the dim, the error asks for it.
    let q8 = edo::PackedTable::quantize(edo::Format::Q8_0, &data(5, 13, 3), 5, 13).unwrap();
    let npy = edo::file::export::packed_array(&q8).to_npy();
    let read = |dim| EdoTable::from_bytes(npy.clone(), "q8.npy", None, Some("q8_0".into()), None, dim);
    assert_eq!(read(Some(13)).unwrap().gather(&[4]).unwrap(), edo::cpu::gather(&q8, &[4], edo::Bounds::Error).unwrap());
    let e = JsValue::from(read(None).err().expect("a width of several dims")).dyn_into::<js_sys::Error>().unwrap();
    assert!(String::from(e.message()).contains("pass the dim"), "{}", String::from(e.message()));
    assert_eq!(js_sys::Reflect::get(&e, &"code".into()).unwrap(), "INVALID_ARGUMENT");
}

#[wasm_bindgen_test]
async fn a_cache_over_wasm_memory_returns_the_resident_rows() {
    let (rows, dim) = (4000, 24);
    let values = data(rows, dim, 9);
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    for format in ["int8", "fp16", "int4"] {
        let table = EdoTable::from_float32(&values, rows, dim, format, None, None).unwrap();
        let cache = engine.cache(&table, 300, Some("lru".into())).await.unwrap();
        assert_eq!(cache.backend(), engine.backend());
        for batch in 0..4 {
            // Skewed ids: the first rows are hot, so later batches hit.
            let lookup: Vec<u32> = (0..1000).map(|i| ((i * i * 7 + batch * 13) % (if i % 3 == 0 { rows } else { 200 })) as u32).collect();
            let got = cache.gather(lookup.clone()).await.unwrap();
            assert_eq!(got, table.gather(&lookup).unwrap(), "{format} batch {batch}");
        }
        // While a lookup is in flight, its cache answers other calls with errors, not panics.
        let probe: Vec<u32> = (0..50).collect();
        let mut pending = Box::pin(cache.gather(probe.clone()));
        let first = pending.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        assert_eq!(cache.backend(), engine.backend());
        let in_flight = first.is_pending();
        let got = match first {
            std::task::Poll::Ready(got) => got,
            std::task::Poll::Pending => {
                assert!(cache.gather(vec![1]).await.is_err(), "a second lookup is refused");
                assert!(cache.prefetch(vec![1]).await.is_err());
                assert!(cache.stats().is_err());
                pending.await
            }
        };
        assert_eq!(got.unwrap(), table.gather(&probe).unwrap());
        if engine.backend() == "webgpu" {
            assert!(in_flight, "a GPU lookup waits for its readback");
            let stats = cache.stats().unwrap();
            assert!(stats.contains("\"capacity\":300"), "{stats}");
            assert!(!stats.contains("\"hits\":0,"), "{stats}");
            assert!(engine.memory_report().contains("cache slots"));
        }
        assert!(cache.gather(vec![rows as u32]).await.is_err());
    }
    assert!(engine.cache(&EdoTable::from_float32(&values, rows, dim, "int8", None, None).unwrap(), 10, Some("fifo".into())).await.is_err());
}

#[wasm_bindgen_test]
async fn a_cache_over_a_remote_file_fetches_only_the_rows_it_looks_up() {
    let (rows, dim) = (30_000, 16);
    let values = data(rows, dim, 4);
    let table = EdoTable::from_float32(&values, rows, dim, "int8", None, None).unwrap();
    let bytes = table.to_bytes(Some(4096)).unwrap();
    // A blob: URL serves byte ranges as a static server does.
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(&bytes[..]));
    let blob = web_sys::Blob::new_with_u8_array_sequence(&parts).unwrap();
    let url = web_sys::Url::create_object_url_with_blob(&blob).unwrap();
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    let cache = engine.cache_remote(url.clone(), 400, None).await.unwrap();
    for batch in 0..3u32 {
        let lookup: Vec<u32> = (0..300).map(|i| (i * i * 31 + batch * 7) % 1500).collect();
        assert_eq!(cache.gather(lookup.clone()).await.unwrap(), table.gather(&lookup).unwrap(), "batch {batch}");
    }
    let stats = cache.stats().unwrap();
    let fetched: f64 = stats.split("\"bytesFetched\":").nth(1).unwrap().trim_end_matches('}').parse().unwrap();
    assert!(fetched < bytes.len() as f64 / 4.0, "fetched {fetched} of {} bytes: {stats}", bytes.len());
    assert!(cache.gather(vec![rows as u32]).await.is_err());
    // On the CPU path the cache is in WASM memory: rows it holds are not fetched again, and two
    // overlapping lookups fetch each row once between them.
    let cpu = EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await;
    let lookup: Vec<u32> = (0..300).map(|i| (i * i * 31) % 1500).collect();
    let field = |stats: &str, name: &str| -> f64 { stats.split(&format!("\"{name}\":")).nth(1).unwrap().split([',', '}']).next().unwrap().parse().unwrap() };
    let requests = |stats: &str| field(stats, "requests");
    let alone = cpu.cache_remote(url.clone(), 400, None).await.unwrap();
    assert_eq!(alone.backend(), "cpu");
    let opened = requests(&alone.stats().unwrap());
    assert_eq!(alone.gather(lookup.clone()).await.unwrap(), table.gather(&lookup).unwrap());
    let first = alone.stats().unwrap();
    let once = requests(&first);
    assert!(once > opened);
    assert_eq!(alone.gather(lookup.clone()).await.unwrap(), table.gather(&lookup).unwrap());
    let stats = alone.stats().unwrap();
    assert_eq!(requests(&stats), once, "rows held are not fetched again: {stats}");
    assert_eq!(field(&stats, "hits"), field(&first, "hits") + 300.0, "{stats}");
    let both = cpu.cache_remote(url.clone(), 400, None).await.unwrap();
    let (a, b) = join(both.gather(lookup.clone()), both.gather(lookup[100..].to_vec())).await;
    assert_eq!(a.unwrap(), table.gather(&lookup).unwrap());
    assert_eq!(b.unwrap(), table.gather(&lookup[100..]).unwrap());
    let stats = both.stats().unwrap();
    assert_eq!(requests(&stats), once, "the second lookup took its rows from the first one's fetches: {stats}");
    assert_eq!(field(&stats, "sharedReads"), 200.0, "{stats}");
    // A prefetch fetches the next batch's misses; the gather then fetches nothing, and takes them
    // from the staging.
    let ahead = cpu.cache_remote(url.clone(), 400, None).await.unwrap();
    let opened = requests(&ahead.stats().unwrap());
    let distinct = lookup.iter().collect::<std::collections::HashSet<_>>().len();
    assert_eq!(ahead.prefetch(lookup.clone()).await.unwrap(), distinct);
    let staged = ahead.stats().unwrap();
    assert!(requests(&staged) > opened, "{staged}");
    assert_eq!(ahead.gather(lookup.clone()).await.unwrap(), table.gather(&lookup).unwrap());
    let stats = ahead.stats().unwrap();
    assert_eq!(requests(&stats), requests(&staged), "the gather fetched nothing: {stats}");
    assert_eq!((field(&stats, "prefetched"), field(&stats, "servedFromStaging")), (distinct as f64, distinct as f64), "{stats}");
    web_sys::Url::revoke_object_url(&url).unwrap();
    // The file is gone (fetch fails as on a dropped connection): retried, then an error that says so.
    let cold: Vec<u32> = (29_000..29_010).collect();
    let e = message(cache.gather(cold).await.unwrap_err());
    assert!(e.contains("after 3 retries"), "{e}");
    let e = message(engine.cache_remote(url, 400, None).await.err().expect("a file that is gone"));
    assert!(e.contains("after 3 retries"), "{e}");
}

/// The model fixtures (model2vec 0.10 saved them; tests/data/models) and model2vec's vectors.
macro_rules! fixture {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!("../../tests/data/models/", $name, "/config.json")) as &[u8],
            include_bytes!(concat!("../../tests/data/models/", $name, "/tokenizer.json")) as &[u8],
            include_bytes!(concat!("../../tests/data/models/", $name, "/model.safetensors")) as &[u8],
        )
    };
}
#[allow(clippy::type_complexity)]
const MODELS: [(&str, &[u8], &[u8], &[u8]); 4] = [fixture!("wordpiece"), fixture!("bpe_f16"), fixture!("unigram_vq"), fixture!("wordpiece_int8")];
const EXPECTED: &str = include_str!("../../tests/data/models/expected.json");

/// Both futures' results, polled together (as `Promise.all` would run them).
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (Box::pin(a), Box::pin(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    (ra.expect("polled to the end"), rb.expect("polled to the end"))
}

fn message(e: edo_web::Failure) -> String {
    JsValue::from(e).dyn_into::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_default()
}

#[wasm_bindgen_test]
async fn static_models_give_model2vecs_tokens_and_vectors_in_the_browser() {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let texts: Vec<String> = expected["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    for (name, config, tokenizer, table) in MODELS {
        let m = &expected["models"][name];
        let model = EdoModel::from_files(Some(config.to_vec()), tokenizer, table).unwrap();
        assert_eq!(model.dim(), m["dim"].as_u64().unwrap() as usize);
        // The tokenizer compiled to wasm gives Python's tokens.
        for (i, text) in texts.iter().enumerate() {
            let want: Vec<u32> = m["tokens"][i].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(model.tokenize(text).unwrap(), want, "{name}: text {i} {text:?}");
        }
        // The CPU path gives model2vec's vectors (f16 tables: within half an f16 ulp).
        let got = model.embed(texts.clone()).unwrap();
        let want: Vec<f32> = m["vectors"].as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
        let f16 = name == "bpe_f16";
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            let tolerance = if f16 { b.abs() * 2f32.powi(-11) + 1e-5 } else { 1e-5 };
            assert!((a - b).abs() <= tolerance, "{name}: value {i}: edo {a}, model2vec {b}");
        }
        // On the engine (WebGPU pools on the GPU): the CPU path's vectors within the bag bound;
        // in INT8, and through an .edo model file made here, the same.
        for format in ["fp32", "int8"] {
            let model = model.quantize(format).unwrap();
            let cpu = model.embed(texts.clone()).unwrap();
            let resident = engine.upload_model(&model).await.unwrap();
            assert_eq!(resident.backend(), engine.backend());
            let on_engine = resident.embed(texts.clone()).await.unwrap();
            assert_eq!(on_engine.len(), cpu.len());
            for (i, (g, c)) in on_engine.iter().zip(&cpu).enumerate() {
                assert!((g - c).abs() <= 64.0 * f32::EPSILON, "{name} {format}: value {i}: engine {g}, CPU {c}");
            }
            let file = EdoModel::from_bytes(model.to_bytes()).unwrap();
            assert_eq!((file.format(), file.vocab_size()), (format.to_string(), model.vocab_size()));
            assert_eq!(file.embed(texts.clone()).unwrap(), cpu, "{name} {format} from its .edo bytes");
        }
    }
}

#[wasm_bindgen_test]
async fn a_model_file_fetched_by_url_searches_a_corpus_by_meaning() {
    let (_, config, tokenizer, table) = MODELS[0];
    let model = EdoModel::from_files(Some(config.to_vec()), tokenizer, table).unwrap();
    let bytes = model.quantize("int8").unwrap().to_bytes();
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(&bytes[..]));
    let url = web_sys::Url::create_object_url_with_blob(&web_sys::Blob::new_with_u8_array_sequence(&parts).unwrap()).unwrap();
    // The header alone gives the shape, so the kernels can compile while the rest is read.
    let shape = edo_web::table_shape(&js_sys::Uint8Array::from(&bytes[..])).unwrap();
    assert_eq!((shape.format(), shape.rows(), shape.dim(), shape.row_alignment()), ("int8".to_string(), model.rows(), 16, 4));
    assert!(edo_web::table_shape(&js_sys::Uint8Array::from(&bytes[..7])).is_err());
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    engine.prepare_model(shape.format(), shape.dim(), None).await.unwrap();
    assert!(engine.prepare_model("int9".into(), 16, None).await.is_err());
    assert!(engine.prepare_model("int8".into(), 16, Some(12)).await.is_err(), "no power of two");
    // A model whose rows are aligned to 16 bytes: its file says so, and the kernels its first
    // embedding runs (on WebGPU, the bag that reads sixteen codes a load) are prepared from it.
    let aligned = edo::model::StaticModel::from_edo_bytes(bytes.clone()).unwrap().with_row_alignment(16).unwrap().to_edo().to_bytes();
    let shape = edo_web::table_shape(&js_sys::Uint8Array::from(&aligned[..])).unwrap();
    assert_eq!(shape.row_alignment(), 16);
    engine.prepare_model(shape.format(), shape.dim(), Some(shape.row_alignment())).await.unwrap();
    let aligned = EdoModel::from_bytes(aligned).unwrap();
    assert_eq!(aligned.row_alignment(), 16);
    let resident = engine.upload_model(&aligned).await.unwrap();
    let want = aligned.embed(vec!["naïve café".into()]).unwrap();
    let got = resident.embed(vec!["naïve café".into()]).await.unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
    let fetched = EdoModel::from_url(url.clone()).await.unwrap();
    web_sys::Url::revoke_object_url(&url).unwrap();
    assert_eq!(fetched.format(), "int8");
    let lines: Vec<String> = [
        "the quick brown fox jumps over the lazy dog",
        "embedding tables are compressed and looked up on the GPU",
        "café naïve résumé jalapeño",
        "Graphics processors run compute shaders written in WGSL",
        "numbers 12345 and 3.14159",
        "a longer sentence about retrieval, recommender systems and quantisation of vectors",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Padded past one workgroup of codes with lines of their own.
    let corpus: Vec<String> = lines.iter().cloned().chain((0..300).map(|i| format!("filler line {i} {}", ["x", "yy", "zzz"][i % 3]))).collect();
    for engine in [EdoEngine::create(None, None, JsValue::UNDEFINED).await, EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await] {
        let index = engine.upload_model(&fetched).await.unwrap().index(corpus.clone()).await.unwrap();
        assert_eq!(index.rows(), corpus.len());
        for (i, line) in lines.iter().enumerate() {
            let found = index.search(line.clone(), 3, None).await.unwrap();
            assert_eq!(found.ids()[0], i as u32, "{} backend: {line:?} → {:?}", engine.backend(), found.ids());
            assert!(found.scores()[0] >= found.scores()[1]);
        }
    }
    assert!(EdoModel::from_url("/no/such/model.edo".into()).await.is_err());
}

#[wasm_bindgen_test]
fn bad_models_are_exceptions_that_say_why() {
    let (_, config, tokenizer, table) = MODELS[0];
    assert!(message(EdoModel::from_bytes(b"not a model".to_vec()).err().unwrap()).contains("edo table file"));
    let plain = EdoTable::from_float32(&data(4, 4, 1), 4, 4, "int8", None, None).unwrap().to_bytes(None).unwrap();
    assert!(message(EdoModel::from_bytes(plain).err().unwrap()).contains("quantize-model"));
    let mut json: serde_json::Value = serde_json::from_slice(tokenizer).unwrap();
    json["model"]["type"] = "Mystery".into();
    let e = message(EdoModel::from_files(Some(config.to_vec()), &serde_json::to_vec(&json).unwrap(), table).err().unwrap());
    assert!(e.contains("\"Mystery\""), "{e}");
    assert!(EdoModel::from_files(None, tokenizer, &table[..100]).is_err());
    assert!(EdoModel::from_files(None, tokenizer, table).unwrap().quantize("int9").is_err());
}

#[wasm_bindgen_test]
async fn a_lost_webgpu_device_is_recovered_with_every_table_and_the_right_rows() {
    let (rows, dim) = (3001, 37);
    let values = data(rows, dim, 21);
    let engine = EdoEngine::create(None, Some(64.0 * 1024.0), JsValue::UNDEFINED).await;
    let heard = std::rc::Rc::new(std::cell::RefCell::new(Vec::<String>::new()));
    let listener = {
        let heard = heard.clone();
        wasm_bindgen::closure::Closure::<dyn FnMut(JsValue)>::new(move |e: JsValue| {
            let kind = js_sys::Reflect::get(&e, &"type".into()).ok().and_then(|t| t.as_string()).unwrap_or_default();
            heard.borrow_mut().push(kind);
        })
    };
    engine.on_device_event(listener.as_ref().unchecked_ref::<js_sys::Function>().clone());
    listener.forget();

    let table = EdoTable::from_float32(&values, rows, dim, "int8", None, None).unwrap();
    let resident = engine.upload(&table).await.unwrap();
    let cache = engine.cache(&EdoTable::from_float32(&values, rows, dim, "q4_k", None, None).unwrap(), 200, None).await.unwrap();
    let cached_table = EdoTable::from_float32(&values, rows, dim, "q4_k", None, None).unwrap();
    let hot: Vec<u32> = (0..150).map(|i| (i * 17 % rows) as u32).collect();
    assert_eq!(cache.gather(hot.clone()).await.unwrap(), cached_table.gather(&hot).unwrap());
    let bits = EdoTable::from_float32(&values, rows, dim, "binary", None, None).unwrap();
    let codes = engine.upload_codes(&bits).await.unwrap();
    let queries = data(3, dim, 22);
    let want_search = search(&EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await, &bits, queries.clone()).await;
    let (_, config, tokenizer, weights) = MODELS[0];
    let model = EdoModel::from_files(Some(config.to_vec()), tokenizer, weights).unwrap();
    let corpus: Vec<String> = (0..300).map(|i| format!("line {i} about {}", ["gpus", "tables", "vectors"][i % 3])).collect();
    let index = engine.upload_model(&model).await.unwrap().index(corpus.clone()).await.unwrap();
    let want_found = index.search("line 7 about vectors".into(), 5, None).await.unwrap().ids();
    assert!(!engine.recover().await.unwrap(), "nothing to recover from");

    // A lookup waiting on the GPU when the device goes, and others started after.
    let lookup = ids(2000, rows);
    let mut in_flight = Box::pin(resident.gather(lookup.clone()));
    let first = in_flight.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    engine.lose_device();
    let got = match first {
        std::task::Poll::Ready(got) => got,
        std::task::Poll::Pending => in_flight.await,
    };
    let want = table.gather(&lookup).unwrap();
    assert_eq!(got.unwrap(), want);
    if engine.backend() != "webgpu" {
        // The CPU path has no device to lose.
        assert_eq!((engine.generation(), heard.borrow().len()), (0.0, 0));
        return;
    }
    assert_eq!(resident.gather(lookup.clone()).await.unwrap(), want);
    let offsets: Vec<u32> = (0..2000).step_by(9).collect();
    assert_eq!(resident.bag(lookup.clone(), offsets.clone(), "mean", None).await.unwrap().len(), offsets.len() * dim);
    assert_eq!(cache.gather(hot.clone()).await.unwrap(), cached_table.gather(&hot).unwrap());
    let stats = cache.stats().unwrap();
    assert!(stats.contains("\"misses\":0,"), "the rebuilt cache holds the hot rows: {stats}");
    assert_eq!(search(&engine, &bits, queries.clone()).await, want_search);
    let n = codes.search(queries, 17).await.unwrap();
    assert_eq!((n.ids(), n.distances()), want_search);
    assert_eq!(index.search("line 7 about vectors".into(), 5, None).await.unwrap().ids(), want_found);
    assert_eq!(engine.generation(), 1.0, "one rebuild");
    assert_eq!(*heard.borrow(), ["lost", "recovered"]);
    assert!(engine.memory_report().contains("cache slots"));
}

/// Reordered and pruned tables on the engine (WebGPU sharded, or the CPU path): the same ids give
/// the plain table's rows (a pruned row zeros), in gathers and bags, read back from `.edo` bytes,
/// and after the device is lost.
#[wasm_bindgen_test]
async fn reordered_and_pruned_tables_give_the_plain_tables_rows() {
    let (rows, dim) = (3001, 37);
    let values = data(rows, dim, 31);
    let engine = EdoEngine::create(None, Some(16384.0), JsValue::UNDEFINED).await;
    let lookup = ids(2049, rows);
    let offsets: Vec<u32> = (0..2049).step_by(11).collect();
    // One format: the kernels' formats are tested natively (tests/gpu/tables.rs); each shape
    // compiled here costs about a second on SwiftShader.
    for format in ["int8"] {
        let plain = EdoTable::from_float32(&values, rows, dim, format, None, None).unwrap();
        let counts: Vec<u32> = (0..rows as u32).map(|r| (r * 7919) % 1000).collect();
        let reordered = plain.reorder_by_counts(&counts).unwrap();
        let back = EdoTable::from_bytes(reordered.to_bytes(None).unwrap(), "r.edo", None, None, None, None).unwrap();
        assert!(back.remapped(), "{format}");
        let on_plain = engine.upload(&plain).await.unwrap();
        let on_back = engine.upload(&back).await.unwrap();
        if engine.backend() == "webgpu" {
            assert!(on_back.shards() > 1, "{format}: {} shards", on_back.shards());
        }
        let want = plain.gather(&lookup).unwrap();
        assert_eq!(back.gather(&lookup).unwrap(), want, "{format}: the CPU path");
        assert_eq!(on_back.gather(lookup.clone()).await.unwrap(), want, "{format} on {}", engine.backend());
        // The same rows pooled; sums and means may be added in another order on the GPU (the
        // pruned kernel's), so they agree to rounding, maxima exactly.
        for pooling in ["sum", "mean", "max"] {
            let got = on_back.bag(lookup.clone(), offsets.clone(), pooling, None).await.unwrap();
            let want = on_plain.bag(lookup.clone(), offsets.clone(), pooling, None).await.unwrap();
            assert_eq!(got.len(), want.len());
            let tol = if pooling == "max" { 0.0 } else { 1e-5 };
            let far = got.iter().zip(&want).position(|(a, b)| (a - b).abs() > tol * (1.0 + b.abs()));
            assert!(far.is_none(), "{format} {pooling} on {}: {far:?}", engine.backend());
        }
    }
    let keep: Vec<u8> = (0..rows).map(|r| u8::from(r % 4 != 1)).collect();
    let pruned = EdoTable::from_float32(&values, rows, dim, "int8", Some(keep), None).unwrap();
    assert_eq!((pruned.rows(), pruned.stored_rows()), (rows, rows - rows / 4));
    let want = pruned.gather(&lookup).unwrap();
    let plain = EdoTable::from_float32(&values, rows, dim, "int8", None, None).unwrap().gather(&lookup).unwrap();
    for (i, &id) in lookup.iter().enumerate() {
        let row = &want[i * dim..(i + 1) * dim];
        if id % 4 == 1 {
            assert!(row.iter().all(|&v| v == 0.0), "pruned row {id}");
        } else {
            assert_eq!(row, &plain[i * dim..(i + 1) * dim], "kept row {id}");
        }
    }
    let on_pruned = engine.upload(&pruned).await.unwrap();
    assert_eq!(on_pruned.gather(lookup.clone()).await.unwrap(), want);
    if engine.backend() == "webgpu" {
        let on_gpu = on_pruned.gather_gpu(lookup.clone()).await.unwrap();
        assert_eq!(on_gpu.read().await.unwrap(), want);
        // The device goes: the pruned table comes back from its host copy, remap and all.
        engine.lose_device();
        assert_eq!(on_pruned.gather(lookup.clone()).await.unwrap(), want);
        assert_eq!(engine.generation(), 1.0);
    }
}

#[wasm_bindgen_test]
async fn f16_gathers_equal_the_cpu_paths_bit_for_bit() {
    let (rows, dim) = (2003, 37);
    let values = data(rows, dim, 31);
    let gpu = EdoEngine::create(None, Some(16.0 * 1024.0), JsValue::UNDEFINED).await;
    let cpu = EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await;
    let lookup = ids(1500, rows);
    for format in ["fp32", "fp16", "int8", "q4_k", "fp8_e4m3"] {
        let table = EdoTable::from_float32(&values, rows, dim, format, None, None).unwrap();
        let want = cpu.upload(&table).await.unwrap().gather_f16(lookup.clone()).await.unwrap();
        assert_eq!(want.len(), lookup.len() * dim);
        let got = gpu.upload(&table).await.unwrap().gather_f16(lookup.clone()).await.unwrap();
        assert_eq!(got, want, "{format} on {}", gpu.backend());
        // The f16 values are the f32 gather's, rounded: within f16's half step of them.
        let f32s = table.gather(&lookup).unwrap();
        assert!(f32s.iter().zip(&got).all(|(x, &h)| (half_to_f32(h) - x).abs() <= x.abs() / 2048.0 + 6e-8), "{format}");
    }
}

/// An f16's bits as f32 (normal and subnormal values; edo's rows hold no inf or NaN).
fn half_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((h >> 10) & 0x1f) as i32, (h & 0x3ff) as f32);
    sign * if e == 0 { m * 2f32.powi(-24) } else { (1.0 + m / 1024.0) * 2f32.powi(e - 15) }
}

/// INT8, FP8 and q8_0 rows aligned to 16 bytes on the GPU (the kernels that read sixteen codes a
/// load, compiled by the browser's WGSL compiler) gather and pool as the packed table does on
/// this backend; the alignment survives an `.edo` file; bad alignments are refused, pruned tables
/// align their stored rows; FP16 rows take their 16-byte kernels and equal the CPU path.
#[wasm_bindgen_test]
async fn aligned_rows_gather_and_pool_as_packed_rows_do() {
    let (rows, dim) = (2001, 48);
    let values = data(rows, dim, 6);
    let lookup = ids(1500, rows);
    let offsets: Vec<u32> = (0..lookup.len() as u32).step_by(7).collect();
    // INT8 on one shard and over several; the other 8-bit formats, whose aligned rows take the
    // same 16-byte kernels over their own decode16, on one.
    let cases = [("int8", None), ("int8", Some(16384.0)), ("fp8_e4m3", None), ("q8_0", None)];
    for (format, shard) in cases {
        let engine = EdoEngine::create(None, shard, JsValue::UNDEFINED).await;
        if let Some(want) = option_env!("EDO_EXPECT_BACKEND") {
            assert_eq!(engine.backend(), want, "{}", engine.note());
        }
        let plain = EdoTable::from_float32(&values, rows, dim, format, None, None).unwrap();
        let aligned = EdoTable::from_float32(&values, rows, dim, format, None, Some(16)).unwrap();
        assert_eq!((plain.row_alignment(), aligned.row_alignment()), (4, 16));
        let back = EdoTable::from_bytes(aligned.to_bytes(None).unwrap(), "a.edo", None, None, None, None).unwrap();
        assert_eq!(back.row_alignment(), 16, "kept in the file");
        let (on_plain, on_back) = (engine.upload(&plain).await.unwrap(), engine.upload(&back).await.unwrap());
        let what = format!("{format} on the {} backend, shard {shard:?}", engine.backend());
        assert_eq!(on_back.gather(lookup.clone()).await.unwrap(), on_plain.gather(lookup.clone()).await.unwrap(), "{what}");
        for pooling in ["sum", "max"] {
            let got = on_back.bag(lookup.clone(), offsets.clone(), pooling, None).await.unwrap();
            let want = on_plain.bag(lookup.clone(), offsets.clone(), pooling, None).await.unwrap();
            assert_eq!(got.len(), want.len());
            // Bit for bit on one shard (the same terms in the same order) and for max; over
            // shards, which split the two tables' rows differently, partial sums add in another
            // order.
            let exact = shard.is_none() || pooling == "max";
            let first = got.iter().zip(&want).position(|(g, w)| if exact { g.to_bits() != w.to_bits() } else { (g - w).abs() > 1e-5 * (1.0 + w.abs()) });
            assert!(first.is_none(), "{what} {pooling}: first difference at {first:?}");
        }
    }
    // FP16 rows of a dim that is a multiple of 16 take the 16-byte kernels without an alignment:
    // the CPU path's rows and maxima, bit for bit.
    let half = EdoTable::from_float32(&values, rows, dim, "fp16", None, None).unwrap();
    let (engine, cpu) = (EdoEngine::create(None, None, JsValue::UNDEFINED).await, EdoEngine::create(Some(false), None, JsValue::UNDEFINED).await);
    let (on_gpu, on_cpu) = (engine.upload(&half).await.unwrap(), cpu.upload(&half).await.unwrap());
    assert_eq!(on_gpu.gather(lookup.clone()).await.unwrap(), half.gather(&lookup).unwrap(), "fp16 gather");
    let (got, want) =
        (on_gpu.bag(lookup.clone(), offsets.clone(), "max", None).await.unwrap(), on_cpu.bag(lookup.clone(), offsets.clone(), "max", None).await.unwrap());
    assert_eq!(got, want, "fp16 max bags");
    for bad in [2, 12, 512] {
        assert!(EdoTable::from_float32(&values, rows, dim, "int8", None, Some(bad)).is_err(), "{bad}");
    }
    // A pruned table aligns its stored rows: the same rows as without.
    let keep: Vec<u8> = (0..rows).map(|i| (i % 3 != 0) as u8).collect();
    let pruned = EdoTable::from_float32(&values, rows, dim, "int8", Some(keep.clone()), Some(16)).unwrap();
    let plain = EdoTable::from_float32(&values, rows, dim, "int8", Some(keep), None).unwrap();
    assert_eq!((pruned.row_alignment(), pruned.remapped()), (16, true));
    let engine = EdoEngine::create(None, None, JsValue::UNDEFINED).await;
    let (a, b) = (engine.upload(&pruned).await.unwrap(), engine.upload(&plain).await.unwrap());
    assert_eq!(a.gather(lookup.clone()).await.unwrap(), b.gather(lookup.clone()).await.unwrap());
}
