//! The kernels, in one table: every kernel's sources, bind-group layout, workgroup shape and
//! override constants are one [`Kernel`] value; a [`ShaderId`] names a kernel and, for kernels
//! that decode rows, the table format. The pipeline cache is keyed by the `ShaderId` and the
//! workgroup shape, which together determine everything a pipeline is made of.
//!
//! A module is the kernel's helpers (`*_common.wgsl`) + the format's decoder
//! (`decode_<format>.wgsl`, from [`super::decoders`], when the kernel decodes rows) + its
//! driver (bindings and the entry point), concatenated: WGSL resolves module-scope names in any
//! order, so a decoder can read the shard through the `word()` a helper defines (over the shard as
//! u32 words, or as 16-byte words for the kernels that read rows 16 bytes at a time), and no
//! preprocessor is needed.

use super::decoders::{self, has_wide_reads};
use crate::format::Format;

/// A WGSL file of `shaders/`. Kernels name their files with these, and each file's text is in
/// the binary once: [`Src::text`] is the one place that includes it (a `const` holding the text
/// itself would be copied into every kernel that uses it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// `gather_common.wgsl`: gather parameters, bounds policies, the row sentinels.
    GatherCommon,
    /// `gather_driver.wgsl`: the gather drivers' input bindings, the id an invocation handles,
    /// and their entry point's body.
    GatherDriver,
    /// `hash_common.wgsl`: MurmurHash3 in WGSL.
    HashCommon,
    /// `search_common.wgsl`: search parameters and helpers.
    SearchCommon,
    /// `hamming_common.wgsl`: the Hamming passes' bindings.
    HammingCommon,
    /// `topk_common.wgsl`: the one-pass top-k kernels' parameters, bindings and block selection.
    TopkCommon,
    /// `hamming_topk_scan.wgsl`: the one pass over the codes, a tile of queries at a time.
    HammingTopkScan,
    /// `topk_rows.wgsl`: the scan's rows read a 4-byte word at a time.
    TopkRows,
    /// `topk_rows4.wgsl`: the scan's rows read 16 bytes at a time (rows of whole vec4s).
    TopkRows4,
    /// `hamming_topk_merge.wgsl`: the blocks' kept pairs, merged.
    HammingTopkMerge,
    /// `gather_rows.wgsl`.
    GatherRows,
    /// `gather_rows4.wgsl`.
    GatherRows4,
    /// `gather_rows4_f32.wgsl`.
    GatherRows4F32,
    /// `gather_rows16.wgsl`: rows decoded sixteen values at a time (`decode16`).
    GatherRows16,
    /// `gather_rows8_f16.wgsl`: FP16 rows of whole vec4s, eight halves a load.
    GatherRows8F16,
    /// `bag.wgsl`.
    Bag,
    /// `bag_decode16.wgsl`: `decode16` as four `decode4`s, for decoders without a 16-byte read.
    BagDecode16,
    /// `gather_shard.wgsl`: a gathering kernel's shard (binding 2) as u32 words, and `word()`.
    GatherShard,
    /// `gather_shard4.wgsl`: a gathering kernel's shard as 16-byte words, `quad()` and `word()`.
    GatherShard4,
    /// `no_row_params.wgsl`: `row_params` for kernels whose rows need none and have no decoder.
    NoRowParams,
    /// `bag_shard.wgsl`: the bag's shard (binding 5) as u32 words, and `word()`.
    BagShard,
    /// `bag_shard4.wgsl`: the bag's shard as 16-byte words, `quad()` and `word()`.
    BagShard4,
    /// `decode_f32_bag4.wgsl`: FP32 rows for the vec4 bag, a 16-byte load a quad.
    DecodeF32Bag4,
    /// `qr.wgsl`.
    Qr,
    /// `hash_ids.wgsl`.
    HashIds,
    /// `remap.wgsl`.
    Remap,
    /// `live_probe.wgsl`.
    LiveProbe,
    /// `scatter_rows.wgsl`.
    ScatterRows,
    /// `hamming_hist.wgsl`.
    HammingHist,
    /// `hamming_select.wgsl`.
    HammingSelect,
    /// `hamming_ties.wgsl`.
    HammingTies,
    /// `hamming_scan.wgsl`.
    HammingScan,
    /// `hamming_collect.wgsl`.
    HammingCollect,
    /// `sort_pairs.wgsl`.
    SortPairs,
    /// `rescore.wgsl`.
    Rescore,
    /// `normalize_rows.wgsl`.
    NormalizeRows,
    /// `f16_common.wgsl`: f32 → f16 with rounding to nearest even.
    F16Common,
    /// `gather_rows_f16.wgsl`.
    GatherRowsF16,
    /// `gather_rows4_f16.wgsl`.
    GatherRows4F16,
    /// `pack_f16.wgsl`.
    PackF16,
}

