//! The memory planner and mixed-precision tables (host side; the GPU lookup of a mixed table is
//! in `tests/gpu/`).

use edo::plan::{plan, Access, Choice, PlanOptions, TableSpec};
use edo::synth::{embedding_table, zipf_ids, Rng};
use edo::Lookup;
use edo::{Bounds, Error, Format, MixedTable};

fn specs(seed: u64) -> Vec<TableSpec> {
    let mut rng = Rng::new(seed);
    (0..6)
        .map(|i| {
            let rows = 1000 + rng.below(200_000) as usize;
            let dim = [8usize, 16, 33, 64, 128][rng.below(5) as usize];
            let access = match rng.below(3) {
                0 => Access::Uniform,
                _ => Access::Zipf(0.6 + 0.7 * rng.next_f32() as f64),
            };
            let mut t = TableSpec::new(format!("t{i}"), rows, dim, access);
            t.lookups = 1.0 + rng.below(5) as f64;
            t
        })
        .collect()
}

#[test]
fn plans_fit_the_budget_and_beat_int8_everywhere_when_it_fits() {
    for seed in 0..6 {
        let tables = specs(seed);
        let options = PlanOptions::default();
        let int8_total: u64 = tables.iter().map(|t| (t.rows * Format::Int8.row_bytes(t.dim)) as u64).sum();
        for share in [0.05, 0.2, 0.5, 0.8, 1.0, 1.3, 3.0] {
            let budget = (share * int8_total as f64) as u64;
            let p = match plan(&tables, budget, &options) {
                Ok(p) => p,
                Err(Error::LimitExceeded { requested, max, .. }) => {
                    assert!(requested > max && share < 0.2, "seed {seed} share {share}: refused although {requested} ≤ {max}");
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            assert!(p.bytes <= budget, "seed {seed} share {share}: {} > {budget}", p.bytes);
            assert_eq!(p.int8_bytes, int8_total);
            // Each table's bytes are what its choice really takes.
            for (t, tp) in tables.iter().zip(&p.tables) {
                let want = match tp.choice {
                    Choice::Resident { format } => (t.rows * format.row_bytes(t.dim)) as u64,
                    Choice::Cached { format, capacity } => (capacity * format.row_bytes(t.dim)) as u64,
                    Choice::Mixed { hot, cold, hot_rows } => (hot_rows * hot.row_bytes(t.dim) + (t.rows - hot_rows) * cold.row_bytes(t.dim)) as u64,
                };
                assert_eq!(tp.bytes, want, "{}", tp.choice);
                if let Choice::Cached { .. } = tp.choice {
                    assert!(tp.hit_rate >= options.min_hit_rate, "{tp:?}");
                }
            }
            if budget >= int8_total {
                assert!(p.expected_error < p.int8_error, "seed {seed} share {share}: {} vs INT8 {}", p.expected_error, p.int8_error);
            }
        }
    }
}

#[test]
fn skewed_tables_beat_int8_in_less_memory_than_int8() {
    // Zipf(1.05) tables: mixed FP16/INT4 (or a cache) reaches below INT8's error in 80 % of its bytes.
    let tables: Vec<TableSpec> = (0..4).map(|i| TableSpec::new(format!("z{i}"), 500_000, 64, Access::Zipf(1.05))).collect();
    let int8_total: u64 = 4 * 500_000 * Format::Int8.row_bytes(64) as u64;
    let p = plan(&tables, int8_total * 8 / 10, &PlanOptions::default()).unwrap();
    assert!(p.bytes <= int8_total * 8 / 10);
    assert!(p.expected_error < p.int8_error, "{p}");
    // Without caches or mixed precision the same budget cannot beat INT8.
    let plain = PlanOptions { min_hit_rate: 2.0, mixed: false, ..PlanOptions::default() };
    let q = plan(&tables, int8_total * 8 / 10, &plain).unwrap();
    assert!(q.expected_error > q.int8_error, "{q}");
    let text = p.to_string();
    assert!(text.contains("z3") && text.contains("budget"), "{text}");
    assert_eq!(p.to_json()["tables"].as_array().unwrap().len(), 4);
}

#[test]
fn budgets_too_small_are_refused_with_the_smallest_size() {
    let tables = vec![TableSpec::new("a", 10_000, 32, Access::Uniform)];
    match plan(&tables, 1000, &PlanOptions::default()) {
        Err(Error::LimitExceeded { requested, max: 1000, .. }) => assert!(requested > 1000),
        other => panic!("{other:?}"),
    }
    assert!(plan(&[], 0, &PlanOptions::default()).unwrap().tables.is_empty());
}

/// The planner's expected error of a mixed table is what lookups of a fresh stream measure.
#[test]
fn the_expected_error_of_a_mixed_plan_is_what_lookups_measure() {
    let (rows, dim) = (20_000, 48);
    let data = embedding_table(rows, dim, 3);
    let train = zipf_ids(200_000, rows, 1.1, 1);
    let mut counts = vec![0u64; rows];
    for &i in &train {
        counts[i as usize] += 1;
    }
    let mut spec = TableSpec::new("m", rows, dim, Access::Counts(counts.clone()));
    spec.sample = Some(data.clone());
    let options = PlanOptions { formats: vec![Format::F16, Format::Int4], min_hit_rate: 2.0, ..PlanOptions::default() };
    let budget = (rows * Format::Int4.row_bytes(dim)) as u64 * 13 / 10;
    let p = plan(&[spec], budget, &options).unwrap();
    let Choice::Mixed { hot, cold, hot_rows } = p.tables[0].choice else { panic!("expected a mixed plan: {p}") };
    let mixed = MixedTable::from_counts(&data, rows, dim, &counts, hot_rows, hot, cold).unwrap();
    assert_eq!(mixed.bytes(), p.tables[0].bytes);
    let test = zipf_ids(50_000, rows, 1.1, 2);
    let got = mixed.gather(&test, Bounds::Error).unwrap();
    let mut err = 0f64;
    for (k, &id) in test.iter().enumerate() {
        let x = &data[id as usize * dim..(id as usize + 1) * dim];
        let y = &got[k * dim..(k + 1) * dim];
        let d: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>().sqrt();
        err += d / x.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
    }
    let measured = err / test.len() as f64;
    let expected = p.tables[0].expected_error;
    assert!((measured - expected).abs() < 0.1 * expected, "measured {measured:.3e} vs expected {expected:.3e}");
}

#[test]
fn mixed_tables_check_their_input() {
    let (rows, dim) = (50, 5);
    let mut data = embedding_table(rows, dim, 1);
    assert!(matches!(MixedTable::quantize(&data, rows, dim, &[3, 9, 3], Format::F16, Format::Int4), Err(Error::DuplicateHotId { id: 3 })));
    assert!(matches!(MixedTable::quantize(&data, rows, dim, &[50], Format::F16, Format::Int4), Err(Error::IdOutOfRange { .. })));
    data[41 * dim + 2] = f32::NAN;
    // Row 41 is cold (index 39 of the cold part): the error names the original row.
    match MixedTable::quantize(&data, rows, dim, &[1, 2], Format::F16, Format::Int4) {
        Err(Error::NonFinite { row: 41, col: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    data[41 * dim + 2] = 7e4; // beyond FP16: named in the hot part too
    match MixedTable::quantize(&data, rows, dim, &[41], Format::F16, Format::Int8) {
        Err(Error::OutOfRange { row: 41, .. }) => {}
        other => panic!("{other:?}"),
    }
    let counts: Vec<u64> = (0..rows as u64).map(|r| r % 7).collect();
    let m = MixedTable::from_counts(&embedding_table(rows, dim, 1), rows, dim, &counts, 5, Format::F32, Format::Int4).unwrap();
    // The five rows with count 6, lowest first: 6, 13, 20, 27, 34.
    let hot: Vec<usize> = (0..rows).filter(|&r| m.locate(r).0).collect();
    assert_eq!(hot, [6, 13, 20, 27, 34]);
}

#[test]
fn a_mixed_table_round_trips_through_its_parts() {
    let (rows, dim) = (300, 6);
    let data = embedding_table(rows, dim, 2);
    let hot: Vec<u32> = vec![299, 0, 17, 150];
    let m = MixedTable::quantize(&data, rows, dim, &hot, Format::F16, Format::Int4).unwrap();
    assert_eq!(m.hot_rows(), hot);
    let back = MixedTable::from_parts(&m.hot_rows(), m.hot().clone(), m.cold().clone()).unwrap();
    let all: Vec<u32> = (0..rows as u32).collect();
    assert_eq!(back.gather(&all, Bounds::Error).unwrap(), m.gather(&all, Bounds::Error).unwrap());
    // Parts that do not fit together are refused.
    let (h, c) = (m.hot().clone(), m.cold().clone());
    assert!(matches!(MixedTable::from_parts(&hot[..3], h.clone(), c.clone()), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(MixedTable::from_parts(&[299, 0, 17, 0], h.clone(), c.clone()), Err(Error::DuplicateHotId { id: 0 })));
    assert!(matches!(MixedTable::from_parts(&[300, 0, 17, 1], h.clone(), c.clone()), Err(Error::IdOutOfRange { index: 0, id: 300, .. })));
    let other_dim = edo::PackedTable::quantize(Format::Int4, &embedding_table(296, 5, 1), 296, 5).unwrap();
    assert!(matches!(MixedTable::from_parts(&hot, h, other_dim), Err(Error::ShapeMismatch { .. })));
}

#[test]
fn the_planner_chooses_among_block_group_wise_and_fp8_formats() {
    // With every format a candidate, a budget of 0.6 bytes per value (below INT8 and FP8, above
    // row-wise INT4) buys a 4-bit format with finer scales than INT4's: its error is lower than
    // the plan limited to row-wise INT4, and it is one of the newer formats.
    let (rows, dim) = (100_000, 256);
    let tables = vec![TableSpec::new("t", rows, dim, Access::Uniform)];
    let budget = (rows * dim) as u64 * 6 / 10;
    let all = PlanOptions { formats: Format::ALL.to_vec(), min_hit_rate: 2.0, mixed: false, ..PlanOptions::default() };
    let p = plan(&tables, budget, &all).unwrap();
    let Choice::Resident { format } = p.tables[0].choice else { panic!("{p}") };
    assert!([Format::Q4K, Format::Int4G64, Format::Int4G128, Format::Q4_0].contains(&format), "{p}");
    let int4 = PlanOptions { formats: vec![Format::Int4], ..all.clone() };
    let q = plan(&tables, budget, &int4).unwrap();
    assert!(p.expected_error < q.expected_error, "{} vs row-wise INT4 {}", p.expected_error, q.expected_error);
    // A larger budget buys FP8 or an 8-bit block format over INT4's; mixed plans may pair them.
    let mixed = PlanOptions { mixed: true, ..all };
    let p = plan(&tables, (rows * dim) as u64 * 11 / 10, &mixed).unwrap();
    assert!(p.bytes <= (rows * dim) as u64 * 11 / 10 && p.expected_error < q.expected_error, "{p}");
}
