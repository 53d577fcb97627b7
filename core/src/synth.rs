//! Deterministic synthetic data: the built-in default table of the demo and the benchmark, and
//! the random tables of the tests. Same seed, same bits, on every platform.

use crate::{Error, Format, PackedTable};

/// SplitMix64: tiny, fast, and good enough for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (the same seed, the same numbers, on every platform).
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in [0, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u32() as u64 * n as u64) >> 32) as u32
    }
    /// Standard normal: `rand_distr`'s ziggurat, which needs one draw and no transcendental
    /// function for about 99 % of values (Box–Muller's logarithm and cosine per value made the
    /// browser demo's default table slow to generate).
    pub fn normal(&mut self) -> f32 {
        rand_distr::Distribution::<f32>::sample(&rand_distr::StandardNormal, self)
    }
}

impl rand_core::RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        Rng::next_u32(self)
    }
    fn next_u64(&mut self) -> u64 {
        Rng::next_u64(self)
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dst)
    }
}

/// A `rows × dim` table that looks like trained embeddings: each row a Gaussian vector with its
/// own scale (0.02–0.2) and offset, as real embedding rows differ in norm. Deterministic in `seed`;
/// generated on all cores natively (each block of rows has its own stream).
pub fn embedding_table(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut data = vec![0f32; rows * dim];
    fill_embedding_table(&mut data, dim, seed);
    data
}

/// [`embedding_table`] as an FP32 [`PackedTable`], generated in place and allocated fallibly: a
/// shape too large for memory is [`Error::HostOutOfMemory`] or [`Error::LimitExceeded`], not an
/// abort, which is what the browser needs (a page can ask for any shape).
pub fn embedding_packed(rows: usize, dim: usize, seed: u64) -> Result<PackedTable, Error> {
    let mut table = PackedTable::zeroed(Format::F32, rows, dim, "synthetic table")?;
    fill_embedding_table(bytemuck::cast_slice_mut(table.words_mut()), dim, seed);
    Ok(table)
}

