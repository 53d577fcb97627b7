//! Binary codes that keep more neighbours: rows and queries centred, and optionally rotated by
//! ITQ, before their signs are taken.
//!
//! Plain sign codes (`bit = x > 0`, sentence-transformers' `quantize_embeddings`) waste bits on
//! tables whose values are not centred on zero: a column whose values are mostly positive is
//! mostly one bit, and says little about which rows are near. A [`CodeTransform`] maps each row
//! `x` to `(x − μ)·R` before the signs: `μ` the table's mean row, `R` an orthogonal `dim × dim`
//! rotation (the identity for centred codes). Iterative quantisation (ITQ, Gong & Lazebnik 2011;
//! faiss `ITQTransform`) learns `R` so the signs lose as little as possible of each centred row:
//! it alternates taking the signs `B` of the rotated rows and the rotation that best maps the rows
//! onto `B` (an orthogonal Procrustes problem, solved with a polar decomposition).
//!
//! Queries go through the same transform ([`CodeTransform::encode`]); the codes keep `dim` bits.
//! Rescoring with a finer table of the original rows is unchanged: rotation does not change dot
//! products, and the candidates are scored against the original rows anyway.

use crate::format::{Format, PackedTable};
use crate::Error;

/// How [`CodeTransform::itq`] trains its rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItqOptions {
    /// Alternations of signs and rotation (faiss's `ITQMatrix::max_iter`: 50).
    pub iterations: usize,
    /// Seed of the random initial rotation.
    pub seed: u64,
    /// Rows to train on at most, taken evenly from the table (`None`: faiss's
    /// `max(10 × dim, 32 768)`). The mean is always taken over every row.
    pub max_train_rows: Option<usize>,
}

impl Default for ItqOptions {
    fn default() -> ItqOptions {
        ItqOptions { iterations: 50, seed: 123, max_train_rows: None }
    }
}

/// What rows and queries go through before their signs become binary codes: `(x − mean)·R`.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeTransform {
    mean: Vec<f32>,
    /// `dim × dim`, row-major: output value `c` is `Σⱼ (xⱼ − meanⱼ)·R[j][c]`. `None`: the identity.
    rotation: Option<Vec<f32>>,
}

/// How far from orthogonal a stored rotation may be: the most `‖x·R·Rᵀ − x‖ / ‖x‖` of a probe.
const ORTHOGONAL_TOLERANCE: f32 = 1e-3;

/// The widest rows ITQ trains a rotation for: training costs `rows × dim²` per iteration and
/// `dim³` per polar decomposition, minutes at this width.
pub const MAX_ITQ_DIM: usize = 1024;

impl CodeTransform {
    /// Centred codes: the mean of `rows` (`n × dim`) subtracted before the signs.
    pub fn centered(rows: &[f32], dim: usize) -> Result<CodeTransform, Error> {
        let n = check_rows(rows, dim)?;
        if n == 0 {
            return Err(Error::TooFewRows { what: "rows to centre codes on", rows: 0, needed: 1 });
        }
        Ok(CodeTransform { mean: mean(rows, dim), rotation: None })
    }

    /// ITQ codes: centred, then rotated by a rotation trained on `rows` (`n × dim`, `n > dim`,
    /// `dim ≤` [`MAX_ITQ_DIM`]). Deterministic for the same rows and options, on any machine.
    pub fn itq(rows: &[f32], dim: usize, options: &ItqOptions) -> Result<CodeTransform, Error> {
        Ok(train_itq(rows, dim, options)?.0)
    }

