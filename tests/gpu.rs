//! The GPU path against the CPU oracle. All GPU tests live in this one binary.
//!
//! Without an adapter every test prints `SKIPPED: no adapter` and returns; with
//! `EDO_REQUIRE_GPU=1` (CI, on lavapipe) a missing adapter fails the test instead.

use std::sync::OnceLock;

use edo::synth::{embedding_table, uniform_ids};
use edo::{block_on, Bounds, Engine, EngineOptions, Error, Format, GpuLookup, GpuTable, Lookup, PackedTable};

/// A value no kernel computes: outputs are pre-filled with it, so a row a kernel failed to write
/// cannot pass for a correct zero row.
const SENTINEL: f32 = -7777.25;

fn require_gpu() -> bool {
    std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// An engine with these options, or `None` after a loud skip (a failure under EDO_REQUIRE_GPU=1).
fn engine_with(options: EngineOptions) -> Option<Engine> {
    match Engine::new_blocking(options) {
        Ok(e) => Some(e),
        Err(Error::NoAdapter) if !require_gpu() => {
            eprintln!("SKIPPED: no adapter");
            None
        }
        Err(e) => panic!("no usable GPU ({e}); EDO_REQUIRE_GPU=1 makes this a failure"),
    }
}

/// The default engine, shared by the tests that need no special options.
fn engine() -> Option<Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| engine_with(EngineOptions::default())).clone()
}

/// Gathers on the GPU into a sentinel-filled output and reads it back.
fn gpu_gather(table: &GpuTable, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
    let job = block_on(table.prepare_gather(ids, bounds))?;
    job.output().fill(SENTINEL)?;
    job.submit()?;
    // The job's inputs go before the readback, as a caller's would: the budget tests count on it.
    job.into_output().read_blocking()
}

/// Bit-exact comparison, with the first difference in the message.
fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a.to_bits() != b.to_bits()) {
        let sentinels = got.iter().filter(|&&v| v == SENTINEL).count();
        panic!("{what}: first difference at value {i}: GPU {} vs CPU {} ({sentinels} values never written)", got[i], want[i]);
    }
}

/// Ids with some out of range (for Zero and Clamp) at varied positions.
fn ids_with_bad(n: usize, rows: usize, seed: u64) -> Vec<u32> {
    let mut ids = uniform_ids(n, rows, seed);
    for (k, id) in ids.iter_mut().enumerate() {
        if k % 97 == 13 {
            *id = rows as u32 + (k as u32 % 5);
        }
        if k % 331 == 7 {
            *id = u32::MAX;
        }
    }
    ids
}

/// Every format × bounds policy × id counts that span many workgroups and are no multiple of the
/// workgroup size, on dims that are multiples of nothing in particular; exact equality.
fn check_against_oracle(engine: &Engine, rows: usize, dims: &[usize], counts: &[usize], expect_many_shards: bool) {
    for &dim in dims {
        let data = embedding_table(rows, dim, 40 + dim as u64);
        for format in Format::ALL {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let gpu = block_on(GpuTable::upload(engine, &table)).unwrap();
            assert_eq!(gpu.bytes(), table.bytes(), "{format}: the GPU holds exactly the packed words");
            let rows_per_shard = engine.max_binding_bytes() as usize / format.row_bytes(dim);
            assert_eq!(gpu.shard_count(), rows.div_ceil(rows_per_shard), "{format} dim {dim}");
            assert_eq!(gpu.shard_count() > 1, expect_many_shards, "{format} dim {dim}: {} shards", gpu.shard_count());
            for &n in counts {
                for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
                    let ids = if bounds == Bounds::Error { uniform_ids(n, rows, n as u64) } else { ids_with_bad(n, rows, n as u64) };
                    let want = edo::cpu::gather(&table, &ids, bounds).unwrap();
                    let got = gpu_gather(&gpu, &ids, bounds).unwrap();
                    assert_bits_eq(&got, &want, &format!("{format} dim {dim} ids {n} {bounds:?} shards {}", gpu.shard_count()));
                }
            }
        }
    }
}

#[test]
fn gather_matches_the_cpu_oracle_in_one_shard() {
    let Some(engine) = engine() else { return };
    check_against_oracle(&engine, 3001, &[1, 7, 100, 129], &[1, 67, 2049, 10_007], false);
}

#[test]
fn gather_matches_the_cpu_oracle_across_many_shards_and_output_chunks() {
    // 4 KiB bindings: tables of a few KiB to a few hundred KiB become 3 to 100 shards, and the
    // output of one lookup is split over many dispatches at aligned offsets.
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    check_against_oracle(&engine, 2500, &[3, 40], &[1, 333, 4099], true);
}

#[test]
fn gather_uses_a_two_dimensional_grid_past_65535_workgroups() {
    // One id per workgroup: 70 001 ids need more than 65 535 workgroups in x.
    let Some(engine) = engine_with(EngineOptions { workgroup_size: 1, ..Default::default() }) else { return };
    for dim in [2, 8, 19] {
        let rows = 5000;
        let data = embedding_table(rows, dim, 3);
        let table = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        let ids = ids_with_bad(70_001, rows, 4);
        let want = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Zero).unwrap(), &want, &format!("2-D grid, dim {dim}"));
    }
    // fill writes an output of more values (1.33 M) than its host block holds, every one.
    let table = PackedTable::quantize(Format::F16, &embedding_table(10, 19, 3), 10, 19).unwrap();
    let job = block_on(block_on(GpuTable::upload(&engine, &table)).unwrap().prepare_gather(&vec![1; 70_001], Bounds::Error)).unwrap();
    job.output().fill(SENTINEL).unwrap();
    assert!(job.output().read_blocking().unwrap().iter().all(|&v| v == SENTINEL));
}

