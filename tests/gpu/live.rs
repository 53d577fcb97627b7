//! Live tables on the GPU: the GPU copy follows inserts, updates, growth, eviction and swaps,
//! and reads what the CPU path reads, bit for bit for gathers, whether the keys' rows are found
//! on the host or by the kernel probing the GPU's copy of the index.

use super::*;
use edo::cache::PolicyKind;
use edo::live::{Init, KeyLookup, LiveOptions, LiveTable, Missing};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The rows `keys` read on the GPU, the output pre-filled with the sentinel: found on the host
/// and by the probe kernel, which must agree.
fn gpu_rows(t: &LiveTable, keys: &[u64], missing: Missing) -> Vec<f32> {
    let mut each = [KeyLookup::Host, KeyLookup::Gpu].map(|how| {
        t.set_key_lookup(how);
        t.gather_gpu_with(keys, missing, |job| Ok(run_job(job))).unwrap()
    });
    t.set_key_lookup(KeyLookup::Auto);
    assert_bits_eq(&each[1], &each[0], &format!("{missing:?}: the probe kernel's rows against the host's, {} keys", keys.len()));
    std::mem::take(&mut each[0])
}

/// [`gpu_rows`] for bags (each way's pooled rows equal).
fn gpu_bags(t: &LiveTable, bags: &Bags<'_, u64>, pooling: Pooling, missing: Missing) -> Vec<f32> {
    let mut each = [KeyLookup::Host, KeyLookup::Gpu].map(|how| {
        t.set_key_lookup(how);
        t.bag_gpu_with(bags, pooling, missing, |job| Ok(run_job(job))).unwrap()
    });
    t.set_key_lookup(KeyLookup::Auto);
    assert_bits_eq(&each[1], &each[0], &format!("{pooling:?} bags: the probe kernel's against the host's"));
    std::mem::take(&mut each[0])
}

fn keys_and_rows(n: usize, dim: usize, seed: u64) -> (Vec<u64>, Vec<f32>) {
    let keys = (0..n as u64).map(|i| edo::hash::hash_id(i + seed * 1_000_000, 7) as u64 * 0x1_0000_0001).collect();
    (keys, embedding_table(n, dim, seed))
}

#[test]
fn the_gpu_copy_follows_inserts_updates_growth_eviction_and_swaps() {
    let Some(engine) = engine() else { return };
    let dim = 37;
    for format in [Format::F16, Format::Int8, Format::Int4] {
        let init = Init::Hashed(PackedTable::quantize(Format::F32, &embedding_table(11, dim, 4), 11, dim).unwrap());
        let t = LiveTable::new(LiveOptions::new(format, dim).capacity(300).max_rows(2_000).init(init).policy(PolicyKind::LruTinyLfu)).unwrap();
        let (keys, values) = keys_and_rows(1_500, dim, 1);
        t.update(&keys, &values).unwrap();
        t.attach_gpu(&engine).unwrap();
        // 1 000 lookups (several workgroups, not a multiple of one), some of keys not held.
        let mut lookups: Vec<u64> = keys.iter().step_by(2).copied().take(950).collect();
        lookups.extend((0..50).map(|i| 5_000 + i));
        for missing in [Missing::Zero, Missing::Init] {
            assert_bits_eq(&gpu_rows(&t, &lookups, missing), &t.gather(&lookups, missing).unwrap(), &format!("{format} {missing:?}"));
        }
        // Removed keys leave tombstones the probe passes over; they read as unknown.
        assert_eq!(t.remove(&lookups[..100]).unwrap(), 100);
        assert_bits_eq(&gpu_rows(&t, &lookups, Missing::Init), &t.gather(&lookups, Missing::Init).unwrap(), &format!("{format} after removals"));
        t.update(&lookups[..100], &values[..100 * dim]).unwrap();
        // Updates, new keys past the slots (growth: the table uploaded again), then past the
        // limit (eviction: slots reused by other keys).
        let (more, more_values) = keys_and_rows(400, dim, 2);
        t.update(&keys[..200], &values[dim * 300..dim * 500]).unwrap();
        t.update(&more, &more_values).unwrap();
        let fresh: Vec<u64> = (0..300).map(|i| 9_000_000 + i).collect();
        t.find_or_insert(&fresh).unwrap();
        assert!(t.stats().evictions > 0, "{format}: nothing evicted");
        let all: Vec<u64> = keys.iter().chain(&more).chain(&fresh).copied().collect();
        assert_bits_eq(&gpu_rows(&t, &all, Missing::Zero), &t.gather(&all, Missing::Zero).unwrap(), &format!("{format} after changes"));
        // Bags.
        let (indices, offsets) = random_bags(120, all.len(), 9, false, 3);
        let bag_keys: Vec<u64> = indices.iter().map(|&i| all[i as usize]).collect();
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let bags = Bags::new(&bag_keys, &offsets).include_last_offset(true);
            let got = gpu_bags(&t, &bags, pooling, Missing::Zero);
            let want = t.bag(&bags, pooling, Missing::Zero).unwrap();
            assert_pooled_close(&got, &want, 9.0, 4.0, pooling == Pooling::Max, &format!("{format} {pooling:?}"));
        }
        // A swap: the GPU holds the new table.
        let other = LiveTable::new(LiveOptions::new(format, dim)).unwrap();
        other.update(&more, &embedding_table(400, dim, 9)).unwrap();
        t.swap(&other.snapshot().unwrap()).unwrap();
        assert_bits_eq(&gpu_rows(&t, &more, Missing::Error), &other.gather(&more, Missing::Error).unwrap(), &format!("{format} after a swap"));
        t.detach_gpu();
        assert!(matches!(t.gather_gpu(&more, Missing::Error), Err(Error::Unsupported(edo::Unsupported::LiveTableWithoutGpu))));
    }
}

