//! Nearest-neighbour search over binary codes: exact Hamming top-k, rescoring of the candidates
//! with a finer table of the same corpus, and exhaustive dot-product search (the ground truth, and
//! asymmetric search of a float query against binary rows). The CPU path here is the oracle of the
//! GPU path in [`crate::gpu`] (`GpuSearch`).
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

use crate::format::{dispatch, Codec, Format, PackedTable};
use crate::Error;

/// The largest `k` a search accepts.
pub const MAX_K: usize = 1024;
/// The most bits per code a Hamming search accepts (the GPU keeps a histogram of the distances in
/// 16 KiB of workgroup memory).
pub const MAX_BITS: usize = 4095;

/// Hamming neighbours: for each query, `k` rows with their distances, nearest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbors {
    /// Results per query (`min(k, rows)`).
    pub k: usize,
    /// `queries × k` row ids.
    pub ids: Vec<u32>,
    /// `queries × k` Hamming distances.
    pub distances: Vec<u32>,
}

/// Scored neighbours: for each query, `k` rows with their scores, highest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    /// Results per query (`min(k, candidates)`).
    pub k: usize,
    /// `queries × k` row ids.
    pub ids: Vec<u32>,
    /// `queries × k` dot products.
    pub scores: Vec<f32>,
}

impl Neighbors {
    /// The ids of query `q`.
    pub fn ids_of(&self, q: usize) -> &[u32] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }
    /// The number of queries.
    pub fn queries(&self) -> usize {
        self.ids.len().checked_div(self.k).unwrap_or(0)
    }
}

impl Scored {
    /// The ids of query `q`.
    pub fn ids_of(&self, q: usize) -> &[u32] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }
    /// The number of queries.
    pub fn queries(&self) -> usize {
        self.ids.len().checked_div(self.k).unwrap_or(0)
    }
}

/// Binary codes of f32 queries (`bit = x > 0`), as the binary format packs table rows.
pub fn binarize(queries: &[f32], dim: usize) -> Result<PackedTable, Error> {
    let n = if dim == 0 { 0 } else { queries.len() / dim };
    PackedTable::quantize(Format::Binary, queries, n, dim)
}

pub(crate) fn check_codes(corpus: &PackedTable, queries: &PackedTable, k: usize) -> Result<(), Error> {
    for t in [corpus, queries] {
        if !matches!(t.format(), Format::Binary | Format::BinaryScaled) {
            return Err(Error::Unsupported { what: "Hamming search needs binary codes (Format::Binary or BinaryScaled)" });
        }
    }
    if corpus.dim() != queries.dim() {
        return Err(Error::ShapeMismatch { what: "query bits (the corpus dim)", expected: corpus.dim(), actual: queries.dim() });
    }
    if corpus.dim() > MAX_BITS {
        return Err(Error::LimitExceeded { what: "bits per code for Hamming search", requested: corpus.dim() as u64, max: MAX_BITS as u64 });
    }
    check_k(k)
}

pub(crate) fn check_k(k: usize) -> Result<(), Error> {
    if k == 0 || k > MAX_K {
        return Err(Error::LimitExceeded { what: "k (1 to 1024)", requested: k as u64, max: MAX_K as u64 });
    }
    Ok(())
}

/// Exact Hamming top-k of every query row against every corpus row, on all cores.
///
/// Distances are counted into a histogram while they are computed; the `k`-th smallest distance
/// is read off it, and one pass over the stored distances keeps every row nearer than that and the
/// lowest-indexed rows at it. Linear in the corpus, whatever `k`.
pub fn hamming_topk(corpus: &PackedTable, queries: &PackedTable, k: usize) -> Result<Neighbors, Error> {
    check_codes(corpus, queries, k)?;
    Ok(hamming_unchecked(corpus, queries, k))
}

/// Hamming top-`k` for any `k` (rescoring asks for up to 8 × [`MAX_K`] candidates).
fn hamming_unchecked(corpus: &PackedTable, queries: &PackedTable, k: usize) -> Neighbors {
    let k_eff = k.min(corpus.rows());
    let mut out: Vec<(u32, u32)> = vec![(0, 0); queries.rows() * k_eff];
    if k_eff > 0 {
        // Each worker takes a block of queries; its queries share each pass over the corpus.
        crate::par::for_each_chunk_mut(&mut out, k_eff, 1, |first_q, block| {
            let nq = block.len() / k_eff;
            super::cpu::simd(|| hamming_block(corpus, queries, first_q, nq, k_eff, block));
            None::<()>
        });
    }
    let (ids, distances) = out.into_iter().unzip();
    Neighbors { k: k_eff, ids, distances }
}

