//! The suite's cases: how each operation is timed on a backend (its rounds, round trips and
//! latencies), the quality kept beside each speed, and the cases recorded.

use super::*;

pub(super) enum Runner {
    #[cfg(feature = "gpu")]
    Gpu(Engine),
    Cpu(usize),
}

pub(super) struct State {
    pub(super) cases: Vec<Case>,
    pub(super) skipped: Vec<Skipped>,
    pub(super) done: usize,
    pub(super) total: usize,
    pub(super) reps: usize,
    pub(super) start: Instant,
    pub(super) budget: Option<f64>,
}

impl State {
    pub(super) fn out_of_budget(&self) -> bool {
        self.budget.is_some_and(|b| self.start.elapsed().as_secs_f64() > b)
    }

    pub(super) fn skip(&mut self, op: Op, format: String, size: &str, backend: &str, reason: &str) {
        self.skipped.push(Skipped { op: op.name().into(), format, size: size.into(), backend: backend.into(), reason: reason.into() });
    }
}

/// Times of one case: the first call and the timed repetitions.
pub(super) struct Timing {
    first: f64,
    times: Vec<f64>,
}

/// What a case did, for its figures.
pub(super) struct Work<'a> {
    op: Op,
    format: String,
    size: &'a str,
    rows: usize,
    dim: usize,
    items: usize,
    unit: &'static str,
    batch: usize,
    timing: &'static str,
    moved_bytes: u64,
    table_bytes: u64,
    shards: Option<usize>,
    note: Option<String>,
    quality: Option<Quality>,
}

/// The mean cosine of up to 1 024 rows of `table` (spread over it) to the same rows of the FP32
/// values it was packed from: what the format keeps.
pub(super) fn cosine_to_fp32(table: &PackedTable, data: &[f32]) -> Result<f64, Error> {
    let (rows, dim) = (table.rows(), table.dim());
    let n = rows.min(1024);
    let ids: Vec<u32> = (0..n).map(|i| (i * rows / n) as u32).collect();
    let got = edo::cpu::gather(table, &ids, Bounds::Error)?;
    let mut sum = 0.0;
    for (k, &id) in ids.iter().enumerate() {
        let (a, b) = (&got[k * dim..][..dim], &data[id as usize * dim..][..dim]);
        let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
        let norms = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt() * b.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
        // Two zero rows are the same row.
        sum += if norms > 0.0 {
            dot / norms
        } else if a == b {
            1.0
        } else {
            0.0
        };
    }
    Ok(sum / n as f64)
}

/// recall@k of a search's results against the exact dot-product neighbours among the FP32
/// values, over the first 8 queries. A plain loop, not `edo::search::dot_topk`, whose kernels
/// for every format would add ~50 KB to the browser's `.wasm`.
pub(super) fn search_recall(data: &[f32], dim: usize, queries: &[f32], found: &edo::search::Scored, k: usize) -> Quality {
    let nq = (queries.len() / dim).min(8).min(found.queries());
    let k = k.min(data.len() / dim).min(found.k);
    let mut truth = Vec::with_capacity(nq * k);
    for query in queries.chunks_exact(dim).take(nq) {
        let mut scored: Vec<(f32, u32)> = data.chunks_exact(dim).zip(0u32..).map(|(row, id)| (row.iter().zip(query).map(|(a, b)| a * b).sum(), id)).collect();
        // Best first, ties by the lower row (as edo's searches order them).
        let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if k < scored.len() {
            scored.select_nth_unstable_by(k, order);
        }
        truth.extend(scored[..k].iter().map(|&(_, id)| id));
    }
    let value = edo::search::recall(&found.ids[..nq * found.k], found.k, &truth, k, k);
    Quality { metric: format!("recall@{k} of exact fp32"), value }
}

/// The `p`-th percentile of sorted times, by nearest rank.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

pub(super) fn push_case(st: &mut State, backend: &BackendInfo, w: Work, t: Timing) {
    let mut times = t.times;
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times[times.len() / 2].max(1e-9);
    let gbps = w.moved_bytes as f64 / median / 1e9;
    st.cases.push(Case {
        op: w.op.name().into(),
        format: w.format,
        size: w.size.into(),
        rows: w.rows,
        dim: w.dim,
        items: w.items,
        unit: w.unit.into(),
        batch: w.batch,
        backend: backend.id.clone(),
        timing: w.timing.into(),
        reps: times.len(),
        median_s: median,
        min_s: times[0],
        max_s: times[times.len() - 1],
        p99_s: Some(percentile(&times, 0.99)),
        p90_s: Some(percentile(&times, 0.90)),
        quality: w.quality,
        first_call_s: t.first,
        items_per_s: w.items as f64 / median,
        moved_bytes: w.moved_bytes,
        gbps,
        ratio_to_copy: gbps / backend.copy_gbps,
        table_bytes: w.table_bytes,
        shards: w.shards,
        note: w.note,
    });
}