#[test]
fn gpu_lookups_beside_updates_read_whole_rows() {
    let Some(engine) = engine() else { return };
    let (dim, n) = (40, 64u64);
    let keys: Vec<u64> = (0..n).collect();
    let t = Arc::new(LiveTable::new(LiveOptions::new(Format::F16, dim)).unwrap());
    t.update(&keys, &vec![0.0; n as usize * dim]).unwrap();
    t.attach_gpu(&engine).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let writer = {
            let (t, keys, done) = (t.clone(), keys.clone(), done.clone());
            s.spawn(move || {
                for g in 1..=60 {
                    t.update(&keys, &vec![g as f32; keys.len() * dim]).unwrap();
                }
                done.store(true, Ordering::Relaxed);
            })
        };
        let mut last = 0.0f32;
        let mut reads = 0;
        while !done.load(Ordering::Relaxed) || reads < 5 {
            let rows = t.gather_gpu(&keys, Missing::Error).unwrap().read_blocking().unwrap();
            // One update writes every key: a lookup sees one generation in all of them.
            assert!(rows.iter().all(|&v| v == rows[0]), "a GPU lookup read rows of two updates");
            assert!(rows[0] >= last, "generation went back from {last} to {}", rows[0]);
            last = rows[0];
            reads += 1;
        }
        writer.join().unwrap();
    });
    assert_eq!(t.gather_gpu(&keys, Missing::Error).unwrap().read_blocking().unwrap(), vec![60.0; n as usize * dim]);
}

#[test]
fn lookups_the_kernel_probes_count_towards_usage_and_keep_keys_from_eviction() {
    let Some(engine) = engine() else { return };
    let dim = 8;
    let t = LiveTable::new(LiveOptions::new(Format::Int8, dim).capacity(64).max_rows(64).policy(PolicyKind::Lru)).unwrap();
    let keys: Vec<u64> = (0..64).map(|i| (1000 + i) << 33).collect();
    t.update(&keys, &vec![1.0; 64 * dim]).unwrap();
    t.attach_gpu(&engine).unwrap();
    t.set_key_lookup(KeyLookup::Gpu);
    // The first half (inserted first: the least recent) looked up on the GPU only, three times.
    for _ in 0..3 {
        t.gather_gpu(&keys[..32], Missing::Zero).unwrap().read_blocking().unwrap();
    }
    assert_eq!(t.usage(&keys[..2]), vec![3, 3]);
    assert_eq!(t.usage(&keys[32..34]), vec![0, 0]);
    assert_eq!(t.stats().lookups, 96);
    // 32 new keys evict the 32 least recently used: the half the GPU did not look up.
    let fresh: Vec<u64> = (0..32).map(|i| 5000 + i).collect();
    t.find_or_insert(&fresh).unwrap();
    assert!(keys[..32].iter().all(|&k| t.contains(k)), "a key the GPU looked up was evicted");
    assert!(keys[32..].iter().all(|&k| !t.contains(k)), "a key nobody looked up stayed");
    // The probe finds the new keys and the kept ones, and reads the evicted ones as unknown.
    let all: Vec<u64> = keys.iter().chain(&fresh).copied().collect();
    assert_bits_eq(&gpu_rows(&t, &all, Missing::Zero), &t.gather(&all, Missing::Zero).unwrap(), "after eviction");
}

