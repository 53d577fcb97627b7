//! `edo eval` and `edo bench search`: retrieval quality, memory and latency of each way to search
//! a float table, and the speed of binary Hamming search on the GPU and the CPU path.

use serde::Serialize;

use edo::format::{Format, PackedTable};
use edo::search::{self, CodeTransform, ItqOptions, Scored};
use edo::{Engine, Error, GpuCodes, GpuTable};
use edo_bench::measure::timed;

/// One way to search, measured.
#[derive(Clone, Debug, Serialize)]
pub struct Method {
    /// The method ("binary Hamming", "INT8 exhaustive", …).
    pub name: String,
    /// "GPU" or "CPU".
    pub path: &'static str,
    /// Bytes the search reads: the codes, plus the rescoring table where there is one.
    pub bytes: u64,
    /// `bytes` over the FP32 table's.
    pub ratio_to_fp32: f64,
    /// Wall time of the whole batch of queries, per query, in milliseconds (median of runs).
    pub ms_per_query: f64,
    /// Share of the exact top-1 found at rank 1.
    pub recall_at_1: f64,
    /// Share of the exact top-10 found in the top 10.
    pub recall_at_10: f64,
    /// Share of the exact top-100 found in the top 100.
    pub recall_at_100: f64,
}

/// The evaluation of every method on one table.
#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    /// Rows of the corpus.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Queries searched.
    pub queries: usize,
    /// Candidates per result that rescoring ranks.
    pub multiplier: usize,
    /// The adapter the GPU methods ran on.
    pub adapter: Option<String>,
    /// Every method measured.
    pub methods: Vec<Method>,
}

/// What `evaluate` compares.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// Candidates per result for rescoring.
    pub multiplier: usize,
    /// Timed repetitions per method (the median is reported).
    pub iters: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig { multiplier: 4, iters: 3 }
    }
}

const K: usize = 100;