impl Src {
    /// The file's text.
    pub fn text(self) -> &'static str {
        match self {
            Src::GatherCommon => wgsl!("gather_common.wgsl"),
            Src::GatherDriver => wgsl!("gather_driver.wgsl"),
            Src::HashCommon => wgsl!("hash_common.wgsl"),
            Src::SearchCommon => wgsl!("search_common.wgsl"),
            Src::HammingCommon => wgsl!("hamming_common.wgsl"),
            Src::TopkCommon => wgsl!("topk_common.wgsl"),
            Src::HammingTopkScan => wgsl!("hamming_topk_scan.wgsl"),
            Src::TopkRows => wgsl!("topk_rows.wgsl"),
            Src::TopkRows4 => wgsl!("topk_rows4.wgsl"),
            Src::HammingTopkMerge => wgsl!("hamming_topk_merge.wgsl"),
            Src::GatherRows => wgsl!("gather_rows.wgsl"),
            Src::GatherRows4 => wgsl!("gather_rows4.wgsl"),
            Src::GatherRows4F32 => wgsl!("gather_rows4_f32.wgsl"),
            Src::Bag => wgsl!("bag.wgsl"),
            Src::DecodeF32Bag4 => wgsl!("decode_f32_bag4.wgsl"),
            Src::GatherRows16 => wgsl!("gather_rows16.wgsl"),
            Src::BagDecode16 => wgsl!("bag_decode16.wgsl"),
            Src::GatherShard => wgsl!("gather_shard.wgsl"),
            Src::GatherShard4 => wgsl!("gather_shard4.wgsl"),
            Src::NoRowParams => wgsl!("no_row_params.wgsl"),
            Src::BagShard => wgsl!("bag_shard.wgsl"),
            Src::BagShard4 => wgsl!("bag_shard4.wgsl"),
            Src::GatherRows8F16 => wgsl!("gather_rows8_f16.wgsl"),
            Src::Qr => wgsl!("qr.wgsl"),
            Src::HashIds => wgsl!("hash_ids.wgsl"),
            Src::Remap => wgsl!("remap.wgsl"),
            Src::LiveProbe => wgsl!("live_probe.wgsl"),
            Src::ScatterRows => wgsl!("scatter_rows.wgsl"),
            Src::HammingHist => wgsl!("hamming_hist.wgsl"),
            Src::HammingSelect => wgsl!("hamming_select.wgsl"),
            Src::HammingTies => wgsl!("hamming_ties.wgsl"),
            Src::HammingScan => wgsl!("hamming_scan.wgsl"),
            Src::HammingCollect => wgsl!("hamming_collect.wgsl"),
            Src::SortPairs => wgsl!("sort_pairs.wgsl"),
            Src::Rescore => wgsl!("rescore.wgsl"),
            Src::NormalizeRows => wgsl!("normalize_rows.wgsl"),
            Src::F16Common => wgsl!("f16_common.wgsl"),
            Src::GatherRowsF16 => wgsl!("gather_rows_f16.wgsl"),
            Src::GatherRows4F16 => wgsl!("gather_rows4_f16.wgsl"),
            Src::PackF16 => wgsl!("pack_f16.wgsl"),
        }
    }
}

/// How a kernel's workgroup shape is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `WG_X × WG_Y` invocations (override constants): `WG_X` share a row, `WG_Y` rows per
    /// workgroup (see `Context::workgroup_shape`).
    Rows,
    /// `WG` invocations in one dimension (an override constant).
    Flat,
    /// Fixed in the source, because the kernel's arithmetic depends on it.
    Fixed(u32),
}

/// The bind-group layout of a kernel: binding 0 a uniform parameter block, then `inputs`
/// read-only storage buffers, then one read-write storage buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binds {
    /// Two inputs: ids (or moves, or queries) and a table shard.
    Gather,
    /// Five inputs: table metas, indices, offsets, weights, a table shard.
    Bag,
    /// Three inputs: raw ids, hash specs, hot ids.
    Hash,
    /// Two inputs (keys, a live table's index) and two outputs (rows, lookup counts).
    Probe,
}

impl Binds {
    /// Read-only storage buffers between the parameters and the output.
    pub fn inputs(self) -> u32 {
        match self {
            Binds::Gather => 2,
            Binds::Bag => 5,
            Binds::Hash => 3,
            Binds::Probe => 2,
        }
    }