#[test]
fn lookups_the_kernel_counts_are_all_counted_while_other_threads_read_the_counts() {
    let Some(engine) = engine() else { return };
    let dim = 4;
    let t = LiveTable::new(LiveOptions::new(Format::F16, dim).capacity(256)).unwrap();
    let keys: Vec<u64> = (0..200).map(|i| (i << 40) | 77).collect();
    t.update(&keys, &vec![0.5; 200 * dim]).unwrap();
    t.attach_gpu(&engine).unwrap();
    t.set_key_lookup(KeyLookup::Gpu);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let lookups: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    for _ in 0..40 {
                        t.gather_gpu(&keys, Missing::Zero).unwrap();
                    }
                })
            })
            .collect();
        // Counts taken while lookups are submitted must lose none of them.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                t.usage(&keys[..1]);
            }
        });
        for l in lookups {
            l.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(t.usage(&keys), vec![80; keys.len()], "every key looked up 80 times on the GPU");
}

/// A GPU that fails while keys are removed: the keys are removed on the host, the GPU's error is
/// returned (not swallowed), and the copy is dropped, so GPU lookups are refused by name.
#[test]
fn a_gpu_failure_during_a_removal_is_returned_and_drops_the_copy() {
    // Its own engine: destroying the shared one would break the other tests.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let dim = 16;
    let (keys, values) = keys_and_rows(300, dim, 4);
    let t = LiveTable::new(LiveOptions::new(Format::Int8, dim)).unwrap();
    t.update(&keys, &values).unwrap();
    t.attach_gpu(&engine).unwrap();
    // The probe's counts are read back before the slots go: a lookup the kernel counted.
    t.set_key_lookup(KeyLookup::Gpu);
    drop(t.gather_gpu(&keys[..50], Missing::Error).unwrap());
    engine.destroy_device();
    let err = t.remove(&keys[..10]).unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err:?}");
    assert!(!t.has_gpu());
    assert!(matches!(t.gather(&keys[..10], Missing::Error), Err(Error::UnknownKey { .. })), "removed on the host all the same");
    assert!(matches!(t.gather_gpu(&keys[10..20], Missing::Error), Err(Error::Unsupported(edo::Unsupported::LiveTableWithoutGpu))));
}

/// Unknown keys the probe kernel meets count in `stats().unknown` as the host's lookups count
/// them: each occurrence, under every `missing` but `Error` (which the host checks first).
#[test]
fn unknown_keys_the_kernel_probes_are_counted() {
    let Some(engine) = engine() else { return };
    let dim = 8;
    let (keys, values) = keys_and_rows(500, dim, 6);
    let t = LiveTable::new(LiveOptions::new(Format::F16, dim)).unwrap();
    t.update(&keys, &values).unwrap();
    t.attach_gpu(&engine).unwrap();
    let strangers: Vec<u64> = (0..37).map(|i| 5_000_000_000 + i).collect();
    let mixed: Vec<u64> = keys[..100].iter().chain(&strangers).chain(&strangers[..5]).copied().collect();
    for (how, missing) in [(KeyLookup::Host, Missing::Zero), (KeyLookup::Gpu, Missing::Zero), (KeyLookup::Gpu, Missing::Init)] {
        t.set_key_lookup(how);
        let before = t.stats();
        drop(t.gather_gpu(&mixed, missing).unwrap().read_blocking().unwrap());
        let after = t.stats();
        assert_eq!(after.lookups - before.lookups, mixed.len() as u64, "{how:?} {missing:?}");
        assert_eq!(after.unknown - before.unknown, 42, "{how:?} {missing:?}: 37 strangers, 5 of them twice");
    }
    t.set_key_lookup(KeyLookup::Auto);
}
