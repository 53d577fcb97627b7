//! The crate's one error type.

use crate::format::{EncodeError, Format};

/// Everything that can go wrong in edo, with the fields a caller needs to act on it.
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
    /// A finite f64 value of an imported file beyond what f32 holds (±3.4028235e38).
    #[error("row {row}, column {col}: value {value:e} is beyond f32's range (±3.4028235e38)")]
    BeyondF32 {
        /// The row.
        row: usize,
        /// Its column.
        col: usize,
        /// The value.
        value: f64,
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
    /// A size exceeds a device or platform limit.
    #[error("{what}: {requested} exceeds the limit of {max}")]
    LimitExceeded {
        /// What exceeds the limit.
        what: &'static str,
        /// How much was asked for.
        requested: u64,
        /// The limit.
        max: u64,
    },
    /// No GPU adapter was found (edo falls back to the CPU path where it can).
    #[error("no GPU adapter found")]
    NoAdapter,
    /// A device given to [`crate::Engine::from_device`] has a limit below what edo's kernels need
    /// (see [`crate::gpu::REQUIRED_LIMITS`]); create it with higher limits, such as
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
    /// The adapter refused to create a device.
    #[error("requesting a GPU device failed: {0}")]
    RequestDevice(String),
    /// The GPU ran out of memory for an allocation.
    #[error("GPU out of memory while allocating {what}")]
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
    },
    /// The host (or the browser's WASM memory) could not hold `bytes` more bytes for `what`: a
    /// lookup's output or a table too large for this machine.
    #[error("out of host memory for {what} ({bytes} bytes)")]
    HostOutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Its bytes.
        bytes: u64,
    },
    /// wgpu reported a validation or internal error (a bug in edo, or a driver problem).
    #[error("GPU error in {what}: {message}")]
    Gpu {
        /// What edo was doing.
        what: &'static str,
        /// wgpu's message.
        message: String,
    },
    /// The device was lost (driver reset, GPU removed, browser tab in the background too long).
    /// The engine cannot be used any more; create a new one.
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// Mapping a buffer for readback failed.
    #[error("reading back GPU results failed: {0}")]
    Readback(String),
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
    /// A raw 64-bit id beyond what the table covers (`max` ids).
    #[error("ids[{index}] = {id} is out of range for a table covering {max} ids")]
    IdOutOfRange64 {
        /// The position of the bad id in the call.
        index: usize,
        /// The id.
        id: u64,
        /// Ids the table covers.
        max: u64,
    },
    /// A hot id listed twice.
    #[error("hot id {id} is listed twice")]
    DuplicateHotId {
        /// The id.
        id: u64,
    },
    /// `what` is in use and cannot take this call now: a row cache holds a prepared lookup not yet
    /// submitted, or (in a browser, one thread) a lookup of it is awaiting the GPU. Submit or drop
    /// the prepared job, or await the other lookup, and call again.
    #[error("{what} is busy: submit or drop the lookup in progress first")]
    Busy {
        /// What is busy, and why.
        what: &'static str,
    },
    /// A combination of arguments edo does not support.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What is not supported.
        what: &'static str,
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
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A file is not what it claims to be: truncated, not the expected kind of file, a header that
    /// contradicts itself or the file's size. Nothing was allocated from its claims.
    #[error("malformed {what}: {reason}")]
    BadFile {
        /// What kind of file it should be.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A table file written by a newer edo.
    #[error("table file version {found} is not supported (this edo reads version {supported})")]
    UnsupportedVersion {
        /// The file's version.
        found: String,
        /// The version this edo reads.
        supported: u32,
    },
    /// Stored bytes do not match their checksum: the file is damaged or changed underneath.
    #[error("checksum mismatch in bytes {start}..{end} of the table rows: the file is damaged or was changed while in use")]
    Checksum {
        /// The first byte of the damaged chunk, in the rows.
        start: u64,
        /// The byte past it.
        end: u64,
    },
    /// A named tensor is not in the file.
    #[error("no tensor named {name:?}; 2-D tensors in the file: {available}")]
    MissingTensor {
        /// The name asked for.
        name: String,
        /// The 2-D tensors the file has, with their shapes and types.
        available: String,
    },
    /// A line of a text table cannot be read.
    #[error("line {line}: {reason}")]
    Parse {
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading a remote file failed: the server refused, ignored `Range`, cut a response short,
    /// or the file changed since it was opened (`location` is its URL or name).
    #[error("{location}: {message}")]
    Remote {
        /// The file's URL or name.
        location: String,
        /// What went wrong.
        message: String,
    },
    /// A tokenizer refused a text.
    #[error("tokenizer: {message}")]
    Tokenizer {
        /// The tokenizer's message.
        message: String,
    },
    /// A `tokenizer.json` whose model edo's static models do not run.
    #[error("a tokenizer.json with model type {model:?}: edo runs WordPiece, BPE, Unigram and WordLevel tokenizers")]
    UnsupportedTokenizer {
        /// The `model.type` the file names (`none` when it names none).
        model: String,
    },
    /// A `tokenizer.json` with a part edo's own tokenizer does not run, in a browser build
    /// (native builds run it through HF `tokenizers`; browser builds leave that crate out).
    #[error("a tokenizer.json with {part}: edo's own tokenizer, the only one in browser builds, does not run it (native builds do, through HF tokenizers)")]
    TokenizerPart {
        /// The part, named (`the pre-tokenizer "ByteLevel"`, `BPE dropout`, …).
        part: String,
    },
    /// A token that is not in the table's vocabulary.
    #[error("token {token:?} is not in the vocabulary")]
    UnknownToken {
        /// The token.
        token: String,
    },
}

impl Error {
    pub(crate) fn from_encode(row: usize, e: EncodeError, format: Format) -> Self {
        match e {
            EncodeError::NonFinite { col, value } => Error::NonFinite { row, col, value },
            EncodeError::OutOfRange { col, value } => Error::OutOfRange { row, col, value, format },
        }
    }
}
