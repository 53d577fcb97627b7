//! The pooling of one text of a static model: its tokens' rows, weighted, summed and divided by
//! the token count, then optionally L2-normalised — the inner loop of `edo::model`'s encoding,
//! here so that it is compiled with the CPU path's loops (one copy per SIMD level).

use crate::format::{Format, PackedTable};
use crate::simd::{Kernel, Lanes};

/// Adds `w / n` times row `r` of `table` to `dst` for each `(r, w)` of `rows` (`n` their count),
/// in order, then divides `dst` by its L2 norm when `normalize` is set ([`normalize_rows`]).
/// `dst` holds the table's `dim` values; `row` is scratch for a decoded row. Every row is asked
/// for (prefetched) before any is read, so their cache misses overlap.
///
/// # Panics
/// If a row is out of range or `dst` is not `dim` values long (the caller checked both).
pub fn pool_text(table: &PackedTable, rows: &[(usize, f32)], normalize: bool, dst: &mut [f32], row: &mut Vec<f32>) {
    crate::simd::run(PoolText { table, rows, normalize, dst, row })
}

/// [`pool_text`] as a [`Kernel`].
struct PoolText<'a> {
    table: &'a PackedTable,
    rows: &'a [(usize, f32)],
    normalize: bool,
    dst: &'a mut [f32],
    row: &'a mut Vec<f32>,
}

impl Kernel for PoolText<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, _: L) {
        let PoolText { table, rows, normalize, dst, row } = self;
        let dim = table.dim();
        assert_eq!(dst.len(), dim, "a pooled text is dim values");
        for &(r, _) in rows {
            super::prefetch(table.row(r));
        }
        let f32_rows = table.format() == Format::F32;
        row.resize(dim, 0.0);
        let n = rows.len() as f32;
        for &(r, w) in rows {
            let w = w / n;
            // An FP32 row is its words: summed where it lies, not copied first.
            let values: &[f32] = if f32_rows {
                bytemuck::cast_slice(table.row(r))
            } else {
                // The format's one shared decoder, not one inlined per format here: the loop
                // spends its time in the sums (see `search`'s `dot_block`).
                table.decode_row_into(r, row);
                &row[..]
            };
            dst.iter_mut().zip(values).for_each(|(d, x)| *d += w * x);
        }
        if normalize {
            normalize_rows(dst, dim);
        }
    }
}

/// Divides each row of `dim` values by its L2 norm + 1e-32, as model2vec does.
///
/// The squares are summed in eight running sums (value `i` into sum `i mod 8`, the last
/// `dim mod 8` values after them), added pairwise at the end: the same bits on every
/// instruction set, and a sum of independent additions, where one running sum is a chain of
/// dependent ones (a 384-value row spent longer waiting on that chain than on the rest of its
/// pooling). It is no less accurate: each sum carries an eighth of the terms.
#[inline]
pub fn normalize_rows(values: &mut [f32], dim: usize) {
    for row in values.chunks_exact_mut(dim.max(1)) {
        let (octets, rest) = row.as_chunks::<8>();
        let mut sums = [0f32; 8];
        for o in octets {
            for (s, x) in sums.iter_mut().zip(o) {
                *s += x * x;
            }
        }
        for (s, x) in sums.iter_mut().zip(rest) {
            *s += x * x;
        }
        let [a, b, c, d, e, f, g, h] = sums;
        let norm = (((a + b) + (c + d)) + ((e + f) + (g + h))).sqrt() + 1e-32;
        row.iter_mut().for_each(|x| *x /= norm);
    }
}