    /// Read-write storage buffers after the inputs.
    pub fn outputs(self) -> u32 {
        match self {
            Binds::Probe => 2,
            _ => 1,
        }
    }
}

/// What of a format's decoder a kernel's module holds, after its helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoder {
    /// None: the kernel reads no table, or reads its rows itself.
    None,
    /// The decoder, [`WgslDecoder::wgsl`](super::decoders::WgslDecoder::wgsl), reading the shard as u32 words.
    Words,
    /// The decoder and its 16-byte reads, [`WgslDecoder::wide`](super::decoders::WgslDecoder::wide), with the shard bound as
    /// 16-byte words (`decode16`).
    Wide,
}

/// Everything about a kernel but the format it decodes.
#[derive(Debug)]
pub struct Kernel {
    /// Its name, for labels and errors.
    pub name: &'static str,
    /// The helpers that come first.
    pub helpers: &'static [Src],
    /// The format's decoder that follows the helpers, if any.
    pub decoder: Decoder,
    /// The driver: bindings and the entry point `main`.
    pub driver: Src,
    /// Its bind-group layout.
    pub binds: Binds,
    /// How its workgroup shape is set.
    pub shape: Shape,
    /// Output values one step of an invocation covers (1; 4 for vec4 stores; 16 for a bag pass).
    pub values_per_step: usize,
    /// Override constants of this variant of the driver.
    pub constants: &'static [(&'static str, f64)],
}

const fn rows_kernel(name: &'static str, driver: Src, values_per_step: usize) -> Kernel {
    let helpers: &'static [Src] = &[Src::GatherCommon, Src::GatherShard];
    Kernel { name, helpers, decoder: Decoder::Words, driver, binds: Binds::Gather, shape: Shape::Rows, values_per_step, constants: &[] }
}

/// A gather driver: the shared bindings and id helper, and f16 rounding for the f16 forms.
const fn gather_kernel(name: &'static str, driver: Src, values_per_step: usize, f16: bool) -> Kernel {
    let helpers: &'static [Src] =
        if f16 { &[Src::GatherCommon, Src::GatherDriver, Src::GatherShard, Src::F16Common] } else { &[Src::GatherCommon, Src::GatherDriver, Src::GatherShard] };
    Kernel { helpers, ..rows_kernel(name, driver, values_per_step) }
}

const fn search_kernel(name: &'static str, driver: Src, size: u32) -> Kernel {
    let helpers: &'static [Src] = &[Src::SearchCommon, Src::HammingCommon];
    Kernel { name, helpers, decoder: Decoder::None, driver, binds: Binds::Gather, shape: Shape::Fixed(size), values_per_step: 1, constants: &[] }
}

const fn flat_kernel(name: &'static str, helpers: &'static [Src], driver: Src, binds: Binds) -> Kernel {
    Kernel { name, helpers, decoder: Decoder::None, driver, binds, shape: Shape::Flat, values_per_step: 1, constants: &[] }
}

