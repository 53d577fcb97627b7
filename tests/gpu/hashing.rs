//! Hashed and quotient-remainder lookups: bucket ids, hot rows and rows equal to the CPU's.

use super::*;

pub(crate) fn random_ids(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = edo::synth::Rng::new(seed);
    (0..n).map(|i| if i % 3 == 0 { rng.next_u64() } else { rng.next_u64() % 5000 }).collect()
}

#[test]
fn hashed_bucket_ids_and_hot_rows_equal_the_cpu_exactly() {
    let Some(engine) = engine() else { return };
    let ids = random_ids(3001, 5);
    for k in 1..=8u32 {
        // Row r of a one-column table holds r, so a lookup returns the sum of the rows it read:
        // exact in f32, so bucket ids and hot rows are compared exactly.
        let hot: Vec<u64> = ids.iter().step_by(17).copied().take(40).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let spec = HashSpec { buckets: 997, seeds: (0..k).map(|s| 1000 + 7 * s).collect(), hot };
        let data: Vec<f32> = (0..spec.rows()).map(|r| r as f32).collect();
        let table = PackedTable::quantize(Format::F32, &data, spec.rows(), 1).unwrap();
        let gpu = block_on(GpuHashedTables::upload(&engine, &[(&table, spec.clone())])).unwrap();
        let want = edo::hash::hashed_lookup(&table, &spec, &ids).unwrap();
        let got = block_on(gpu.gather(&ids)).unwrap().read_blocking().unwrap();
        assert_bits_eq(&got, &want, &format!("k = {k}"));
    }
}

#[test]
fn hashed_bags_over_many_tables_match_the_cpu() {
    for max_binding in [None, Some(4 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        let specs = vec![HashSpec::new(300, 1).with_hot(vec![1, 2, 3]), HashSpec::new(50, 4), HashSpec::new(1000, 2).with_hot(vec![42])];
        let dims = [16usize, 16, 8];
        let tables: Vec<PackedTable> = specs
            .iter()
            .zip(dims)
            .enumerate()
            .map(|(t, (s, d))| PackedTable::quantize(Format::Int8, &embedding_table(s.rows(), d, t as u64), s.rows(), d).unwrap())
            .collect();
        let refs: Vec<&PackedTable> = tables.iter().collect();
        let pairs: Vec<(&PackedTable, HashSpec)> = refs.iter().copied().zip(specs.iter().cloned()).collect();
        let gpu = block_on(GpuHashedTables::upload(&engine, &pairs)).unwrap();
        let batch = 64;
        let mut rng = edo::synth::Rng::new(9);
        let mut ids = Vec::new();
        let mut offsets = Vec::new();
        for _ in 0..specs.len() * batch {
            offsets.push(ids.len() as u32);
            for _ in 0..rng.below(21) {
                ids.push(if rng.below(4) == 0 { rng.below(4) as u64 } else { rng.next_u64() });
            }
        }
        offsets.push(ids.len() as u32);
        let weights: Vec<f32> = (0..ids.len()).map(|j| 1.0 + (j % 3) as f32).collect();
        let max_abs = tables.iter().flat_map(|t| t.dequantize()).fold(0f32, |m, x| m.max(x.abs()));
        for layout in [Layout::Concat, Layout::PerTable] {
            for weighted in [false, true] {
                let mut bags = HashedBags::new(&ids, &offsets).include_last_offset(true);
                if weighted {
                    bags = bags.weights(&weights);
                }
                let want = edo::hash::hashed_bags(&refs, &specs, batch, &bags, Pooling::Sum, layout).unwrap();
                let got = run_job(block_on(gpu.prepare_bags(batch, &bags, Pooling::Sum, layout)).unwrap());
                // Up to 20 ids × 4 hashes per bag, weights up to 3.
                assert_pooled_close(&got, &want, 80.0, 3.0 * max_abs, false, &format!("{layout:?} weighted {weighted} binding {max_binding:?}"));
            }
        }
    }
}

// Quotient-remainder lookups

#[test]
fn quotient_remainder_lookups_equal_the_cpu_exactly() {
    for max_binding in [None, Some(1 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for (m, q_rows, dim, format) in [(1000u32, 3000usize, 4usize, Format::F32), (7, 40, 5, Format::Int8), (65_537, 20, 16, Format::F16)] {
            let qt = PackedTable::quantize(format, &embedding_table(q_rows, dim, 1), q_rows, dim).unwrap();
            let rt = PackedTable::quantize(format, &embedding_table(m as usize, dim, 2), m as usize, dim).unwrap();
            let gpu = block_on(GpuQrTables::upload(&engine, &qt, &rt)).unwrap();
            let covered = q_rows as u64 * m as u64;
            let mut rng = edo::synth::Rng::new(m as u64);
            let good: Vec<u64> = (0..2001).map(|_| rng.next_u64() % covered).collect();
            // Ids past the table, some beyond 2³² and some with quotients beyond 32 bits.
            let mut mixed = good.clone();
            for (i, id) in mixed.iter_mut().enumerate() {
                match i % 50 {
                    1 => *id = covered + i as u64,
                    2 => *id = u64::MAX - i as u64,
                    3 => *id = (1u64 << 40) + i as u64,
                    _ => {}
                }
            }
            for combine in [QrCombine::Mult, QrCombine::Add, QrCombine::Concat] {
                for (bounds, ids) in [(Bounds::Error, &good), (Bounds::Zero, &mixed), (Bounds::Clamp, &mixed)] {
                    let want = edo::qr::gather(&qt, &rt, ids, combine, bounds).unwrap();
                    let got = run_job(block_on(gpu.prepare_gather(ids, combine, bounds)).unwrap());
                    assert_bits_eq(&got, &want, &format!("m {m} {format} {combine:?} {bounds:?} binding {max_binding:?}"));
                }
            }
            let err = block_on(gpu.gather(&[1, covered], QrCombine::Mult, Bounds::Error)).err();
            assert_eq!(err, Some(Error::IdOutOfRange64 { index: 1, id: covered, max: covered }));
        }
    }
}
