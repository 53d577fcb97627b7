//! [`RowSource`]: where packed rows are read from by id — a table in memory or mapped, a
//! checksummed file, a remote file — for the row cache (which reads the rows it misses from its
//! source) and the CPU path over any source ([`gather_rows`]). Below both `cache` and `file`:
//! `file` implements it for its tables, `cache` reads through it.

use crate::format::{Format, PackedTable};
use crate::Error;

/// A host table behind a row cache: where the rows a lookup misses are read from. Implemented
/// for an in-memory or memory-mapped [`PackedTable`], for a [`crate::file::TableFile`] (which checks each
/// 1 MiB chunk of rows against its checksum the first time a row of it is read), and for a
/// reference or an `Arc` of either, so the host table can be shared.
pub trait RowSource {
    /// The format of the packed rows it returns.
    fn format(&self) -> Format;
    /// Rows of the table.
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;
    /// Appends the packed words of `rows` (each `< self.rows()`), in order, to `out`.
    fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> impl std::future::Future<Output = Result<(), Error>>;
}

/// Appends the packed words of `rows` from `source` to `out` (empty), checking that the source
/// returned a whole row of `row_words` words for each: what a cache loads its misses with.
pub(crate) async fn read_whole_rows<S: RowSource + ?Sized>(source: &S, row_words: usize, rows: &[u32], out: &mut Vec<u32>) -> Result<(), Error> {
    source.read_rows(rows, out).await?;
    if out.len() != rows.len() * row_words {
        return Err(Error::ShapeMismatch { what: "words a row source returned", expected: rows.len() * row_words, actual: out.len() });
    }
    Ok(())
}

/// Decoded rows of `ids` read straight from `source` on the host (the CPU path over any row
/// source: a remote table, a mapped file), each row fetched once per id.
pub async fn gather_rows<S: RowSource + ?Sized>(source: &S, ids: &[u32], bounds: crate::Bounds) -> Result<Vec<f32>, Error> {
    let (rows, dim, format) = (source.rows(), source.dim(), source.format());
    bounds.check(ids, rows)?;
    let resolved: Vec<Option<u32>> = ids.iter().map(|&id| bounds.resolve(id, rows).map(|r| r as u32)).collect();
    let wanted: Vec<u32> = resolved.iter().flatten().copied().collect();
    let mut words = Vec::new();
    source.read_rows(&wanted, &mut words).await?;
    let rw = format.row_words(dim);
    let mut out = crate::cpu::zeroed(ids.len(), dim, "gather output")?;
    let mut packed = words.chunks_exact(rw.max(1));
    for (r, dst) in resolved.iter().zip(out.chunks_exact_mut(dim.max(1))) {
        if r.is_some() {
            format.decode_row(packed.next().expect("one row read per resolved id"), dst);
        }
    }
    Ok(out)
}

impl RowSource for PackedTable {
    fn format(&self) -> Format {
        PackedTable::format(self)
    }
    fn rows(&self) -> usize {
        PackedTable::rows(self)
    }
    fn dim(&self) -> usize {
        PackedTable::dim(self)
    }
    async fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> Result<(), Error> {
        out.reserve(rows.len() * self.row_words());
        for &r in rows {
            out.extend_from_slice(self.row(r as usize));
        }
        Ok(())
    }
}

impl<T: RowSource> RowSource for &T {
    fn format(&self) -> Format {
        (**self).format()
    }
    fn rows(&self) -> usize {
        (**self).rows()
    }
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> impl std::future::Future<Output = Result<(), Error>> {
        (**self).read_rows(rows, out)
    }
}

impl<T: RowSource> RowSource for std::sync::Arc<T> {
    fn format(&self) -> Format {
        (**self).format()
    }
    fn rows(&self) -> usize {
        (**self).rows()
    }
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> impl std::future::Future<Output = Result<(), Error>> {
        (**self).read_rows(rows, out)
    }
}
