//! EmbeddingBag and table-batched bags against the CPU oracle.

use super::*;

fn check_bags(engine: &Engine, dims: &[usize], expect_shards: bool) {
    let rows = 700;
    for &dim in dims {
        let data = embedding_table(rows, dim, 90 + dim as u64);
        for format in Format::ALL {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            let gpu = block_on(GpuTable::upload(engine, &table)).unwrap();
            assert_eq!(gpu.shard_count() > 1, expect_shards, "{format} dim {dim}");
            for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
                let (indices, offsets) = random_bags(301, rows, 9, bounds != Bounds::Error, dim as u64);
                let weights: Vec<f32> = (0..indices.len()).map(|j| 0.5 + (j % 7) as f32 * 0.25).collect();
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::None] {
                    for weighted in [false, true] {
                        if weighted && !matches!(pooling, Pooling::Sum | Pooling::None) {
                            continue;
                        }
                        let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                        if weighted {
                            bags = bags.weights(&weights);
                        }
                        let what = format!("{format} dim {dim} {pooling:?} weighted {weighted} {bounds:?} shards {}", gpu.shard_count());
                        let want = edo::cpu::embedding_bag(&table, &bags, pooling, bounds).unwrap();
                        let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, bounds)).unwrap());
                        let w = if weighted { 2.0 } else { 1.0 };
                        assert_pooled_close(&got, &want, 9.0, w * max_abs, pooling == Pooling::Max, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn bags_match_the_cpu_oracle_for_every_pooling_format_and_weighting() {
    let Some(engine) = engine() else { return };
    // 3: the scalar kernel; 16, 100: four quads per invocation; 1000: several column blocks.
    check_bags(&engine, &[3, 16, 100, 1000], false);
}

#[test]
fn bags_match_the_cpu_oracle_across_shards() {
    // 2 KiB shards: every format of a 700-row table is split (binary dim 5: 2 800 bytes).
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(2 << 10), ..Default::default() }) else { return };
    check_bags(&engine, &[5, 24], true);
}

#[test]
fn table_batched_bags_match_the_oracle_in_one_dispatch_per_shard() {
    for max_binding in [None, Some(8 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for (dims, format) in
            [(vec![8usize, 4, 64, 16], Format::Int8), (vec![8, 3, 17], Format::F16), (vec![128, 48, 16], Format::F16), (vec![32, 32], Format::BinaryScaled)]
        {
            let rows: Vec<usize> = (0..dims.len()).map(|t| [500, 3, 1200, 40][t % 4]).collect();
            let tables: Vec<PackedTable> = dims
                .iter()
                .zip(&rows)
                .enumerate()
                .map(|(t, (&d, &r))| PackedTable::quantize(format, &embedding_table(r, d, t as u64), r, d).unwrap())
                .collect();
            let refs: Vec<&PackedTable> = tables.iter().collect();
            let max_abs = tables.iter().flat_map(|t| t.dequantize()).fold(0f32, |m, x| m.max(x.abs()));
            let gpu = block_on(GpuTableBatch::upload(&engine, &refs)).unwrap();
            assert_eq!(gpu.len(), dims.len());
            assert_eq!(gpu.bytes(), tables.iter().map(|t| t.bytes()).sum::<u64>());
            let batch = 129;
            let mut indices = Vec::new();
            let mut offsets = Vec::new();
            for (t, &r) in rows.iter().enumerate() {
                let (idx, off) = random_bags(batch, r, 20, false, 7 + t as u64);
                offsets.extend(off[..batch].iter().map(|o| o + indices.len() as u32));
                indices.extend(idx);
            }
            offsets.push(indices.len() as u32);
            let bags = Bags::new(&indices, &offsets).include_last_offset(true);
            for layout in [Layout::Concat, Layout::PerTable] {
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
                    let want = edo::cpu::embedding_bags(&refs, batch, &bags, pooling, Bounds::Error, layout).unwrap();
                    let job = block_on(gpu.prepare_bags(batch, &bags, pooling, Bounds::Error, layout)).unwrap();
                    let got = run_job(job);
                    let what = format!("{format} dims {dims:?} {layout:?} {pooling:?} shards {}", gpu.shard_count());
                    assert_pooled_close(&got, &want, 20.0, max_abs, pooling == Pooling::Max, &what);
                }
            }
        }
    }
}

#[test]
fn bag_errors_are_typed_and_mixed_formats_refused() {
    let Some(engine) = engine() else { return };
    let a = PackedTable::quantize(Format::Int8, &embedding_table(10, 4, 1), 10, 4).unwrap();
    let b = PackedTable::quantize(Format::Int4, &embedding_table(10, 4, 2), 10, 4).unwrap();
    assert!(matches!(block_on(GpuTableBatch::upload(&engine, &[&a, &b])).map_err(Error::from), Err(Error::MixedFormats { index: 1, .. })));
    let gpu = block_on(GpuTable::upload(&engine, &a)).unwrap();
    let idx = [1u32, 2, 30];
    let err = block_on(gpu.bag(&Bags::new(&idx, &[0, 1]), Pooling::Sum, Bounds::Error)).err();
    assert_eq!(err, Some(Error::IdOutOfRange { index: 2, id: 30, rows: 10 }));
    let err = block_on(gpu.bag(&Bags::new(&idx, &[0, 3, 1]), Pooling::Sum, Bounds::Zero)).err();
    assert!(matches!(err, Some(Error::BadOffsets { index: 2, .. })));
}