#[test]
fn out_of_range_ids_are_refused_before_any_work() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::Int4, &embedding_table(10, 9, 1), 10, 9).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let err = block_on(gpu.gather(&[0, 9, 10, 11], Bounds::Error)).err();
    assert_eq!(err, Some(Error::IdOutOfRange { index: 2, id: 10, rows: 10 }));
}

#[test]
fn empty_lookups_and_empty_tables() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::Int8, &embedding_table(10, 5, 1), 10, 5).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    assert_eq!(gpu_gather(&gpu, &[], Bounds::Error).unwrap(), Vec::<f32>::new());

    let empty = PackedTable::quantize(Format::Int8, &[], 0, 5).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &empty)).unwrap();
    assert_eq!(gpu.rows(), 0);
    assert_bits_eq(&gpu_gather(&gpu, &[0, 3], Bounds::Zero).unwrap(), &[0.0; 10], "empty table, Zero");
    assert!(matches!(gpu_gather(&gpu, &[0], Bounds::Error), Err(Error::IdOutOfRange { index: 0, id: 0, rows: 0 })));
    assert!(matches!(gpu_gather(&gpu, &[0], Bounds::Clamp), Err(Error::IdOutOfRange { .. })));
}

#[test]
fn a_row_larger_than_a_binding_is_a_limit_error() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(256), ..Default::default() }) else { return };
    let table = PackedTable::quantize(Format::F32, &vec![1.0; 100], 1, 100).unwrap();
    match block_on(GpuTable::upload(&engine, &table)) {
        Err(Error::LimitExceeded { what, requested: 400, max: 256 }) => assert!(what.contains("row")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a 400-byte row cannot fit a 256-byte binding"),
    }
}

#[test]
fn the_output_stays_on_the_gpu_for_the_callers_pipelines() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::F16, &embedding_table(50, 6, 2), 50, 6).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let rows = block_on(gpu.gather(&[1, 2, 3], Bounds::Error)).unwrap();
    assert_eq!((rows.rows(), rows.dim()), (3, 6));
    assert_eq!(rows.buffer().size(), 3 * 6 * 4);
    assert!(rows.buffer().usage().contains(wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC));
    // A caller's copy out of the buffer sees the rows.
    let copy = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 72,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = engine.device().create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(rows.buffer(), 0, &copy, 0, 72);
    engine.queue().submit([enc.finish()]);
    copy.slice(..).map_async(wgpu::MapMode::Read, |r| r.unwrap());
    engine.wait_idle().unwrap();
    let bytes = copy.slice(..).get_mapped_range().unwrap().to_vec();
    let want = edo::cpu::gather(&table, &[1, 2, 3], Bounds::Error).unwrap();
    assert_bits_eq(bytemuck::cast_slice(&bytes), &want, "caller's copy");
}

#[test]
fn device_loss_is_a_typed_error_everywhere() {
    // Its own engine: destroying the shared one would break the other tests.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let table = PackedTable::quantize(Format::Int8, &embedding_table(20, 4, 1), 20, 4).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    block_on(engine.prepare_gather(Format::F16, 4)).unwrap();
    let rows = block_on(gpu.gather(&[1, 2], Bounds::Error)).unwrap();
    engine.destroy_device();
    assert!(matches!(block_on(engine.prepare_gather(Format::Int4, 4)), Err(Error::DeviceLost(_))));
    assert!(matches!(block_on(gpu.gather(&[1], Bounds::Error)), Err(Error::DeviceLost(_))));
    assert!(matches!(rows.read_blocking(), Err(Error::DeviceLost(_))));
    assert!(matches!(block_on(GpuTable::upload(&engine, &table)), Err(Error::DeviceLost(_))));
    assert!(matches!(engine.wait_idle(), Err(Error::DeviceLost(_))));
}

#[test]
fn the_engine_reports_its_adapter_and_real_limits() {
    let Some(engine) = engine() else { return };
    assert!(!engine.adapter().name.is_empty());
    // The adapter's own limits, not WebGPU's defaults (lavapipe: 128 MiB bindings, not 128 MiB
    // by accident: the WebGPU default is 128 MiB too, so check the buffer size limit instead).
    assert!(engine.limits().max_buffer_size >= 256 << 20, "max_buffer_size {}", engine.limits().max_buffer_size);
    assert_eq!(engine.max_binding_bytes(), engine.limits().max_storage_buffer_binding_size.min(engine.limits().max_buffer_size));
    eprintln!("adapter: {}", engine.adapter());
}

// ---------------------------------------------------------------------------------------------
// EmbeddingBag and table-batched bags

use edo::{Bags, GpuTableBatch, Layout, Pooling};