/// Evaluates search on `corpus` (`rows × dim`, normalised for cosine) with `queries`: exact FP32
/// dot-product top-100 as the ground truth, then recall@1/10/100, memory and latency of exhaustive
/// search over each format of values (FP16, INT8, INT4, ggml's blocks), binary Hamming search, binary search rescored with INT8 rows, and
/// asymmetric search (float query against the binary+scale rows). With an engine, the binary
/// searches run on the GPU too.
pub fn evaluate(corpus: &[f32], rows: usize, dim: usize, queries: &[f32], config: &EvalConfig, engine: Option<&Engine>) -> Result<EvalReport, Error> {
    let nq = queries.len() / dim.max(1);
    let fp32 = PackedTable::quantize(Format::F32, corpus, rows, dim)?;
    let int8 = PackedTable::quantize(Format::Int8, corpus, rows, dim)?;
    let bits = PackedTable::quantize(Format::Binary, corpus, rows, dim)?;
    let scaled = PackedTable::quantize(Format::BinaryScaled, corpus, rows, dim)?;
    let codes = search::binarize(queries, dim)?;
    let iters = config.iters.max(1);

    let (truth, truth_s) = timed(iters, || search::dot_topk(&fp32, queries, K))?;
    let mut methods = Vec::new();
    let mut add = |name: &str, path: &'static str, bytes: u64, seconds: f64, found: &[u32], k: usize| {
        methods.push(Method {
            name: name.to_string(),
            path,
            bytes,
            ratio_to_fp32: bytes as f64 / fp32.bytes() as f64,
            ms_per_query: 1e3 * seconds / nq.max(1) as f64,
            recall_at_1: search::recall(found, k, &truth.ids, truth.k, 1),
            recall_at_10: search::recall(found, k, &truth.ids, truth.k, 10),
            recall_at_100: search::recall(found, k, &truth.ids, truth.k, 100),
        });
    };
    add("fp32 exact (ground truth)", "CPU", fp32.bytes(), truth_s, &truth.ids, truth.k);
    // Every format of values (not signs) searched exhaustively: what each keeps of the ranking.
    for format in Format::ALL.into_iter().filter(|&f| f != Format::F32 && f.code_bits() > 1) {
        let quantized;
        let t = if format == Format::Int8 {
            &int8
        } else {
            quantized = PackedTable::quantize(format, corpus, rows, dim)?;
            &quantized
        };
        let (r, s) = timed(iters, || search::dot_topk(t, queries, K))?;
        add(&format!("{format} exhaustive"), "CPU", t.bytes(), s, &r.ids, r.k);
        if format.has_min_error_search() {
            // The same format with each group's scale and bias chosen for least squared error.
            let t = PackedTable::quantize_min_error(format, corpus, rows, dim)?;
            let (r, s) = timed(iters, || search::dot_topk(&t, queries, K))?;
            add(&format!("{format} min-error exhaustive"), "CPU", t.bytes(), s, &r.ids, r.k);
        }
    }
    let (r, s) = timed(iters, || search::hamming_topk(&bits, &codes, K))?;
    add("binary hamming", "CPU", bits.bytes(), s, &r.ids, r.k);
    let rescore_name = format!("binary + int8 rescore ×{}", config.multiplier);
    let (r, s) = timed(iters, || search::search_rescored(&bits, queries, &int8, K, config.multiplier))?;
    add(&rescore_name, "CPU", bits.bytes() + int8.bytes(), s, &r.ids, r.k);
    let (r, s) = timed(iters, || search::dot_topk(&scaled, queries, K))?;
    add("binary+scale asymmetric", "CPU", scaled.bytes(), s, &r.ids, r.k);
    // Codes that keep more neighbours: centred, and centred then rotated by ITQ (trained on the
    // corpus; the transform's bytes count with the codes').
    let mut transforms = vec![("centred", CodeTransform::centered(corpus, dim)?)];
    // A rotation needs more rows than values per row, at most MAX_ITQ_DIM of them, and rows
    // that do not all coincide; without one, the report goes on without ITQ's rows.
    if rows > dim && dim <= search::codes::MAX_ITQ_DIM {
        if let Ok(t) = CodeTransform::itq(corpus, dim, &ItqOptions::default()) {
            transforms.push(("itq", t));
        }
    }
    for (name, transform) in &transforms {
        let t_bytes = 4 * (transform.mean().len() + transform.rotation().map_or(0, <[f32]>::len)) as u64;
        let t_bits = transform.encode(corpus)?;
        let t_codes = transform.encode(queries)?;
        let (r, s) = timed(iters, || search::hamming_topk(&t_bits, &t_codes, K))?;
        add(&format!("binary {name} hamming"), "CPU", t_bits.bytes() + t_bytes, s, &r.ids, r.k);
        let (r, s) = timed(iters, || search::search_rescored_with(&t_bits, Some(transform), queries, &int8, K, config.multiplier))?;
        add(&format!("binary {name} + int8 rescore ×{}", config.multiplier), "CPU", t_bits.bytes() + t_bytes + int8.bytes(), s, &r.ids, r.k);
    }

    if let Some(engine) = engine {
        let gpu_bits = edo::block_on(GpuCodes::upload(engine, &bits))?;
        let gpu_int8 = edo::block_on(GpuTable::upload(engine, &int8))?;
        let (r, s) = timed(iters, || edo::block_on(gpu_bits.hamming_topk(&codes, K)))?;
        add("binary hamming", "GPU", bits.bytes(), s, &r.ids, r.k);
        let (r, s): (Scored, f64) = timed(iters, || edo::block_on(gpu_bits.search_rescored(queries, &gpu_int8, K, config.multiplier)))?;
        add(&rescore_name, "GPU", bits.bytes() + int8.bytes(), s, &r.ids, r.k);
    }
    Ok(EvalReport { rows, dim, queries: nq, multiplier: config.multiplier, adapter: engine.map(|e| e.adapter().to_string()), methods })
}