/// Queries sharing one pass over the corpus (bounded so their distances stay within ~64 MiB).
fn queries_per_pass(n: usize) -> usize {
    ((64 << 20) / (2 * n.max(1))).clamp(1, 8)
}

#[inline(always)]
fn hamming_block(corpus: &PackedTable, queries: &PackedTable, first_q: usize, nq: usize, k: usize, out: &mut [(u32, u32)]) {
    let n = corpus.rows();
    let cw = corpus.format().code_words(corpus.dim());
    let bins = corpus.dim() + 1;
    let qb = queries_per_pass(n);
    const ROWS: usize = 4096;
    let mut dist = vec![0u16; qb * n];
    let mut hist = vec![0u32; qb * bins];
    for q0 in (0..nq).step_by(qb) {
        let m = qb.min(nq - q0);
        hist.fill(0);
        for r0 in (0..n).step_by(ROWS) {
            let r1 = (r0 + ROWS).min(n);
            for j in 0..m {
                let q = &queries.row(first_q + q0 + j)[..cw];
                let d = &mut dist[j * n..(j + 1) * n];
                let h = &mut hist[j * bins..(j + 1) * bins];
                for r in r0..r1 {
                    let x = hamming(q, &corpus.row(r)[..cw]);
                    d[r] = x as u16;
                    h[x as usize] += 1;
                }
            }
        }
        for j in 0..m {
            let (threshold, less) = threshold(&hist[j * bins..(j + 1) * bins], k);
            let res = &mut out[(q0 + j) * k..(q0 + j + 1) * k];
            collect(&dist[j * n..(j + 1) * n], threshold, less, res);
        }
    }
}

/// The `k`-th smallest distance and the number of distances below it.
pub(crate) fn threshold(hist: &[u32], k: usize) -> (u32, usize) {
    let mut below = 0usize;
    for (d, &c) in hist.iter().enumerate() {
        if below + c as usize >= k {
            return (d as u32, below);
        }
        below += c as usize;
    }
    unreachable!("k ≤ rows, and the histogram counts every row")
}

/// Rows nearer than `threshold`, then the lowest-indexed rows at it, sorted by (distance, row).
fn collect(dist: &[u16], threshold: u32, less: usize, out: &mut [(u32, u32)]) {
    let need_eq = out.len() - less;
    let (mut n_less, mut n_eq) = (0, 0);
    for (r, &d) in dist.iter().enumerate() {
        let d = d as u32;
        if d < threshold {
            out[n_less] = (r as u32, d);
            n_less += 1;
        } else if d == threshold && n_eq < need_eq {
            out[less + n_eq] = (r as u32, d);
            n_eq += 1;
        }
    }
    // Rows were met in index order: a stable sort by distance leaves ties by index.
    out[..less].sort_by_key(|&(_, d)| d);
}

/// Number of differing bits of two code rows.
#[inline(always)]
pub fn hamming(a: &[u32], b: &[u32]) -> u32 {
    let mut s = 0u32;
    let (a2, b2) = (a.chunks_exact(2), b.chunks_exact(2));
    let (ra, rb) = (a2.remainder(), b2.remainder());
    for (x, y) in a2.zip(b2) {
        let x = x[0] as u64 | (x[1] as u64) << 32;
        let y = y[0] as u64 | (y[1] as u64) << 32;
        s += (x ^ y).count_ones();
    }
    for (x, y) in ra.iter().zip(rb) {
        s += (x ^ y).count_ones();
    }
    s
}