/// Random bags over `rows` rows, some empty, some with bad indices when `bad` is set.
fn random_bags(n_bags: usize, rows: usize, max_len: u32, bad: bool, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut rng = edo::synth::Rng::new(seed);
    let mut indices = Vec::new();
    let mut offsets = Vec::new();
    for b in 0..n_bags {
        offsets.push(indices.len() as u32);
        let len = if b % 11 == 5 { 0 } else { rng.below(max_len + 1) };
        for _ in 0..len {
            let id = if bad && rng.below(13) == 0 { rows as u32 + rng.below(3) } else { rng.below(rows as u32) };
            indices.push(id);
        }
    }
    offsets.push(indices.len() as u32);
    (indices, offsets)
}

/// Pooled values agree within a documented tolerance: the GPU sums in the same order on one shard,
/// but a driver may fuse `acc + w·x`, and several shards add partial sums. |GPU − CPU| ≤
/// 4·n·ε·Σ|wᵢ·xᵢ|, bounded here by n·max|w|·max|x| per bag. Max pooling is exact (up to the
/// sign of a zero).
fn assert_pooled_close(got: &[f32], want: &[f32], max_len: f32, max_abs: f32, exact: bool, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = 4.0 * max_len * f32::EPSILON * (max_len * max_abs);
    for (i, (&g, &c)) in got.iter().zip(want).enumerate() {
        assert!(g != SENTINEL, "{what}: value {i} never written");
        if exact {
            // Exact, but for the sign of a zero: max(−0, +0) may be either (IEEE 754 leaves it
            // open), and zero rows of bad ids or products with a zero row meet both.
            assert!(g == c, "{what}: value {i}: {g} vs {c} (max pooling is exact)");
        } else {
            assert!((g - c).abs() <= tol, "{what}: value {i}: GPU {g} vs CPU {c}, tolerance {tol}");
        }
    }
}

fn run_job(job: edo::LookupJob) -> Vec<f32> {
    job.output().fill(SENTINEL).unwrap();
    job.submit().unwrap();
    job.output().read_blocking().unwrap()
}

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
        for (dims, format) in [(vec![8usize, 4, 64, 16], Format::Int8), (vec![8, 3, 17], Format::F16), (vec![32, 32], Format::BinaryScaled)] {
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
    assert!(matches!(block_on(GpuTableBatch::upload(&engine, &[&a, &b])), Err(Error::MixedFormats { index: 1, .. })));
    let gpu = block_on(GpuTable::upload(&engine, &a)).unwrap();
    let idx = [1u32, 2, 30];
    let err = block_on(gpu.bag(&Bags::new(&idx, &[0, 1]), Pooling::Sum, Bounds::Error)).err();
    assert_eq!(err, Some(Error::IdOutOfRange { index: 2, id: 30, rows: 10 }));
    let err = block_on(gpu.bag(&Bags::new(&idx, &[0, 3, 1]), Pooling::Sum, Bounds::Zero)).err();
    assert!(matches!(err, Some(Error::BadOffsets { index: 2, .. })));
}

// ---------------------------------------------------------------------------------------------
// Hashed lookups

use edo::hash::{HashSpec, HashedBags};
use edo::GpuHashedTables;

fn random_ids(n: usize, seed: u64) -> Vec<u64> {
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

// ---------------------------------------------------------------------------------------------
// Quotient-remainder lookups

use edo::hash::QrCombine;
use edo::GpuQrTables;

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
                    let want = edo::hash::qr_lookup(&qt, &rt, ids, combine, bounds).unwrap();
                    let got = run_job(block_on(gpu.prepare_gather(ids, combine, bounds)).unwrap());
                    assert_bits_eq(&got, &want, &format!("m {m} {format} {combine:?} {bounds:?} binding {max_binding:?}"));
                }
            }
            let err = block_on(gpu.gather(&[1, covered], QrCombine::Mult, Bounds::Error)).err();
            assert_eq!(err, Some(Error::IdOutOfRange64 { index: 1, id: covered, max: covered }));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pruned tables

use edo::{GpuPrunedTable, PrunedTable};

#[test]
fn pruned_gathers_and_bags_match_the_cpu() {
    for max_binding in [None, Some(2 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        let (rows, dim) = (900, 12);
        let data = embedding_table(rows, dim, 3);
        let keep: Vec<bool> = (0..rows).map(|r| (r * 7) % 10 < 6).collect();
        for format in Format::ALL {
            let pruned = PrunedTable::quantize(format, &data, rows, dim, &keep).unwrap();
            let gpu = block_on(GpuPrunedTable::upload(&engine, &pruned)).unwrap();
            assert_eq!(gpu.bytes(), pruned.bytes());
            let max_abs = data.iter().fold(1f32, |m, x| m.max(x.abs()));
            for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
                let ids = if bounds == Bounds::Error { uniform_ids(2001, rows, 8) } else { ids_with_bad(2001, rows, 8) };
                let want = pruned.gather(&ids, bounds).unwrap();
                let got = run_job(block_on(gpu.prepare_gather(&ids, bounds)).unwrap());
                assert_bits_eq(&got, &want, &format!("pruned gather {format} {bounds:?}"));
                let (indices, offsets) = random_bags(150, rows, 12, bounds != Bounds::Error, 4);
                let bags = Bags::new(&indices, &offsets).include_last_offset(true);
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
                    let want = pruned.bag(&bags, pooling, bounds).unwrap();
                    let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, bounds)).unwrap());
                    assert_pooled_close(&got, &want, 12.0, max_abs, pooling == Pooling::Max, &format!("pruned bag {format} {pooling:?} {bounds:?}"));
                }
            }
        }
    }
}