/// The kernels. qr, remap, scatter, the search passes and rescore bind what a gather does:
/// parameters, two inputs (ids, moves or queries; a table shard or rows), an output.
pub mod kernels {
    use super::*;
    /// Rows of any dim, one value per step.
    pub const GATHER_ROWS: Kernel = gather_kernel("gather_rows", Src::GatherRows, 1, false);
    /// Rows of a dim that is a multiple of 4, a vec4 store per step.
    pub const GATHER_ROWS4: Kernel = gather_kernel("gather_rows4", Src::GatherRows4, 4, false);
    /// FP32 rows of a dim that is a multiple of 4: a 16-byte load and a vec4 store per step.
    pub const GATHER_ROWS4_F32: Kernel =
        Kernel { helpers: GATHER_OWN_DECODE, decoder: Decoder::None, ..gather_kernel("gather_rows4_f32", Src::GatherRows4F32, 4, false) };
    /// Rows of a format with 16-byte reads ([`WgslDecoder::wide`](super::decoders::WgslDecoder::wide)), every dim a multiple of
    /// 16 and rows on 16-byte boundaries: `decode16` (one 16-byte load of codes for 8-bit codes)
    /// and four vec4 stores per step.
    pub const GATHER_ROWS16: Kernel = Kernel { helpers: GATHER_SHARD4, decoder: Decoder::Wide, ..gather_kernel("gather_rows16", Src::GatherRows16, 16, false) };
    /// FP16 rows of whole vec4s (a dim that is a multiple of 8): a 16-byte load of eight halves
    /// and two vec4 stores per step.
    pub const GATHER_ROWS8_F16: Kernel =
        Kernel { helpers: GATHER_OWN_DECODE, decoder: Decoder::None, ..gather_kernel("gather_rows8_f16", Src::GatherRows8F16, 8, false) };
    /// The helpers of the gathers that bind their shard as 16-byte words.
    const GATHER_SHARD4: &[Src] = &[Src::GatherCommon, Src::GatherDriver, Src::GatherShard4];
    /// The helpers of the 16-byte gathers that unpack rows without a decoder.
    const GATHER_OWN_DECODE: &[Src] = &[Src::GatherCommon, Src::GatherDriver, Src::GatherShard4, Src::NoRowParams];
    /// Rows of any dim written as f16, a word (two values) per step.
    pub const GATHER_ROWS_F16: Kernel = gather_kernel("gather_rows_f16", Src::GatherRowsF16, 2, true);
    /// Rows of a dim that is a multiple of 4 written as f16, four values (a vec2 store) per step.
    pub const GATHER_ROWS4_F16: Kernel = gather_kernel("gather_rows4_f16", Src::GatherRows4F16, 4, true);
    /// Dense f32 rows → f16 rows.
    pub const PACK_F16: Kernel = flat_kernel("pack_f16", &[Src::F16Common], Src::PackF16, Binds::Gather);
    /// EmbeddingBag, one column per lane and accumulator.
    pub const BAG: Kernel = Kernel { name: "bag", helpers: BAG_HELPERS, binds: Binds::Bag, constants: &[("VEC4", 0.0)], ..rows_kernel("", Src::Bag, 1) };
    /// `bag.wgsl` with `VEC4`: every dim a multiple of 4, a quad per lane and accumulator.
    pub const BAG4: Kernel = Kernel { name: "bag4", helpers: BAG_HELPERS, binds: Binds::Bag, constants: &[("VEC4", 1.0)], ..rows_kernel("", Src::Bag, 4) };
    /// `BAG4` over FP32 tables: a 16-byte load a quad (its own decoder, which binds the shard as
    /// vec4 words).
    pub const BAG4_F32: Kernel = Kernel {
        name: "bag4",
        helpers: &[Src::GatherCommon, Src::BagShard4, Src::DecodeF32Bag4, Src::BagDecode16],
        decoder: Decoder::None,
        binds: Binds::Bag,
        constants: &[("VEC4", 1.0)],
        ..rows_kernel("", Src::Bag, 4)
    };
    /// `bag.wgsl` with `WIDE` over a format with 16-byte reads ([`WgslDecoder::wide`](super::decoders::WgslDecoder::wide);
    /// every dim a multiple of 16, rows on 16-byte boundaries): a lane's sixteen columns of a row
    /// from one `decode16` (one 16-byte load of codes for 8-bit codes).
    pub const BAG16: Kernel = Kernel {
        name: "bag16",
        helpers: &[Src::GatherCommon, Src::BagShard4],
        decoder: Decoder::Wide,
        binds: Binds::Bag,
        constants: &[("VEC4", 1.0), ("WIDE", 1.0)],
        ..rows_kernel("", Src::Bag, 16)
    };
    /// The helpers of the bags whose decoder reads u32 words: `decode16` is four `decode4`s.
    const BAG_HELPERS: &[Src] = &[Src::GatherCommon, Src::BagShard, Src::BagDecode16];
    /// Quotient-remainder lookup.
    pub const QR: Kernel = rows_kernel("qr", Src::Qr, 1);
    /// Raw ids → hashed rows.
    pub const HASH_IDS: Kernel = flat_kernel("hash_ids", &[Src::HashCommon], Src::HashIds, Binds::Hash);
    /// Ids of a pruned table → rows of its compact table.
    pub const REMAP: Kernel = flat_kernel("remap", &[], Src::Remap, Binds::Gather);
    /// A live table's keys → its rows, probing its index.
    pub const LIVE_PROBE: Kernel = flat_kernel("live_probe", &[Src::HashCommon], Src::LiveProbe, Binds::Probe);
    /// Uploaded rows → their cache slots.
    pub const SCATTER: Kernel = flat_kernel("scatter_rows", &[], Src::ScatterRows, Binds::Gather);
    /// Rows divided by their L2 norm, in place (static models' sentence vectors).
    pub const NORMALIZE_ROWS: Kernel = flat_kernel("normalize_rows", &[], Src::NormalizeRows, Binds::Gather);
    /// Hamming search: per-query histograms of distances.
    pub const HAMMING_HIST: Kernel = search_kernel("hamming_hist", Src::HammingHist, 256);
    /// Hamming search: the k-th distance off the histograms.
    pub const HAMMING_SELECT: Kernel = search_kernel("hamming_select", Src::HammingSelect, 64);
    /// Hamming search: rows at the k-th distance, by index.
    pub const HAMMING_TIES: Kernel = search_kernel("hamming_ties", Src::HammingTies, 256);
    /// Hamming search: prefix sums of the candidates.
    pub const HAMMING_SCAN: Kernel = search_kernel("hamming_scan", Src::HammingScan, 256);
    /// Hamming search: the candidates, collected.
    pub const HAMMING_COLLECT: Kernel = search_kernel("hamming_collect", Src::HammingCollect, 256);
    /// One-pass Hamming top-k: each block's k nearest per query of a tile.
    pub const HAMMING_TOPK_SCAN: Kernel =
        Kernel { helpers: &[Src::TopkCommon, Src::TopkRows], ..search_kernel("hamming_topk_scan", Src::HammingTopkScan, 256) };
    /// The one-pass scan over rows of whole vec4s (code words a multiple of 4): a 16-byte load
    /// per four code words.
    pub const HAMMING_TOPK_SCAN4: Kernel =
        Kernel { helpers: &[Src::TopkCommon, Src::TopkRows4], ..search_kernel("hamming_topk_scan4", Src::HammingTopkScan, 256) };
    /// One-pass Hamming top-k: the blocks' lists merged.
    pub const HAMMING_TOPK_MERGE: Kernel = Kernel { helpers: &[Src::TopkCommon], ..search_kernel("hamming_topk_merge", Src::HammingTopkMerge, 256) };
    /// [`HAMMING_TOPK_SCAN`] over blocks of 4096 rows (16 an invocation), for k up to 1024.
    pub const HAMMING_TOPK_SCAN_LONG: Kernel = Kernel { name: "hamming_topk_scan_long", constants: &[("STRIPES", 16.0)], ..HAMMING_TOPK_SCAN };
    /// [`HAMMING_TOPK_SCAN4`] over blocks of 4096 rows, for k up to 1024.
    pub const HAMMING_TOPK_SCAN4_LONG: Kernel = Kernel { name: "hamming_topk_scan4_long", constants: &[("STRIPES", 16.0)], ..HAMMING_TOPK_SCAN4 };
    /// [`HAMMING_TOPK_MERGE`] of groups of 4096 entries, for k up to 1024.
    pub const HAMMING_TOPK_MERGE_LONG: Kernel = Kernel { name: "hamming_topk_merge_long", constants: &[("STRIPES", 16.0)], ..HAMMING_TOPK_MERGE };
    /// Sorts (distance, row) pairs per query.
    pub const SORT_PAIRS: Kernel = Kernel { helpers: &[Src::SearchCommon], ..search_kernel("sort_pairs", Src::SortPairs, 256) };
    /// Scores of candidates against rows of a table.
    pub const RESCORE: Kernel =
        Kernel { helpers: &[Src::SearchCommon, Src::GatherShard], decoder: Decoder::Words, ..search_kernel("rescore", Src::Rescore, 64) };
}