/// Times `f` on `threads` threads of the CPU path (edo-core's calls return its own error, the
/// others edo's).
pub(super) fn time_cpu<E: Into<Error>>(reps: usize, threads: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<Timing, Error> {
    let (first, times) = edo::par::with_threads(threads, || crate::measure::sample_calls(reps, || f().map_err(Into::into)))?;
    Ok(Timing { first, times })
}

#[cfg(feature = "gpu")]
pub(super) async fn time_round_trip<F, Fut>(reps: usize, mut f: F) -> Result<Timing, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let t = Instant::now();
    f().await?;
    let first = t.elapsed().as_secs_f64();
    let mut n = 1;
    let mut times = Vec::with_capacity(reps);
    // Samples grow until one lasts MIN_SAMPLE_S; then `reps` of that many calls are timed.
    while times.len() < reps {
        let t = Instant::now();
        for _ in 0..n {
            f().await?;
        }
        let seconds = t.elapsed().as_secs_f64();
        match crate::measure::more_calls(n, seconds) {
            Some(more) if times.is_empty() => n = more,
            _ => times.push(seconds / n as f64),
        }
    }
    Ok(Timing { first, times })
}

/// The first call of `f`, then `calls` more, each timed on its own (calls long enough for the
/// clock to resolve: round trips, not gathers on the device).
#[cfg(feature = "gpu")]
pub(super) async fn time_each_call<F, Fut, T>(calls: usize, mut f: F) -> Result<Timing, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let t = Instant::now();
    f().await?;
    let first = t.elapsed().as_secs_f64();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        std::hint::black_box(f().await?);
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(Timing { first, times })
}

/// The engine a size's tables live on: the backend's own, or one with the size's shard limit.
#[cfg(feature = "gpu")]
pub(super) fn engine_for(engine: &Engine, size: &Size) -> Engine {
    match size.shard_bytes {
        Some(b) => engine.sibling(EngineOptions { max_binding_bytes: Some(b), ..Default::default() }),
        None => engine.clone(),
    }
}

/// Pooling factor of the bag cases.
pub(super) const BAG: usize = 16;