    /// A transform from its parts, as stored: `mean` of `dim` values and an optional `dim × dim`
    /// orthogonal rotation (row-major). Checks shapes, finiteness and orthogonality (that
    /// `x·R·Rᵀ = x` within 10⁻³ for a few probe vectors: `dim²` work, not `dim³`).
    pub fn from_parts(mean: Vec<f32>, rotation: Option<Vec<f32>>) -> Result<CodeTransform, Error> {
        let dim = mean.len();
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        if let Some(i) = mean.iter().position(|x| !x.is_finite()) {
            return Err(Error::NonFinite { row: 0, col: i, value: mean[i] });
        }
        if let Some(r) = &rotation {
            if r.len() != dim * dim {
                return Err(Error::ShapeMismatch { what: "rotation values (dim × dim of the mean's dim)", expected: dim * dim, actual: r.len() });
            }
            if let Some(i) = r.iter().position(|x| !x.is_finite()) {
                return Err(Error::NonFinite { row: i / dim, col: i % dim, value: r[i] });
            }
            let worst = orthogonality_error(r, dim);
            if worst.is_nan() || worst > ORTHOGONAL_TOLERANCE {
                return Err(Error::NotOrthogonal { error: worst, tolerance: ORTHOGONAL_TOLERANCE });
            }
        }
        Ok(CodeTransform { mean, rotation })
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// The mean row subtracted.
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    /// The rotation (`dim × dim`, row-major), if any.
    pub fn rotation(&self) -> Option<&[f32]> {
        self.rotation.as_deref()
    }

    /// "centered" or "itq".
    pub fn kind(&self) -> &'static str {
        if self.rotation.is_some() {
            "itq"
        } else {
            "centered"
        }
    }

    /// `(x − mean)·R` of every row of `x` (a multiple of `dim` finite values).
    pub fn apply(&self, x: &[f32]) -> Result<Vec<f32>, Error> {
        let dim = self.dim();
        let n = check_rows(x, dim)?;
        let centred: Vec<f32> = x.chunks_exact(dim).flat_map(|row| row.iter().zip(&self.mean).map(|(a, m)| a - m)).collect();
        let Some(r) = &self.rotation else { return Ok(centred) };
        let mut out = vec![0f32; n * dim];
        mul_rows(&centred, dim, r, &mut out);
        Ok(out)
    }

    /// Binary codes ([`Format::Binary`]) of the rows of `x` through the transform: a table's rows
    /// or the queries searched against it.
    pub fn encode(&self, x: &[f32]) -> Result<PackedTable, Error> {
        let y = self.apply(x)?;
        let dim = self.dim();
        Ok(PackedTable::quantize(Format::Binary, &y, y.len() / dim, dim)?)
    }
}

/// Rows of a `dim`-wide table of finite values.
fn check_rows(rows: &[f32], dim: usize) -> Result<usize, Error> {
    super::check_finite_rows(rows, dim, "values (a multiple of dim)")
}

/// The mean row, summed in f64.
fn mean(rows: &[f32], dim: usize) -> Vec<f32> {
    let n = rows.len() / dim;
    let mut sum = vec![0f64; dim];
    for row in rows.chunks_exact(dim) {
        for (s, &x) in sum.iter_mut().zip(row) {
            *s += x as f64;
        }
    }
    sum.iter().map(|s| (s / n as f64) as f32).collect()
}

