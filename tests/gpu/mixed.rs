//! Mixed-precision tables: hot and cold rows in one job.

use super::*;

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
    let pairs = [(Format::F16, Format::Int4), (Format::Int8, Format::Int4), (Format::F32, Format::BinaryScaled), (Format::F16, Format::Int8)];
    // And the block, group-wise and FP8 formats.
    let newer = [(Format::Fp8E4M3, Format::Q4K), (Format::Q8_0, Format::Int4G64), (Format::Q6K, Format::Fp8E5M2)];
    for (hot, cold) in pairs.into_iter().chain(newer) {
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
