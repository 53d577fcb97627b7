//! The crate's one error type, and what it names: [`Unsupported`] and [`Cause`].

use crate::format::Format;
pub use edo_core::{Cause, CauseError};

/// Everything that can go wrong in edo, with the fields a caller needs to act on it. New kinds of
/// error may be added (`#[non_exhaustive]`): a `match` needs a `_` arm.
///
/// An error that came from the operating system or from wgpu keeps it as its
/// [`std::error::Error::source`] (a [`Cause`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
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
    /// An order that is not a permutation of a table's rows: an entry out of range or repeated.
    #[error("order[{index}] = {value}: not a permutation of the table's {rows} rows (out of range or repeated)")]
    NotAPermutation {
        /// The position of the bad entry.
        index: usize,
        /// The entry.
        value: u32,
        /// Rows of the table.
        rows: usize,
    },
    /// Too few rows for what was asked of them (training an ITQ rotation needs more rows than
    /// values per row).
    #[error("{what}: {rows} rows, at least {needed} needed")]
    TooFewRows {
        /// What the rows were for.
        what: &'static str,
        /// Rows given.
        rows: usize,
        /// The fewest that work.
        needed: usize,
    },
    /// A rotation (a stored code transform's) that is not orthogonal: `error` is the most
    /// `‖x·R·Rᵀ − x‖ / ‖x‖` of edo's probe vectors.
    #[error("a rotation that is not orthogonal: ‖x·R·Rᵀ − x‖/‖x‖ reaches {error}, beyond {tolerance}")]
    NotOrthogonal {
        /// The most `‖x·R·Rᵀ − x‖ / ‖x‖` of the probes (NaN if it could not be computed).
        error: f32,
        /// The most allowed.
        tolerance: f32,
    },
    /// Training (of a code transform's rotation) failed on these rows.
    #[error("training {what} failed: {reason}")]
    Training {
        /// What was trained.
        what: &'static str,
        /// Why it failed.
        reason: &'static str,
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
    /// The adapter refused to create a device (wgpu's `RequestDeviceError` is the source).
    #[error("requesting a GPU device failed: {0}")]
    RequestDevice(#[source] Cause),
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
    /// A combination of arguments, an input or an operation edo does not support, named.
    #[error("unsupported: {0}")]
    Unsupported(Unsupported),
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
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error (a [`std::io::Error`]; [`Cause::downcast_ref`] gets it).
        source: Cause,
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
    /// Packed rows whose width is a row of several dims (a ggml block is stored whole however
    /// few of its values a row's last one holds; a 4-bit row's last byte holds one value or two):
    /// the dim has to be given
    /// ([`FileLayout::Packed`](crate::file::import::FileLayout::Packed)'s `dim`; `--dim` on the command
    /// line).
    #[error("{what}: {cols} columns are a {format} row of any dim from {low} to {high}: pass the dim")]
    AmbiguousDim {
        /// What was being read.
        what: &'static str,
        /// The rows' format.
        format: Format,
        /// The rows' width in bytes.
        cols: usize,
        /// The smallest dim whose rows are that wide.
        low: usize,
        /// The largest.
        high: usize,
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
    /// A named tensor is not in the file, or (`name` empty) none was named and the file holds
    /// several 2-D tensors.
    #[error("{}", missing_tensor(.name, .available))]
    MissingTensor {
        /// The name asked for (empty when none was).
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
        /// The part, named (`the pre-tokenizer "Punctuation"`, `BPE dropout`, …).
        part: String,
    },
    /// A key that is not in a keyed table, looked up with [`crate::live::Missing::Error`].
    #[error("keys[{index}] = {key} is not in the table")]
    UnknownKey {
        /// The position of the key in the call.
        index: usize,
        /// The key.
        key: u64,
    },
    /// A key given for two rows of a keyed table.
    #[error("key {key} is given for two rows")]
    DuplicateKey {
        /// The key.
        key: u64,
    },
    /// A token that is not in the table's vocabulary.
    #[error("token {token:?} is not in the vocabulary")]
    UnknownToken {
        /// The token.
        token: String,
    },
}

/// edo-core's errors under the names they have here, so that a `match` on an [`Error`] sees the
/// same variant whether the formats, the CPU path or the GPU path found the case.
impl From<edo_core::Error> for Error {
    fn from(e: edo_core::Error) -> Self {
        use edo_core::Error as E;
        match e {
            E::NonFinite { row, col, value } => Error::NonFinite { row, col, value },
            E::OutOfRange { row, col, value, format } => Error::OutOfRange { row, col, value, format },
            E::ZeroDim => Error::ZeroDim,
            E::ShapeMismatch { what, expected, actual } => Error::ShapeMismatch { what, expected, actual },
            E::IdOutOfRange { index, id, rows } => Error::IdOutOfRange { index, id, rows },
            E::IdOutOfRange64 { index, id, max } => Error::IdOutOfRange64 { index, id, max },
            E::LimitExceeded { what, requested, max } => Error::LimitExceeded { what, requested, max },
            E::HostOutOfMemory { what, bytes } => Error::HostOutOfMemory { what, bytes },
            E::NonFiniteWeight { index, value } => Error::NonFiniteWeight { index, value },
            E::BadOffsets { index, value, reason } => Error::BadOffsets { index, value, reason },
            E::Unsupported(u) => Error::Unsupported(u.into()),
        }
    }
}

/// edo-gpu's errors under the names they have here (its edo-core cases as [`From<edo_core::Error>`]
/// converts them).
#[cfg(feature = "gpu")]
impl From<edo_gpu::Error> for Error {
    fn from(e: edo_gpu::Error) -> Self {
        use edo_gpu::Error as E;
        match e {
            E::Core(e) => e.into(),
            E::NoAdapter => Error::NoAdapter,
            E::DeviceLimits { limit, required, actual } => Error::DeviceLimits { limit, required, actual },
            E::RequestDevice(cause) => Error::RequestDevice(cause),
            E::OutOfMemory { what } => Error::OutOfMemory { what },
            E::Gpu { what, message, source } => Error::Gpu { what, message, source },
            E::DeviceLost(reason) => Error::DeviceLost(reason),
            E::Readback { message, source } => Error::Readback { message, source },
            E::MixedFormats { index, expected, found } => Error::MixedFormats { index, expected, found },
            E::Unsupported(u) => Error::Unsupported(u.into()),
        }
    }
}

#[cfg(feature = "gpu")]
impl From<edo_gpu::Unsupported> for Unsupported {
    fn from(u: edo_gpu::Unsupported) -> Self {
        use edo_gpu::Unsupported as U;
        match u {
            U::GpuDecoder { format } => Unsupported::GpuDecoder { format },
            U::ReadF16OfF32Rows => Unsupported::ReadF16OfF32Rows,
            U::RebuildCallersDevice => Unsupported::RebuildCallersDevice,
            U::ResubmittedCacheLookup => Unsupported::ResubmittedCacheLookup,
        }
    }
}

impl From<edo_core::Unsupported> for Unsupported {
    fn from(u: edo_core::Unsupported) -> Self {
        use edo_core::Unsupported as U;
        match u {
            U::PoolingNoneOverSeveralTables => Unsupported::PoolingNoneOverSeveralTables,
            U::RowAlignment { bytes } => Unsupported::RowAlignment { bytes },
            U::WeightsWithMeanOrMax => Unsupported::WeightsWithMeanOrMax,
        }
    }
}

/// What edo does not support, named: the field of [`Error::Unsupported`]. Its message says what
/// to do instead where there is something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Unsupported {
    /// Checksum chunks must be a positive multiple of 4 bytes.
    #[error("checksum chunks must be a positive multiple of 4 bytes")]
    ChecksumChunkBytes,
    /// Quotient-remainder tables need at least one row each.
    #[error("quotient-remainder tables need at least one row each")]
    EmptyQuotientRemainderTable,
    /// GatherBlockQuantized export of this format: quantise to int4_zp32/64/128 or int8_zp32/64/128.
    #[error("GatherBlockQuantized export of this format: quantise to int4_zp32/64/128 or int8_zp32/64/128")]
    GbqExportFormat,
    /// GatherBlockQuantized export of 4-bit rows of an odd width.
    #[error("GatherBlockQuantized export of 4-bit rows of an odd width")]
    GbqExportOddWidth,
    /// A GGUF file of this format: GGUF holds fp32, fp16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k and q6_k.
    #[error("a GGUF file of this format: GGUF holds fp32, fp16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k and q6_k")]
    GgufExportFormat,
    /// A GGUF tensor of rows that are not whole ggml blocks (32 values; the k-quants' 256).
    #[error("a GGUF tensor of rows that are not whole ggml blocks (32 values; the k-quants' 256)")]
    GgufPartialBlocks,
    /// This GGUF tensor type: edo reads F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K tensors.
    #[error("this GGUF tensor type: edo reads F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K tensors")]
    GgufTensorType,
    /// A table format the GPU path has no decoder for (edo-core has the format; the GPU path
    /// does not yet): look it up on the CPU path.
    #[error("{format} tables on the GPU (the CPU path reads them)")]
    GpuDecoder {
        /// The format.
        format: Format,
    },
    /// Hamming search needs binary codes (Format::Binary or BinaryScaled).
    #[error("Hamming search needs binary codes (Format::Binary or BinaryScaled)")]
    HammingOfNonBinaryCodes,
    /// A code transform (centred or ITQ codes) for rows that are not Format::Binary.
    #[error("a code transform (centred or ITQ codes) for rows that are not Format::Binary")]
    CodeTransformOfNonBinary,
    /// Hashed bags on the CPU path of the browser build (its API has none).
    #[error("hashed bags on the CPU path of the browser build (its API has none)")]
    HashedBagsInBrowserCpuPath,
    /// A hashed table needs at least one bucket.
    #[error("a hashed table needs at least one bucket")]
    HashedTableWithoutBuckets,
    /// Lookup on several hashed tables: use bags with one id per bag.
    #[error("lookup on several hashed tables: use bags with one id per bag")]
    LookupOnSeveralHashedTables,
    /// Mean or max pooling over ids hashed k > 1 times (the k rows of an id are summed).
    #[error("mean or max pooling over ids hashed k > 1 times (the k rows of an id are summed)")]
    MeanOrMaxOverMultiHashedIds,
    /// A plan needs at least one candidate format.
    #[error("a plan needs at least one candidate format")]
    PlanWithoutFormats,
    /// A remote table whose checksum store a panicking thread left poisoned.
    #[error("a remote table whose checksum store a panicking thread left poisoned")]
    PoisonedChecksums,
    /// Pooling None over hashed ids (each id already sums its k rows: use lookup).
    #[error("pooling None over hashed ids (each id already sums its k rows: use lookup)")]
    PoolingNoneOverHashedIds,
    /// Pooling None over several tables (one output row per index needs one dim).
    #[error("pooling None over several tables (one output row per index needs one dim)")]
    PoolingNoneOverSeveralTables,
    /// A prepared bag through a cache whose gathered rows exceed one binding (GpuCache::bag submits part by part).
    #[error("a prepared bag through a cache whose gathered rows exceed one binding (GpuCache::bag submits part by part)")]
    PreparedCacheBagOverBindings,
    /// Read_f16 of f32 rows (gather_f16 and bag_f16 write f16 rows).
    #[error("read_f16 of f32 rows (gather_f16 and bag_f16 write f16 rows)")]
    ReadF16OfF32Rows,
    /// Rebuilding an engine over the caller's device (Engine::from_device): make a new device and call from_device again.
    #[error("rebuilding an engine over the caller's device (Engine::from_device): make a new device and call from_device again")]
    RebuildCallersDevice,
    /// A GPU lookup of a live table that has no GPU copy (never attached, or dropped after a GPU
    /// failure).
    #[error("a GPU lookup of a live table without a GPU copy: call attach_gpu first (a GPU failure during an update drops the copy)")]
    LiveTableWithoutGpu,
    /// Rescoring with a table placed on another backend than the codes.
    #[error("rescoring with a table placed on another backend than the codes")]
    RescoringAcrossBackends,
    /// A table file whose rows are reordered (it has an id map) opened as a plain table: its rows
    /// are not in id order.
    #[error("a table file whose rows are reordered (it holds an id map): read it with PrunedTable::open or from_file_bytes, which apply the map (on the command line, `edo lookup` does, and `edo quantize`, `export` and `reorder` read the rows back in id order; `edo inspect` describes the file as stored)")]
    ReorderedTableFile,
    /// A table file whose rows are addressed by 64-bit keys (a live table's snapshot) opened as
    /// a plain table, or keys asked for beside an id map or a code transform.
    #[error("a table file whose rows are addressed by 64-bit keys (a live table's snapshot): open it with edo::live::LiveTable (`edo update` on the command line); a keyed file holds no id map or code transform")]
    KeyedTableFile,
    /// Metadata keys starting with "edo." are reserved.
    #[error("metadata keys starting with \"edo.\" are reserved")]
    ReservedMetadataKey,
    /// Submitting a cache lookup again (its slots may hold other rows now): prepare it again.
    #[error("submitting a cache lookup again (its slots may hold other rows now): prepare it again")]
    ResubmittedCacheLookup,
    /// A row alignment that is not a power of two from 4 to 256 bytes.
    #[error("a row alignment of {bytes} bytes (it is a power of two from 4 to 256)")]
    RowAlignment {
        /// The bytes asked for.
        bytes: usize,
    },
    /// Per-sample weights with mean or max pooling (PyTorch allows them with sum only).
    #[error("per-sample weights with mean or max pooling (PyTorch allows them with sum only)")]
    WeightsWithMeanOrMax,
    /// Word2vec text with an empty token or one holding whitespace.
    #[error("word2vec text with an empty token or one holding whitespace")]
    Word2vecToken,
    /// K = 0 (a search returns 1 to 1024 neighbours per query).
    #[error("k = 0 (a search returns 1 to 1024 neighbours per query)")]
    ZeroNeighbours,
    /// A Zipf exponent must be finite and > 0.
    #[error("a Zipf exponent must be finite and > 0")]
    ZipfExponent,
}

impl Error {
    /// A stable code for the kind of error, the same in every binding: JavaScript's
    /// `EdoError.code`, Python's `EdoError.code` (`"ID_OUT_OF_RANGE"`, `"BAD_FILE"`,
    /// `"DEVICE_LOST"`, …). Every variant has one: a new variant must be given its code here.
    pub fn code(&self) -> &'static str {
        use Error as E;
        match self {
            E::NonFinite { .. } | E::NonFiniteWeight { .. } => "NON_FINITE",
            E::OutOfRange { .. } | E::BeyondF32 { .. } => "VALUE_OUT_OF_RANGE",
            E::ZeroDim | E::ShapeMismatch { .. } => "SHAPE_MISMATCH",
            E::BadOffsets { .. } => "BAD_OFFSETS",
            E::IdOutOfRange { .. } | E::IdOutOfRange64 { .. } | E::UnknownKey { .. } => "ID_OUT_OF_RANGE",
            E::LimitExceeded { .. } | E::DeviceLimits { .. } => "LIMIT_EXCEEDED",
            E::NoAdapter | E::RequestDevice(_) => "NO_GPU",
            E::OutOfMemory { .. } => "GPU_OUT_OF_MEMORY",
            E::HostOutOfMemory { .. } => "OUT_OF_MEMORY",
            E::Gpu { .. } | E::Readback { .. } => "GPU_ERROR",
            E::DeviceLost(_) => "DEVICE_LOST",
            E::DuplicateHotId { .. }
            | E::DuplicateKey { .. }
            | E::TooFewRows { .. }
            | E::NotOrthogonal { .. }
            | E::Training { .. }
            | E::NotAPermutation { .. }
            | E::AmbiguousDim { .. } => "INVALID_ARGUMENT",
            E::Busy { .. } => "BUSY",
            E::Unsupported(_) | E::MixedFormats { .. } | E::UnsupportedTokenizer { .. } | E::TokenizerPart { .. } => "UNSUPPORTED",
            E::Io { .. } => "IO",
            E::BadFile { .. } | E::MissingTensor { .. } | E::Parse { .. } => "BAD_FILE",
            E::UnsupportedVersion { .. } => "UNSUPPORTED_VERSION",
            E::Checksum { .. } => "CHECKSUM",
            E::Remote { .. } => "NETWORK",
            E::Tokenizer { .. } => "TOKENIZER",
            E::UnknownToken { .. } => "UNKNOWN_TOKEN",
        }
    }

    /// [`Error::Io`] for `path`.
    pub fn io(path: impl std::fmt::Display, error: std::io::Error) -> Error {
        Error::Io { path: path.to_string(), source: Cause::new(error) }
    }

    /// [`Error::Gpu`] found without wgpu reporting one (a GPU result that fails a check).
    pub fn gpu(what: &'static str, message: impl Into<String>) -> Error {
        Error::Gpu { what, message: message.into(), source: None }
    }
}

