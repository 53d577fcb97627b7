//! Nearest-neighbour search over binary codes: exact Hamming top-k, rescoring of the candidates
//! with a finer table of the same corpus, and exhaustive dot-product search (the ground truth, and
//! asymmetric search of a float query against binary rows). This module checks the arguments; the
//! CPU path's loops are edo-core's ([`crate::cpu::search`]), the oracle of the GPU path in
//! [`crate::gpu`] (`GpuSearch`).
//!
//! - **Codes** are tables of [`Format::Binary`] or [`Format::BinaryScaled`]: `numpy.packbits` bits
//!   (sentence-transformers `ubinary`), imported as they are with [`crate::file::import`]. The
//!   Hamming distance of two rows is the number of differing bits among the first `dim`; bits past
//!   `dim` are always zero, so any `dim ≥ 1` works. It does not depend on the order of the bits
//!   within a byte, so faiss `IndexBinaryFlat` computes the same distances from the same bytes.
//! - **Results** are sorted best first, ties broken by the lower row index, so they are one
//!   well-defined answer that the GPU reproduces exactly. With fewer than `k` rows, every row is
//!   returned.
//! - **Scores** are dot products `Σ qᵢ·x̂ᵢ` in f32, `x̂` the decoded row: normalise rows and
//!   queries first for cosine similarity. Summation order differs between the CPU (eight partial
//!   sums) and the GPU (column order), so scores agree within `2·dim·ε·Σ|qᵢ·x̂ᵢ|`, not bit for bit.

pub mod codes;

pub use codes::{CodeTransform, ItqOptions};
pub use edo_core::cpu::search::{hamming, Neighbors, Scored, MAX_BITS, MAX_K};

use crate::format::{Format, PackedTable};
use crate::Error;
use edo_core::cpu::search::{dot_topk_unchecked, hamming_unchecked, rescore_unchecked};

/// Binary codes of f32 queries (`bit = x > 0`), as the binary format packs table rows.
pub fn binarize(queries: &[f32], dim: usize) -> Result<PackedTable, Error> {
    let n = queries.len().checked_div(dim).unwrap_or(0);
    Ok(PackedTable::quantize(Format::Binary, queries, n, dim)?)
}

/// The binary codes of float `queries`: through `transform` if there is one (its dim must be
/// `dim`), else their signs.
pub(crate) fn query_codes(transform: Option<&CodeTransform>, queries: &[f32], dim: usize) -> Result<PackedTable, Error> {
    match transform {
        None => binarize(queries, dim),
        Some(t) if t.dim() != dim => Err(Error::ShapeMismatch { what: "code transform values per row (the corpus dim)", expected: dim, actual: t.dim() }),
        Some(t) => t.encode(queries),
    }
}

/// The queries rescoring scores when the codes went through `transform`: the queries as given
/// for a table of values, and the transformed queries (`Some`) for a binary table, which is
/// taken to hold the codes themselves (their decoded ±1 or ±scale values live in the transformed
/// space).
pub(crate) fn rescoring_queries(transform: Option<&CodeTransform>, table_format: Format, queries: &[f32]) -> Result<Option<Vec<f32>>, Error> {
    match transform {
        Some(t) if matches!(table_format, Format::Binary | Format::BinaryScaled) => Ok(Some(t.apply(queries)?)),
        _ => Ok(None),
    }
}

/// Whether codes of `format` and `dim` bits can be searched: binary, at most [`MAX_BITS`] bits.
pub fn check_corpus(format: Format, dim: usize) -> Result<(), Error> {
    if !matches!(format, Format::Binary | Format::BinaryScaled) {
        return Err(Error::Unsupported(crate::Unsupported::HammingOfNonBinaryCodes));
    }
    if dim > MAX_BITS {
        return Err(Error::LimitExceeded { what: "bits per code for Hamming search", requested: dim as u64, max: MAX_BITS as u64 });
    }
    Ok(())
}

/// A search of `queries` against a corpus of `format` and `dim` bits, `k` results each.
pub(crate) fn check_codes(format: Format, dim: usize, queries: &PackedTable, k: usize) -> Result<(), Error> {
    check_corpus(format, dim)?;
    check_corpus(queries.format(), queries.dim())?;
    if dim != queries.dim() {
        return Err(Error::ShapeMismatch { what: "query bits (the corpus dim)", expected: dim, actual: queries.dim() });
    }
    check_k(k)
}

pub(crate) fn check_k(k: usize) -> Result<(), Error> {
    if k == 0 {
        return Err(Error::Unsupported(crate::Unsupported::ZeroNeighbours));
    }
    if k > MAX_K {
        return Err(Error::LimitExceeded { what: "k (1 to 1024)", requested: k as u64, max: MAX_K as u64 });
    }
    Ok(())
}

