//! What a lookup does with an id that is not a row of the table.

use crate::Error;

/// The id that writes nothing: under the kernels' skip policy its row is another pass's to write
/// (the other part of a mixed-precision table). `ROW_SKIP` in `gather_common.wgsl`.
pub const SKIP_ID: u32 = u32::MAX;

/// An id past any table edo uploads, so it reads a zero row under [`Bounds::Zero`]. Kernels use
/// the value as a row, too: `ROW_ZERO` in `gather_common.wgsl`, a zero row to write.
pub const ZERO_ID: u32 = u32::MAX - 1;

/// Bounds policy for ids ≥ rows, chosen per call (FBGEMM's bounds-check modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Bounds {
    /// Refuse the whole call, before any work, with [`Error::IdOutOfRange`] naming the first bad
    /// id (FBGEMM `FATAL`). The default: a wrong id is a bug to hear about.
    #[default]
    Error,
    /// Bad ids read as a zero row (FBGEMM `IGNORE`, ONNX Runtime's `GatherBlockQuantized`).
    Zero,
    /// Bad ids read the last row (`rows − 1`).
    Clamp,
}

impl Bounds {
    /// With [`Bounds::Error`], the first id that is out of range. With [`Bounds::Clamp`] on a
    /// table of no rows there is no row to clamp to: the first id is out of range. Otherwise
    /// nothing to check. After `check` passes, [`Bounds::resolve`] is safe for every id.
    pub fn check(self, ids: &[u32], rows: usize) -> Result<(), Error> {
        let first_bad = match self {
            Bounds::Error => ids.iter().position(|&id| id as usize >= rows),
            Bounds::Clamp if rows == 0 && !ids.is_empty() => Some(0),
            _ => None,
        };
        match first_bad {
            Some(index) => Err(Error::IdOutOfRange { index, id: ids[index], rows }),
            None => Ok(()),
        }
    }

    /// The row an id reads, or `None` for a zero row. `rows` must be ≥ 1 for [`Bounds::Clamp`].
    #[inline(always)]
    pub fn resolve(self, id: u32, rows: usize) -> Option<usize> {
        let id = id as usize;
        if id < rows {
            Some(id)
        } else {
            match self {
                Bounds::Clamp => Some(rows - 1),
                Bounds::Zero | Bounds::Error => None,
            }
        }
    }
}
