//! Mixed precision inside one table: the rows looked up most stay in a precise format, the rest
//! in a compact one ("hot data at high precision, cold data degraded"). Under a skewed id stream
//! most lookups read hot rows, so the expected error is close to the precise format's while the
//! memory is close to the compact one's.

#[cfg(feature = "gpu")]
use crate::bounds::{SKIP_ID, ZERO_ID};
use crate::format::{check_shape, Format, PackedTable};
use crate::{Bounds, Error};

/// Marks a hot row in the remap; the rest of the word is the row's index in the hot table.
const HOT: u32 = 1 << 31;

/// A table split into hot rows (one format) and cold rows (another), with the map from each
/// original row to its place. Both parts are ordinary [`PackedTable`]s, so everything that
/// uploads, stores or decodes a table serves them; [`crate::GpuMixedTable`] looks up both in one
/// job. Lookups on the CPU path: [`crate::Lookup`].
#[derive(Clone, Debug)]
pub struct MixedTable {
    hot: PackedTable,
    cold: PackedTable,
    /// Per original row: `HOT | index` into `hot`, or the index into `cold`.
    remap: Vec<u32>,
}

impl MixedTable {
    /// Quantises a row-major `rows × dim` f32 table: rows `hot_rows` (distinct) to `hot_format`,
    /// the others, in order, to `cold_format`. Errors name rows of the original table.
    pub fn quantize(data: &[f32], rows: usize, dim: usize, hot_rows: &[u32], hot_format: Format, cold_format: Format) -> Result<MixedTable, Error> {
        check_shape(data.len(), rows, dim)?;
        if rows >= HOT as usize {
            return Err(Error::LimitExceeded { what: "rows of a mixed-precision table", requested: rows as u64, max: HOT as u64 - 1 });
        }
        Bounds::Error.check(hot_rows, rows)?;
        let mut is_hot = vec![false; rows];
        for &r in hot_rows {
            if std::mem::replace(&mut is_hot[r as usize], true) {
                return Err(Error::DuplicateHotId { id: r as u64 });
            }
        }
        let cold_rows: Vec<u32> = (0..rows as u32).filter(|&r| !is_hot[r as usize]).collect();
        let hot = PackedTable::quantize_rows(hot_format, data, dim, hot_rows)?;
        let cold = PackedTable::quantize_rows(cold_format, data, dim, &cold_rows)?;
        MixedTable::from_parts(hot_rows, hot, cold)
    }

    /// [`MixedTable::quantize`] with the `hot` rows of highest `counts` (access counts per row, a
    /// sample of the id stream) hot; ties go to the lower row.
    pub fn from_counts(
        data: &[f32],
        rows: usize,
        dim: usize,
        counts: &[u64],
        hot: usize,
        hot_format: Format,
        cold_format: Format,
    ) -> Result<MixedTable, Error> {
        if counts.len() != rows {
            return Err(Error::ShapeMismatch { what: "access counts (one per row)", expected: rows, actual: counts.len() });
        }
        let mut order: Vec<u32> = (0..rows as u32).collect();
        order.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
        order.truncate(hot.min(rows));
        MixedTable::quantize(data, rows, dim, &order, hot_format, cold_format)
    }

    /// A mixed table from its parts, as `edo plan --write` stores one: `hot_rows` (distinct rows
    /// of the original table, in the order of `hot`'s rows) and the two tables; the original has
    /// `hot.rows() + cold.rows()` rows, the cold ones in order. Refused unless they fit together.
    pub fn from_parts(hot_rows: &[u32], hot: PackedTable, cold: PackedTable) -> Result<MixedTable, Error> {
        if hot.dim() != cold.dim() {
            return Err(Error::ShapeMismatch { what: "dims of the hot and the cold rows", expected: cold.dim(), actual: hot.dim() });
        }
        if hot_rows.len() != hot.rows() {
            return Err(Error::ShapeMismatch { what: "hot row ids (one per row of the hot table)", expected: hot.rows(), actual: hot_rows.len() });
        }
        let rows = hot.rows() + cold.rows();
        if rows >= HOT as usize {
            return Err(Error::LimitExceeded { what: "rows of a mixed-precision table", requested: rows as u64, max: HOT as u64 - 1 });
        }
        Bounds::Error.check(hot_rows, rows)?;
        let mut remap = vec![u32::MAX; rows];
        for (i, &r) in hot_rows.iter().enumerate() {
            if remap[r as usize] != u32::MAX {
                return Err(Error::DuplicateHotId { id: r as u64 });
            }
            remap[r as usize] = HOT | i as u32;
        }
        for (cold_index, m) in remap.iter_mut().filter(|m| **m == u32::MAX).enumerate() {
            *m = cold_index as u32;
        }
        Ok(MixedTable { hot, cold, remap })
    }

    /// The original rows that are hot, in the order of the hot table's rows.
    pub fn hot_rows(&self) -> Vec<u32> {
        let mut rows = vec![0u32; self.hot.rows()];
        for (r, &m) in self.remap.iter().enumerate() {
            if m & HOT != 0 {
                rows[(m & !HOT) as usize] = r as u32;
            }
        }
        rows
    }

    /// Rows of the original table (ids address these).
    pub fn rows(&self) -> usize {
        self.remap.len()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.cold.dim()
    }
    /// The hot rows' table (rows in the order they were named).
    pub fn hot(&self) -> &PackedTable {
        &self.hot
    }
    /// The cold rows' table (rows in original order).
    pub fn cold(&self) -> &PackedTable {
        &self.cold
    }
    /// Bytes of packed rows (what the GPU holds); the remap (4 bytes per row) stays on the host.
    pub fn bytes(&self) -> u64 {
        self.hot.bytes() + self.cold.bytes()
    }
    /// Whether original row `r` is hot, and its index in its part.
    pub fn locate(&self, r: usize) -> (bool, usize) {
        let m = self.remap[r];
        (m & HOT != 0, (m & !HOT) as usize)
    }

    /// The ids of each part's gather for `ids`: the row in that part, [`SKIP_ID`] where the other
    /// part writes the row, and [`ZERO_ID`] (out of range: a zero row) in the cold part for an id
    /// the bounds policy reads as zeros.
    #[cfg(feature = "gpu")]
    pub(crate) fn split_ids(&self, ids: &[u32], bounds: Bounds) -> (Vec<u32>, Vec<u32>) {
        let mut hot = Vec::with_capacity(ids.len());
        let mut cold = Vec::with_capacity(ids.len());
        for &id in ids {
            match bounds.resolve(id, self.rows()).map(|r| self.locate(r)) {
                Some((true, i)) => {
                    hot.push(i as u32);
                    cold.push(SKIP_ID);
                }
                Some((false, i)) => {
                    hot.push(SKIP_ID);
                    cold.push(i as u32);
                }
                None => {
                    hot.push(SKIP_ID);
                    cold.push(ZERO_ID);
                }
            }
        }
        (hot, cold)
    }
}