/// The most `‖x·R·Rᵀ − x‖ / ‖x‖` over eight fixed probe vectors `x` (NaN if not finite). Zero
/// for every probe only if `R·Rᵀ = I` on their span; a matrix off orthogonal by `E` moves a
/// probe by about `‖E‖_F / √dim`, so eight of them catch any real departure.
fn orthogonality_error(r: &[f32], dim: usize) -> f32 {
    let mut worst = 0f64;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..8 {
        let x: Vec<f64> = (0..dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        // y = x·R, then z = y·Rᵀ (z_i = Σ_c y_c·R[i][c]).
        let mut y = vec![0f64; dim];
        for (j, &xj) in x.iter().enumerate() {
            for (yc, &w) in y.iter_mut().zip(&r[j * dim..(j + 1) * dim]) {
                *yc += xj * w as f64;
            }
        }
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let off = (0..dim)
            .map(|i| {
                let zi: f64 = r[i * dim..(i + 1) * dim].iter().zip(&y).map(|(&w, yc)| w as f64 * yc).sum();
                (zi - x[i]).powi(2)
            })
            .sum::<f64>()
            .sqrt();
        let e = off / norm.max(1e-300);
        if e.is_nan() {
            return f32::NAN;
        }
        worst = worst.max(e);
    }
    worst as f32
}

/// Trains ITQ; also returns the quantisation loss `‖B − V·R‖²` (per training row) after each
/// iteration, for tests.
pub(crate) fn train_itq(rows: &[f32], dim: usize, options: &ItqOptions) -> Result<(CodeTransform, Vec<f64>), Error> {
    let n = check_rows(rows, dim)?;
    if dim > MAX_ITQ_DIM {
        return Err(Error::LimitExceeded { what: "values per row for an ITQ rotation", requested: dim as u64, max: MAX_ITQ_DIM as u64 });
    }
    if n <= dim {
        return Err(Error::TooFewRows { what: "rows to train an ITQ rotation (more than dim)", rows: n, needed: dim + 1 });
    }
    let mean = mean(rows, dim);
    let max_train = options.max_train_rows.unwrap_or((10 * dim).max(32_768)).max(dim + 1);
    // In u64: i·n passes usize on wasm32 for tables of a few hundred thousand rows.
    let picked: Vec<usize> = if n > max_train { (0..max_train).map(|i| (i as u64 * n as u64 / max_train as u64) as usize).collect() } else { (0..n).collect() };
    // Centred and L2-normalised training rows, as faiss's ITQTransform trains on.
    let mut v = Vec::with_capacity(picked.len() * dim);
    for &i in &picked {
        let start = v.len();
        v.extend(rows[i * dim..(i + 1) * dim].iter().zip(&mean).map(|(x, m)| x - m));
        let norm = v[start..].iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        if norm > 0.0 {
            v[start..].iter_mut().for_each(|x| *x = (*x as f64 / norm) as f32);
        }
    }
    let nt = picked.len();
    let mut r = random_rotation(dim, options.seed)?;
    let mut rotated = vec![0f32; nt * dim];
    let mut losses = Vec::with_capacity(options.iterations);
    for _ in 0..options.iterations {
        let r32: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        mul_rows(&v, dim, &r32, &mut rotated);
        let loss: f64 = rotated.iter().map(|&p| (if p < 0.0 { -1.0 - p as f64 } else { 1.0 - p as f64 }).powi(2)).sum::<f64>() / nt as f64;
        losses.push(loss);
        rotated.iter_mut().for_each(|p| *p = if *p < 0.0 { -1.0 } else { 1.0 });
        let mut m = transpose_times(&v, &rotated, dim);
        // The rotation maximising tr(Rᵀ·M), M = Vᵀ·B: the polar factor of M. A small pull
        // towards the current rotation keeps M invertible when the rows span fewer than `dim`
        // directions (a constant column), choosing the nearest rotation there.
        let scale = 1e-9 * m.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-300);
        m.iter_mut().zip(&r).for_each(|(a, b)| *a += scale * b);
        r = polar(&m, dim)?;
    }
    let rotation: Vec<f32> = r.iter().map(|&x| x as f32).collect();
    // The polar iteration converges for any invertible matrix; should it not have, the rotation
    // would be refused when read back, so it is refused here.
    let error = orthogonality_error(&rotation, dim);
    if error.is_nan() || error > ORTHOGONAL_TOLERANCE {
        return Err(Error::Training { what: "an ITQ rotation", reason: "the rotation did not converge to an orthogonal matrix" });
    }
    Ok((CodeTransform { mean, rotation: Some(rotation) }, losses))
}

/// `out = x·R` for the rows of `x` (`dim` wide) and a `dim × dim` row-major `R`, on all cores.
fn mul_rows(x: &[f32], dim: usize, r: &[f32], out: &mut [f32]) {
    crate::par::for_each_chunk_mut(out, dim, 64, |first, block| {
        const T: usize = 8;
        for (b, outs) in block.chunks_mut(T * dim).enumerate() {
            outs.fill(0.0);
            let row0 = first + b * T;
            let rows = outs.len() / dim;
            for j in 0..dim {
                let rj = &r[j * dim..(j + 1) * dim];
                for (t, o) in outs.chunks_exact_mut(dim).enumerate().take(rows) {
                    let a = x[(row0 + t) * dim + j];
                    for (o, &w) in o.iter_mut().zip(rj) {
                        *o += a * w;
                    }
                }
            }
        }
        None::<()>
    });
}