/// quantize → table file → memory map → GPU gather: the same rows as the in-memory table, on
/// the GPU and on the CPU, with the mapped table split into several shards.
#[test]
fn mapped_table_file_gathers_like_the_in_memory_table() {
    let Some(_) = engine() else { return };
    let Some(small_shards) = engine_with(EngineOptions { max_binding_bytes: Some(16 << 10), ..Default::default() }) else { return };
    let dir = std::env::temp_dir().join(format!("edo-gpu-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, dim) = (5000, 77);
    let data = embedding_table(rows, dim, 31);
    let ids = ids_with_bad(3001, rows, 8);
    for format in Format::ALL {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let path = dir.join(format!("{}.edo", format.name().replace('+', "_")));
        edo::file::TableFile::new(table.clone()).write(&path).unwrap();
        let file = edo::file::TableFile::open(&path).unwrap();
        assert!(file.table().is_mapped());
        file.verify().unwrap();
        let from_file = block_on(GpuTable::upload(&small_shards, file.table())).unwrap();
        let in_memory = block_on(GpuTable::upload(&small_shards, &table)).unwrap();
        assert!(from_file.shard_count() > 3, "{format}: {} shards", from_file.shard_count());
        let want = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap();
        assert_bits_eq(&gpu_gather(&from_file, &ids, Bounds::Zero).unwrap(), &want, &format!("{format} mapped file on the GPU"));
        assert_bits_eq(&gpu_gather(&in_memory, &ids, Bounds::Zero).unwrap(), &want, &format!("{format} in memory on the GPU"));
        assert_bits_eq(&edo::cpu::gather(file.table(), &ids, Bounds::Zero).unwrap(), &want, &format!("{format} mapped file on the CPU"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Binary codes with many exact ties: rows drawn from a few patterns with some bits flipped.
fn tied_codes(rows: usize, dim: usize, seed: u64, format: Format) -> PackedTable {
    let mut rng = edo::synth::Rng::new(seed);
    let pool: Vec<Vec<f32>> = (0..5).map(|_| (0..dim).map(|_| rng.normal()).collect()).collect();
    let mut data = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        for &x in &pool[r % 5] {
            data.push(if rng.below(16) == 0 { -x } else { x });
        }
    }
    PackedTable::quantize(format, &data, rows, dim).unwrap()
}

/// Hamming top-k on the GPU equals the CPU path exactly — ids, distances, ties by index — over
/// corpora of several chunks (not multiples of the 1024-row chunk), several shards, and k up to
/// 1024.
#[test]
fn hamming_topk_on_the_gpu_equals_the_cpu_path() {
    let Some(engine) = engine() else { return };
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(24 << 10), ..Default::default() }) else { return };
    let cases = [
        (1, 1, 1, Format::Binary),
        (3000, 7, 17, Format::Binary),
        (5000, 64, 10, Format::BinaryScaled),
        (2100, 256, 1024, Format::Binary),
        (1500, 1000, 100, Format::BinaryScaled),
        (700, 3, 5, Format::Binary),
    ];
    for (rows, dim, k, format) in cases {
        let corpus = tied_codes(rows, dim, rows as u64, format);
        let queries = tied_codes(37, dim, 7 + rows as u64, Format::Binary);
        let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
        for (what, e) in [("one shard", &engine), ("sharded", &sharded)] {
            let codes = block_on(edo::GpuCodes::upload(e, &corpus)).unwrap();
            let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
            assert_eq!(got.k, want.k);
            if let Some(i) = (0..got.ids.len()).find(|&i| (got.ids[i], got.distances[i]) != (want.ids[i], want.distances[i])) {
                panic!(
                    "{rows} × {dim} k {k} {what} ({} shards): first difference at {i}: GPU ({}, {}) vs CPU ({}, {})",
                    codes.shard_count(),
                    got.ids[i],
                    got.distances[i],
                    want.ids[i],
                    want.distances[i]
                );
            }
        }
    }
    // Argument errors come before any GPU work.
    let codes = block_on(edo::GpuCodes::upload(&engine, &tied_codes(10, 16, 1, Format::Binary))).unwrap();
    assert!(matches!(block_on(codes.hamming_topk(&tied_codes(2, 16, 2, Format::Binary), 0)), Err(Error::Unsupported { .. })));
    assert!(matches!(block_on(codes.hamming_topk(&tied_codes(2, 8, 2, Format::Binary), 1)), Err(Error::ShapeMismatch { .. })));
    let f32_table = PackedTable::quantize(Format::F32, &[1.0; 16], 1, 16).unwrap();
    assert!(matches!(block_on(edo::GpuCodes::upload(&engine, &f32_table)), Err(Error::Unsupported { .. })));
}

/// Rescoring on the GPU: the candidates are the CPU path's, and the scores its scores within
/// rounding (the summation orders differ), so the ranking agrees wherever scores are apart.
#[test]
fn rescored_search_on_the_gpu_agrees_with_the_cpu_path() {
    let Some(engine) = engine() else { return };
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(20 << 10), ..Default::default() }) else { return };
    let (rows, dim, nq) = (3333, 96, 29);
    let data = embedding_table(rows, dim, 4);
    let queries = embedding_table(nq, dim, 5);
    let bits = PackedTable::quantize(Format::Binary, &data, rows, dim).unwrap();
    for (format, k, mult) in [(Format::Int8, 10, 4), (Format::F32, 7, 3), (Format::BinaryScaled, 25, 1), (Format::Int4, 100, 8)] {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let want = edo::search::search_rescored(&bits, &queries, &table, k, mult).unwrap();
        for (what, e) in [("one shard", &engine), ("sharded", &sharded)] {
            let codes = block_on(edo::GpuCodes::upload(e, &bits)).unwrap();
            let gpu_table = block_on(GpuTable::upload(e, &table)).unwrap();
            let got = block_on(codes.search_rescored(&queries, &gpu_table, k, mult)).unwrap();
            assert_eq!(got.k, want.k);
            let decoded = table.dequantize();
            for q in 0..nq {
                let qv = &queries[q * dim..(q + 1) * dim];
                let tol = |id: u32| {
                    let x = &decoded[id as usize * dim..(id as usize + 1) * dim];
                    2.0 * dim as f32 * f32::EPSILON * x.iter().zip(qv).map(|(a, b)| (a * b).abs()).sum::<f32>()
                };
                for j in 0..k {
                    let (gid, gs) = (got.ids[q * k + j], got.scores[q * k + j]);
                    let (wid, ws) = (want.ids[q * k + j], want.scores[q * k + j]);
                    assert!((gs - ws).abs() <= tol(gid).max(tol(wid)), "{format} {what}: query {q} rank {j}: GPU {gid} {gs} vs CPU {wid} {ws}");
                    if gid != wid {
                        assert!((gs - ws).abs() <= tol(gid) + tol(wid), "{format} {what}: query {q} rank {j}: different rows with distinct scores");
                    }
                }
            }
        }
    }
}

/// Rows rewritten on the GPU in place (runs of rows, across shard boundaries, duplicates) gather
/// exactly like the updated host table, and the rest stays as it was.
#[test]
fn write_rows_updates_the_gpu_table_in_place() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(6144), ..Default::default() }) else { return };
    let (rows, dim) = (2000, 21);
    let data = embedding_table(rows, dim, 12);
    let fresh = embedding_table(40, dim, 13);
    for format in [Format::Int8, Format::F16, Format::Binary] {
        let mut table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        assert!(gpu.shard_count() > 1, "{format}: {} shards", gpu.shard_count());
        // Runs of consecutive rows that cross shard boundaries, single rows, and a duplicate.
        let ids: Vec<u32> = (95..125).chain([0, 1999, 700, 700, 1000, 1001, 1002, 5, 6, 7]).collect();
        table.update_rows(&ids, &fresh).unwrap();
        gpu.write_rows(&table, &ids).unwrap();
        let all: Vec<u32> = (0..rows as u32).collect();
        let want = edo::cpu::gather(&table, &all, Bounds::Error).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &all, Bounds::Error).unwrap(), &want, &format!("{format} after write_rows"));
        // Mismatched host tables are refused.
        let other = PackedTable::quantize(Format::F32, &data, rows, dim).unwrap();
        assert!(matches!(gpu.write_rows(&other, &[1]), Err(Error::MixedFormats { .. })));
        assert!(matches!(gpu.write_rows(&table, &[2000]), Err(Error::IdOutOfRange { .. })));
    }
}