pub(super) async fn table_case(
    st: &mut State,
    runner: &Runner,
    backend: &BackendInfo,
    size: &Size,
    op: Op,
    table: &PackedTable,
    data: &[f32],
) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let n = size.ids;
    let row_bytes = table.row_words() as u64 * 4;
    let out_f32 = |values: usize| values as u64 * 4;
    let ids = synth::uniform_ids(n, rows, 7);
    let offsets: Vec<u32> = (0..n / BAG).map(|b| (b * BAG) as u32).collect();
    let n_bags = offsets.len();
    let bag_ids = &ids[..n_bags * BAG];
    let hashed_ids: Vec<u64> = {
        let mut rng = synth::Rng::new(11);
        (0..n_bags * BAG).map(|_| rng.next_u64()).collect()
    };
    let spec = HashSpec::new(rows as u32, 2);
    let (moved, batch) = match op {
        Op::Gather => (n as u64 * (row_bytes + 4) + out_f32(n * dim), n),
        Op::BagSum | Op::BagMean => ((n_bags * BAG) as u64 * (row_bytes + 4) + out_f32(n_bags * dim), n_bags),
        _ => ((n_bags * BAG) as u64 * (2 * row_bytes + 8) + out_f32(n_bags * dim), n_bags),
    };
    let pooling = if op == Op::BagMean { Pooling::Mean } else { Pooling::Sum };
    let mut work = Work {
        op,
        format: table.format().name().into(),
        size: size.name,
        rows,
        dim,
        items: if op == Op::Gather { n } else { n_bags * BAG },
        unit: "ids",
        batch,
        timing: "device",
        moved_bytes: moved,
        table_bytes: table.bytes(),
        shards: None,
        note: None,
        quality: Some(Quality { metric: "cosine to fp32".into(), value: cosine_to_fp32(table, data)? }),
    };
    let reps = st.reps;
    let timing = match runner {
        Runner::Cpu(threads) => {
            work.timing = "host";
            match op {
                Op::Gather => {
                    let mut out = vec![0f32; n * dim];
                    time_cpu(reps, *threads, || edo::cpu::gather_into(table, &ids, Bounds::Error, &mut out))?
                }
                Op::BagSum | Op::BagMean => {
                    let mut out = vec![0f32; n_bags * dim];
                    let bags = Bags::new(bag_ids, &offsets);
                    time_cpu(reps, *threads, || edo::cpu::embedding_bags_into(&[table], n_bags, &bags, pooling, Bounds::Error, Layout::Concat, &mut out))?
                }
                // The browser build's API has no hashed bags on the CPU path, and their pooling
                // kernels (for 64-bit ids) would add ~0.5 MB to every page's .wasm for this case.
                #[cfg(web)]
                _ => return Err(Error::Unsupported(edo::Unsupported::HashedBagsInBrowserCpuPath)),
                #[cfg(not(web))]
                _ => {
                    let mut out = vec![0f32; n_bags * dim];
                    let bags = HashedBags::new(&hashed_ids, &offsets);
                    let specs = [spec.clone()];
                    time_cpu(reps, *threads, || edo::hash::hashed_bags_into(&[table], &specs, n_bags, &bags, Pooling::Sum, Layout::Concat, &mut out))?
                }
            }
        }
        #[cfg(feature = "gpu")]
        Runner::Gpu(engine) => {
            let engine = engine_for(engine, size);
            // Uploads are not the call's work: the first call starts at preparing the job
            // (which compiles the kernel the first time a shape is seen).
            let (job, shards, bytes) = if op == Op::HashedBag {
                let g = GpuHashedTables::upload(&engine, &[(table, spec.clone())]).await?;
                let t = Instant::now();
                let bags = HashedBags::new(&hashed_ids, &offsets);
                let job = g.prepare_bags(n_bags, &bags, Pooling::Sum, Layout::Concat).await?;
                ((job, t), None, g.bytes())
            } else {
                let g = GpuTable::upload(&engine, table).await?;
                let t = Instant::now();
                let job = if op == Op::Gather {
                    g.prepare_gather(&ids, Bounds::Error).await?
                } else {
                    g.prepare_bag(&Bags::new(bag_ids, &offsets), pooling, Bounds::Error).await?
                };
                ((job, t), Some(g.shard_count()), g.bytes())
            };
            let (job, t) = job;
            job.submit()?;
            engine.work_done().await?;
            let first = t.elapsed().as_secs_f64();
            if op == Op::Gather && job.output().read().await? != edo::cpu::gather(table, &ids, Bounds::Error)? {
                return Err(Error::gpu("benchmark check", format!("{}: the GPU gather differs from the CPU path", table.format())));
            }
            let times = crate::measure::time_device(&engine, reps, |enc| job.encode(enc)).await?;
            // (Hashed tables do not say how many buffers they took.)
            work.shards = shards;
            work.table_bytes = bytes;
            Timing { first, times }
        }
    };
    push_case(st, backend, work, timing);
    Ok(())
}

