//! Device-loss recovery: a `RecoveringEngine` rebuilds its engine and uploads its tables again,
//! under concurrent lookups, with the rows the CPU path gives.

use super::*;
use edo::cache::PolicyKind;
use edo::gpu::CacheSpec;
use edo::{AsyncLookup, GpuCache, GpuCodes, Recoverable, RecoveringEngine, RecoveryEvent};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A recovering engine on its own device (losing the shared one would break the other tests),
/// with small shards so every table spans several, and the events it tells.
fn recovering() -> Option<(RecoveringEngine, Arc<Mutex<Vec<RecoveryEvent>>>)> {
    let engine = engine_with(EngineOptions { max_binding_bytes: Some(64 << 10), ..Default::default() })?;
    let rec = RecoveringEngine::new(engine);
    let events = Arc::new(Mutex::new(Vec::new()));
    {
        let events = events.clone();
        rec.on_event(move |e| events.lock().unwrap().push(e.clone()));
    }
    Some((rec, events))
}

fn kinds(events: &Mutex<Vec<RecoveryEvent>>) -> Vec<&'static str> {
    let kind = |e: &RecoveryEvent| match e {
        RecoveryEvent::Lost { .. } => "lost",
        RecoveryEvent::Recovered { .. } => "recovered",
        RecoveryEvent::Failed { .. } => "failed",
    };
    events.lock().unwrap().iter().map(kind).collect()
}

#[test]
fn lookups_on_several_threads_survive_a_device_loss_with_the_right_rows() {
    let Some((rec, events)) = recovering() else { return };
    let (rows, dim) = (5003, 37);
    let f32s = embedding_table(rows, dim, 11);
    let int8 = PackedTable::quantize(Format::Int8, &f32s, rows, dim).unwrap();
    let q4 = PackedTable::quantize(Format::Q4K, &f32s, rows, dim).unwrap();
    let keep: Vec<bool> = (0..rows).map(|r| r % 3 != 0).collect();
    let pruned = PrunedTable::quantize(Format::F16, &f32s, rows, dim, &keep).unwrap();
    let bits = PackedTable::quantize(Format::Binary, &f32s, rows, dim).unwrap();
    let table: Recoverable<GpuTable> = block_on(rec.upload(int8.clone())).unwrap();
    let any: Recoverable<AnyGpuTable> = block_on(rec.upload(AnyTable::from(pruned.clone()))).unwrap();
    let spec = CacheSpec { source: Arc::new(q4.clone()), capacity: 700, policy: PolicyKind::Lfu };
    let cache: Recoverable<GpuCache<Arc<PackedTable>>> = block_on(rec.upload(spec)).unwrap();
    let codes: Recoverable<GpuCodes> = block_on(rec.upload(bits.clone())).unwrap();
    let before = rec.engine().allocated_bytes() - rec.engine().idle_bytes();

    let done = AtomicUsize::new(0);
    let rounds = 24;
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (table, any, cache, codes) = (&table, &any, &cache, &codes);
            let (int8, q4, pruned, bits, done) = (&int8, &q4, &pruned, &bits, &done);
            s.spawn(move || {
                for round in 0..rounds {
                    let seed = 100 * t + round as u64;
                    let ids = ids_with_bad(1500 + 37 * round, rows, seed);
                    match (t + round as u64) % 4 {
                        0 => assert_bits_eq(
                            &block_on(table.gather(&ids, Bounds::Zero)).unwrap(),
                            &edo::cpu::gather(int8, &ids, Bounds::Zero).unwrap(),
                            "int8 gather",
                        ),
                        1 => {
                            let offsets: Vec<u32> = (0..ids.len() as u32).step_by(7).collect();
                            let bags = Bags::new(&ids, &offsets);
                            let got = block_on(any.bag(&bags, Pooling::Sum, Bounds::Zero)).unwrap();
                            let want = Lookup::bag(pruned, &bags, Pooling::Sum, Bounds::Zero).unwrap();
                            assert_eq!(got.len(), want.len());
                            assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + b.abs())), "pruned bag");
                        }
                        2 => {
                            let ids = uniform_ids(900, rows, seed);
                            assert_bits_eq(
                                &block_on(cache.gather(&ids, Bounds::Error)).unwrap(),
                                &edo::cpu::gather(q4, &ids, Bounds::Error).unwrap(),
                                "cached q4_k gather",
                            );
                        }
                        _ => {
                            let queries = edo::search::binarize(&embedding_table(5, dim, seed), dim).unwrap();
                            let got = block_on(codes.hamming_topk(&queries, 10)).unwrap();
                            let want = edo::search::hamming_topk(bits, &queries, 10).unwrap();
                            assert_eq!((got.ids, got.distances), (want.ids, want.distances), "hamming top-10");
                        }
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // Lose the device while the threads are mid-way.
        while done.load(Ordering::SeqCst) < 4 * rounds / 3 {
            std::thread::yield_now();
        }
        rec.engine().destroy_device();
    });
    assert_eq!(done.load(Ordering::SeqCst), 4 * rounds);
    assert_eq!(rec.generation(), 1, "one rebuild for all the threads");
    assert_eq!(kinds(&events), ["lost", "recovered"]);
    match &events.lock().unwrap()[1] {
        RecoveryEvent::Recovered { residents, failed, bytes, .. } => {
            assert_eq!((*residents, failed.len()), (4, 0), "{failed:?}");
            assert!(*bytes > 0);
        }
        e => panic!("{e:?}"),
    }
    // The new engine holds what the old one did: the tables and the cache's slots, nothing else
    // (besides idle buffers of its lookups, kept for the next ones).
    assert_eq!(rec.engine().allocated_bytes() - rec.engine().idle_bytes(), before);
    assert!(!rec.engine().is_lost());
}