/// A second handle to a table costs no GPU memory; the table lives while any handle does and is
/// freed with the last; an engine's memory budget refuses an allocation before making it.
#[test]
fn shared_handles_cost_no_table_memory_and_the_budget_holds() {
    let Some(engine) = engine_with(EngineOptions { memory_budget: Some(1 << 20), ..Default::default() }) else { return };
    let base = engine.allocated_bytes();
    let (rows, dim) = (3000, 40);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 1), rows, dim).unwrap();
    let a = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let held = engine.allocated_bytes();
    assert_eq!(held - base, a.bytes(), "the engine holds the table's shards");
    let b = a.clone();
    assert_eq!(engine.allocated_bytes(), held, "a second handle costs no table memory");
    drop(a);
    assert_eq!(engine.allocated_bytes(), held, "the table lives while a handle does");
    let ids = uniform_ids(500, rows, 3);
    assert_bits_eq(&gpu_gather(&b, &ids, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "through the second handle");
    assert_eq!(engine.allocated_bytes(), held, "a finished lookup gives its buffers back");
    drop(b);
    assert_eq!(engine.allocated_bytes(), base, "freed with the last handle");

    // 1.5 MiB of FP32 against a 1 MiB budget: refused, and nothing stays allocated.
    let big = PackedTable::quantize(Format::F32, &embedding_table(10_000, 40, 2), 10_000, 40).unwrap();
    match block_on(GpuTable::upload(&engine, &big)) {
        Err(Error::LimitExceeded { what, max, .. }) => assert!(what.contains("budget") && max == 1 << 20, "{what}"),
        Ok(_) => panic!("a table over the budget was uploaded"),
        Err(e) => panic!("{e}"),
    }
    assert_eq!(engine.allocated_bytes(), base);
    // A table that fits, then a lookup whose output would not.
    let t = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let many = uniform_ids(20_000, rows, 4); // 20 000 × 40 × 4 = 3.2 MB of output
    assert!(matches!(block_on(t.gather(&many, Bounds::Error)), Err(Error::LimitExceeded { .. })));
    assert_eq!(engine.allocated_bytes(), held, "the refused lookup left nothing behind");
}

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
    job.into_output().read_blocking()
}