pub(super) async fn search_case(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, data: &[f32], int8: &PackedTable) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let (k, multiplier) = (10, 4);
    let queries_n = if size.rows < 10_000 { 8 } else { 32 };
    // Queries near table rows: a row plus noise, so the true neighbours are meaningful.
    let mut rng = synth::Rng::new(5);
    let queries: Vec<f32> = (0..queries_n).flat_map(|q| data[(q * 997 % rows) * dim..][..dim].to_vec()).map(|x| x + 0.3 * rng.normal()).collect();
    let corpus = edo::search::binarize(data, dim)?;
    let code_bytes = (corpus.format().code_bytes(dim) * rows) as u64;
    let mut work = Work {
        op: Op::Search,
        format: "binary+int8".into(),
        size: size.name,
        rows,
        dim,
        items: queries_n,
        unit: "queries",
        batch: queries_n,
        timing: "round trip",
        moved_bytes: code_bytes * queries_n as u64,
        table_bytes: corpus.bytes() + int8.bytes(),
        shards: None,
        note: Some(format!("top-{k}, {multiplier}× candidates rescored")),
        quality: None,
    };
    let want = edo::search::search_rescored(&corpus, &queries, int8, k, multiplier)?;
    work.quality = Some(search_recall(data, dim, &queries, &want, k));
    let timing = match runner {
        Runner::Cpu(threads) => {
            work.timing = "host";
            time_cpu(st.reps, *threads, || edo::search::search_rescored(&corpus, &queries, int8, k, multiplier).map(|_| ()))?
        }
        #[cfg(feature = "gpu")]
        Runner::Gpu(engine) => {
            let engine = engine_for(engine, size);
            let codes = GpuCodes::upload(&engine, &corpus).await?;
            let table = GpuTable::upload(&engine, int8).await?;
            let got = codes.search_rescored(&queries, &table, k, multiplier).await?;
            if (0..queries_n).any(|q| got.ids_of(q) != want.ids_of(q)) {
                return Err(Error::gpu("benchmark check", "the GPU's search results differ from the CPU path's"));
            }
            work.shards = Some(codes.shard_count() + table.shard_count());
            // What the kernels read: the corpus once per tile of queries (or three times a query
            // past the one-pass kernels' k), so the ratio to the copy is of bytes really read.
            let reads = codes.corpus_reads(queries_n, k * multiplier)?;
            work.moved_bytes = code_bytes * reads;
            work.note = Some(format!(
                "top-{k}, {multiplier}× candidates rescored; corpus read {reads}× per call ({:.1} queries a read)",
                queries_n as f64 / reads as f64
            ));
            let (c, t, q) = (&codes, &table, &queries);
            time_round_trip(st.reps, || async move { c.search_rescored(q, t, k, multiplier).await.map(|_| ()) }).await?
        }
    };
    push_case(st, backend, work, timing);
    Ok(())
}

#[cfg(feature = "gpu")]
pub(super) async fn cache_case(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, int8: &PackedTable) -> Result<(), Error> {
    let Runner::Gpu(engine) = runner else {
        // The CPU path holds every row: there is nothing to cache.
        return Ok(());
    };
    let engine = engine_for(engine, size);
    let (rows, dim) = (size.rows, size.dim);
    let batch = (size.ids / 16).max(64);
    let warm = 16;
    let ids = synth::zipf_ids((warm + st.reps + 1) * batch, rows, 1.05, 3);
    let batches: Vec<&[u32]> = ids.chunks(batch).collect();
    let cache = GpuCache::new(&engine, int8, rows.div_ceil(8), edo::cache::PolicyKind::Lfu.build()).await?;
    for b in &batches[..warm] {
        cache.gather(b, Bounds::Error).await?.read().await?;
    }
    cache.reset_stats();
    let mut next = warm;
    let c = &cache;
    let bs = &batches;
    let next = &mut next;
    let timing = {
        let mut times = Vec::new();
        let mut first = 0.0;
        for i in 0..=st.reps {
            let b = bs[*next];
            *next += 1;
            let t = Instant::now();
            c.gather(b, Bounds::Error).await?.read().await?;
            let s = t.elapsed().as_secs_f64();
            if i == 0 {
                first = s;
            } else {
                times.push(s);
            }
        }
        Timing { first, times }
    };
    let stats = cache.stats();
    let row_bytes = int8.row_words() as u64 * 4;
    let work = Work {
        op: Op::Cache,
        format: int8.format().name().into(),
        size: size.name,
        rows,
        dim,
        items: batch,
        unit: "ids",
        batch,
        timing: "round trip",
        moved_bytes: batch as u64 * (row_bytes + 4 + dim as u64 * 4),
        table_bytes: cache.bytes(),
        shards: Some(cache.shard_count()),
        note: Some(format!("LFU over 1/8 of the rows, Zipf 1.05: hit rate {:.3}", stats.hit_rate())),
        quality: None,
    };
    push_case(st, backend, work, timing);
    Ok(())
}