/// A mean of exactly summed values: the sum is exact, but WGSL's `/` is accurate only to 2.5 ULP,
/// and drivers use that (NVIDIA's Vulkan driver on an H200 is 1 ULP off where lavapipe rounds
/// correctly). Within 2.5 ULP of the CPU path's mean, then; an empty bag's 0 exactly.
fn assert_exact_sum_divided(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &c)) in got.iter().zip(want).enumerate() {
        assert!(g != SENTINEL, "{what}: value {i} never written");
        // The spacing of f32s just above |c| (at a power of two, twice that just below it).
        let ulp = f32::from_bits(c.abs().to_bits() + 1) - c.abs();
        assert!((g - c).abs() <= 2.5 * ulp, "{what}: value {i}: GPU {g} vs CPU {c}, more than 2.5 ULP apart");
    }
}

/// Issue 32: a workgroup stages its bags' indices 256 at a time, so bags longer than that, bags
/// that straddle two stages and empty bags between them all pool as the CPU does — on one shard and
/// over several, in the quad kernel (dims 128, 40) and the one-column kernel (dim 7).
#[test]
fn long_bags_pool_across_staging_rounds() {
    let rows = 900;
    let lens = [0u32, 1, 3, 255, 256, 257, 0, 700, 5, 1000, 2, 511, 513, 4, 0, 300, 31, 64, 1, 999, 0, 256, 7, 129, 33, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 600];
    let mut rng = edo::synth::Rng::new(32);
    let mut indices = Vec::new();
    let mut offsets = vec![0u32];
    for &len in &lens {
        for _ in 0..len {
            indices.push(if rng.below(97) == 0 { rows as u32 + rng.below(5) } else { rng.below(rows as u32) });
        }
        offsets.push(indices.len() as u32);
    }
    let weights: Vec<f32> = (0..indices.len()).map(|j| 0.25 + (j % 5) as f32 * 0.5).collect();
    let max_len = *lens.iter().max().unwrap() as f32;
    for max_binding in [None, Some(4 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for dim in [128usize, 40, 7] {
            let data = embedding_table(rows, dim, dim as u64);
            // Small integers: FP32 and FP16 hold them exactly, and every sum and weighted sum
            // here is exact in f32 in any order, so those two formats' sums and maxima must match
            // bit for bit (their means too, up to the division's 2.5 ULP).
            let ints: Vec<f32> = (0..rows * dim).map(|i| ((i * 7 + i / dim * 3) % 17) as f32 - 8.0).collect();
            for format in [Format::Int8, Format::F32, Format::Int4, Format::F16] {
                let exact = matches!(format, Format::F32 | Format::F16);
                let table = PackedTable::quantize(format, if exact { &ints } else { &data }, rows, dim).unwrap();
                let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
                let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
                for (pooling, weighted) in [(Pooling::Sum, false), (Pooling::Sum, true), (Pooling::Mean, false), (Pooling::Max, false)] {
                    let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                    if weighted {
                        bags = bags.weights(&weights);
                    }
                    let what = format!("{format} dim {dim} {pooling:?} weighted {weighted} shards {}", gpu.shard_count());
                    let want = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Zero).unwrap();
                    let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Zero)).unwrap());
                    let w = if weighted { 2.25 } else { 1.0 };
                    if exact && pooling == Pooling::Mean {
                        assert_exact_sum_divided(&got, &want, &what);
                    } else {
                        assert_pooled_close(&got, &want, max_len, w * max_abs, exact || pooling == Pooling::Max, &what);
                    }
                    if max_binding.is_some() {
                        assert!(gpu.shard_count() > 1, "{what}");
                    }
                }
            }
        }
    }
}

/// Issue 32: a large batch runs a quarter of the lanes per bag of a small one, each lane pooling
/// four quads (or columns); both shapes pool as the CPU does. 20 000 bags are a large batch for
/// every dim here (`bag_shape`: 20 000 × ⌈quads / 4⌉ lanes ≥ 32 768), the other tests' few hundred
/// a small one.
#[test]
fn large_batches_pool_with_four_quads_a_lane() {
    let Some(engine) = engine() else { return };
    let rows = 3000;
    let (indices, offsets) = random_bags(20_000, rows, 12, true, 5);
    let weights: Vec<f32> = (0..indices.len()).map(|j| 1.5 - (j % 4) as f32 * 0.5).collect();
    for dim in [128usize, 40, 7] {
        let data = embedding_table(rows, dim, 3 + dim as u64);
        for format in [Format::Int8, Format::F32, Format::Q4K] {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
            for (pooling, weighted) in [(Pooling::Sum, true), (Pooling::Mean, false), (Pooling::Max, false)] {
                let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                if weighted {
                    bags = bags.weights(&weights);
                }
                let what = format!("{format} dim {dim} {pooling:?} weighted {weighted}");
                let want = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Clamp).unwrap();
                let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Clamp)).unwrap());
                assert_pooled_close(&got, &want, 12.0, 1.5 * max_abs, pooling == Pooling::Max, &what);
            }
        }
    }
}
