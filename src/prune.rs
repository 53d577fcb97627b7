//! Pruned tables: rows that were cut (rarely used, or zero after training) take no memory; an
//! id → compact-row remap (FBGEMM's index remapping) sends their ids to a zero row.
//!
//! The same remap carries a **reordered** table: every row kept, stored in another order — the
//! most looked-up first ([`PrunedTable::reorder`], [`frequency_order`]) — so lookups keep the
//! user's ids. Such a table round-trips through `.edo` files with its map
//! ([`PrunedTable::to_bytes`], [`PrunedTable::write`], [`PrunedTable::open`]).

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

    /// The same table, its stored rows aligned to `bytes` on a GPU
    /// ([`PackedTable::with_row_alignment`]).
    pub fn with_row_alignment(self, bytes: usize) -> Result<PrunedTable, Error> {
        Ok(PrunedTable { table: self.table.with_row_alignment(bytes)?, remap: self.remap })
    }

    /// The compact table of kept rows.
    pub fn table(&self) -> &PackedTable {
        &self.table
    }
    /// The compact table and the remap, giving up the pruned table.
    pub(crate) fn into_parts(self) -> (PackedTable, Vec<u32>) {
        (self.table, self.remap)
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

    /// `table` with its rows stored in `order` (row `k` of the result holds `table`'s row
    /// `order[k]`), looked up by the original ids through the remap. `order` must be a
    /// permutation of the table's rows ([`Error::NotAPermutation`] names the first entry that
    /// is out of range or repeated).
    pub fn reorder(table: &PackedTable, order: &[u32]) -> Result<PrunedTable, Error> {
        let rows = table.rows();
        if order.len() != rows {
            return Err(Error::ShapeMismatch { what: "order (one entry per row of the table)", expected: rows, actual: order.len() });
        }
        let mut remap = vec![ABSENT; rows];
        for (k, &id) in order.iter().enumerate() {
            match remap.get_mut(id as usize) {
                Some(slot) if *slot == ABSENT => *slot = k as u32,
                _ => return Err(Error::NotAPermutation { index: k, value: id, rows }),
            }
        }
        let rw = table.row_words();
        let mut words = crate::alloc::zeroed::<u32>(rows * rw, "reordered rows")?;
        for (dst, &id) in words.chunks_exact_mut(rw.max(1)).zip(order) {
            dst.copy_from_slice(table.row(id as usize));
        }
        // The rows keep the alignment asked of them on a GPU.
        let table = PackedTable::from_words(table.format(), rows, table.dim(), words)?.with_row_alignment(table.row_alignment())?;
        Ok(PrunedTable { table, remap })
    }

    /// Whether every original row is kept (a reordering, not a pruning): the remap is a
    /// permutation of the stored rows.
    pub fn is_reordering(&self) -> bool {
        check_permutation(&self.remap, self.table.rows()).is_ok()
    }

    /// The rows in their original order again (for a pruned table, its pruned rows as zeros in
    /// the format's encoding of zero).
    pub fn original_order(&self) -> Result<PackedTable, Error> {
        let rw = self.table.row_words();
        let zero = PackedTable::quantize(self.table.format(), &vec![0.0; self.dim()], 1, self.dim())?;
        let mut words = crate::alloc::zeroed::<u32>(self.remap.len() * rw, "rows in their original order")?;
        for (dst, &r) in words.chunks_exact_mut(rw.max(1)).zip(&self.remap) {
            dst.copy_from_slice(if r == ABSENT { zero.row(0) } else { self.table.row(r as usize) });
        }
        Ok(PackedTable::from_words(self.table.format(), self.remap.len(), self.dim(), words)?.with_row_alignment(self.table.row_alignment())?)
    }

    /// The `.edo` file's bytes of a reordered table: its stored rows and its id map, so a reader
    /// gets the same rows for the same ids. `chunk_bytes` as in
    /// [`crate::file::TableFile::with_chunk_bytes`] (None: 1 MiB), `metadata` as in
    /// [`crate::file::TableFile::set_metadata`]. Only a reordering is stored: a pruned table's
    /// remap (absent rows, which the format does not hold) is [`Error::ShapeMismatch`], a
    /// remap that is not a permutation [`Error::NotAPermutation`].
    pub fn to_bytes(&self, chunk_bytes: Option<usize>, metadata: &std::collections::BTreeMap<String, String>) -> Result<Vec<u8>, Error> {
        Ok(self.file(chunk_bytes, metadata)?.to_bytes())
    }

    /// [`PrunedTable::to_bytes`], written to `path` (through a temporary file renamed into
    /// place, as [`crate::file::TableFile::write`]).
    #[cfg(native)]
    pub fn write(
        &self,
        path: impl AsRef<std::path::Path>,
        chunk_bytes: Option<usize>,
        metadata: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), Error> {
        self.file(chunk_bytes, metadata)?.write(path)
    }

    /// The file, kept inside: a `TableFile` holding an id map serves its rows in stored order
    /// (`table()`, its `RowSource`), so none is handed out.
    fn file(&self, chunk_bytes: Option<usize>, metadata: &std::collections::BTreeMap<String, String>) -> Result<crate::file::TableFile, Error> {
        check_permutation(&self.remap, self.table.rows())?;
        let mut file = crate::file::TableFile::new(self.table.clone());
        if let Some(bytes) = chunk_bytes {
            file = file.with_chunk_bytes(bytes)?;
        }
        for (k, v) in metadata {
            file.set_metadata(k.clone(), v.clone())?;
        }
        Ok(file.with_id_map(self.remap.clone()))
    }

    /// Opens a reordered table's `.edo` file (memory-mapped), checking its id map (its checksum,
    /// and that it is a permutation of the stored rows: else [`Error::BadFile`]) and every row's
    /// checksum (the whole file is read once). A file without a map opens too (the identity map).
    #[cfg(native)]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<PrunedTable, Error> {
        Self::from_table_file(crate::file::TableFile::open_stored(path)?)
    }

    /// [`PrunedTable::open`] from the file's bytes.
    pub fn from_file_bytes(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<PrunedTable, Error> {
        Self::from_table_file(crate::file::TableFile::from_bytes_any(bytes)?)
    }

    /// Checks every row against its checksum first: a `PrunedTable` keeps no file to verify
    /// rows lazily from, so a damaged file is refused here, not read as wrong rows later.
    fn from_table_file(file: crate::file::TableFile) -> Result<PrunedTable, Error> {
        file.verify()?;
        let remap = match file.id_map() {
            Some(map) => map.to_vec(),
            None => (0..file.table().rows() as u32).collect(),
        };
        // A map that matches its checksum but is no permutation is a writer's bug in the file,
        // not a caller's mistake.
        check_permutation(&remap, file.table().rows()).map_err(|e| Error::BadFile { what: "edo table file", reason: format!("its id map: {e}") })?;
        Ok(PrunedTable { table: file.into_table(), remap })
    }

    /// Ids of the original table → rows of the compact one, [`ABSENT`] for pruned rows and, under
    /// [`Bounds::Zero`], for ids out of range. Fails under [`Bounds::Error`] on the first id out
    /// of range of the original rows.
    pub fn map_ids(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<u32>, Error> {
        bounds.check(ids, self.original_rows())?;
        Ok(ids.iter().map(|&id| bounds.resolve(id, self.original_rows()).map_or(ABSENT, |r| self.remap[r])).collect())
    }
}

/// Checks that `remap` sends the `rows` stored rows' ids to each stored row exactly once.
fn check_permutation(remap: &[u32], rows: usize) -> Result<(), Error> {
    if remap.len() != rows {
        return Err(Error::ShapeMismatch { what: "id map (one entry per stored row)", expected: rows, actual: remap.len() });
    }
    let mut seen = vec![false; rows];
    for (index, &value) in remap.iter().enumerate() {
        match seen.get_mut(value as usize) {
            Some(s) if !*s => *s = true,
            _ => return Err(Error::NotAPermutation { index, value, rows }),
        }
    }
    Ok(())
}

/// Rows ordered by `counts`, the most counted first (ties by row): the order that
/// [`PrunedTable::reorder`] takes to put the most looked-up rows together.
pub fn frequency_order(counts: &[u64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..counts.len() as u32).collect();
    order.sort_by_key(|&r| (std::cmp::Reverse(counts[r as usize]), r));
    order
}

/// How often each of `rows` rows is looked up in `ids` (a trace); an id past the table is
/// [`Error::IdOutOfRange`].
pub fn lookup_counts(ids: &[u32], rows: usize) -> Result<Vec<u64>, Error> {
    let mut counts = vec![0u64; rows];
    for (index, &id) in ids.iter().enumerate() {
        *counts.get_mut(id as usize).ok_or(Error::IdOutOfRange { index, id, rows })? += 1;
    }
    Ok(counts)
}