pub(super) async fn latency_cases(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, int8: &PackedTable) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let row_bytes = int8.row_words() as u64 * 4;
    #[cfg(feature = "gpu")]
    let gpu = match runner {
        Runner::Gpu(engine) => Some(GpuTable::upload(engine, int8).await?),
        Runner::Cpu(_) => None,
    };
    let mut batches = vec![1, 64, 1024];
    batches.push(size.ids.max(2048));
    for n in batches {
        // Eight sets of ids, taken in turn: no call repeats the one before it.
        let sets: Vec<Vec<u32>> = (0..8).map(|k| synth::uniform_ids(n, rows, 9 + k)).collect();
        let mut work = Work {
            op: Op::Latency,
            format: int8.format().name().into(),
            size: size.name,
            rows,
            dim,
            items: n,
            unit: "ids",
            batch: n,
            timing: "round trip",
            moved_bytes: n as u64 * (row_bytes + 4 + dim as u64 * 4),
            table_bytes: int8.bytes(),
            shards: None,
            note: None,
            quality: None,
        };
        let mut turn = 0;
        let mut next = || {
            turn += 1;
            &sets[turn % sets.len()]
        };
        let timing = match runner {
            // A caller's round trip: the gather and its readback in one submission.
            #[cfg(feature = "gpu")]
            Runner::Gpu(_) => {
                let g = gpu.as_ref().expect("uploaded above");
                work.shards = Some(g.shard_count());
                // Each call timed on its own, for the tail: at least 100 of them.
                let calls = (10 * st.reps).max(100);
                time_each_call(calls, || {
                    let ids = next();
                    async move { g.lookup_host(&edo::Request::gather(ids, Bounds::Error)).await }
                })
                .await?
            }
            // Calls too short for a clock (and a browser's 100 µs one) to time one by one:
            // samples of many.
            Runner::Cpu(threads) => {
                work.timing = "host";
                let mut out = vec![0f32; n * dim];
                time_cpu(st.reps, *threads, || edo::cpu::gather_into(int8, next(), Bounds::Error, &mut out))?
            }
        };
        push_case(st, backend, work, timing);
    }
    Ok(())
}

/// Short English sentences, cycled to make the embed cases' batches.
pub(super) const TEXTS: [&str; 16] = [
    "The quick brown fox jumps over the lazy dog.",
    "Embedding tables map tokens to vectors.",
    "How do I reset my password?",
    "GPU kernels decode compressed rows on the fly.",
    "A cup of coffee in the morning helps me think.",
    "The train to Berlin leaves at nine.",
    "Quantisation trades a little accuracy for a lot of memory.",
    "Where is the nearest pharmacy?",
    "Static models pool token vectors into sentence vectors.",
    "The cat sat on the warm windowsill.",
    "Search results are ranked by cosine similarity.",
    "Please send the invoice by Friday.",
    "Browsers run WebGPU compute shaders.",
    "Rain is expected over the weekend.",
    "The museum opens its new wing next spring.",
    "Recommender systems look up millions of ids per second.",
];

pub(super) async fn embed_cases<F: FnMut(&Progress) -> Fut, Fut: Future<Output = ()>>(
    st: &mut State,
    progress: &mut F,
    runner: &Runner,
    backend: &BackendInfo,
    model: &StaticModel,
) -> Result<(), Error> {
    progress(&Progress { done: st.done, total: st.total, label: format!("embed on {}", backend.name) }).await;
    if st.out_of_budget() {
        st.skip(Op::Embed, model.table().format().name().into(), "model", &backend.id, "budget");
        st.done += 1;
        return Ok(());
    }
    let texts: Vec<&str> = TEXTS.iter().cycle().take(1024).copied().collect();
    #[cfg(feature = "gpu")]
    let gpu = match runner {
        Runner::Gpu(engine) => Some(GpuStaticModel::upload(engine, model).await?),
        Runner::Cpu(_) => None,
    };
    for n in [1, 32, 1024] {
        let batch = &texts[..n];
        let mut work = Work {
            op: Op::Embed,
            format: model.table().format().name().into(),
            size: "model",
            rows: model.table().rows(),
            dim: model.dim(),
            items: n,
            unit: "texts",
            batch: n,
            timing: "round trip",
            moved_bytes: (n * model.dim() * 4) as u64,
            table_bytes: model.table().bytes(),
            shards: None,
            note: None,
            quality: None,
        };
        let timing = match runner {
            #[cfg(feature = "gpu")]
            Runner::Gpu(_) => {
                let g = gpu.as_ref().expect("uploaded above");
                time_round_trip(st.reps, || async move {
                    g.encode(batch).await?.read().await?;
                    Ok(())
                })
                .await?
            }
            Runner::Cpu(threads) => {
                work.timing = "host";
                time_cpu(st.reps, *threads, || model.encode(batch).map(|_| ()))?
            }
        };
        push_case(st, backend, work, timing);
    }
    st.done += 1;
    Ok(())
}
