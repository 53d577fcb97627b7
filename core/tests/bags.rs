//! EmbeddingBag semantics on the CPU path (the GPU's oracle), against a naive reference written
//! from PyTorch's definition, and the typed errors of bad offsets. No GPU needed.

use edo_core::synth::{embedding_table, Rng};
use edo_core::{Bags, Bounds, Error, Format, Layout, PackedTable, Pooling};

/// PyTorch's EmbeddingBag, written as plainly as possible over decoded rows (f64 accumulation).
fn reference(rows: &[Vec<f32>], indices: &[u32], offsets: &[usize], weights: Option<&[f32]>, pooling: Pooling, bounds: Bounds) -> Vec<Vec<f64>> {
    let dim = rows[0].len();
    let row = |id: u32| -> Vec<f64> {
        match bounds.resolve(id, rows.len()) {
            Some(r) => rows[r].iter().map(|&x| x as f64).collect(),
            None => vec![0.0; dim],
        }
    };
    (0..offsets.len() - 1)
        .map(|b| {
            let (s, e) = (offsets[b], offsets[b + 1]);
            if s == e {
                return vec![0.0; dim];
            }
            let mut acc = vec![if pooling == Pooling::Max { f64::NEG_INFINITY } else { 0.0 }; dim];
            for j in s..e {
                let w = weights.map_or(1.0, |w| w[j] as f64);
                for (a, x) in acc.iter_mut().zip(row(indices[j])) {
                    *a = if pooling == Pooling::Max { a.max(x) } else { *a + w * x };
                }
            }
            if pooling == Pooling::Mean {
                acc.iter_mut().for_each(|a| *a /= (e - s) as f64);
            }
            acc
        })
        .collect()
}

fn random_bags(n_bags: usize, rows: usize, max_len: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut rng = Rng::new(seed);
    let mut indices = Vec::new();
    let mut offsets = Vec::new();
    for b in 0..n_bags {
        offsets.push(indices.len() as u32);
        let len = if b % 7 == 3 { 0 } else { rng.below(max_len as u32 + 1) as usize };
        indices.extend((0..len).map(|_| rng.below(rows as u32)));
    }
    (indices, offsets)
}

fn assert_close(got: &[f32], want: &[Vec<f64>], what: &str) {
    let dim = want.first().map_or(0, |r| r.len());
    assert_eq!(got.len(), want.len() * dim, "{what}: length");
    for (b, w) in want.iter().enumerate() {
        for c in 0..dim {
            let (g, x) = (got[b * dim + c] as f64, w[c]);
            assert!((g - x).abs() <= 1e-5 * (1.0 + x.abs()), "{what}: bag {b} col {c}: {g} vs {x}");
        }
    }
}

#[test]
fn pooling_matches_pytorch_semantics_for_every_format() {
    let (rows, dim) = (300, 13);
    let data = embedding_table(rows, dim, 1);
    let (indices, offsets) = random_bags(64, rows, 9, 2);
    let weights: Vec<f32> = (0..indices.len()).map(|j| 0.25 + (j % 5) as f32 * 0.5).collect();
    let ends: Vec<usize> = offsets.iter().map(|&o| o as usize).chain([indices.len()]).collect();
    for format in Format::ALL {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let decoded: Vec<Vec<f32>> = table.dequantize().chunks(dim).map(|r| r.to_vec()).collect();
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let got = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &offsets), pooling, Bounds::Error).unwrap();
            assert_close(&got, &reference(&decoded, &indices, &ends, None, pooling, Bounds::Error), &format!("{format} {pooling:?}"));
        }
        let got = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &offsets).weights(&weights), Pooling::Sum, Bounds::Error).unwrap();
        assert_close(&got, &reference(&decoded, &indices, &ends, Some(&weights), Pooling::Sum, Bounds::Error), &format!("{format} weighted sum"));
        // Max takes exact maxima of exactly decoded rows: equal to the reference bit for bit.
        let max = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &offsets), Pooling::Max, Bounds::Error).unwrap();
        let want = reference(&decoded, &indices, &ends, None, Pooling::Max, Bounds::Error);
        assert!(max.iter().zip(want.concat()).all(|(&a, b)| a as f64 == b), "{format}: max is exact");
    }
}

#[test]
fn include_last_offset_both_ways_and_none_pooling() {
    let (rows, dim) = (50, 4);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 3), rows, dim).unwrap();
    let indices = [1u32, 2, 3, 4, 5, 6];
    let a = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &[0, 2, 2, 5]), Pooling::Sum, Bounds::Error).unwrap();
    let b = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &[0, 2, 2, 5, 6]).include_last_offset(true), Pooling::Sum, Bounds::Error).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 4 * dim);
    assert!(a[dim..2 * dim].iter().all(|&x| x == 0.0), "the empty bag is a zero row");
    // None: one weighted row per index, whatever the offsets.
    let w = [2.0f32, 1.0, 0.5, 1.0, 1.0, -1.0];
    let none = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &[0, 3]).weights(&w), Pooling::None, Bounds::Error).unwrap();
    let rows_ = edo_core::cpu::gather(&table, &indices, Bounds::Error).unwrap();
    for j in 0..6 {
        for c in 0..dim {
            assert_eq!(none[j * dim + c], w[j] * rows_[j * dim + c]);
        }
    }
}