/// `Vᵀ·B` (`dim × dim`, f64) for `n × dim` row-major `v` and `b`, on all cores (f32 partial sums
/// per thread, added in f64).
fn transpose_times(v: &[f32], b: &[f32], dim: usize) -> Vec<f64> {
    let n = v.len() / dim;
    // Parts of at most 2 048 rows (fewer when dim is large), whatever the thread count, so the
    // sums, and the rotation, are the same on every machine.
    let parts = n.div_ceil(2048).min(((64 << 20) / (4 * dim * dim)).max(1)).max(1);
    let mut partial = vec![0f32; parts * dim * dim];
    crate::par::for_each_chunk_mut(&mut partial, dim * dim, 1, |first, block| {
        const T: usize = 8;
        for (p, m) in block.chunks_exact_mut(dim * dim).enumerate() {
            let part = first + p;
            let share = |p: usize| (p as u64 * n as u64 / parts as u64) as usize;
            let (r0, r1) = (share(part), share(part + 1));
            for i0 in (r0..r1).step_by(T) {
                let i1 = (i0 + T).min(r1);
                for j in 0..dim {
                    let mj = &mut m[j * dim..(j + 1) * dim];
                    for i in i0..i1 {
                        let a = v[i * dim + j];
                        for (o, &s) in mj.iter_mut().zip(&b[i * dim..(i + 1) * dim]) {
                            *o += a * s;
                        }
                    }
                }
            }
        }
        None::<()>
    });
    let mut m = vec![0f64; dim * dim];
    for p in partial.chunks_exact(dim * dim) {
        m.iter_mut().zip(p).for_each(|(a, &b)| *a += b as f64);
    }
    m
}

/// A random rotation: the polar factor of a matrix of standard normal values (Haar-distributed).
fn random_rotation(dim: usize, seed: u64) -> Result<Vec<f64>, Error> {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut g = Vec::with_capacity(dim * dim + 1);
    while g.len() < dim * dim {
        // Box–Muller.
        let (u1, u2) = (1.0 - next(), next());
        let r = (-2.0 * u1.ln()).sqrt();
        g.push(r * (std::f64::consts::TAU * u2).cos());
        g.push(r * (std::f64::consts::TAU * u2).sin());
    }
    g.truncate(dim * dim);
    polar(&g, dim)
}

/// The orthogonal polar factor `U·Wᵀ` of a square `a = U·Σ·Wᵀ` (row-major, `dim × dim`): the
/// orthogonal matrix nearest `a`. Newton's iteration `X ← (γX + X⁻ᵀ/γ)/2` with Frobenius
/// scaling (Higham), which converges quadratically, in about ten steps for the matrices ITQ meets.
pub(crate) fn polar(a: &[f64], dim: usize) -> Result<Vec<f64>, Error> {
    let frob = |m: &[f64]| m.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut x = a.to_vec();
    let mut scaling = true;
    for _ in 0..100 {
        let inv = inverse(&x, dim)?;
        let gamma = if scaling { (frob(&inv) / frob(&x)).sqrt() } else { 1.0 };
        let mut next = vec![0f64; dim * dim];
        for i in 0..dim {
            for j in 0..dim {
                next[i * dim + j] = 0.5 * (gamma * x[i * dim + j] + inv[j * dim + i] / gamma);
            }
        }
        let change = next.iter().zip(&x).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt() / frob(&next);
        x = next;
        if change < 1e-2 {
            scaling = false;
        }
        if change < 1e-12 {
            return Ok(x);
        }
    }
    Ok(x)
}