/// Exact Hamming top-k of every query row against every corpus row, on all cores.
///
/// Each query keeps a max-heap of its `k` best (distance, row) pairs while the corpus is scanned
/// in row order, a block of rows (that fits the L1 cache) for all of a worker's queries at a
/// time; a row enters only if it is strictly nearer than the heap's worst, which is exactly the
/// "ties go to the lower row" rule. The distance loop is compiled for the common code widths.
pub fn hamming_topk(corpus: &PackedTable, queries: &PackedTable, k: usize) -> Result<Neighbors, Error> {
    check_codes(corpus.format(), corpus.dim(), queries, k)?;
    Ok(hamming_unchecked(corpus, queries, k))
}

fn check_queries(queries: &[f32], dim: usize) -> Result<usize, Error> {
    check_finite_rows(queries, dim, "query values (a multiple of dim)")
}

/// The rows of `values`, `dim` finite values each (`what` names them in a shape error).
pub(crate) fn check_finite_rows(values: &[f32], dim: usize, what: &'static str) -> Result<usize, Error> {
    if dim == 0 {
        return Err(Error::ZeroDim);
    }
    if !values.len().is_multiple_of(dim) {
        return Err(Error::ShapeMismatch { what, expected: values.len().next_multiple_of(dim), actual: values.len() });
    }
    if let Some(i) = values.iter().position(|x| !x.is_finite()) {
        return Err(Error::NonFinite { row: i / dim, col: i % dim, value: values[i] });
    }
    Ok(values.len() / dim)
}

/// Rescores Hamming candidates: the dot product of each float query with the candidates' rows of
/// `table` (any format: INT8 or FP32 rows of the same corpus, or the binary rows themselves for
/// sentence-transformers' rescoring), keeping the `k` best per query, ties by the lower row.
pub fn rescore(queries: &[f32], candidates: &Neighbors, table: &PackedTable, k: usize) -> Result<Scored, Error> {
    check_k(k)?;
    let nq = check_queries(queries, table.dim())?;
    if nq != candidates.queries() && candidates.k > 0 {
        return Err(Error::ShapeMismatch { what: "queries (one per candidate list)", expected: candidates.queries(), actual: nq });
    }
    crate::Bounds::Error.check(&candidates.ids, table.rows())?;
    Ok(rescore_unchecked(queries, candidates, table, k))
}

/// Hamming top `k × multiplier` of the binarised queries, rescored with `table`: binary search
/// with rescoring in one call. `multiplier = 1` with the binary table itself is plain binary
/// search ordered by the asymmetric score.
pub fn search_rescored(corpus: &PackedTable, queries: &[f32], table: &PackedTable, k: usize, multiplier: usize) -> Result<Scored, Error> {
    search_rescored_with(corpus, None, queries, table, k, multiplier)
}

/// [`search_rescored`] over codes made through `transform` (centred or ITQ codes): the queries go
/// through it before their signs are taken. Rescoring with a table of values (INT8, FP32, …)
/// scores the queries as given; with a binary table (the codes themselves, for asymmetric
/// scores) it scores the transformed queries.
pub fn search_rescored_with(
    corpus: &PackedTable,
    transform: Option<&CodeTransform>,
    queries: &[f32],
    table: &PackedTable,
    k: usize,
    multiplier: usize,
) -> Result<Scored, Error> {
    check_k(k)?;
    if table.rows() != corpus.rows() || table.dim() != corpus.dim() {
        return Err(Error::ShapeMismatch { what: "rows of the rescoring table (the corpus rows)", expected: corpus.rows(), actual: table.rows() });
    }
    check_queries(queries, corpus.dim())?;
    let codes = query_codes(transform, queries, corpus.dim())?;
    let kc = k.saturating_mul(multiplier.max(1)).min(MAX_K * 8);
    check_codes(corpus.format(), corpus.dim(), &codes, 1)?;
    let candidates = hamming_unchecked(corpus, &codes, kc);
    match rescoring_queries(transform, table.format(), queries)? {
        Some(transformed) => rescore(&transformed, &candidates, table, k),
        None => rescore(queries, &candidates, table, k),
    }
}

/// Exhaustive dot-product top-k of float queries against every row of `table` (decoded): the
/// ground truth on an FP32 table, INT8 / INT4 search on quantised ones, and asymmetric search on a
/// binary table (a float query against ±1 or ±scale rows). Best first, ties by the lower row.
pub fn dot_topk(table: &PackedTable, queries: &[f32], k: usize) -> Result<Scored, Error> {
    check_k(k)?;
    check_queries(queries, table.dim())?;
    Ok(dot_topk_unchecked(table, queries, k))
}

/// recall@k of `found` against `truth`: the fraction of each query's true top-`k` ids that are
/// among the first `k` found, averaged over queries.
pub fn recall(found: &[u32], found_k: usize, truth: &[u32], truth_k: usize, k: usize) -> f64 {
    let queries = truth.len().checked_div(truth_k).unwrap_or(0);
    if queries == 0 || k == 0 {
        return 0.0;
    }
    let (kf, kt) = (k.min(found_k), k.min(truth_k));
    let mut hits = 0usize;
    for q in 0..queries {
        let t = &truth[q * truth_k..q * truth_k + kt];
        let f = &found[q * found_k..q * found_k + kf];
        hits += t.iter().filter(|id| f.contains(id)).count();
    }
    hits as f64 / (queries * kt) as f64
}