/// Binary Hamming top-k on each path, in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct SearchBench {
    /// Rows of codes.
    pub rows: usize,
    /// Bits per row.
    pub bits: usize,
    /// Queries searched.
    pub queries: usize,
    /// Results per query.
    pub k: usize,
    /// Threads of the CPU path.
    pub threads: usize,
    /// Seconds per batch of queries on the CPU path.
    pub cpu_seconds: f64,
    /// Queries per second on the CPU path.
    pub cpu_queries_per_second: f64,
    /// Corpus bytes × queries per second.
    pub cpu_scan_gbps: f64,
    /// The adapter of the GPU figures.
    pub adapter: Option<String>,
    /// Seconds per batch of queries on the GPU.
    pub gpu_seconds: Option<f64>,
    /// Queries per second on the GPU.
    pub gpu_queries_per_second: Option<f64>,
    /// Corpus bytes × queries per second on the GPU.
    pub gpu_scan_gbps: Option<f64>,
    /// The device's own copy (the faster of `copy_buffer_to_buffer` and a copy kernel), bytes
    /// read + written per second, measured in this run.
    pub gpu_copy_gbps: Option<f64>,
    /// `gpu_scan_gbps / gpu_copy_gbps`.
    pub gpu_scan_ratio_to_copy: Option<f64>,
    /// Times the GPU read the corpus per batch ([`GpuCodes::corpus_reads`]: once per tile of up
    /// to eight queries in one pass, three times per query otherwise).
    pub gpu_corpus_reads: Option<u64>,
    /// Corpus bytes the GPU actually read per second (`gpu_corpus_reads` × corpus bytes per
    /// batch), over `gpu_copy_gbps`.
    pub gpu_read_ratio_to_copy: Option<f64>,
    /// Whether the GPU's ids and distances equal the CPU path's.
    pub gpu_equals_cpu: Option<bool>,
    /// Ids and distances of the CPU path (`queries × k`), for peers to compare.
    pub ids: Vec<u32>,
    /// Their Hamming distances.
    pub distances: Vec<u32>,
}

/// Times Hamming top-`k` of `queries` against `corpus` on the CPU path and, with an engine, on
/// the GPU (upload excluded; query upload and readback included).
pub fn search_bench(corpus: &PackedTable, queries: &PackedTable, k: usize, iters: usize, engine: Option<&Engine>) -> Result<SearchBench, Error> {
    let (cpu, cpu_s) = timed(iters, || search::hamming_topk(corpus, queries, k))?;
    let code_bytes = (corpus.rows() * corpus.format().code_bytes(corpus.dim())) as f64;
    let nq = queries.rows() as f64;
    let mut b = SearchBench {
        rows: corpus.rows(),
        bits: corpus.dim(),
        queries: queries.rows(),
        k,
        threads: edo_bench::measure::threads(),
        cpu_seconds: cpu_s,
        cpu_queries_per_second: nq / cpu_s,
        cpu_scan_gbps: code_bytes * nq / cpu_s / 1e9,
        adapter: None,
        gpu_seconds: None,
        gpu_queries_per_second: None,
        gpu_scan_gbps: None,
        gpu_copy_gbps: None,
        gpu_scan_ratio_to_copy: None,
        gpu_corpus_reads: None,
        gpu_read_ratio_to_copy: None,
        gpu_equals_cpu: None,
        ids: Vec::new(),
        distances: Vec::new(),
    };
    if let Some(engine) = engine {
        let codes = edo::block_on(GpuCodes::upload(engine, corpus))?;
        let (gpu, s) = timed(iters, || edo::block_on(codes.hamming_topk(queries, k)))?;
        let copy = edo_bench::measure::gpu_copy_gbps(engine, codes.bytes(), iters)?;
        let scan = code_bytes * nq / s / 1e9;
        b.adapter = Some(engine.adapter().to_string());
        b.gpu_seconds = Some(s);
        b.gpu_queries_per_second = Some(nq / s);
        b.gpu_scan_gbps = Some(scan);
        b.gpu_copy_gbps = Some(copy);
        b.gpu_scan_ratio_to_copy = Some(scan / copy);
        let reads = codes.corpus_reads(queries.rows(), k)?;
        b.gpu_corpus_reads = Some(reads);
        b.gpu_read_ratio_to_copy = Some(code_bytes * reads as f64 / s / 1e9 / copy);
        b.gpu_equals_cpu = Some(gpu == cpu);
    }
    b.ids = cpu.ids;
    b.distances = cpu.distances;
    Ok(b)
}