#[test]
fn bounds_policy_applies_to_every_index() {
    let (rows, dim) = (10, 3);
    let table = PackedTable::quantize(Format::F32, &embedding_table(rows, dim, 4), rows, dim).unwrap();
    let decoded: Vec<Vec<f32>> = table.dequantize().chunks(dim).map(|r| r.to_vec()).collect();
    let indices = [1u32, 10, 2, 99, 9];
    let offsets = [0u32, 2, 4];
    assert_eq!(
        edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &offsets), Pooling::Sum, Bounds::Error),
        Err(Error::IdOutOfRange { index: 1, id: 10, rows })
    );
    let ends = [0, 2, 4, 5];
    for bounds in [Bounds::Zero, Bounds::Clamp] {
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let got = edo_core::cpu::embedding_bag(&table, &Bags::new(&indices, &offsets), pooling, bounds).unwrap();
            assert_close(&got, &reference(&decoded, &indices, &ends, None, pooling, bounds), &format!("{bounds:?} {pooling:?}"));
        }
    }
}

#[test]
fn bad_offsets_and_weights_are_typed_errors() {
    let table = PackedTable::quantize(Format::F32, &embedding_table(10, 2, 5), 10, 2).unwrap();
    let idx = [1u32, 2, 3];
    let bag =
        |offsets: &[u32], last: bool| edo_core::cpu::embedding_bag(&table, &Bags::new(&idx, offsets).include_last_offset(last), Pooling::Sum, Bounds::Error);
    assert!(matches!(bag(&[1, 2], false), Err(Error::BadOffsets { index: 0, value: 1, .. })));
    assert!(matches!(bag(&[0, 2, 1], false), Err(Error::BadOffsets { index: 2, value: 1, .. })));
    assert!(matches!(bag(&[0, 4], false), Err(Error::BadOffsets { index: 1, value: 4, .. })));
    assert!(matches!(bag(&[0, 1, 2], true), Err(Error::BadOffsets { index: 2, value: 2, .. })), "last offset must cover all indices");
    assert!(matches!(bag(&[], true), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(bag(&[], false), Err(Error::ShapeMismatch { .. })), "indices but no bags");
    let none = edo_core::cpu::embedding_bag(&table, &Bags::new(&[], &[]), Pooling::Sum, Bounds::Error);
    assert_eq!(none.unwrap(), Vec::<f32>::new(), "no bags, no output");
    let w = [1.0f32, 2.0];
    let weighted = |w: &[f32], p| edo_core::cpu::embedding_bag(&table, &Bags::new(&idx, &[0]).weights(w), p, Bounds::Error);
    assert!(matches!(weighted(&w, Pooling::Sum), Err(Error::ShapeMismatch { expected: 3, actual: 2, .. })));
    assert!(matches!(weighted(&[1.0, 2.0, 3.0], Pooling::Max), Err(Error::Unsupported { .. })));
    assert!(matches!(weighted(&[1.0, f32::NAN, 3.0], Pooling::Sum), Err(Error::NonFiniteWeight { index: 1, .. })));
}

#[test]
fn batched_tables_equal_one_call_per_table_in_both_layouts() {
    let dims = [8usize, 3, 16];
    let rows = [100usize, 7, 1000];
    let tables: Vec<PackedTable> =
        dims.iter().zip(rows).enumerate().map(|(t, (&d, r))| PackedTable::quantize(Format::Int4, &embedding_table(r, d, t as u64), r, d).unwrap()).collect();
    let refs: Vec<&PackedTable> = tables.iter().collect();
    // Enough samples for the CPU path to split them over threads (64 or more each).
    let batch = 161;
    // Feature-major bags: table 0's 161 bags, then table 1's, then table 2's.
    let mut indices = Vec::new();
    let mut offsets = Vec::new();
    let mut per_table = Vec::new();
    for (t, &r) in rows.iter().enumerate() {
        let (idx, off) = random_bags(batch, r, 6, 10 + t as u64);
        per_table.push(edo_core::cpu::embedding_bag(&tables[t], &Bags::new(&idx, &off), Pooling::Mean, Bounds::Error).unwrap());
        offsets.extend(off.iter().map(|o| o + indices.len() as u32));
        indices.extend(idx);
    }
    offsets.push(indices.len() as u32);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    let concat = edo_core::cpu::embedding_bags(&refs, batch, &bags, Pooling::Mean, Bounds::Error, Layout::Concat).unwrap();
    let total: usize = dims.iter().sum();
    for b in 0..batch {
        let mut col = 0;
        for (t, &d) in dims.iter().enumerate() {
            assert_eq!(&concat[b * total + col..b * total + col + d], &per_table[t][b * d..(b + 1) * d]);
            col += d;
        }
    }
    let per = edo_core::cpu::embedding_bags(&refs, batch, &bags, Pooling::Mean, Bounds::Error, Layout::PerTable).unwrap();
    assert_eq!(per, per_table.concat());
    // Into a caller's buffer: the same values over whatever it held; a buffer of the wrong size
    // is refused and left as it was.
    let mut out = vec![f32::NAN; batch * total];
    edo_core::cpu::embedding_bags_into(&refs, batch, &bags, Pooling::Mean, Bounds::Error, Layout::Concat, &mut out).unwrap();
    assert_eq!(out, concat);
    let mut short_out = vec![f32::NAN; batch * total - 1];
    assert!(matches!(
        edo_core::cpu::embedding_bags_into(&refs, batch, &bags, Pooling::Mean, Bounds::Error, Layout::Concat, &mut short_out),
        Err(Error::ShapeMismatch { expected, actual, .. }) if expected == batch * total && actual == batch * total - 1
    ));
    assert!(short_out.iter().all(|x| x.is_nan()));
    // Offsets must describe exactly B·T bags.
    let short = Bags::new(&indices, &offsets[..offsets.len() - 1]).include_last_offset(true);
    assert!(matches!(edo_core::cpu::embedding_bags(&refs, batch, &short, Pooling::Sum, Bounds::Error, Layout::Concat), Err(Error::ShapeMismatch { .. })));
    // A bad index reports its position in the whole indices array.
    let mut bad = indices.clone();
    let j = offsets[batch] as usize + 1; // the second index of table 1 (7 rows)
    bad[j] = 7;
    let bags = Bags::new(&bad, &offsets).include_last_offset(true);
    assert_eq!(
        edo_core::cpu::embedding_bags(&refs, batch, &bags, Pooling::Sum, Bounds::Error, Layout::Concat),
        Err(Error::IdOutOfRange { index: j, id: 7, rows: 7 })
    );
}

/// Every format's bags equal the ordered sum of its decoded rows bit for bit: `acc += x` (or
/// `acc += w · x`) row after row in index order from zero, then `/ n` for Mean — the order the
/// GPU kernels and the documentation state — at dims that are multiples of 8 (the formats that
/// decode octets on their own keep their sums in registers there, in blocks of 64 values, in
/// chunks of 32 rows) and dims that are not, bags shorter and longer than a chunk, weighted and
/// not, bad ids read as zero rows.
#[test]
fn bags_equal_the_ordered_sum_of_decoded_rows_bit_for_bit() {
    let mut rng = Rng::new(62);
    for format in Format::ALL {
        for dim in [8, 13, 64, 72, 128, 136, 256] {
            let rows = 300;
            let data: Vec<f32> = (0..rows * dim).map(|_| rng.normal()).collect();
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let mut decoded = vec![0f32; rows * dim];
            for r in 0..rows {
                format.decode_row_reference(table.row(r), &mut decoded[r * dim..(r + 1) * dim]);
            }
            let lens = [0usize, 1, 5, 31, 32, 33, 70, 2];
            let mut offsets = vec![0u32];
            for &n in &lens {
                offsets.push(offsets.last().unwrap() + n as u32);
            }
            let n_ids = *offsets.last().unwrap() as usize;
            // A few ids past the end: zero rows under Bounds::Zero.
            let indices: Vec<u32> = (0..n_ids).map(|i| if i % 17 == 9 { rows as u32 + 5 } else { rng.below(rows as u32) }).collect();
            let weights: Vec<f32> = (0..n_ids).map(|_| rng.next_f32() * 2.0 - 0.5).collect();
            for (pooling, w) in [(Pooling::Sum, None), (Pooling::Mean, None), (Pooling::Sum, Some(&weights[..]))] {
                let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                bags.per_sample_weights = w;
                let got = edo_core::cpu::embedding_bag(&table, &bags, pooling, Bounds::Zero).unwrap();
                for (b, pair) in offsets.windows(2).enumerate() {
                    let mut acc = vec![0f32; dim];
                    for i in pair[0] as usize..pair[1] as usize {
                        let id = indices[i] as usize;
                        if id >= rows {
                            continue;
                        }
                        let row = &decoded[id * dim..(id + 1) * dim];
                        let wi = w.map_or(1.0, |w| w[i]);
                        for (a, &x) in acc.iter_mut().zip(row) {
                            *a += if wi == 1.0 { x } else { wi * x };
                        }
                    }
                    let n = (pair[1] - pair[0]) as f32;
                    if pooling == Pooling::Mean && n > 0.0 {
                        acc.iter_mut().for_each(|a| *a /= n);
                    }
                    let got = &got[b * dim..(b + 1) * dim];
                    let first = got.iter().zip(&acc).position(|(g, a)| g.to_bits() != a.to_bits());
                    assert!(first.is_none(), "{format} dim {dim} {pooling:?} weighted {}: bag {b} differs at {first:?}", w.is_some());
                }
            }
        }
    }
}
