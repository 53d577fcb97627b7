//! The GPU path's errors: what a device, a submission or a readback can refuse, beside edo-core's
//! cases (wrapped whole). `edo::Error` has a variant of the same name and fields for each, and
//! converts.

use edo_core::{Cause, Format};

/// What can go wrong on the GPU path, with the fields a caller needs to act on it. Not
/// `#[non_exhaustive]`, so that `edo::Error`'s conversion names every case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A case of the formats or the CPU path's checks (ids out of range, shapes, limits).
    #[error(transparent)]
    Core(#[from] edo_core::Error),
    /// No GPU adapter was found (edo falls back to the CPU path where it can).
    #[error("no GPU adapter found")]
    NoAdapter,
    /// A device given to [`crate::Engine::from_device`] has a limit below what edo's kernels need
    /// (see [`crate::REQUIRED_LIMITS`]); create it with higher limits, such as
    /// `wgpu::Limits::default()` or the adapter's own.
    #[error("the device's {limit} is {actual}; edo's kernels need at least {required}")]
    DeviceLimits {
        /// The `wgpu::Limits` field.
        limit: &'static str,
        /// The least value edo's kernels need.
        required: u64,
        /// The device's value.
        actual: u64,
    },
    /// The adapter refused to create a device (wgpu's `RequestDeviceError` is the source).
    #[error("requesting a GPU device failed: {0}")]
    RequestDevice(#[source] Cause),
    /// The GPU ran out of memory for an allocation.
    #[error("GPU out of memory while allocating {what}")]
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
    },
    /// wgpu reported a validation or internal error (a bug in edo, or a driver problem), or a
    /// GPU result failed edo's own check.
    #[error("GPU error in {what}: {message}")]
    Gpu {
        /// What edo was doing.
        what: &'static str,
        /// wgpu's message, or edo's.
        message: String,
        /// wgpu's error, where wgpu reported one.
        #[source]
        source: Option<Cause>,
    },
    /// The device was lost (driver reset, GPU removed, browser tab in the background too long).
    /// The engine cannot be used any more; create a new one.
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// Mapping a buffer for readback failed (wgpu's error is the source, where it gave one).
    #[error("reading back GPU results failed: {message}")]
    Readback {
        /// What failed.
        message: String,
        /// wgpu's error.
        #[source]
        source: Option<Cause>,
    },
    /// Tables given together must share a format.
    #[error("tables batched together must share a format: table {index} is {found}, table 0 is {expected}")]
    MixedFormats {
        /// The position of the table of another format.
        index: usize,
        /// Table 0's format.
        expected: Format,
        /// Its format.
        found: Format,
    },
    /// A combination the GPU path does not support, named.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
}

impl Error {
    /// [`Error::Gpu`] found without wgpu reporting one (a GPU result that fails a check).
    pub fn gpu(what: &'static str, message: impl Into<String>) -> Error {
        Error::Gpu { what, message: message.into(), source: None }
    }

    /// [`edo_core::Error::LimitExceeded`], the limit most of the GPU path's checks name.
    pub fn limit(what: &'static str, requested: u64, max: u64) -> Error {
        Error::Core(edo_core::Error::LimitExceeded { what, requested, max })
    }
}

/// What the GPU path does not support, named: the field of [`Error::Unsupported`].
/// `edo::Unsupported` has a variant of the same name for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Unsupported {
    /// A table format the GPU path has no decoder for (edo-core has the format; the GPU path
    /// does not yet): look it up on the CPU path.
    #[error("{format} tables on the GPU (the CPU path reads them)")]
    GpuDecoder {
        /// The format.
        format: Format,
    },
    /// Read_f16 of f32 rows (gather_f16 and bag_f16 write f16 rows).
    #[error("read_f16 of f32 rows (gather_f16 and bag_f16 write f16 rows)")]
    ReadF16OfF32Rows,
    /// Rebuilding an engine over the caller's device (Engine::from_device): make a new device and call from_device again.
    #[error("rebuilding an engine over the caller's device (Engine::from_device): make a new device and call from_device again")]
    RebuildCallersDevice,
    /// Submitting a cache lookup again (its slots may hold other rows now): prepare it again.
    #[error("submitting a cache lookup again (its slots may hold other rows now): prepare it again")]
    ResubmittedCacheLookup,
}
