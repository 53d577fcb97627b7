//! f16 output: gathers and bags that write f16 rows (two values a word), rounded to nearest even
//! as the CPU path rounds them, bit for bit; by the fused gather kernel and by the rounding pass.

use super::*;
use half::f16;

/// An f16 lookup into a sentinel-filled output, read back as f16 bits.
fn read_bits(job: edo::LookupJob) -> Vec<u16> {
    assert!(job.output().is_f16());
    job.output().fill(SENTINEL).unwrap();
    job.submit().unwrap();
    job.into_output().read_f16_blocking().unwrap().into_iter().map(f16::to_bits).collect()
}

fn bits(values: &[f16]) -> Vec<u16> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn assert_same(got: &[u16], want: &[u16], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at value {i}: GPU {:#06x} vs CPU {:#06x}", got[i], want[i]);
    }
}

#[test]
fn f16_gathers_equal_the_cpu_path_for_every_format_across_shards() {
    // 4 KiB bindings: several shards and output chunks at aligned offsets.
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    let rows = 1500;
    for dim in [1, 7, 40] {
        let data = embedding_table(rows, dim, 70 + dim as u64);
        for format in Format::ALL {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
            for (n, bounds) in [(1, Bounds::Error), (333, Bounds::Zero), (2049, Bounds::Clamp)] {
                let ids = if bounds == Bounds::Error { uniform_ids(n, rows, 5) } else { ids_with_bad(n, rows, n as u64) };
                let want = bits(&Lookup::gather_f16(&table, &ids, bounds).unwrap());
                let what = format!("{format} dim {dim} ids {n} {bounds:?}");
                // The fused kernel (a plain table), and the f32 gather then the rounding pass (the
                // same table behind the trait's default, as a mixed table with no hot rows).
                assert_same(&read_bits(block_on(gpu.prepare_gather_f16(&ids, bounds)).unwrap()), &want, &format!("{what}, fused"));
                let mixed = edo::MixedTable::quantize(&data, rows, dim, &[], format, format).unwrap();
                let gpu_mixed = block_on(edo::GpuMixedTable::upload(&engine, &mixed)).unwrap();
                assert_same(&read_bits(block_on(gpu_mixed.prepare_gather_f16(&ids, bounds)).unwrap()), &want, &format!("{what}, rounding pass"));
            }
        }
    }
}

#[test]
fn f16_rounding_of_hard_values_is_ieee_round_to_nearest_even() {
    let Some(engine) = engine() else { return };
    let hard: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1.0 / 3.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        1e6,
        -1e6,
        1e-3,
        // subnormal f16: the smallest, half of it (a tie, to zero), just above half, a mid one
        5.960_464_5e-8,
        2.980_232_2e-8,
        2.980_233e-8,
        1.0e-6,
        -3.0e-5,
        6.097_555e-5,
        6.103_515_6e-5,
        // ties between f16 neighbours: 2049 (to 2048, even), 2051 (to 2052), 1 + 2^-11 (to 1)
        2049.0,
        2051.0,
        1.000_488_3,
        1.001_464_8,
        1e-10,
        f32::MIN_POSITIVE,
        3.0e38,
        -3.0e38,
    ];
    let dim = 5;
    let rows = hard.len().div_ceil(dim);
    let mut data = hard.clone();
    data.resize(rows * dim, 0.5);
    let table = PackedTable::quantize(Format::F32, &data, rows, dim).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let ids: Vec<u32> = (0..rows as u32).rev().collect();
    let want = bits(&Lookup::gather_f16(&table, &ids, Bounds::Error).unwrap());
    assert_same(&read_bits(block_on(gpu.prepare_gather_f16(&ids, Bounds::Error)).unwrap()), &want, "fused");
    let pruned = edo::PrunedTable::quantize(Format::F32, &data, rows, dim, &vec![true; rows]).unwrap();
    let gpu_pruned = block_on(edo::GpuPrunedTable::upload(&engine, &pruned)).unwrap();
    assert_same(&read_bits(block_on(gpu_pruned.prepare_gather_f16(&ids, Bounds::Error)).unwrap()), &want, "rounding pass");
    // The reference itself, spot-checked: overflow to inf, ties to even, the subnormal tie to 0.
    let at = |x: f32| f16::from_f32(x).to_bits();
    assert_eq!((at(65520.0), at(65519.99), at(2049.0), at(2.980_232_2e-8)), (0x7c00, 0x7bff, 0x6800, 0));
}

#[test]
fn f16_bags_round_what_the_bag_pooled() {
    let Some(engine) = engine() else { return };
    let (rows, dim) = (2000, 19);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 8), rows, dim).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let indices = ids_with_bad(3001, rows, 2);
    let offsets: Vec<u32> = (0..3001).step_by(11).collect();
    let bags = Bags::new(&indices, &offsets);
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::None] {
        let pooled = block_on(gpu.bag(&bags, pooling, Bounds::Zero)).unwrap().read_blocking().unwrap();
        let got = read_bits(block_on(gpu.prepare_bag_f16(&bags, pooling, Bounds::Zero)).unwrap());
        // The GPU's own pooled values, rounded as the CPU rounds: bit for bit.
        assert_same(&got, &bits(&edo::cpu::to_f16(&pooled)), &format!("{pooling:?}"));
        // And the CPU path's f16 bags, within f16's rounding of the pooled values' difference.
        let cpu = Lookup::bag_f16(&table, &bags, pooling, Bounds::Zero).unwrap();
        for (i, (g, c)) in got.iter().zip(&cpu).enumerate() {
            let (g, c) = (f16::from_bits(*g).to_f32(), c.to_f32());
            assert!((g - c).abs() <= 1e-3 * (1.0 + c.abs()), "{pooling:?} value {i}: {g} vs {c}");
        }
    }
}

#[test]
fn f16_rows_read_back_widened_and_f32_rows_refuse_read_f16() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::F16, &embedding_table(50, 9, 1), 50, 9).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let rows = block_on(gpu.gather_f16(&[3, 1, 4], Bounds::Error)).unwrap();
    assert_eq!((rows.rows(), rows.dim(), rows.row_words()), (3, 9, 5));
    assert_eq!(rows.buffer().size(), 3 * 5 * 4, "half the bytes of f32 rows, an odd dim padded to a word");
    // f16 rows read as f32 are the f16 values widened: a table of f16 gives its values exactly.
    assert_bits_eq(&rows.read_blocking().unwrap(), &edo::cpu::gather(&table, &[3, 1, 4], Bounds::Error).unwrap(), "widened");
    let f32_rows = block_on(gpu.gather(&[3], Bounds::Error)).unwrap();
    assert!(!f32_rows.is_f16());
    assert!(matches!(f32_rows.read_f16_blocking().map_err(Error::from), Err(Error::Unsupported { .. })));
}
