//! Quotient-remainder embeddings (DLRM's `QREmbeddingBag`) on the CPU path: id `i` reads row
//! `i / m` of a quotient table and row `i mod m` of a remainder table of `m` rows, and the two
//! rows combine into one — `N` ids for `N / m + m` rows. [`QrTable`] is the table kind (every
//! [`Request`], u32 or 64-bit ids); [`gather`] and [`bag`] the functions under it. The GPU's
//! twins are [`crate::gpu::GpuQrTable`] and [`crate::GpuQrTables`].

use crate::format::PackedTable;
use crate::lookup::Lookup;
use crate::request::{HostRows, Request, Select};
use crate::{Bags, Bounds, Error, Pooling};

/// Quotient-remainder tables as one table kind: ids `0 .. quotient rows × remainder rows`, each
/// the `combine` of its quotient and remainder rows. It answers every [`Request`] — u32 ids and
/// 64-bit ids ([`Request::gather_keys`]) alike. An id whose quotient is past the table follows
/// the bounds policy on its quotient row only, as [`gather`] does: [`Bounds::Zero`] zeros the
/// quotient row and still reads the remainder row (with [`QrCombine::Add`] or
/// [`QrCombine::Concat`] the row is the remainder's values, not zeros), [`Bounds::Clamp`] reads
/// the last quotient row, [`Bounds::Error`] names the 64-bit id.
#[derive(Clone, Debug)]
pub struct QrTable {
    quotient: PackedTable,
    remainder: PackedTable,
    combine: QrCombine,
}

impl QrTable {
    /// The kind over `quotient` and `remainder` (one dim, each at least one row).
    pub fn new(quotient: PackedTable, remainder: PackedTable, combine: QrCombine) -> Result<QrTable, Error> {
        check_qr(&quotient, &remainder)?;
        Ok(QrTable { quotient, remainder, combine })
    }
    /// The quotient table.
    pub fn quotient(&self) -> &PackedTable {
        &self.quotient
    }
    /// The remainder table.
    pub fn remainder(&self) -> &PackedTable {
        &self.remainder
    }
    /// How the two rows combine.
    pub fn combine(&self) -> QrCombine {
        self.combine
    }
    /// Ids the table covers: quotient rows × remainder rows.
    pub fn ids(&self) -> u64 {
        self.quotient.rows() as u64 * self.remainder.rows() as u64
    }
}

impl Lookup for QrTable {
    /// [`QrTable::ids`], or `usize::MAX` where it does not fit.
    fn rows(&self) -> usize {
        usize::try_from(self.ids()).unwrap_or(usize::MAX)
    }
    /// Values of a looked-up row: twice a table's for [`QrCombine::Concat`].
    fn dim(&self) -> usize {
        if self.combine == QrCombine::Concat {
            2 * self.quotient.dim()
        } else {
            self.quotient.dim()
        }
    }
    fn bytes(&self) -> u64 {
        self.quotient.bytes() + self.remainder.bytes()
    }
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        let (q, r, combine, bounds) = (&self.quotient, &self.remainder, self.combine, request.bounds);
        let widen = |ids: &[u32]| -> Vec<u64> { ids.iter().map(|&id| u64::from(id)).collect() };
        let values = match request.select {
            Select::Keys(keys) => gather(q, r, keys, combine, bounds)?,
            Select::Ids(ids) => gather(q, r, &widen(ids), combine, bounds)?,
            Select::KeyBags(bags, pooling) => bag(q, r, &bags, combine, pooling, bounds)?,
            Select::Bags(bags, pooling) => bag(q, r, &bags.with_indices(&widen(bags.indices)), combine, pooling, bounds)?,
        };
        Ok(request.finish(values))
    }
}

/// How the two rows of a quotient-remainder embedding combine (DLRM's `qr_operation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QrCombine {
    /// Element-wise product (DLRM's default).
    #[default]
    Mult,
    /// Element-wise sum.
    Add,
    /// The quotient row, then the remainder row (output dim doubles).
    Concat,
}