/// A cache over a host table returns the fully resident table's rows bit for bit, for every
/// format and policy, on Zipf batches with duplicates, bad ids (Zero and Clamp), evictions in
/// the middle of a batch (more distinct rows than slots, down to a single slot), and slots
/// spread over several shards.
#[test]
fn cached_lookups_equal_the_resident_table_for_every_format_and_policy() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(8192), ..Default::default() }) else { return };
    let (rows, dim) = (3000, 37);
    let data = embedding_table(rows, dim, 21);
    for format in Format::ALL {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        for kind in edo::cache::PolicyKind::ALL {
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
    match block_on(GpuTable::upload(&engine, &big)) {
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

/// A mixed-precision table (hot rows in one format, cold rows in another) looked up in one job
/// equals its CPU gather bit for bit — every pair of formats, bad ids under Zero and Clamp,
/// parts spread over several shards — and its hot rows decode as the hot format's.
#[test]
fn mixed_precision_gathers_equal_the_cpu() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4096), ..Default::default() }) else { return };
    let (rows, dim) = (2500, 36);
    let data = embedding_table(rows, dim, 17);
    let ids = ids_with_bad(1777, rows, 3);
    let hot_rows: Vec<u32> = edo::synth::zipf_ids(4000, rows, 1.1, 5).into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().take(300).collect();
    for (hot, cold) in [(Format::F16, Format::Int4), (Format::Int8, Format::Int4), (Format::F32, Format::BinaryScaled), (Format::F16, Format::Int8)] {
        let mixed = edo::MixedTable::quantize(&data, rows, dim, &hot_rows, hot, cold).unwrap();
        assert_eq!(mixed.bytes(), (300 * hot.row_bytes(dim) + 2200 * cold.row_bytes(dim)) as u64);
        let gpu = block_on(edo::GpuMixedTable::upload(&engine, &mixed)).unwrap();
        assert_eq!(gpu.bytes(), mixed.bytes());
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            let job = block_on(gpu.prepare_gather(&ids, bounds)).unwrap();
            job.output().fill(SENTINEL).unwrap();
            job.submit().unwrap();
            let got = job.output().read_blocking().unwrap();
            assert_bits_eq(&got, &mixed.gather(&ids, bounds).unwrap(), &format!("{hot}/{cold} {bounds:?}"));
        }
        // Hot rows are the hot format's rows, cold rows the cold format's.
        let probe = [hot_rows[0], hot_rows[299], (0..rows as u32).find(|r| !hot_rows.contains(r)).unwrap()];
        let got = block_on(gpu.gather(&probe, Bounds::Error)).unwrap().read_blocking().unwrap();
        let whole_hot = PackedTable::quantize(hot, &data, rows, dim).unwrap();
        let whole_cold = PackedTable::quantize(cold, &data, rows, dim).unwrap();
        assert_bits_eq(&got[..2 * dim], &edo::cpu::gather(&whole_hot, &probe[..2], Bounds::Error).unwrap(), "hot rows");
        assert_bits_eq(&got[2 * dim..], &edo::cpu::gather(&whole_cold, &probe[2..], Bounds::Error).unwrap(), "cold row");
        assert!(matches!(block_on(gpu.gather(&[2500], Bounds::Error)), Err(Error::IdOutOfRange { .. })));
    }
}

// ---------------------------------------------------------------------------------------------
// One lookup interface: every u32-id kind gathers and bags through GpuLookup, equal to the
// host twin (Lookup); the cache and QR tables bag too.

use edo::{AnyGpuTable, AnyTable};