/// The passes of a Hamming search (see `gpu::search`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchKernel {
    /// Per-query histograms of distances.
    Hist,
    /// The k-th distance of each query.
    Select,
    /// The rows at the k-th distance, by index.
    Ties,
    /// Prefix sums of the candidates per chunk.
    Scan,
    /// The candidates, collected.
    Collect,
    /// The results, sorted.
    Sort,
    /// One pass over the codes: each block of 2048 rows' k nearest per query (k ≤ 64).
    TopkScan,
    /// [`SearchKernel::TopkScan`] over rows of whole vec4s, read 16 bytes a load.
    TopkScan4,
    /// The blocks' k nearest, merged level by level.
    TopkMerge,
    /// [`SearchKernel::TopkScan`] over blocks of 4096 rows (64 < k ≤ 1024).
    TopkScanLong,
    /// [`SearchKernel::TopkScan4`] over blocks of 4096 rows (k ≤ 1024).
    TopkScan4Long,
    /// [`SearchKernel::TopkMerge`] of groups of 4096 entries (k ≤ 1024).
    TopkMergeLong,
}

impl SearchKernel {
    /// Every pass: the histogram passes in order, the sort, the one-pass kernels.
    pub const ALL: [SearchKernel; 12] = [
        SearchKernel::Hist,
        SearchKernel::Select,
        SearchKernel::Ties,
        SearchKernel::Scan,
        SearchKernel::Collect,
        SearchKernel::Sort,
        SearchKernel::TopkScan,
        SearchKernel::TopkScan4,
        SearchKernel::TopkMerge,
        SearchKernel::TopkScanLong,
        SearchKernel::TopkScan4Long,
        SearchKernel::TopkMergeLong,
    ];
}

