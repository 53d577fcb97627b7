//! Nearest-neighbour search over binary codes on the CPU path — exact Hamming top-k, rescoring of
//! candidates by dot product, exhaustive dot-product top-k — with no checks: `edo::search` checks
//! the arguments (formats, shapes, `k`, finite queries, ids in range) and calls these. Results are
//! sorted best first, ties broken by the lower row, as the GPU path's are.

use std::marker::PhantomData;

use crate::format::{Codec, CodecVisitor, PackedTable};
use crate::simd::{Kernel, Lanes};

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

/// Exact Hamming top-`k` of every query row against every corpus row, on all cores, for any `k`
/// (rescoring asks for up to 8 × [`MAX_K`] candidates). Both tables must hold codes of the same
/// number of bits.
///
/// Each query keeps a max-heap of its `k` best (distance, row) pairs while the corpus is scanned
/// in row order, a block of rows (that fits the L1 cache) for all of a worker's queries at a
/// time; a row enters only if it is strictly nearer than the heap's worst, which is exactly the
/// "ties go to the lower row" rule. The distance loop is compiled for the common code widths.
///
/// # Panics
/// If the queries' codes are narrower than the corpus's (`edo::search` checks the shapes).
pub fn hamming_unchecked(corpus: &PackedTable, queries: &PackedTable, k: usize) -> Neighbors {
    let k_eff = k.min(corpus.rows());
    let mut out: Vec<(u32, u32)> = vec![(0, 0); queries.rows() * k_eff];
    if k_eff > 0 {
        crate::par::for_each_chunk_mut(&mut out, k_eff, 1, |first_q, block| {
            let nq = block.len() / k_eff;
            let cw = corpus.format().code_words(corpus.dim());
            let args = (corpus, queries, first_q, nq, k_eff, block);
            match cw {
                1 => crate::simd::run(HammingBlock::<1>(args)),
                2 => crate::simd::run(HammingBlock::<2>(args)),
                4 => crate::simd::run(HammingBlock::<4>(args)),
                8 => crate::simd::run(HammingBlock::<8>(args)),
                12 => crate::simd::run(HammingBlock::<12>(args)),
                16 => crate::simd::run(HammingBlock::<16>(args)),
                24 => crate::simd::run(HammingBlock::<24>(args)),
                32 => crate::simd::run(HammingBlock::<32>(args)),
                _ => crate::simd::run(HammingBlock::<0>(args)),
            }
            None::<()>
        });
    }
    let (ids, distances) = out.into_iter().map(|(d, id)| (id, d)).unzip();
    Neighbors { k: k_eff, ids, distances }
}

/// The arguments of [`hamming_block`]: corpus, queries, first query, query count, k, output.
type HammingArgs<'a> = (&'a PackedTable, &'a PackedTable, usize, usize, usize, &'a mut [(u32, u32)]);

/// [`hamming_block`] as a [`Kernel`].
struct HammingBlock<'a, const CW: usize>(HammingArgs<'a>);

impl<const CW: usize> Kernel for HammingBlock<'_, CW> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, _: L) {
        hamming_block::<CW>(self.0)
    }
}

/// Top-`k` of `nq` queries from `first_q` into `out` as (distance, row), sorted. `CW` is the
/// number of code words when it is one of the compiled widths, 0 otherwise.
#[inline(always)]
fn hamming_block<const CW: usize>((corpus, queries, first_q, nq, k, out): HammingArgs<'_>) {
    let n = corpus.rows();
    let cw = corpus.format().code_words(corpus.dim());
    let stride = corpus.row_words();
    let words = corpus.words();
    let mut tops: Vec<TopK> = (0..nq).map(|_| TopK::new(k)).collect();
    let avx512 = avx512::available() && !NO_AVX512.load(std::sync::atomic::Ordering::Relaxed);
    // Rows per block: 32 KiB of codes, read from L1 by every query of the block.
    let block_rows = ((32 << 10) / (4 * stride)).max(16);
    for r0 in (0..n).step_by(block_rows) {
        let r1 = (r0 + block_rows).min(n);
        let rows = &words[r0 * stride..r1 * stride];
        for (j, top) in tops.iter_mut().enumerate() {
            let q = &queries.row(first_q + j)[..cw];
            if CW == 0 {
                for (i, row) in rows.chunks_exact(stride).enumerate() {
                    let d = hamming(q, &row[..cw]);
                    if d < top.worst {
                        top.offer(d, r0 + i);
                    }
                }
            } else if avx512 && (CW.is_multiple_of(8) || CW == 2 || CW == 4) && stride == CW {
                // SAFETY: the CPU has AVX-512F and VPOPCNTDQ (checked once above); the rows slice
                // holds whole rows of CW words.
                unsafe { avx512::scan::<CW>(q, rows, r0, top) };
            } else {
                let q = Fixed::<CW>::new(q);
                for (i, row) in rows.chunks_exact(stride).enumerate() {
                    let d = q.distance(&row[..CW]);
                    if d < top.worst {
                        top.offer(d, r0 + i);
                    }
                }
            }
        }
    }
    for (top, res) in tops.into_iter().zip(out.chunks_exact_mut(k)) {
        res.copy_from_slice(&top.heap.into_sorted_vec());
    }
}