/// Writes the rows of [`embedding_table`] into `data` (whole rows of `dim` values).
pub fn fill_embedding_table(data: &mut [f32], dim: usize, seed: u64) {
    if dim == 0 {
        return;
    }
    crate::par::for_each_chunk_mut(data, dim, 4096, |first_row, block| {
        for (i, row) in block.chunks_exact_mut(dim).enumerate() {
            let mut rng = Rng::new(seed ^ ((first_row + i) as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
            let scale = 0.02 + 0.18 * rng.next_f32();
            let offset = 0.01 * rng.normal();
            for x in row.iter_mut() {
                *x = offset + scale * rng.normal();
            }
        }
        None::<()>
    });
}

/// `n` ids uniform in `[0, rows)`, deterministic in `seed`.
pub fn uniform_ids(n: usize, rows: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.below(rows as u32)).collect()
}

/// `rows` unit vectors in clusters of about 20 (a Gaussian centre per cluster plus noise of 0.6
/// its per-value scale): neighbours are mostly cluster mates, as with real sentence embeddings,
/// where binary search with rescoring is meant to work. Deterministic in `seed`.
pub fn clustered(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let clusters = (rows / 20).max(1);
    let centers: Vec<f32> = (0..clusters * dim).map(|_| rng.normal()).collect();
    let mut out = Vec::with_capacity(rows * dim);
    for _ in 0..rows {
        let c = rng.below(clusters as u32) as usize;
        let start = out.len();
        out.extend(centers[c * dim..(c + 1) * dim].iter().map(|&x| x + 0.6 * rng.normal()));
        crate::synth::normalize(&mut out[start..]);
    }
    out
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// `rows` random binary codes of `bits` bits (each bit a fair coin), deterministic in `seed`.
pub fn random_codes(rows: usize, bits: usize, seed: u64) -> crate::PackedTable {
    let format = crate::Format::Binary;
    let cw = format.code_words(bits);
    let mut words = vec![0u32; rows * cw];
    // Bits past `bits` stay zero, as the format requires.
    let last_mask = (32 * cw.saturating_sub(1)..bits).fold(0u32, |m, i| m | 1 << crate::format::bit_shift(i));
    if cw > 0 {
        crate::par::for_each_chunk_mut(&mut words, cw, 4096, |first, block| {
            let mut rng = Rng::new(seed ^ (first as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for row in block.chunks_exact_mut(cw) {
                for w in row.iter_mut() {
                    *w = rng.next_u32();
                }
                row[cw - 1] &= last_mask;
            }
            None::<()>
        });
    }
    crate::PackedTable::from_words(format, rows, bits.max(1), words).expect("sizes computed above")
}

/// `n` ids over `rows` rows drawn from a Zipf distribution of exponent `s` > 0 (rank k has
/// probability ∝ k^−s), the shape of real id streams: a few hot rows take most lookups.
/// Deterministic in `seed`. Ranks are spread over the table by a fixed bijection
/// (`rank · P mod rows`, `P` prime to `rows`), so the hot rows are not simply the first ones.
///
/// Sampling is rejection-inversion against the continuous envelope `min(1, x^−s)`, which accepts
/// rank k with probability exactly k^−s times a constant, in O(1) per id for any `rows`.
pub fn zipf_ids(n: usize, rows: usize, s: f64, seed: u64) -> Vec<u32> {
    assert!(rows >= 1 && rows as u64 <= 1 << 32, "zipf_ids needs 1 ≤ rows ≤ 2^32");
    assert!(s > 0.0 && s.is_finite(), "zipf_ids needs a finite exponent > 0");
    let nf = rows as f64;
    let one_minus = 1.0 - s;
    let unit = one_minus.abs() < 1e-12;
    // Area under the envelope on [0, rows].
    let total = if unit { 1.0 + nf.ln() } else { (nf.powf(one_minus) - s) / one_minus };
    let inverse = |p: f64| {
        let a = p * total;
        if a <= 1.0 {
            a
        } else if unit {
            (a - 1.0).exp()
        } else {
            (a * one_minus + s).powf(1.0 / one_minus)
        }
    };
    let mut stride = 2_654_435_761u64 % rows as u64;
    while gcd(stride.max(1), rows as u64) != 1 {
        stride += 1;
    }
    let stride = stride.max(1);
    let mut rng = Rng::new(seed);
    let unit_f64 = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (0..n)
        .map(|_| loop {
            let x = inverse(unit_f64(&mut rng));
            let k = (x + 1.0).floor().min(nf);
            let mut ratio = k.powf(-s);
            if x > 1.0 {
                ratio *= x.powf(s);
            }
            if unit_f64(&mut rng) < ratio {
                let rank = k as u64 - 1;
                break ((rank * stride) % rows as u64) as u32;
            }
        })
        .collect()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Zipf traffic with a scan mixed in: each of `n` ids is, with probability `scan_share`, the next
/// row of a cursor that walks the whole table in order (a batch job reading every row once), else
/// a [`zipf_ids`] draw. The scan's rows are each read once per pass: a cache that admits every
/// miss lets them push hot rows out. Deterministic in `seed`.
pub fn scan_mixed_zipf_ids(n: usize, rows: usize, s: f64, scan_share: f64, seed: u64) -> Vec<u32> {
    let zipf = zipf_ids(n, rows, s, seed);
    let mut rng = Rng::new(seed ^ 0x5ca7);
    let mut cursor = (rng.next_u64() % rows as u64) as u32;
    let threshold = (scan_share.clamp(0.0, 1.0) * u32::MAX as f64) as u32;
    zipf.into_iter()
        .map(|id| {
            if rng.next_u32() < threshold {
                cursor = if cursor as usize + 1 >= rows { 0 } else { cursor + 1 };
                cursor
            } else {
                id
            }
        })
        .collect()
}

/// Zipf traffic whose hot set moves: every `period` ids, every rank's row shifts to another
/// (`id + k · rows / 3 + k` for the k-th period, mod rows), so the rows that were hot are cold and
/// new ones are hot — popularity that drifts, as trending items do. Deterministic in `seed`.
pub fn drifting_zipf_ids(n: usize, rows: usize, s: f64, period: usize, seed: u64) -> Vec<u32> {
    let period = period.max(1);
    zipf_ids(n, rows, s, seed)
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let k = (i / period) as u64;
            ((id as u64 + k * (rows as u64 / 3 + 1)) % rows as u64) as u32
        })
        .collect()
}
