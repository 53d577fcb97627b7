//! The errors of the formats and the CPU path: what a caller passed that cannot be packed or
//! looked up. `edo::Error` has a variant of the same name and fields for each, and converts.
//! [`Cause`] keeps the error an error came from (an I/O error, wgpu's) for every crate above.

use std::sync::Arc;

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
    /// `ids[index] = id`, a 64-bit id, is past the `max` ids a table covers (bounds policy
    /// `Error`).
    #[error("ids[{index}] = {id} is out of range for a table covering {max} ids")]
    IdOutOfRange64 {
        /// The position of the bad id in the call.
        index: usize,
        /// The id.
        id: u64,
        /// Ids the table covers.
        max: u64,
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

/// The error an [`Error`] came from — an I/O error, a wgpu error — kept whole as its
/// [`std::error::Error::source`], and shared, so that [`Error`] stays `Clone`. Two causes are
/// equal when their messages are.
#[derive(Clone)]
pub struct Cause(Arc<CauseError>);

/// What a [`Cause`] holds: an error that can cross threads, as edo's errors do. (In a browser,
/// where edo runs on one thread, wgpu's errors are not `Send`; a cause wraps them.)
pub type CauseError = dyn std::error::Error + Send + Sync + 'static;

impl Cause {
    /// Keeps `error`, which natively must cross threads as edo's errors do.
    #[cfg(native)]
    pub fn new<E: std::error::Error + Send + Sync + 'static>(error: E) -> Cause {
        Cause(Arc::new(error))
    }

    /// Keeps `error` (a build for wasm32 runs edo on one thread; see `OneThread`).
    #[cfg(web)]
    pub fn new<E: std::error::Error + 'static>(error: E) -> Cause {
        Cause(Arc::new(OneThread(Box::new(error))))
    }

    /// The error itself.
    pub fn get(&self) -> &(dyn std::error::Error + 'static) {
        #[cfg(web)]
        if let Some(OneThread(inner)) = (&*self.0 as &(dyn std::error::Error + 'static)).downcast_ref::<OneThread>() {
            return &**inner;
        }
        &*self.0
    }

    /// The error as a `T`, if it is one (a [`std::io::Error`], a `wgpu::Error`, …).
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.get().downcast_ref()
    }
}

/// An error of a browser build, where edo's code runs on one thread: wasm32 without the
/// `atomics` feature has no other thread to send it to, so the markers hold.
#[cfg(web)]
#[derive(Debug)]
struct OneThread(Box<dyn std::error::Error + 'static>);
#[cfg(all(web, not(target_feature = "atomics")))]
// SAFETY: without `atomics`, wasm32 runs one thread; nothing can observe the value elsewhere.
unsafe impl Send for OneThread {}
#[cfg(all(web, not(target_feature = "atomics")))]
// SAFETY: as for Send.
unsafe impl Sync for OneThread {}
#[cfg(web)]
impl std::fmt::Display for OneThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}
#[cfg(web)]
impl std::error::Error for OneThread {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.get(), f)
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

/// The cause stands for the error it holds: its source is that error's source.
impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}
