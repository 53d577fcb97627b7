//! The row cache against the resident table: policies, budgets, prefetch, pressure, sharing.

use super::*;

/// A host table that counts the rows read from it.
struct Counting {
    table: PackedTable,
    reads: std::cell::Cell<usize>,
}

impl edo::cache::RowSource for Counting {
    fn format(&self) -> Format {
        self.table.format()
    }
    fn rows(&self) -> usize {
        self.table.rows()
    }
    fn dim(&self) -> usize {
        self.table.dim()
    }
    async fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> Result<(), Error> {
        self.reads.set(self.reads.get() + rows.len());
        edo::cache::RowSource::read_rows(&self.table, rows, out).await
    }
}

/// Looks up through a cache into a sentinel-filled output and reads it back.
fn cache_lookup<S: edo::cache::RowSource>(cache: &edo::GpuCache<S>, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
    let job = block_on(cache.prepare_gather(ids, bounds))?;
    job.output().fill(SENTINEL)?;
    job.submit()?;
    // The job's inputs go before the readback, as a caller's would: the budget tests count on it.
    Ok(job.into_output().read_blocking()?)
}

/// A cache over a host table returns the fully resident table's rows bit for bit, for every
/// format and policy, on Zipf batches with duplicates, bad ids (Zero and Clamp), evictions in
/// the middle of a batch (more distinct rows than slots, down to a single slot), and slots
/// spread over several shards.
///
/// Every format runs with one policy (each in turn) and every policy with INT8 and INT4: what
/// a format changes (the rows' bytes, decoded by the gather) does not depend on the policy, and
/// what a policy changes (which slots are reused) does not depend on the format. (The whole
/// product took most of the GPU tests' time on lavapipe.)
#[test]
fn cached_lookups_equal_the_resident_table_for_every_format_and_policy() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(8192), ..Default::default() }) else { return };
    let (rows, dim) = (3000, 37);
    let data = embedding_table(rows, dim, 21);
    let policies = edo::cache::PolicyKind::ALL;
    for (i, format) in Format::ALL.into_iter().enumerate() {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let kinds: &[edo::cache::PolicyKind] = if matches!(format, Format::Int8 | Format::Int4) { &policies } else { &policies[i % policies.len()..][..1] };
        for &kind in kinds {
            for capacity in [1usize, 61, 700] {
                let cache = block_on(edo::GpuCache::new(&engine, table.clone(), capacity, kind.build())).unwrap();
                assert_eq!(cache.max_capacity(), capacity);
                for batch in 0..4u64 {
                    let n = [1usize, 300, 1029, 5][batch as usize];
                    let mut ids = edo::synth::zipf_ids(n, rows, 1.05, batch + 10 * capacity as u64);
                    if n > 100 {
                        ids[17] = rows as u32 + 5;
                        ids[n - 1] = u32::MAX;
                    }
                    let bounds = if batch % 2 == 0 { Bounds::Zero } else { Bounds::Clamp };
                    let got = cache_lookup(&cache, &ids, bounds).unwrap();
                    let want = edo::cpu::gather(&table, &ids, bounds).unwrap();
                    assert_bits_eq(&got, &want, &format!("{format} {kind} capacity {capacity} batch {batch}"));
                }
                let s = cache.stats();
                assert!(s.hits > 0 && s.misses > 0, "{format} {kind} {capacity}: {s:?}");
                if capacity < 700 {
                    assert!(s.parts > s.batches && s.evictions > 0, "{format} {kind} {capacity}: batches split mid-way: {s:?}");
                }
                // The cache grew page by page as it filled; each page is one shard within the
                // binding limit.
                let rows_per_shard = engine.max_binding_bytes() as usize / format.row_bytes(dim);
                assert!(cache.page_rows() <= rows_per_shard && cache.capacity() <= capacity);
                assert_eq!(cache.bytes(), (cache.capacity() * format.row_bytes(dim)) as u64);
                assert_eq!(cache.shard_count(), cache.capacity().div_ceil(cache.page_rows()), "{format} {capacity}");
                if capacity * format.row_bytes(dim) > engine.max_binding_bytes() as usize {
                    assert!(cache.shard_count() > 1, "{format}: {capacity} slots need several shards");
                }
            }
        }
    }
}