/// Every compute kernel edo runs: a [`Kernel`], and the table format for kernels that decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShaderId {
    /// Gather rows of `format` into dense f32; `vec4` selects the driver for dims that are a
    /// multiple of 4.
    Gather {
        /// The format decoded.
        format: Format,
        /// The vec4 driver (dims that are a multiple of 4).
        vec4: bool,
    },
    /// Gather rows of `format` into f16 rows (two values a word); `vec4` as for `Gather`.
    GatherF16 {
        /// The format decoded.
        format: Format,
        /// The vec4 driver (dims that are a multiple of 4).
        vec4: bool,
    },
    /// Dense f32 rows → f16 rows.
    PackF16,
    /// EmbeddingBag over one or several tables of `format`; `vec4` when every dim is a multiple
    /// of 4.
    Bag {
        /// The format decoded.
        format: Format,
        /// Every dim a multiple of 4: 16 columns a pass.
        vec4: bool,
    },
    /// Gather rows of `format` read 16 bytes at a time ([`has_wide_reads`](super::decoders::has_wide_reads)): rows on
    /// 16-byte boundaries (row words a multiple of 4) of a dim that is a multiple of 16 (for
    /// FP16, 8), sixteen 8-bit codes (eight halves) a load.
    GatherWide {
        /// The format decoded.
        format: Format,
    },
    /// EmbeddingBag over tables of `format` read 16 bytes at a time: rows on 16-byte boundaries
    /// of dims that are multiples of 16.
    BagWide {
        /// The format decoded.
        format: Format,
    },
    /// Raw 64-bit ids → hashed row indices (no table format involved).
    HashIds,
    /// Quotient-remainder lookup from tables of `format`.
    Qr {
        /// The format decoded.
        format: Format,
    },
    /// Ids of a pruned table → rows of its compact table.
    Remap,
    /// A live table's keys → its rows, through its index.
    LiveProbe,
    /// Uploaded rows → their slots in a row cache.
    Scatter,
    /// One pass of a Hamming top-k search.
    Search(SearchKernel),
    /// Rows divided by their L2 norm, in place.
    NormalizeRows,
    /// Scores of search candidates against rows of a table of `format`.
    Rescore {
        /// The format decoded.
        format: Format,
    },
}

impl ShaderId {
    /// Every kernel, for tests that validate them all.
    pub fn all() -> Vec<ShaderId> {
        Format::ALL
            .iter()
            .flat_map(|&format| [false, true].map(|vec4| [ShaderId::Gather { format, vec4 }, ShaderId::Bag { format, vec4 }]))
            .flatten()
            .chain(Format::ALL.iter().flat_map(|&format| [false, true].map(|vec4| ShaderId::GatherF16 { format, vec4 })))
            .chain(Format::ALL.iter().filter(|&&f| has_wide_reads(f)).flat_map(|&format| [ShaderId::GatherWide { format }, ShaderId::BagWide { format }]))
            .chain([ShaderId::HashIds, ShaderId::Remap, ShaderId::LiveProbe, ShaderId::Scatter, ShaderId::NormalizeRows, ShaderId::PackF16])
            .chain(Format::ALL.map(|format| ShaderId::Qr { format }))
            .chain(SearchKernel::ALL.map(ShaderId::Search))
            .chain(Format::ALL.map(|format| ShaderId::Rescore { format }))
            .collect()
    }

    /// The gather kernel for rows of `dim` values of `format`, `row_words` words apart: one that
    /// reads 16 bytes at a time where the format has such reads and the rows start on 16-byte
    /// boundaries (FP16 rows of a dim that is a multiple of 8 always do; INT8's and FP8's when
    /// aligned to 16 bytes, [`crate::PackedTable::with_row_alignment`], at dims that are multiples
    /// of 16; q8_0's so aligned, or packed rows of whole vec4s, as at dims 224 + 256k and
    /// multiples of 256).
    pub fn gather(format: Format, dim: usize, row_words: usize) -> ShaderId {
        let unit = if format == Format::F16 { 8 } else { 16 };
        if has_wide_reads(format) && dim.is_multiple_of(unit) && row_words.is_multiple_of(4) {
            return ShaderId::GatherWide { format };
        }
        ShaderId::Gather { format, vec4: dim.is_multiple_of(4) }
    }

