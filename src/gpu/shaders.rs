//! The WGSL sources and how they are assembled; a [`ShaderId`] is the pipeline cache key.
//!
//! A gather module is `gather_common.wgsl` (parameters, bounds policy) + `decode_<format>.wgsl`
//! (how one packed row decodes, no bindings) + a driver with the bindings and the entry point:
//! `gather_rows.wgsl` (any dim, one value per step) or `gather_rows4.wgsl` (dim a multiple of 4,
//! one vec4 store per step). Five decoders × two drivers from seven small files, with no
//! preprocessor: WGSL resolves module-scope names in any order, so a decoder can read the `shard`
//! its driver declares.

use crate::format::Format;

const GATHER_COMMON: &str = include_str!("../../shaders/gather_common.wgsl");
const GATHER_ROWS: &str = include_str!("../../shaders/gather_rows.wgsl");
const GATHER_ROWS4: &str = include_str!("../../shaders/gather_rows4.wgsl");
const BAG: &str = include_str!("../../shaders/bag.wgsl");
const HASH_COMMON: &str = include_str!("../../shaders/hash_common.wgsl");
const HASH_IDS: &str = include_str!("../../shaders/hash_ids.wgsl");
const QR: &str = include_str!("../../shaders/qr.wgsl");
const REMAP: &str = include_str!("../../shaders/remap.wgsl");
const SCATTER_ROWS: &str = include_str!("../../shaders/scatter_rows.wgsl");
const SEARCH_COMMON: &str = include_str!("../../shaders/search_common.wgsl");
const HAMMING_COMMON: &str = include_str!("../../shaders/hamming_common.wgsl");
const SORT_PAIRS: &str = include_str!("../../shaders/sort_pairs.wgsl");
const RESCORE: &str = include_str!("../../shaders/rescore.wgsl");

/// The passes of a Hamming search (see `gpu::search`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchKernel {
    Hist,
    Select,
    Ties,
    Scan,
    Collect,
    Sort,
}

impl SearchKernel {
    pub const ALL: [SearchKernel; 6] =
        [SearchKernel::Hist, SearchKernel::Select, SearchKernel::Ties, SearchKernel::Scan, SearchKernel::Collect, SearchKernel::Sort];
}

/// Every compute kernel edo runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShaderId {
    /// Gather rows of `format` into dense f32; `vec4` selects the driver for dims that are a
    /// multiple of 4.
    Gather { format: Format, vec4: bool },
    /// EmbeddingBag over one or several tables of `format`; `vec4` when every dim is a multiple
    /// of 4 (an override constant of the one `bag.wgsl`).
    Bag { format: Format, vec4: bool },
    /// Raw 64-bit ids → hashed row indices (no table format involved).
    HashIds,
    /// Quotient-remainder lookup from tables of `format`.
    Qr { format: Format },
    /// Ids of a pruned table → rows of its compact table.
    Remap,
    /// Uploaded rows → their slots in a row cache.
    Scatter,
    /// One pass of a Hamming top-k search.
    Search(SearchKernel),
    /// Scores of search candidates against rows of a table of `format`.
    Rescore { format: Format },
}

impl ShaderId {
    /// Every kernel, for tests that validate them all.
    pub fn all() -> Vec<ShaderId> {
        Format::ALL
            .iter()
            .flat_map(|&format| [false, true].map(|vec4| [ShaderId::Gather { format, vec4 }, ShaderId::Bag { format, vec4 }]))
            .flatten()
            .chain([ShaderId::HashIds, ShaderId::Remap, ShaderId::Scatter])
            .chain(Format::ALL.map(|format| ShaderId::Qr { format }))
            .chain(SearchKernel::ALL.map(ShaderId::Search))
            .chain(Format::ALL.map(|format| ShaderId::Rescore { format }))
            .collect()
    }

    /// The gather kernel for rows of `dim` values of `format`.
    pub fn gather(format: Format, dim: usize) -> ShaderId {
        ShaderId::Gather { format, vec4: dim.is_multiple_of(4) }
    }

    /// Output values each invocation writes per step (1, or 4 for the vec4 driver).
    pub fn values_per_step(self) -> usize {
        match self {
            ShaderId::Gather { vec4, .. } => {
                if vec4 {
                    4
                } else {
                    1
                }
            }
            ShaderId::Bag { vec4, .. } => {
                if vec4 {
                    16
                } else {
                    1
                }
            }
            ShaderId::HashIds | ShaderId::Remap | ShaderId::Scatter | ShaderId::Qr { .. } | ShaderId::Search(_) | ShaderId::Rescore { .. } => 1,
        }
    }