/// [`Error::MissingTensor`]'s message.
fn missing_tensor(name: &str, available: &str) -> String {
    if name.is_empty() && available.is_empty() {
        "the file holds no 2-D tensor (an embedding table is 2-D)".to_string()
    } else if name.is_empty() {
        format!("the file holds several 2-D tensors: say which (--tensor on the command line, the tensor option in the browser): {available}")
    } else {
        format!("no tensor named {name:?}; 2-D tensors in the file: {available}")
    }
}

#[cfg(all(test, native))]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_io_error_keeps_its_source_and_the_error_stays_clone_and_comparable() {
        let Err(e) = crate::file::TableFile::open("/nonexistent/edo-table.edo") else { panic!("opened a file that is not there") };
        let Error::Io { path, source } = &e else { panic!("expected Error::Io, got {e:?}") };
        assert_eq!(path, "/nonexistent/edo-table.edo");
        assert_eq!(source.downcast_ref::<std::io::Error>().map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
        // The chain: edo's error, then the operating system's.
        let first = e.source().expect("Error::Io has a source");
        assert_eq!(first.to_string(), source.to_string());
        assert!(e.to_string().starts_with("/nonexistent/edo-table.edo: "), "{e}");
        assert_eq!(e.clone(), e);
        assert_ne!(e, Error::io("/nonexistent/edo-table.edo", std::io::Error::other("another message")));
    }

    #[test]
    fn unsupported_is_named_by_a_variant_and_says_what_to_do() {
        let e = Error::Unsupported(Unsupported::GbqExportFormat);
        assert!(matches!(e, Error::Unsupported(Unsupported::GbqExportFormat)));
        assert!(e.to_string().starts_with("unsupported: GatherBlockQuantized export of this format: quantise to"), "{e}");
        assert!(e.source().is_none());
        assert_eq!(Error::gpu("check", "differs").source().map(|s| s.to_string()), None);
    }
}