    /// The kernel, and the format it decodes if it reads a table.
    pub fn kernel(self) -> (&'static Kernel, Option<Format>) {
        use kernels::*;
        match self {
            // FP32 needs no decoder: its vec4 driver loads 16 bytes at a time.
            ShaderId::Gather { format: Format::F32, vec4: true } => (&GATHER_ROWS4_F32, Some(Format::F32)),
            ShaderId::Gather { format, vec4 } => (if vec4 { &GATHER_ROWS4 } else { &GATHER_ROWS }, Some(format)),
            ShaderId::GatherF16 { format, vec4 } => (if vec4 { &GATHER_ROWS4_F16 } else { &GATHER_ROWS_F16 }, Some(format)),
            ShaderId::PackF16 => (&PACK_F16, None),
            // FP16's 16-byte gather unpacks its rows itself, for dims that are multiples of 8.
            ShaderId::GatherWide { format: Format::F16 } => (&GATHER_ROWS8_F16, Some(Format::F16)),
            ShaderId::GatherWide { format } => (&GATHER_ROWS16, Some(format)),
            ShaderId::BagWide { format } => (&BAG16, Some(format)),
            ShaderId::Bag { format: Format::F32, vec4: true } => (&BAG4_F32, Some(Format::F32)),
            ShaderId::Bag { format, vec4 } => (if vec4 { &BAG4 } else { &BAG }, Some(format)),
            ShaderId::Qr { format } => (&QR, Some(format)),
            ShaderId::Rescore { format } => (&RESCORE, Some(format)),
            ShaderId::HashIds => (&HASH_IDS, None),
            ShaderId::Remap => (&REMAP, None),
            ShaderId::LiveProbe => (&LIVE_PROBE, None),
            ShaderId::Scatter => (&SCATTER, None),
            ShaderId::NormalizeRows => (&NORMALIZE_ROWS, None),
            ShaderId::Search(k) => (
                match k {
                    SearchKernel::Hist => &HAMMING_HIST,
                    SearchKernel::Select => &HAMMING_SELECT,
                    SearchKernel::Ties => &HAMMING_TIES,
                    SearchKernel::Scan => &HAMMING_SCAN,
                    SearchKernel::Collect => &HAMMING_COLLECT,
                    SearchKernel::Sort => &SORT_PAIRS,
                    SearchKernel::TopkScan => &HAMMING_TOPK_SCAN,
                    SearchKernel::TopkScan4 => &HAMMING_TOPK_SCAN4,
                    SearchKernel::TopkMerge => &HAMMING_TOPK_MERGE,
                    SearchKernel::TopkScanLong => &HAMMING_TOPK_SCAN_LONG,
                    SearchKernel::TopkScan4Long => &HAMMING_TOPK_SCAN4_LONG,
                    SearchKernel::TopkMergeLong => &HAMMING_TOPK_MERGE_LONG,
                },
                None,
            ),
        }
    }

    /// The table format the kernel decodes, if it reads a table.
    pub fn format(self) -> Option<Format> {
        self.kernel().1
    }

    /// Output values each invocation writes per step.
    pub fn values_per_step(self) -> usize {
        self.kernel().0.values_per_step
    }

    /// A short name for labels and messages: the kernel's, and the format's after a slash.
    pub fn name(self) -> String {
        match self.kernel() {
            (k, Some(format)) => format!("{}/{format}", k.name),
            (k, None) => k.name.to_string(),
        }
    }

    /// The complete WGSL module: helpers, the format's decoder (and its 16-byte reads), the
    /// driver.
    pub fn source(self) -> String {
        let (kernel, format) = self.kernel();
        // A format the GPU path has no decoder for never reaches a kernel: uploads refuse it
        // (`decoders::require`).
        let decoder = match (kernel.decoder, format.and_then(decoders::decoder)) {
            (Decoder::Words, Some(d)) => vec![d.wgsl],
            // A format without 16-byte reads decodes sixteen values as four quads of words.
            (Decoder::Wide, Some(d)) => vec![d.wgsl, d.wide.unwrap_or(Src::BagDecode16.text())],
            _ => vec![],
        };
        kernel.helpers.iter().map(|h| h.text()).chain(decoder).chain([kernel.driver.text()]).collect()
    }

