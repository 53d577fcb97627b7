//! The errors of the formats and the CPU path: what a caller passed that cannot be packed or
//! looked up. `edo::Error` has a variant of the same name and fields for each, and converts.

use crate::format::{EncodeError, Format};

/// What can go wrong in edo-core, with the fields a caller needs to act on it. Not
/// `#[non_exhaustive]`, so that `edo::Error`'s conversion names every case: a new case here does
/// not compile until edo has it too.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A table value is NaN or infinite. `row` and `col` locate the first one.
    #[error("row {row}, column {col}: value {value} is not finite (NaN and ±inf cannot be quantised)")]
    NonFinite {
        /// The row of the first non-finite value.
        row: usize,
        /// Its column.
        col: usize,
        /// The value (NaN or ±inf).
        value: f32,
    },
    /// A finite value is beyond what `format` can represent (FP16 and the INT4 fp16 bias: ±65504).
    #[error("row {row}, column {col}: value {value} is out of range for {format}")]
    OutOfRange {
        /// The row of the value.
        row: usize,
        /// Its column.
        col: usize,
        /// The value.
        value: f32,
        /// The format that cannot hold it.
        format: Format,
    },
    /// A table must have at least one column.
    #[error("a table needs dim ≥ 1")]
    ZeroDim,
    /// Lengths that must agree do not.
    #[error("{what}: expected {expected}, got {actual}")]
    ShapeMismatch {
        /// What was counted.
        what: &'static str,
        /// The length it must have.
        expected: usize,
        /// The length it has.
        actual: usize,
    },
    /// `ids[index] = id` is not a row of a table with `rows` rows (bounds policy `Error`).
    #[error("ids[{index}] = {id} is out of range for a table of {rows} rows")]
    IdOutOfRange {
        /// The position of the bad id in the call.
        index: usize,
        /// The id.
        id: u32,
        /// Rows of the table.
        rows: usize,
    },
    /// A size exceeds a platform limit.
    #[error("{what}: {requested} exceeds the limit of {max}")]
    LimitExceeded {
        /// What exceeds the limit.
        what: &'static str,
        /// How much was asked for.
        requested: u64,
        /// The limit.
        max: u64,
    },
    /// The host (or the WASM memory) could not hold `bytes` more bytes for `what`: a lookup's
    /// output or a table too large for this machine.
    #[error("out of host memory for {what} ({bytes} bytes)")]
    HostOutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Its bytes.
        bytes: u64,
    },
    /// A per-sample weight is NaN or infinite.
    #[error("per_sample_weights[{index}] = {value} is not finite")]
    NonFiniteWeight {
        /// The position of the weight.
        index: usize,
        /// The weight.
        value: f32,
    },
    /// Offsets of bags that do not describe bags of the indices.
    #[error("offsets[{index}] = {value}: {reason}")]
    BadOffsets {
        /// The position of the bad offset.
        index: usize,
        /// The offset.
        value: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A combination of arguments edo-core does not support, named.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
}

impl Error {
    /// The error of row `row`, from the codec's error for one row.
    pub fn from_encode(row: usize, e: EncodeError, format: Format) -> Self {
        match e {
            EncodeError::NonFinite { col, value } => Error::NonFinite { row, col, value },
            EncodeError::OutOfRange { col, value } => Error::OutOfRange { row, col, value, format },
        }
    }
}

/// What edo-core does not support, named: the field of [`Error::Unsupported`]. `edo::Unsupported`
/// has a variant of the same name for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Unsupported {
    /// Pooling None over several tables (one output row per index needs one dim).
    #[error("pooling None over several tables (one output row per index needs one dim)")]
    PoolingNoneOverSeveralTables,
    /// A row alignment that is not a power of two from 4 to 256 bytes.
    #[error("a row alignment of {bytes} bytes (it is a power of two from 4 to 256)")]
    RowAlignment {
        /// The bytes asked for.
        bytes: usize,
    },
    /// Per-sample weights with mean or max pooling (PyTorch allows them with sum only).
    #[error("per-sample weights with mean or max pooling (PyTorch allows them with sum only)")]
    WeightsWithMeanOrMax,
}