impl QrCombine {
    #[cfg(feature = "gpu")]
    pub(crate) fn shader_code(self) -> u32 {
        match self {
            QrCombine::Mult => 0,
            QrCombine::Add => 1,
            QrCombine::Concat => 2,
        }
    }
}

/// Quotient-remainder split of an id: `(id / m, id % m)`.
#[inline]
pub fn qr_split(id: u64, m: u32) -> (u64, u32) {
    (id / m as u64, (id % m as u64) as u32)
}

/// EmbeddingBag over raw 64-bit ids of quotient-remainder tables on the CPU (DLRM's
/// `QREmbeddingBag`): each id's row as [`gather`] combines it, pooled as the CPU bag pools.
pub fn bag(
    quotient: &PackedTable,
    remainder: &PackedTable,
    bags: &Bags<'_, u64>,
    combine: QrCombine,
    pooling: Pooling,
    bounds: Bounds,
) -> Result<Vec<f32>, Error> {
    bags.validate(pooling, None)?;
    let rows = gather(quotient, remainder, bags.indices, combine, bounds)?;
    let dim = if combine == QrCombine::Concat { 2 * quotient.dim() } else { quotient.dim() };
    Ok(crate::cpu::pool_rows(rows, dim, bags, pooling)?)
}

/// Quotient-remainder lookup on the CPU: `quotient` has `ceil(N / m)` rows, `remainder` has `m`;
/// id `i` reads quotient row `i / m` and remainder row `i % m`, combined by `combine`. Ids whose
/// quotient is out of range follow `bounds` (a zero or the last quotient row).
pub fn gather(quotient: &PackedTable, remainder: &PackedTable, ids: &[u64], combine: QrCombine, bounds: Bounds) -> Result<Vec<f32>, Error> {
    check_qr(quotient, remainder)?;
    let m = remainder.rows() as u32;
    let dim = quotient.dim();
    if bounds == Bounds::Error {
        if let Some(index) = ids.iter().position(|&id| qr_split(id, m).0 >= quotient.rows() as u64) {
            return Err(Error::IdOutOfRange64 { index, id: ids[index], max: quotient.rows() as u64 * m as u64 });
        }
    }
    let out_dim = if combine == QrCombine::Concat { 2 * dim } else { dim };
    let mut out = crate::cpu::zeroed(ids.len(), out_dim, "quotient-remainder lookup output")?;
    let (mut q_row, mut r_row) = (vec![0f32; dim], vec![0f32; dim]);
    for (i, &id) in ids.iter().enumerate() {
        let (q, r) = qr_split(id, m);
        // A quotient past 32 bits saturates: out of range of any table, like the GPU's.
        match bounds.resolve(q.min(u32::MAX as u64) as u32, quotient.rows()) {
            Some(q) => quotient.decode_row_into(q, &mut q_row),
            None => q_row.fill(0.0),
        }
        remainder.decode_row_into(r as usize, &mut r_row);
        let dst = &mut out[i * out_dim..(i + 1) * out_dim];
        match combine {
            QrCombine::Mult => dst.iter_mut().zip(q_row.iter().zip(&r_row)).for_each(|(o, (a, b))| *o = a * b),
            QrCombine::Add => dst.iter_mut().zip(q_row.iter().zip(&r_row)).for_each(|(o, (a, b))| *o = a + b),
            QrCombine::Concat => {
                dst[..dim].copy_from_slice(&q_row);
                dst[dim..].copy_from_slice(&r_row);
            }
        }
    }
    Ok(out)
}

pub(crate) fn check_qr(quotient: &PackedTable, remainder: &PackedTable) -> Result<(), Error> {
    if quotient.dim() != remainder.dim() {
        return Err(Error::ShapeMismatch { what: "dims of the quotient and remainder tables", expected: quotient.dim(), actual: remainder.dim() });
    }
    if remainder.rows() == 0 || quotient.rows() == 0 {
        return Err(Error::Unsupported(crate::Unsupported::EmptyQuotientRemainderTable));
    }
    Ok(())
}