    /// Override constants fixed by the kernel's identity: the driver variant's and the
    /// decoder's. The workgroup shape's (`WG_X`, `WG_Y` or `WG`) are added per pipeline.
    pub fn constants(self) -> Vec<(&'static str, f64)> {
        let (kernel, format) = self.kernel();
        let decoder = format.filter(|_| kernel.decoder != Decoder::None).and_then(decoders::decoder).map_or(&[][..], |d| d.constants);
        kernel.constants.iter().chain(decoder).copied().collect()
    }

    /// [`ShaderId::constants`] with those of the workgroup shape `(x, y)`.
    pub fn constants_for(self, (x, y): (u32, u32)) -> Vec<(&'static str, f64)> {
        let mut c = self.constants();
        match self.kernel().0.shape {
            Shape::Rows => c.extend([("WG_X", x as f64), ("WG_Y", y as f64)]),
            Shape::Flat => c.push(("WG", (x * y) as f64)),
            Shape::Fixed(_) => {}
        }
        c
    }
}

/// Checks that a `#[repr(C)]` host struct lays out its fields as the WGSL struct of the same name
/// in `shader`'s module does, field by field, by name and byte offset, as naga lays it out; and
/// that both have the same size. Fields whose name starts with `_` are padding and may differ.
#[cfg(any(test, feature = "layout-tests"))]
#[macro_export]
#[doc(hidden)]
macro_rules! assert_wgsl_layout {
    ($shader:expr, $ty:ident { $($field:ident),* $(,)? }) => {
        $crate::shaders::check_wgsl_layout(
            $shader,
            stringify!($ty),
            std::mem::size_of::<$ty>(),
            &[$((stringify!($field), std::mem::offset_of!($ty, $field))),*],
        )
    };
}
/// [`assert_wgsl_layout!`]'s check (naga's layout of the WGSL struct against the host's).
#[cfg(any(test, feature = "layout-tests"))]
pub fn check_wgsl_layout(shader: ShaderId, name: &str, size: usize, fields: &[(&str, usize)]) {
    let source = shader.source();
    let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{}: {}", shader.name(), e.emit_to_string(&source)));
    let (members, span) = module
        .types
        .iter()
        .find_map(|(_, t)| match &t.inner {
            naga::TypeInner::Struct { members, span } if t.name.as_deref() == Some(name) => Some((members.clone(), *span)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{}: no struct {name}", shader.name()));
    let wgsl: Vec<(String, usize)> =
        members.iter().filter_map(|m| m.name.clone().map(|n| (n, m.offset as usize))).filter(|(n, _)| !n.starts_with('_')).collect();
    let host: Vec<(String, usize)> = fields.iter().filter(|(n, _)| !n.starts_with('_')).map(|&(n, o)| (n.to_string(), o)).collect();
    assert_eq!(host, wgsl, "{name}: host fields (name, offset) against the WGSL struct's in {}", shader.name());
    assert_eq!(size, span as usize, "{name}: size on the host and in WGSL");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row sentinels and policy codes are one value on each side: `bounds::SKIP_ID`/`ZERO_ID`
    /// and `RowPolicy` on the host, `ROW_SKIP`/`ROW_ZERO` and `POLICY_*` in `gather_common.wgsl`,
    /// which every decoding kernel includes.
    #[test]
    fn row_sentinels_agree_between_host_and_wgsl() {
        let module = naga::front::wgsl::parse_str(Src::GatherCommon.text()).unwrap();
        let value = |name: &str| -> u32 {
            let (_, c) = module.constants.iter().find(|(_, c)| c.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("no {name}"));
            match module.global_expressions[c.init] {
                naga::Expression::Literal(naga::Literal::U32(v)) => v,
                ref e => panic!("{name}: {e:?}"),
            }
        };
        assert_eq!(value("ROW_SKIP"), crate::bounds::SKIP_ID);
        assert_eq!(value("ROW_ZERO"), crate::bounds::ZERO_ID);
        use crate::table::RowPolicy;
        for (name, policy) in [("POLICY_ZERO", RowPolicy::Zero), ("POLICY_CLAMP", RowPolicy::Clamp), ("POLICY_SKIP", RowPolicy::Skip)] {
            assert_eq!(value(name), policy as u32, "{name}");
        }
        for k in [&kernels::BAG, &kernels::GATHER_ROWS, &kernels::GATHER_ROWS4] {
            let driver = k.driver.text();
            assert!(k.helpers.contains(&Src::GatherCommon) && !driver.contains("0xffffffffu") && !driver.contains("0xfffffffeu"), "{}", k.name);
        }
    }
}
