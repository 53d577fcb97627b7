//! Pruned tables: rows that were cut (rarely used, or zero after training) take no memory; an
//! id → compact-row remap (FBGEMM's index remapping) sends their ids to a zero row.

use crate::format::PackedTable;
use crate::{Bounds, Error};

/// Marks an original row that was pruned.
pub const ABSENT: u32 = u32::MAX;

/// A packed table of the kept rows, and for every original row its compact row or [`ABSENT`].
#[derive(Clone, Debug, PartialEq)]
pub struct PrunedTable {
    table: PackedTable,
    remap: Vec<u32>,
}

impl PrunedTable {
    /// Keeps the rows of a row-major `rows × dim` f32 table for which `keep` is true.
    pub fn quantize(format: crate::Format, data: &[f32], rows: usize, dim: usize, keep: &[bool]) -> Result<PrunedTable, Error> {
        crate::format::check_shape(data.len(), rows, dim)?;
        if keep.len() != rows {
            return Err(Error::ShapeMismatch { what: "keep flags (one per row)", expected: rows, actual: keep.len() });
        }
        let mut kept = Vec::new();
        let mut remap = Vec::with_capacity(rows);
        for (r, &k) in keep.iter().enumerate() {
            if k {
                remap.push(kept.len() as u32);
                kept.push(r as u32);
            } else {
                remap.push(ABSENT);
            }
        }
        // Errors name the original row, not the compact one.
        let table = PackedTable::quantize_rows(format, data, dim, &kept)?;
        Ok(PrunedTable { table, remap })
    }

    /// A compact table with FBGEMM's remap (`remap[i]` = compact row of original row `i`, or
    /// [`ABSENT`]; FBGEMM writes −1, which is [`ABSENT`] as u32).
    pub fn from_remap(table: PackedTable, remap: Vec<u32>) -> Result<PrunedTable, Error> {
        if let Some(index) = remap.iter().position(|&r| r != ABSENT && r as usize >= table.rows()) {
            return Err(Error::IdOutOfRange { index, id: remap[index], rows: table.rows() });
        }
        if remap.len() > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "original rows", requested: remap.len() as u64, max: u32::MAX as u64 });
        }
        Ok(PrunedTable { table, remap })
    }

    /// The compact table of kept rows.
    pub fn table(&self) -> &PackedTable {
        &self.table
    }
    /// Compact row (or [`ABSENT`]) of every original row.
    pub fn remap(&self) -> &[u32] {
        &self.remap
    }
    /// Rows before pruning: ids address these.
    pub fn original_rows(&self) -> usize {
        self.remap.len()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.table.dim()
    }
    /// Bytes of the compact table plus the remap.
    pub fn bytes(&self) -> u64 {
        self.table.bytes() + 4 * self.remap.len() as u64
    }
    /// Bytes the same table would take unpruned in its format.
    pub fn unpruned_bytes(&self) -> u64 {
        self.remap.len() as u64 * self.table.format().row_bytes(self.table.dim()) as u64
    }

    /// Ids of the original table → rows of the compact one, [`ABSENT`] for pruned rows and, under
    /// [`Bounds::Zero`], for ids out of range. Fails under [`Bounds::Error`] on the first id out
    /// of range of the original rows.
    pub fn map_ids(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<u32>, Error> {
        bounds.check(ids, self.original_rows())?;
        Ok(ids.iter().map(|&id| bounds.resolve(id, self.original_rows()).map_or(ABSENT, |r| self.remap[r])).collect())
    }
}