/// Dot product of a query with a decoded row in f32: eight interleaved partial sums (so it
/// vectorises), added pairwise at the end.
#[inline(always)]
pub(crate) fn dot(q: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (q8, x8) = (q.chunks_exact(8), x.chunks_exact(8));
    let tail: f32 = q8.remainder().iter().zip(x8.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in q8.zip(x8) {
        for i in 0..8 {
            acc[i] += a[i] * b[i];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn check_queries(queries: &[f32], dim: usize) -> Result<usize, Error> {
    if dim == 0 {
        return Err(Error::ZeroDim);
    }
    if queries.len() % dim != 0 {
        return Err(Error::ShapeMismatch { what: "query values (a multiple of dim)", expected: queries.len().next_multiple_of(dim), actual: queries.len() });
    }
    if let Some(i) = queries.iter().position(|x| !x.is_finite()) {
        return Err(Error::NonFinite { row: i / dim, col: i % dim, value: queries[i] });
    }
    Ok(queries.len() / dim)
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
    let dim = table.dim();
    let k_eff = k.min(candidates.k);
    let mut out: Vec<(u32, f32)> = vec![(0, 0.0); nq * k_eff];
    if k_eff == 0 {
        return Ok(Scored { k: 0, ids: Vec::new(), scores: Vec::new() });
    }
    crate::par::for_each_chunk_mut(&mut out, k_eff, 1, |first, block| {
        let mut row = vec![0f32; dim];
        let mut scored: Vec<(u32, f32)> = Vec::with_capacity(candidates.k);
        for (j, res) in block.chunks_exact_mut(k_eff).enumerate() {
            let q = first + j;
            let query = &queries[q * dim..(q + 1) * dim];
            scored.clear();
            for &id in candidates.ids_of(q) {
                table.decode_row_into(id as usize, &mut row);
                scored.push((id, dot(query, &row)));
            }
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            res.copy_from_slice(&scored[..k_eff]);
        }
        None::<()>
    });
    Ok(split_scored(out, k_eff))
}

fn split_scored(out: Vec<(u32, f32)>, k: usize) -> Scored {
    let (ids, scores) = out.into_iter().unzip();
    Scored { k, ids, scores }
}

/// Hamming top `k × multiplier` of the binarised queries, rescored with `table`: binary search
/// with rescoring in one call. `multiplier = 1` with the binary table itself is plain binary
/// search ordered by the asymmetric score.
pub fn search_rescored(corpus: &PackedTable, queries: &[f32], table: &PackedTable, k: usize, multiplier: usize) -> Result<Scored, Error> {
    check_k(k)?;
    if table.rows() != corpus.rows() || table.dim() != corpus.dim() {
        return Err(Error::ShapeMismatch { what: "rows of the rescoring table (the corpus rows)", expected: corpus.rows(), actual: table.rows() });
    }
    check_queries(queries, corpus.dim())?;
    let codes = binarize(queries, corpus.dim())?;
    let kc = k.saturating_mul(multiplier.max(1)).min(MAX_K * 8);
    check_codes(corpus, &codes, 1)?;
    let candidates = hamming_unchecked(corpus, &codes, kc);
    rescore(queries, &candidates, table, k)
}

/// Exhaustive dot-product top-k of float queries against every row of `table` (decoded): the
/// ground truth on an FP32 table, INT8 / INT4 search on quantised ones, and asymmetric search on a
/// binary table (a float query against ±1 or ±scale rows). Best first, ties by the lower row.
pub fn dot_topk(table: &PackedTable, queries: &[f32], k: usize) -> Result<Scored, Error> {
    check_k(k)?;
    let dim = table.dim();
    let nq = check_queries(queries, dim)?;
    let n = table.rows();
    let k_eff = k.min(n);
    let mut out: Vec<(u32, f32)> = vec![(0, 0.0); nq * k_eff];
    if k_eff == 0 {
        return Ok(Scored { k: 0, ids: Vec::new(), scores: Vec::new() });
    }
    crate::par::for_each_chunk_mut(&mut out, k_eff, 1, |first, block| {
        let nb = block.len() / k_eff;
        dispatch!(table.format(), C => super::cpu::simd(|| dot_block::<C>(table, &queries[first * dim..(first + nb) * dim], k_eff, block)));
        None::<()>
    });
    Ok(split_scored(out, k_eff))
}

#[inline(always)]
fn dot_block<C: Codec>(table: &PackedTable, queries: &[f32], k: usize, out: &mut [(u32, f32)]) {
    let dim = table.dim();
    let n = table.rows();
    const ROWS: usize = 256;
    // Queries scored together: each decoded block of rows serves all of them; their scores stay
    // within ~64 MiB.
    let per_pass = ((16 << 20) / n.max(1)).clamp(1, 64);
    let mut decoded = vec![0f32; ROWS * dim];
    let mut scores = vec![0f32; per_pass.min(queries.len() / dim) * n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    for (queries, out) in queries.chunks(per_pass * dim).zip(out.chunks_mut(per_pass * k)) {
        for r0 in (0..n).step_by(ROWS) {
            let r1 = (r0 + ROWS).min(n);
            for (r, dst) in (r0..r1).zip(decoded.chunks_exact_mut(dim)) {
                C::decode_row(table.row(r), dst);
            }
            for (q, query) in queries.chunks_exact(dim).enumerate() {
                for (r, x) in (r0..r1).zip(decoded.chunks_exact(dim)) {
                    scores[q * n + r] = dot(query, x);
                }
            }
        }
        for (q, res) in out.chunks_exact_mut(k).enumerate() {
            let s = &scores[q * n..(q + 1) * n];
            order.clear();
            order.extend(0..n as u32);
            let better = |a: &u32, b: &u32| s[*b as usize].total_cmp(&s[*a as usize]).then(a.cmp(b));
            if k < n {
                order.select_nth_unstable_by(k - 1, better);
            }
            order[..k].sort_by(better);
            for (o, &id) in res.iter_mut().zip(&order[..k]) {
                *o = (id, s[id as usize]);
            }
        }
    }
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