/// The `k` nearest rows met so far: a max-heap of (distance, row), and the distance a row must
/// beat to enter (rows come in increasing order, so a tie never enters: ties go to the lower row).
struct TopK {
    heap: std::collections::BinaryHeap<(u32, u32)>,
    k: usize,
    worst: u32,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK { heap: std::collections::BinaryHeap::with_capacity(k + 1), k, worst: u32::MAX }
    }

    #[cold]
    fn offer(&mut self, d: u32, r: usize) {
        if self.heap.len() == self.k {
            self.heap.pop();
        }
        self.heap.push((d, r as u32));
        if self.heap.len() == self.k {
            self.worst = self.heap.peek().map_or(u32::MAX, |p| p.0);
        }
    }
}

/// Turns the AVX-512 scan off (tests compare it with the portable one).
static NO_AVX512: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Hamming distances of eight rows at a time with AVX-512 VPOPCNTDQ, where the CPU has it.
mod avx512 {
    use super::TopK;

    pub fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Offers every row of `rows` (whole rows of `CW` words, `CW` 2, 4 or a multiple of 8, row
    /// `r0` first) to `top`, in row order.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512 VPOPCNTDQ.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vpopcntdq")]
    pub unsafe fn scan<const CW: usize>(q: &[u32], rows: &[u32], r0: usize, top: &mut TopK) {
        use std::arch::x86_64::*;
        let n = rows.len() / CW;
        let segs = CW / 8;
        let p = rows.as_ptr();
        // Lanes of the pairwise sums that make each row's total (see below).
        let lo = _mm512_setr_epi64(0, 4, 1, 5, 8, 12, 9, 13);
        let hi = _mm512_setr_epi64(2, 6, 3, 7, 10, 14, 11, 15);
        // Rows of two words: the query in every 64-bit lane. Rows of four: both halves of a row
        // counted, then summed and put in row order.
        let q64 = if CW == 2 { _mm512_set1_epi64((q[0] as u64 | (q[1] as u64) << 32) as i64) } else { _mm512_setzero_si512() };
        let q128 = if CW == 4 { _mm512_broadcast_i32x4(_mm_loadu_si128(q.as_ptr() as *const __m128i)) } else { _mm512_setzero_si512() };
        let order4 = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
        let mut i = 0;
        while i + 8 <= n {
            let mut sums = _mm512_setzero_si512();
            if CW == 2 {
                sums = _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(p.add(i * 2) as *const __m512i), q64));
            } else if CW == 4 {
                let a = _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(p.add(i * 4) as *const __m512i), q128));
                let b = _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(p.add(i * 4 + 16) as *const __m512i), q128));
                // [r0, r4, r1, r5, r2, r6, r3, r7], then in row order.
                let pairs = _mm512_add_epi64(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
                sums = _mm512_permutexvar_epi64(order4, pairs);
            }
            for s in 0..segs {
                let qz = _mm512_broadcast_i64x4(_mm256_loadu_si256(q.as_ptr().add(8 * s) as *const __m256i));
                // Segment s of rows i + 2m and i + 2m + 1 in one register, XOR the query, count.
                let pair = |m: usize| {
                    let a = _mm256_loadu_si256(p.add((i + 2 * m) * CW + 8 * s) as *const __m256i);
                    let b = _mm256_loadu_si256(p.add((i + 2 * m + 1) * CW + 8 * s) as *const __m256i);
                    _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b), qz))
                };
                let (a, b, c, d) = (pair(0), pair(1), pair(2), pair(3));
                // Adjacent words: [a0+a1, b0+b1, a2+a3, b2+b3, a4+a5, b4+b5, a6+a7, b6+b7].
                let ab = _mm512_add_epi64(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
                let cd = _mm512_add_epi64(_mm512_unpacklo_epi64(c, d), _mm512_unpackhi_epi64(c, d));
                // Row i = ab0 + ab2, i+1 = ab4 + ab6, i+2 = ab1 + ab3, i+3 = ab5 + ab7, then cd.
                let rows8 = _mm512_add_epi64(_mm512_permutex2var_epi64(ab, lo, cd), _mm512_permutex2var_epi64(ab, hi, cd));
                sums = _mm512_add_epi64(sums, rows8);
            }
            let below = _mm512_cmplt_epu64_mask(sums, _mm512_set1_epi64(top.worst as i64));
            if below != 0 {
                let mut d = [0u64; 8];
                _mm512_storeu_si512(d.as_mut_ptr() as *mut __m512i, sums);
                for (j, &dj) in d.iter().enumerate() {
                    if (dj as u32) < top.worst {
                        top.offer(dj as u32, r0 + i + j);
                    }
                }
            }
            i += 8;
        }
        for r in i..n {
            let d = super::hamming(q, &rows[r * CW..(r + 1) * CW]);
            if d < top.worst {
                top.offer(d, r0 + r);
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub unsafe fn scan<const CW: usize>(_: &[u32], _: &[u32], _: usize, _: &mut TopK) {
        unreachable!("available() is false")
    }
}

/// A query of exactly `CW` code words, as 64-bit words, for [`hamming`] unrolled.
struct Fixed<const CW: usize> {
    q: [u32; CW],
}

impl<const CW: usize> Fixed<CW> {
    #[inline(always)]
    fn new(q: &[u32]) -> Self {
        Fixed { q: q.try_into().expect("CW words") }
    }

    #[inline(always)]
    fn distance(&self, row: &[u32]) -> u32 {
        let b: &[u32; CW] = row.try_into().expect("CW words");
        let a = &self.q;
        let mut s = 0u32;
        let mut i = 0;
        while i + 1 < CW {
            let x = a[i] as u64 | (a[i + 1] as u64) << 32;
            let y = b[i] as u64 | (b[i + 1] as u64) << 32;
            s += (x ^ y).count_ones();
            i += 2;
        }
        if CW % 2 == 1 {
            s += (a[CW - 1] ^ b[CW - 1]).count_ones();
        }
        s
    }
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
pub fn dot(q: &[f32], x: &[f32]) -> f32 {
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

/// Rescores Hamming candidates: the dot product of each query (`dim` values, the table's) with
/// its candidates' rows of `table`, keeping the `k` best, ties by the lower row. The queries must
/// be one per candidate list and every candidate a row of `table`.
///
/// # Panics
/// If a candidate is not a row of `table` or a query list is missing (`edo::search` checks both).
pub fn rescore_unchecked(queries: &[f32], candidates: &Neighbors, table: &PackedTable, k: usize) -> Scored {
    let nq = queries.len().checked_div(table.dim()).unwrap_or(0);
    let dim = table.dim();
    let k_eff = k.min(candidates.k);
    let mut out: Vec<(u32, f32)> = vec![(0, 0.0); nq * k_eff];
    if k_eff == 0 {
        return Scored { k: 0, ids: Vec::new(), scores: Vec::new() };
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
    split_scored(out, k_eff)
}

fn split_scored(out: Vec<(u32, f32)>, k: usize) -> Scored {
    let (ids, scores) = out.into_iter().unzip();
    Scored { k, ids, scores }
}

/// Exhaustive dot-product top-`k` of float queries (`dim` values each, the table's) against every
/// row of `table`, decoded: best first, ties by the lower row.
pub fn dot_topk_unchecked(table: &PackedTable, queries: &[f32], k: usize) -> Scored {
    let dim = table.dim();
    let nq = queries.len().checked_div(dim).unwrap_or(0);
    let n = table.rows();
    let k_eff = k.min(n);
    let mut out: Vec<(u32, f32)> = vec![(0, 0.0); nq * k_eff];
    if k_eff == 0 {
        return Scored { k: 0, ids: Vec::new(), scores: Vec::new() };
    }
    crate::par::for_each_chunk_mut(&mut out, k_eff, 1, |first, block| {
        let nb = block.len() / k_eff;
        table.format().visit(DotBlocks((table, &queries[first * dim..(first + nb) * dim], k_eff, block)));
        None::<()>
    });
    split_scored(out, k_eff)
}

/// [`DotBlock`] for the codec of a runtime format.
struct DotBlocks<'a>((&'a PackedTable, &'a [f32], usize, &'a mut [(u32, f32)]));

impl CodecVisitor for DotBlocks<'_> {
    type Output = ();
    fn visit<C: Codec>(self) {
        crate::simd::run(DotBlock::<C>(PhantomData, self.0))
    }
}

/// [`dot_block`] as a [`Kernel`].
struct DotBlock<'a, C>(PhantomData<C>, (&'a PackedTable, &'a [f32], usize, &'a mut [(u32, f32)]));

impl<C: Codec> Kernel for DotBlock<'_, C> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, _: L) {
        dot_block::<C>(self.1)
    }
}

#[inline(always)]
fn dot_block<C: Codec>((table, queries, k, out): (&PackedTable, &[f32], usize, &mut [(u32, f32)])) {
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
                // Through the format's one shared decoder (its level picked per row), not one
                // inlined here: a copy per format in this kernel too was size in every page's
                // .wasm, for a loop that spends its time in the dot products.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 scan and the portable one give the same neighbours (on a CPU with AVX-512;
    /// elsewhere both runs take the portable path).
    #[test]
    fn avx512_and_portable_scans_agree() {
        // 64 and 128 bits: many ties among random codes, broken by row on both paths.
        for bits in [256, 512, 1000, 768, 64, 128, 33, 96] {
            let corpus = crate::synth::random_codes(5003, bits, 1);
            let queries = crate::synth::random_codes(9, bits, 2);
            let fast = hamming_unchecked(&corpus, &queries, 37);
            NO_AVX512.store(true, std::sync::atomic::Ordering::Relaxed);
            let portable = hamming_unchecked(&corpus, &queries, 37);
            NO_AVX512.store(false, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(fast, portable, "{bits} bits");
        }
    }
}