/// The inverse of a square matrix by Gauss–Jordan elimination with partial pivoting.
fn inverse(a: &[f64], dim: usize) -> Result<Vec<f64>, Error> {
    let w = 2 * dim;
    let mut m = vec![0f64; dim * w];
    for i in 0..dim {
        m[i * w..i * w + dim].copy_from_slice(&a[i * dim..(i + 1) * dim]);
        m[i * w + dim + i] = 1.0;
    }
    let largest = a.iter().fold(0f64, |acc, x| acc.max(x.abs()));
    for k in 0..dim {
        let p = (k..dim).max_by(|&i, &j| m[i * w + k].abs().total_cmp(&m[j * w + k].abs())).expect("k < dim");
        let pivot = m[p * w + k];
        if pivot.is_nan() || pivot.abs() <= largest * 1e-14 {
            return Err(Error::Training { what: "an ITQ rotation", reason: "the rows span fewer directions than they have values (a singular matrix)" });
        }
        if p != k {
            for c in 0..w {
                m.swap(p * w + c, k * w + c);
            }
        }
        let inv_pivot = 1.0 / pivot;
        m[k * w..(k + 1) * w].iter_mut().for_each(|x| *x *= inv_pivot);
        let (before, rest) = m.split_at_mut(k * w);
        let (pivot_row, after) = rest.split_at_mut(w);
        for row in before.chunks_exact_mut(w).chain(after.chunks_exact_mut(w)) {
            let f = row[k];
            if f != 0.0 {
                for (x, &y) in row.iter_mut().zip(pivot_row.iter()) {
                    *x -= f * y;
                }
            }
        }
    }
    Ok(m.chunks_exact(w).flat_map(|row| row[dim..].iter().copied()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(a: &[f64], b: &[f64], d: usize) -> Vec<f64> {
        let mut c = vec![0f64; d * d];
        for i in 0..d {
            for k in 0..d {
                for j in 0..d {
                    c[i * d + j] += a[i * d + k] * b[k * d + j];
                }
            }
        }
        c
    }

    #[test]
    fn polar_factor_of_a_rotation_times_a_positive_matrix_is_the_rotation() {
        let d = 13;
        let q = random_rotation(d, 7).unwrap();
        // S = Gᵀ·G + I: symmetric positive definite, condition number in the hundreds.
        let g = random_rotation(d, 8).unwrap();
        let mut s = vec![0f64; d * d];
        for i in 0..d {
            for j in 0..d {
                s[i * d + j] = (0..d).map(|k| g[k * d + i] * g[k * d + j] * (1.0 + 30.0 * k as f64)).sum::<f64>();
            }
        }
        let p = polar(&product(&q, &s, d), d).unwrap();
        for (a, b) in p.iter().zip(&q) {
            assert!((a - b).abs() < 1e-10, "{a} vs {b}");
        }
    }

    #[test]
    fn itq_lowers_the_quantisation_loss_at_every_step() {
        let (n, d) = (900, 16);
        let mut state = 5u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        // Correlated columns of different spread.
        let basis: Vec<f32> = (0..d * d).map(|_| next()).collect();
        let mut rows = Vec::with_capacity(n * d);
        for _ in 0..n {
            let z: Vec<f32> = (0..d).map(|i| next() * (1.0 + i as f32)).collect();
            rows.extend((0..d).map(|c| (0..d).map(|i| z[i] * basis[i * d + c]).sum::<f32>() + 0.3));
        }
        let (_, losses) = train_itq(&rows, d, &ItqOptions { iterations: 30, ..Default::default() }).unwrap();
        assert_eq!(losses.len(), 30);
        for w in losses.windows(2) {
            assert!(w[1] <= w[0] + 1e-6 * losses[0], "{losses:?}");
        }
        // ‖b − v‖² = dim + 1 − 2·Σ|vR| for a unit row: the rotation raises Σ|vR| by a fifth of one.
        assert!(losses[0] - losses[29] > 0.25, "{losses:?}");
    }

    #[test]
    fn inverse_refuses_a_singular_matrix() {
        let a = vec![1.0, 2.0, 2.0, 4.0];
        assert!(matches!(inverse(&a, 2), Err(Error::Training { .. })));
        let b = inverse(&[4.0, 7.0, 2.0, 6.0], 2).unwrap();
        let want = [0.6, -0.7, -0.2, 0.4];
        for (x, y) in b.iter().zip(want) {
            assert!((x - y).abs() < 1e-12);
        }
    }

    #[test]
    fn mul_rows_and_transpose_times_match_plain_loops() {
        let (n, d) = (37, 11);
        let x: Vec<f32> = (0..n * d).map(|i| ((i * 7919) % 23) as f32 - 11.0).collect();
        let r: Vec<f32> = (0..d * d).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
        let mut out = vec![f32::NAN; n * d];
        mul_rows(&x, d, &r, &mut out);
        let m = transpose_times(&x, &out, d);
        for i in 0..n {
            for c in 0..d {
                let want: f32 = (0..d).map(|j| x[i * d + j] * r[j * d + c]).sum();
                assert_eq!(out[i * d + c], want);
            }
        }
        for j in 0..d {
            for c in 0..d {
                let want: f64 = (0..n).map(|i| x[i * d + j] as f64 * out[i * d + c] as f64).sum();
                assert!((m[j * d + c] - want).abs() <= 1e-6 * want.abs().max(1.0), "{} vs {want}", m[j * d + c]);
            }
        }
    }
}