    /// A short name for labels and error messages.
    pub fn name(self) -> &'static str {
        match self {
            ShaderId::Gather { format, vec4 } => match (format, vec4) {
                (Format::F32, false) => "gather_rows/decode_f32",
                (Format::F32, true) => "gather_rows4/decode_f32",
                (Format::F16, false) => "gather_rows/decode_f16",
                (Format::F16, true) => "gather_rows4/decode_f16",
                (Format::Int8, false) => "gather_rows/decode_int8",
                (Format::Int8, true) => "gather_rows4/decode_int8",
                (Format::Int4, false) => "gather_rows/decode_int4",
                (Format::Int4, true) => "gather_rows4/decode_int4",
                (Format::Binary | Format::BinaryScaled, false) => "gather_rows/decode_binary",
                (Format::Binary | Format::BinaryScaled, true) => "gather_rows4/decode_binary",
            },
            ShaderId::HashIds => "hash_ids",
            ShaderId::Qr { .. } => "qr",
            ShaderId::Remap => "remap",
            ShaderId::Scatter => "scatter_rows",
            ShaderId::Search(k) => match k {
                SearchKernel::Hist => "hamming_hist",
                SearchKernel::Select => "hamming_select",
                SearchKernel::Ties => "hamming_ties",
                SearchKernel::Scan => "hamming_scan",
                SearchKernel::Collect => "hamming_collect",
                SearchKernel::Sort => "sort_pairs",
            },
            ShaderId::Rescore { format } => match format {
                Format::F32 => "rescore/decode_f32",
                Format::F16 => "rescore/decode_f16",
                Format::Int8 => "rescore/decode_int8",
                Format::Int4 => "rescore/decode_int4",
                Format::Binary | Format::BinaryScaled => "rescore/decode_binary",
            },
            ShaderId::Bag { format, .. } => match format {
                Format::F32 => "bag/decode_f32",
                Format::F16 => "bag/decode_f16",
                Format::Int8 => "bag/decode_int8",
                Format::Int4 => "bag/decode_int4",
                Format::Binary | Format::BinaryScaled => "bag/decode_binary",
            },
        }
    }

    /// The complete WGSL module.
    pub fn source(self) -> String {
        let driver = match self {
            ShaderId::Gather { vec4: false, .. } => GATHER_ROWS,
            ShaderId::Gather { vec4: true, .. } => GATHER_ROWS4,
            ShaderId::Bag { .. } => BAG,
            ShaderId::Qr { .. } => QR,
            ShaderId::HashIds => return [HASH_COMMON, HASH_IDS].concat(),
            ShaderId::Remap => return REMAP.to_string(),
            ShaderId::Scatter => return SCATTER_ROWS.to_string(),
            ShaderId::Search(SearchKernel::Sort) => return [SEARCH_COMMON, SORT_PAIRS].concat(),
            ShaderId::Search(k) => {
                let driver = match k {
                    SearchKernel::Hist => include_str!("../../shaders/hamming_hist.wgsl"),
                    SearchKernel::Select => include_str!("../../shaders/hamming_select.wgsl"),
                    SearchKernel::Ties => include_str!("../../shaders/hamming_ties.wgsl"),
                    SearchKernel::Scan => include_str!("../../shaders/hamming_scan.wgsl"),
                    SearchKernel::Collect => include_str!("../../shaders/hamming_collect.wgsl"),
                    SearchKernel::Sort => unreachable!("returned above"),
                };
                return [SEARCH_COMMON, HAMMING_COMMON, driver].concat();
            }
            ShaderId::Rescore { format } => return [SEARCH_COMMON, decoder(format), RESCORE].concat(),
        };
        [GATHER_COMMON, decoder(self.format().unwrap_or(Format::F32)), driver].concat()
    }

    /// Override constants fixed by the kernel's identity (the workgroup shape is added per
    /// pipeline).
    pub fn constants(self) -> Vec<(&'static str, f64)> {
        let mut c = match self.format() {
            Some(Format::Binary) => vec![("SCALED", 0.0)],
            Some(Format::BinaryScaled) => vec![("SCALED", 1.0)],
            _ => vec![],
        };
        if let ShaderId::Bag { vec4, .. } = self {
            c.push(("VEC4", vec4 as u8 as f64));
        }
        c
    }

    /// The table format the kernel decodes, if it reads a table.
    pub fn format(self) -> Option<Format> {
        match self {
            ShaderId::Gather { format, .. } | ShaderId::Bag { format, .. } | ShaderId::Qr { format } | ShaderId::Rescore { format } => Some(format),
            ShaderId::HashIds | ShaderId::Remap | ShaderId::Scatter | ShaderId::Search(_) => None,
        }
    }
}

fn decoder(format: Format) -> &'static str {
    match format {
        Format::F32 => include_str!("../../shaders/decode_f32.wgsl"),
        Format::F16 => include_str!("../../shaders/decode_f16.wgsl"),
        Format::Int8 => include_str!("../../shaders/decode_int8.wgsl"),
        Format::Int4 => include_str!("../../shaders/decode_int4.wgsl"),
        Format::Binary | Format::BinaryScaled => include_str!("../../shaders/decode_binary.wgsl"),
    }
}