/// A budget of no row is refused; one row works (every distinct id its own part); a bad id under
/// `Bounds::Error` changes nothing; an unsubmitted lookup leaves no row claimed but not loaded.
#[test]
fn cache_budgets_of_zero_and_one_row_and_failed_lookups() {
    // An engine of its own: the shared one's allocated bytes move with the tests running beside
    // this one, and the refused caches must leave this engine's count as it was.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let (rows, dim) = (500, 16);
    let table = PackedTable::quantize(Format::Int4, &embedding_table(rows, dim, 5), rows, dim).unwrap();
    let row_bytes = Format::Int4.row_bytes(dim) as u64;
    let before = engine.allocated_bytes();
    for budget in [0, row_bytes - 1] {
        match block_on(edo::GpuCache::with_budget(&engine, table.clone(), budget, edo::cache::PolicyKind::Lru.build())) {
            Err(Error::LimitExceeded { .. }) => {}
            Err(e) => panic!("budget {budget}: {e}"),
            Ok(_) => panic!("budget {budget}: a cache without a slot was made"),
        }
    }
    assert!(matches!(block_on(edo::GpuCache::new(&engine, table.clone(), 0, edo::cache::PolicyKind::Lfu.build())), Err(Error::LimitExceeded { .. })));
    assert_eq!(engine.allocated_bytes(), before);

    let one = block_on(edo::GpuCache::with_budget(&engine, table.clone(), row_bytes, edo::cache::PolicyKind::Arc.build())).unwrap();
    assert_eq!(one.capacity(), 1);
    let ids = [4u32, 4, 9, 4, 9, 9, 499, 0];
    assert_bits_eq(&cache_lookup(&one, &ids, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "one slot");
    assert_eq!(one.stats().parts, 6);

    let cache = block_on(edo::GpuCache::new(&engine, table.clone(), 50, edo::cache::PolicyKind::Lru.build())).unwrap();
    cache_lookup(&cache, &[1, 2, 3], Bounds::Error).unwrap();
    let stats = cache.stats();
    assert!(matches!(block_on(cache.gather(&[7, 500], Bounds::Error)), Err(Error::IdOutOfRange { index: 1, id: 500, .. })));
    assert_eq!(cache.stats(), stats, "a refused lookup changes nothing");
    assert!(!cache.is_cached(7));
    // Prepared, then dropped: row 8 must not look cached, and a later lookup loads it.
    drop(block_on(cache.prepare_gather(&[8, 1], Bounds::Error)).unwrap());
    assert!(!cache.is_cached(8) && cache.is_cached(1));
    let ids = [8u32, 1, 8];
    assert_bits_eq(&cache_lookup(&cache, &ids, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "after a dropped job");
}

/// Prefetched rows are hits for the lookup that follows; row updates reach the cached copies;
/// a mapped table file whose rows were damaged gives a checksum error and serves its good rows.
#[test]
fn cache_prefetch_updates_and_a_damaged_file() {
    let Some(engine) = engine() else { return };
    let (rows, dim) = (4000, 24);
    let data = embedding_table(rows, dim, 8);
    let table = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let counting = Counting { table: table.clone(), reads: std::cell::Cell::new(0) };
    let batches: Vec<Vec<u32>> = (0..6).map(|b| edo::synth::zipf_ids(512, rows, 1.05, 100 + b)).collect();
    {
        // Large enough that a batch never evicts its own rows: every miss was staged.
        let cache = block_on(edo::GpuCache::new(&engine, &counting, 3000, edo::cache::PolicyKind::Lfu.build())).unwrap();
        let mut pending = block_on(cache.gather(&batches[0], Bounds::Error)).unwrap();
        for b in 1..batches.len() {
            // Stage the next batch while this one runs; the lookup then reads nothing from the host.
            let staged = block_on(cache.prefetch(&batches[b])).unwrap();
            assert!(staged > 0, "batch {b}");
            let got = pending.read_blocking().unwrap();
            assert_bits_eq(&got, &edo::cpu::gather(&table, &batches[b - 1], Bounds::Error).unwrap(), &format!("batch {} with the next staged", b - 1));
            let (reads, before) = (counting.reads.get(), cache.stats());
            pending = block_on(cache.gather(&batches[b], Bounds::Error)).unwrap();
            let after = cache.stats();
            assert_eq!(counting.reads.get(), reads, "batch {b}: every missing row came from the staging");
            assert_eq!(after.served_from_staging - before.served_from_staging, after.misses - before.misses, "batch {b}");
        }
        assert_bits_eq(&pending.read_blocking().unwrap(), &edo::cpu::gather(&table, &batches[5], Bounds::Error).unwrap(), "the last batch");
        assert!(cache.stats().served_from_staging > 100, "{:?}", cache.stats());
        // A staging that guessed wrong is harmless: the lookup reads its misses from the host.
        block_on(cache.prefetch(&[1, 2, 3])).unwrap();
        let other: Vec<u32> = (3000..3100).collect();
        assert_bits_eq(
            &block_on(cache.gather(&other, Bounds::Error)).unwrap().read_blocking().unwrap(),
            &edo::cpu::gather(&table, &other, Bounds::Error).unwrap(),
            "after a wrong guess",
        );
    }
    let mut cache = block_on(edo::GpuCache::new(&engine, table.clone(), 400, edo::cache::PolicyKind::Lfu.build())).unwrap();
    block_on(cache.gather(&batches.concat(), Bounds::Error)).unwrap();

    // Update cached and uncached rows through the cache.
    let mut host = table.clone();
    let hot = batches[5][0];
    let ids = [hot, 3999, hot];
    let fresh = embedding_table(3, dim, 99);
    assert!(cache.is_cached(hot));
    block_on(cache.update_rows(&ids, &fresh)).unwrap();
    host.update_rows(&ids, &fresh).unwrap();
    let all: Vec<u32> = batches.concat();
    assert_bits_eq(&cache_lookup(&cache, &all, Bounds::Error).unwrap(), &edo::cpu::gather(&host, &all, Bounds::Error).unwrap(), "after update_rows");
    assert!(matches!(block_on(cache.update_rows(&[4000], &fresh[..dim])), Err(Error::IdOutOfRange { .. })));
    // A row staged by a prefetch and then changed: the lookup sees the new row, not the staged one.
    let cold = (0..rows as u32).rev().find(|&r| !cache.is_cached(r)).unwrap();
    assert_eq!(block_on(cache.prefetch(&[cold])).unwrap(), 1);
    block_on(cache.update_rows(&[cold], &fresh[dim..2 * dim])).unwrap();
    host.update_rows(&[cold], &fresh[dim..2 * dim]).unwrap();
    assert_bits_eq(
        &cache_lookup(&cache, &[cold], Bounds::Error).unwrap(),
        &edo::cpu::gather(&host, &[cold], Bounds::Error).unwrap(),
        "a staged row updated before its lookup",
    );

    // A table file with a damaged byte in its last rows.
    let dir = std::env::temp_dir().join(format!("edo-gpu-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.edo");
    let big_rows = 40_000; // 40 000 × 28 B: two 1 MiB checksum chunks
    let big = PackedTable::quantize(Format::Int8, &embedding_table(big_rows, dim, 3), big_rows, dim).unwrap();
    let file = edo::file::TableFile::new(big.clone());
    let mut bytes = file.to_bytes();
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let damaged = edo::file::TableFile::open(&path).unwrap();
    let cache = block_on(edo::GpuCache::new(&engine, damaged, 100, edo::cache::PolicyKind::Lru.build())).unwrap();
    let good = [0u32, 5, 17];
    assert_bits_eq(&cache_lookup(&cache, &good, Bounds::Error).unwrap(), &edo::cpu::gather(&big, &good, Bounds::Error).unwrap(), "good rows of a damaged file");
    match block_on(cache.gather(&[1, 39_999], Bounds::Error)) {
        Err(Error::Checksum { .. }) => {}
        other => panic!("expected a checksum error, got {:?}", other.map(|_| ())),
    }
    assert!(!cache.is_cached(39_999), "a row that failed to load is not claimed");
    assert_bits_eq(&cache_lookup(&cache, &good, Bounds::Error).unwrap(), &edo::cpu::gather(&big, &good, Bounds::Error).unwrap(), "the cache still serves");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The memory report names every table and cache with its bytes; caches grow page by page while
/// the engine has room, give a page back above 90 % of the budget, drop to one page above 95 %,
/// and grow again once memory is freed — serving exact rows throughout.
#[test]
fn memory_report_and_cache_pressure_stages() {
    let budget = 4u64 << 20;
    let Some(engine) = engine_with(EngineOptions { memory_budget: Some(budget), ..Default::default() }) else { return };
    let (rows, dim) = (20_000, 8);
    let host = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 4), rows, dim).unwrap();
    let row_bytes = Format::Int8.row_bytes(dim) as u64;
    let cache = block_on(edo::GpuCache::new(&engine, &host, 8000, edo::cache::PolicyKind::Lfu.build())).unwrap();
    cache.set_name("user cache");
    assert_eq!((cache.page_rows(), cache.capacity()), (2000, 2000), "a quarter of the capacity per page under a budget");
    let check = |cache: &edo::GpuCache<&PackedTable>, ids: &[u32], what: &str| {
        assert_bits_eq(&cache_lookup(cache, ids, Bounds::Error).unwrap(), &edo::cpu::gather(&host, ids, Bounds::Error).unwrap(), what);
    };
    let wide: Vec<u32> = (0..5000).map(|i| i * 4).collect();
    check(&cache, &wide, "growing");
    assert_eq!(cache.capacity(), 6000, "grew to fit the batch's rows");

    let report = engine.memory_report();
    assert_eq!(report.total, engine.allocated_bytes());
    assert_eq!(report.owner_bytes("user cache"), cache.bytes());
    assert_eq!(cache.bytes(), 6000 * row_bytes);
    let json = report.to_json();
    assert_eq!(json["budget"], budget);
    assert!(json["entries"].as_array().unwrap().iter().any(|e| e["owner"] == "user cache" && e["what"] == "cache slots" && e["buffers"] == 3));
    assert!(report.to_string().contains("user cache"), "{report}");
    // Every buffer on its own too: the cache's three pages.
    let pages: Vec<u64> = report.buffers.iter().filter(|b| b.owner == "user cache").map(|b| b.bytes).collect();
    assert_eq!(pages, [2000 * row_bytes; 3]);
    assert_eq!(json["buffers"].as_array().unwrap().len(), report.buffers.len());
    assert_eq!(report.buffers.iter().map(|b| b.bytes).sum::<u64>(), report.total);

    // A table that brings the engine to ~92 % of its budget: the next lookup gives a page back.
    let fill = |share: f64| {
        let want = (share * budget as f64) as u64 - engine.allocated_bytes();
        let r = (want / 256) as usize;
        let t = PackedTable::quantize(Format::F32, &embedding_table(r, 64, 9), r, 64).unwrap();
        block_on(GpuTable::upload(&engine, &t)).unwrap()
    };
    let first = fill(0.92);
    first.set_name("filler");
    assert_eq!(engine.memory_report().owner_bytes("filler"), first.bytes());
    check(&cache, &wide[..50], "under pressure");
    assert_eq!(cache.capacity(), 4000, "one page given back above 90 %");
    let second = fill(0.955);
    check(&cache, &wide[..2200], "under more pressure");
    assert_eq!(cache.capacity(), 2000, "down to one page above 95 %");
    assert!(cache.stats().parts > cache.stats().batches, "the wide batch ran in parts instead of growing");
    // An allocation past the budget is refused with a clear error.
    let big = PackedTable::quantize(Format::F32, &embedding_table(4000, 64, 9), 4000, 64).unwrap();
    match block_on(GpuTable::upload(&engine, &big)).map_err(Error::from) {
        Err(Error::LimitExceeded { what, .. }) => assert!(what.contains("budget"), "{what}"),
        other => panic!("expected the budget error, got {:?}", other.map(|_| ())),
    }
    drop((first, second));
    check(&cache, &wide, "after memory was freed");
    assert_eq!(cache.capacity(), 6000, "grows again below 85 %");
    cache.release().unwrap();
    assert_eq!(cache.capacity(), 2000);
    check(&cache, &wide[..10], "after release");
}

#[test]
fn a_shared_cache_serves_through_the_interface_and_holds_its_slots_for_a_prepared_job() {
    let Some(engine) = engine() else { return };
    let (rows, dim) = (5000, 12);
    let host = PackedTable::quantize(Format::F16, &embedding_table(rows, dim, 21), rows, dim).unwrap();
    let cache: AnyGpuTable = block_on(edo::GpuCache::new(&engine, host.clone(), 300, edo::cache::PolicyKind::Arc.build())).unwrap().into();
    let AnyGpuTable::Cached(shared) = &cache else { unreachable!() };
    let ids = ids_with_bad(777, rows, 13);
    // Through the enum, as any kind.
    let job = block_on(cache.prepare_gather(&ids, Bounds::Zero)).unwrap();
    // While the job holds the slots, other lookups of the cache are refused, not misordered.
    assert!(matches!(block_on(shared.gather(&[1, 2], Bounds::Error)), Err(Error::Busy { .. })));
    assert!(matches!(block_on(shared.prefetch(&[1, 2])), Err(Error::Busy { .. })));
    assert_bits_eq(&run_job(job), &host.gather(&ids, Bounds::Zero).unwrap(), "prepared through the enum");
    // Submitted once: a second submission could read slots that hold other rows by now.
    let job = block_on(cache.prepare_gather(&ids[..50], Bounds::Zero)).unwrap();
    job.submit().unwrap();
    assert!(matches!(job.submit().map_err(Error::from), Err(Error::Unsupported { .. })));
    // A dropped job gives the slots back.
    drop(block_on(cache.prepare_gather(&ids[100..200], Bounds::Zero)).unwrap());
    let (indices, offsets) = random_bags(211, rows, 9, true, 5);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    let max_abs = host.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
    let got = run_job(block_on(cache.prepare_bag(&bags, Pooling::Mean, Bounds::Zero)).unwrap());
    assert_pooled_close(&got, &host.bag(&bags, Pooling::Mean, Bounds::Zero).unwrap(), 9.0, max_abs, false, "prepared cache bag");
    // Threads share one cache; every one gets its own rows.
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (cache, host) = (&cache, &host);
            scope.spawn(move || {
                for k in 0..5 {
                    let ids = edo::synth::zipf_ids(400, rows, 1.1, 100 * t + k);
                    let got = block_on(cache.gather(&ids, Bounds::Error)).unwrap().read_blocking().unwrap();
                    assert_bits_eq(&got, &host.gather(&ids, Bounds::Error).unwrap(), &format!("thread {t} batch {k}"));
                }
            });
        }
    });
}