/// Pools on the GPU through the trait into a sentinel-filled output.
fn gpu_bag<T: GpuLookup>(table: &T, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Vec<f32> {
    run_job(block_on(table.prepare_bag(bags, pooling, bounds)).unwrap())
}

#[test]
fn every_kind_gathers_and_bags_through_one_interface() {
    // 3 KiB shards and bindings: the dense rows of a bag's indices span several parts too.
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(3 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (900, 20);
    let data = embedding_table(rows, dim, 8);
    let keep: Vec<bool> = (0..rows).map(|r| r % 5 != 2).collect();
    let hot: Vec<u32> = (0..rows as u32).filter(|r| r % 7 == 0).collect();
    let kinds: Vec<AnyTable> = vec![
        PackedTable::quantize(Format::Int4, &data, rows, dim).unwrap().into(),
        edo::PrunedTable::quantize(Format::Int8, &data, rows, dim, &keep).unwrap().into(),
        edo::MixedTable::quantize(&data, rows, dim, &hot, Format::F16, Format::Int4).unwrap().into(),
    ];
    // 301 bags (several workgroups, no multiple of one), some empty, some with bad indices.
    let (indices, offsets) = random_bags(301, rows, 17, true, 4);
    let weights: Vec<f32> = (0..indices.len()).map(|i| 0.25 + (i % 7) as f32 * 0.5).collect();
    let max_abs = data.iter().fold(0f32, |m, x| m.max(x.abs())) * 1.1;
    for host in &kinds {
        let gpu: AnyGpuTable = block_on(host.upload(&engine)).unwrap();
        assert_eq!((gpu.rows(), gpu.dim()), (host.rows(), host.dim()));
        let name = match host {
            AnyTable::Dense(_) => "dense",
            AnyTable::Pruned(_) => "pruned",
            AnyTable::Mixed(_) => "mixed",
        };
        let ids = ids_with_bad(1234, rows, 9);
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            let job = block_on(gpu.prepare_gather(&ids, bounds)).unwrap();
            assert_bits_eq(&run_job(job), &host.gather(&ids, bounds).unwrap(), &format!("{name} gather {bounds:?}"));
            for (pooling, weighted) in [(Pooling::Sum, true), (Pooling::Mean, false), (Pooling::Max, false), (Pooling::None, true)] {
                let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                if weighted {
                    bags = bags.weights(&weights);
                }
                let want = host.bag(&bags, pooling, bounds).unwrap();
                let got = gpu_bag(&gpu, &bags, pooling, bounds);
                assert_pooled_close(&got, &want, 17.0 * 3.5, max_abs, pooling == Pooling::Max, &format!("{name} {pooling:?} {bounds:?}"));
            }
        }
        // Refused before any work, with the index of the first bad id.
        let bags = Bags::new(&indices, &offsets).include_last_offset(true);
        let first_bad = indices.iter().position(|&i| i as usize >= rows).unwrap();
        assert!(matches!(block_on(gpu.bag(&bags, Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange { index, .. }) if index == first_bad), "{name}");
        assert!(matches!(host.bag(&bags, Pooling::Sum, Bounds::Error), Err(Error::IdOutOfRange { index, .. }) if index == first_bad), "{name}");
    }
}

#[test]
fn mixed_bags_equal_the_fused_bags_of_the_whole_table() {
    // All rows hot: the mixed table's bag (gather, then pool) must equal the fused bag kernel's
    // of the same format, the same values in the same order.
    let Some(engine) = engine() else { return };
    let (rows, dim) = (500, 12);
    let data = embedding_table(rows, dim, 3);
    let all: Vec<u32> = (0..rows as u32).collect();
    let mixed = edo::MixedTable::quantize(&data, rows, dim, &all, Format::Int8, Format::Int4).unwrap();
    let whole = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let (indices, offsets) = random_bags(200, rows, 9, false, 2);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
        let host_mixed = Lookup::bag(&mixed, &bags, pooling, Bounds::Error).unwrap();
        assert_bits_eq(&host_mixed, &Lookup::bag(&whole, &bags, pooling, Bounds::Error).unwrap(), &format!("CPU {pooling:?}"));
        let gpu_mixed = block_on(edo::GpuMixedTable::upload(&engine, &mixed)).unwrap();
        let gpu_whole = block_on(GpuTable::upload(&engine, &whole)).unwrap();
        assert_bits_eq(&gpu_bag(&gpu_mixed, &bags, pooling, Bounds::Error), &gpu_bag(&gpu_whole, &bags, pooling, Bounds::Error), &format!("GPU {pooling:?}"));
    }
}

#[test]
fn cache_and_qr_bags_equal_their_oracles() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (3000, 16);
    let host = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 5), rows, dim).unwrap();
    let max_abs = host.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
    // 200 slots for bags over 3000 rows: every call evicts, and runs in parts.
    let cache = block_on(edo::GpuCache::new(&engine, host.clone(), 200, edo::cache::PolicyKind::Lru.build())).unwrap();
    for seed in 0..3 {
        let (indices, offsets) = random_bags(157, rows, 12, true, 30 + seed);
        let bags = Bags::new(&indices, &offsets).include_last_offset(true);
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let want = Lookup::bag(&host, &bags, pooling, Bounds::Zero).unwrap();
            let got = block_on(cache.bag(&bags, pooling, Bounds::Zero)).unwrap().read_blocking().unwrap();
            assert_pooled_close(&got, &want, 12.0, max_abs, pooling == Pooling::Max, &format!("cache {pooling:?}"));
        }
    }
    let bad = [1u32, 3000];
    assert!(matches!(block_on(cache.bag(&Bags::new(&bad, &[0]), Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange { index: 1, .. })));

    let m = 97;
    let quotient = PackedTable::quantize(Format::F16, &embedding_table(40, dim, 6), 40, dim).unwrap();
    let remainder = PackedTable::quantize(Format::F16, &embedding_table(m, dim, 7), m, dim).unwrap();
    let qr = block_on(edo::GpuQrTables::upload(&engine, &quotient, &remainder)).unwrap();
    assert_eq!((qr.dim(), qr.ids()), (dim, 40 * m as u64));
    let ids: Vec<u64> = random_ids(700, 11).into_iter().map(|i| i % (45 * m as u64)).collect();
    let offsets: Vec<u32> = (0..ids.len() as u32).step_by(9).collect();
    let bags = Bags::new(&ids, &offsets);
    for combine in [edo::hash::QrCombine::Mult, edo::hash::QrCombine::Add, edo::hash::QrCombine::Concat] {
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let want = edo::hash::qr_bag(&quotient, &remainder, &bags, combine, pooling, Bounds::Zero).unwrap();
            let got = run_job(block_on(qr.prepare_bag(&bags, combine, pooling, Bounds::Zero)).unwrap());
            assert_pooled_close(&got, &want, 9.0, 4.0, pooling == Pooling::Max, &format!("qr {combine:?} {pooling:?}"));
        }
    }
    let beyond = ids.iter().position(|&i| i >= 40 * m as u64).unwrap();
    assert!(
        matches!(block_on(qr.bag(&bags, edo::hash::QrCombine::Mult, Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange64 { index, .. }) if index == beyond)
    );
}