#[test]
fn a_rebuilt_cache_starts_with_the_rows_the_lost_one_held() {
    let Some((rec, events)) = recovering() else { return };
    let (rows, dim) = (3001, 19);
    let table = PackedTable::quantize(Format::Int4, &embedding_table(rows, dim, 5), rows, dim).unwrap();
    let cache: Recoverable<GpuCache<PackedTable>> = block_on(rec.upload(CacheSpec { source: table.clone(), capacity: 300, policy: PolicyKind::Lru })).unwrap();
    let ids = uniform_ids(250, rows, 9);
    block_on(cache.gather(&ids, Bounds::Error)).unwrap();
    let lost = block_on(cache.current()).unwrap();
    let mut held = lost.cached_ids();
    assert!(!held.is_empty());
    assert_eq!(block_on(rec.recover()), Ok(false), "nothing to recover from yet");
    rec.engine().destroy_device();
    assert_eq!(block_on(rec.recover()), Ok(true));
    assert_eq!(block_on(rec.recover()), Ok(false), "recovered already");
    let rebuilt = block_on(cache.current()).unwrap();
    assert!(!Arc::ptr_eq(&lost, &rebuilt));
    let mut warm = rebuilt.cached_ids();
    held.sort_unstable();
    warm.sort_unstable();
    assert_eq!(warm, held);
    assert_eq!(rebuilt.stats().misses, 0, "the warm-up is not counted");
    // The same ids again: every one a hit, and the rows of the host table.
    let got = block_on(cache.gather(&ids, Bounds::Error)).unwrap();
    assert_bits_eq(&got, &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "rows after the rebuild");
    assert_eq!(rebuilt.stats().misses, 0);
    // What the lost engine made still says so.
    assert!(matches!(block_on(lost.gather(&ids, Bounds::Error)), Err(Error::DeviceLost(_))));
    assert_eq!(kinds(&events), ["lost", "recovered"]);
}

#[test]
fn an_engine_over_the_callers_device_is_not_rebuilt_and_says_why() {
    let engine = match engine_with(EngineOptions::default()) {
        Some(e) => e,
        None => return,
    };
    let own = Engine::from_device(engine.device().clone(), engine.queue().clone(), EngineOptions::default()).unwrap();
    assert!(matches!(block_on(own.rebuild()).map_err(Error::from), Err(Error::Unsupported { .. })));
    let rec = RecoveringEngine::new(own);
    let events = Arc::new(Mutex::new(Vec::new()));
    {
        let events = events.clone();
        rec.on_event(move |e| events.lock().unwrap().push(e.clone()));
    }
    let table = PackedTable::quantize(Format::F16, &embedding_table(100, 8, 2), 100, 8).unwrap();
    let gpu: Recoverable<GpuTable> = block_on(rec.upload(table)).unwrap();
    rec.engine().destroy_device();
    let err = block_on(gpu.gather(&[1, 2, 3], Bounds::Error)).unwrap_err();
    assert!(matches!(&err, Error::DeviceLost(why) if why.contains("from_device")), "{err}");
    assert_eq!(err.to_string().matches("GPU device lost").count(), 1, "{err}");
    assert_eq!(kinds(&events), ["lost", "failed"]);
    // A later call tries again, and fails the same way.
    assert!(matches!(block_on(gpu.gather(&[1], Bounds::Error)), Err(Error::DeviceLost(_))));
    assert_eq!(rec.generation(), 0);
}

#[test]
fn an_engine_on_the_callers_instance_is_rebuilt_from_that_instance() {
    if engine().is_none() {
        return;
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = EngineOptions::default().backends;
    let instance = wgpu::Instance::new(desc);
    let engine = block_on(Engine::from_instance(&instance, EngineOptions::default())).unwrap();
    let rec = RecoveringEngine::new(engine);
    let (rows, dim) = (1001, 19);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 5), rows, dim).unwrap();
    let gpu: Recoverable<GpuTable> = block_on(rec.upload(table.clone())).unwrap();
    rec.engine().destroy_device();
    let ids = uniform_ids(700, rows, 3);
    // The lookup after the loss waits for the rebuild, on a device from the same instance.
    assert_bits_eq(
        &block_on(gpu.gather(&ids, Bounds::Error)).unwrap(),
        &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(),
        "int8 gather after the rebuild",
    );
    assert_eq!(rec.generation(), 1);
}