#[test]
fn the_planners_choice_is_a_table_to_look_up() {
    use edo::plan::{Access, Choice};
    let Some(engine) = engine() else { return };
    let (rows, dim) = (600, 8);
    let data = embedding_table(rows, dim, 12);
    let ids = ids_with_bad(333, rows, 1);
    for (choice, access) in [
        (Choice::Resident { format: Format::Int8 }, Access::Uniform),
        (Choice::Cached { format: Format::F16, capacity: 50 }, Access::Zipf(1.1)),
        (Choice::Mixed { hot: Format::F16, cold: Format::Int4, hot_rows: 40 }, Access::Zipf(1.1)),
        (Choice::Mixed { hot: Format::F32, cold: Format::BinaryScaled, hot_rows: 3 }, Access::Counts((0..rows as u64).map(|r| r % 50).collect())),
    ] {
        let table = choice.build(&data, rows, dim, &access).unwrap();
        let gpu = block_on(choice.upload(&engine, table.clone())).unwrap();
        match (&gpu, choice.cache_capacity()) {
            (AnyGpuTable::Cached(cache), Some(capacity)) => assert_eq!(cache.max_capacity(), capacity, "{choice}"),
            (_, None) => assert_eq!(gpu.bytes(), Lookup::bytes(&table), "{choice}"),
            _ => panic!("{choice}: a cached choice is uploaded as a cache"),
        }
        let job = block_on(gpu.prepare_gather(&ids, Bounds::Zero)).unwrap();
        assert_bits_eq(&run_job(job), &table.gather(&ids, Bounds::Zero).unwrap(), &format!("{choice}"));
        assert_eq!(choice.cache_capacity().is_some(), matches!(choice, Choice::Cached { .. }));
        if let (AnyTable::Mixed(m), Access::Zipf(_)) = (&table, &access) {
            assert!(m.locate(0).0 && !m.locate(rows - 1).0, "{choice}: the first rows are the hot ones under Zipf");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bring your own device

/// A device of this machine's adapter, made by "the application" with `limits`.
fn own_device(limits: wgpu::Limits) -> Option<(wgpu::Device, wgpu::Queue)> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let Ok(adapter) = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())) else {
        assert!(!require_gpu(), "no adapter; EDO_REQUIRE_GPU=1 makes this a failure");
        eprintln!("SKIPPED: no adapter");
        return None;
    };
    Some(
        block_on(adapter.request_device(&wgpu::DeviceDescriptor { required_limits: limits, ..Default::default() }))
            .expect("a device within the adapter's limits"),
    )
}

#[test]
fn an_engine_over_the_callers_device_feeds_the_callers_pipeline() {
    let Some((device, queue)) = own_device(wgpu::Limits::default()) else { return };
    let engine = Engine::from_device(device.clone(), queue.clone(), EngineOptions::default()).unwrap();
    // The device's limits (WebGPU's defaults), not the adapter's.
    assert_eq!(engine.limits().max_storage_buffer_binding_size, wgpu::Limits::default().max_storage_buffer_binding_size);
    let (rows, dim) = (5000, 7);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 4), rows, dim).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let ids = ids_with_bad(777, rows, 6);
    let job = block_on(gpu.prepare_gather(&ids, Bounds::Zero)).unwrap();
    job.output().fill(SENTINEL).unwrap();
    // The caller's kernel doubles every gathered value in place, in the same encoder.
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> v: array<f32>;
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                 if (g.x < arrayLength(&v)) { v[g.x] = 2.0 * v[g.x]; }
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry { binding: 0, resource: job.output().buffer().as_entire_binding() }],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    job.encode(&mut encoder);
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(((ids.len() * dim) as u32).div_ceil(64), 1, 1);
    }
    queue.submit([encoder.finish()]);
    let got = job.output().read_blocking().unwrap();
    let want: Vec<f32> = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap().iter().map(|x| 2.0 * x).collect();
    assert_bits_eq(&got, &want, "gathered and doubled on the caller's device");
}

#[test]
fn a_device_below_edos_limits_is_refused_by_name() {
    let Some((device, queue)) = own_device(wgpu::Limits::downlevel_webgl2_defaults()) else { return };
    let err = Engine::from_device(device, queue, EngineOptions::default()).err();
    assert_eq!(err, Some(Error::DeviceLimits { limit: "max_storage_buffers_per_shader_stage", required: 6, actual: 0 }));
    assert!(err.unwrap().to_string().contains("max_storage_buffers_per_shader_stage is 0"));
}

#[test]
fn device_loss_listeners_hear_it_once() {
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    {
        let heard = heard.clone();
        engine.on_device_lost(move |why| heard.lock().unwrap().push(why.to_string()));
    }
    assert!(heard.lock().unwrap().is_empty());
    engine.destroy_device();
    engine.destroy_device();
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].contains("Destroyed"), "{heard:?}");
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
    assert!(matches!(job.submit(), Err(Error::Unsupported { .. })));
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
