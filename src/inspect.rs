//! What `edo inspect` reports: quantisation error statistics of a table against its source, and a
//! picture of the table and of its error.

use image::{Rgb, RgbImage};
use serde::Serialize;

use crate::format::Format;

/// Error of a decoded table against the values it was made from.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorStats {
    pub values: usize,
    pub max_abs: f64,
    pub mean_abs: f64,
    pub rmse: f64,
    /// Per-row relative error `‖x − x̂‖ / ‖x‖` (rows of norm 0 count their absolute error).
    pub row_relative: Quantiles,
    /// The row with the largest relative error.
    pub worst_row: usize,
    /// Mean and minimum cosine similarity of each row with its decoded row.
    pub mean_cosine: f64,
    pub min_cosine: f64,
    /// Rows where some value misses the format's documented error bound, when the bound applies
    /// (the table was quantised by edo from these values); `None` otherwise.
    pub rows_beyond_bound: Option<usize>,
}

/// Median, 90th, 99th percentile and maximum.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    fn of(mut v: Vec<f64>) -> Quantiles {
        if v.is_empty() {
            return Quantiles { p50: 0.0, p90: 0.0, p99: 0.0, max: 0.0 };
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Quantiles { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: v[v.len() - 1] }
    }
}

/// Compares `decoded` with `source` (both `rows × dim`). With `bound_format`, also counts the
/// rows that miss that format's documented error bound.
pub fn error_stats(source: &[f32], decoded: &[f32], dim: usize, bound_format: Option<Format>) -> ErrorStats {
    assert_eq!(source.len(), decoded.len(), "source and decoded table differ in size");
    let rows = source.len().checked_div(dim).unwrap_or(0);
    let (mut max_abs, mut sum_abs, mut sum_sq) = (0f64, 0f64, 0f64);
    let mut rel = Vec::with_capacity(rows);
    let (mut cos_sum, mut cos_min) = (0f64, f64::INFINITY);
    let mut beyond = 0usize;
    for r in 0..rows {
        let x = &source[r * dim..(r + 1) * dim];
        let y = &decoded[r * dim..(r + 1) * dim];
        let (mut e2, mut x2, mut y2, mut xy) = (0f64, 0f64, 0f64, 0f64);
        for (&a, &b) in x.iter().zip(y) {
            let (a, b) = (a as f64, b as f64);
            let e = (a - b).abs();
            max_abs = max_abs.max(e);
            sum_abs += e;
            e2 += e * e;
            x2 += a * a;
            y2 += b * b;
            xy += a * b;
        }
        sum_sq += e2;
        rel.push(if x2 > 0.0 { (e2 / x2).sqrt() } else { e2.sqrt() });
        let cos = if x2 > 0.0 && y2 > 0.0 { xy / (x2.sqrt() * y2.sqrt()) } else if x2 == y2 { 1.0 } else { 0.0 };
        cos_sum += cos;
        cos_min = cos_min.min(cos);
        if let Some(f) = bound_format {
            let bounds = f.error_bounds(x);
            if x.iter().zip(y).zip(&bounds).any(|((&a, &b), &bound)| (a - b).abs() > bound) {
                beyond += 1;
            }
        }
    }
    let n = source.len().max(1) as f64;
    let worst_row = rel.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
    ErrorStats {
        values: source.len(),
        max_abs,
        mean_abs: sum_abs / n,
        rmse: (sum_sq / n).sqrt(),
        row_relative: Quantiles::of(rel),
        worst_row,
        mean_cosine: if rows == 0 { 1.0 } else { cos_sum / rows as f64 },
        min_cosine: if rows == 0 { 1.0 } else { cos_min },
        rows_beyond_bound: bound_format.map(|_| beyond),
    }
}

/// How a picture maps the table onto pixels, for the legend a caller prints.
#[derive(Clone, Debug, Serialize)]
pub struct PictureLegend {
    pub width: u32,
    pub height: u32,
    /// Table rows per pixel row (rows are sampled evenly, not averaged).
    pub rows_per_pixel: f64,
    /// Columns averaged into one pixel column.
    pub cols_per_pixel: usize,
    /// Values at ±`value_scale` are full blue / red (the 99th percentile of |x|).
    pub value_scale: f32,
    /// |error| at `error_scale` is full yellow (the largest |error|); absent without a source.
    pub error_scale: Option<f32>,
}

const MAX_SIDE: usize = 1024;
const GAP: u32 = 12;

/// A picture of `values` (`rows × dim`): blue for negative, white for zero, red for positive.
/// With `source`, a second panel on the right shows `|source − values|` from black (0) through
/// red to yellow (the largest error). Large tables are sampled to at most 1024 × 1024 cells; small
/// ones are magnified so each value is visible.
pub fn picture(values: &[f32], dim: usize, source: Option<&[f32]>) -> (RgbImage, PictureLegend) {
    let rows = values.len().checked_div(dim).unwrap_or(0);
    let cols_per_pixel = dim.div_ceil(MAX_SIDE).max(1);
    let cells_x = dim.div_ceil(cols_per_pixel).max(1);
    let cells_y = rows.clamp(1, MAX_SIDE);
    let zoom_x = (512 / cells_x).clamp(1, 16) as u32;
    let zoom_y = (512 / cells_y).clamp(1, 16) as u32;
    let panel_w = cells_x as u32 * zoom_x;
    let panel_h = cells_y as u32 * zoom_y;
    let panels = if source.is_some() { 2 } else { 1 };
    let width = panel_w * panels + GAP * (panels - 1);
    let mut img = RgbImage::from_pixel(width, panel_h, Rgb([255, 255, 255]));

    // cell(y, x) = mean over the pixel's columns of f(row, col).
    let row_of = |cy: usize| if rows <= MAX_SIDE { cy } else { cy * rows / cells_y };
    let cell = |f: &dyn Fn(usize) -> f32, cy: usize, cx: usize| -> f32 {
        let r = row_of(cy);
        let c0 = cx * cols_per_pixel;
        let c1 = (c0 + cols_per_pixel).min(dim);
        (c0..c1).map(|c| f(r * dim + c)).sum::<f32>() / (c1 - c0).max(1) as f32
    };
    let mut mags: Vec<f32> = values.iter().step_by((values.len() / 100_000).max(1)).map(|v| v.abs()).collect();
    mags.sort_by(f32::total_cmp);
    let value_scale = mags.get((mags.len().saturating_sub(1) as f64 * 0.99) as usize).copied().filter(|&s| s > 0.0).unwrap_or(1.0);
    let value = |i: usize| values[i];
    let mut paint = |x0: u32, shade: &dyn Fn(usize, usize) -> Rgb<u8>| {
        for cy in 0..cells_y.min(rows) {
            for cx in 0..cells_x {
                let px = shade(cy, cx);
                for dy in 0..zoom_y {
                    for dx in 0..zoom_x {
                        img.put_pixel(x0 + cx as u32 * zoom_x + dx, cy as u32 * zoom_y + dy, px);
                    }
                }
            }
        }
    };
    paint(0, &|cy, cx| diverging(cell(&value, cy, cx) / value_scale));
    let mut error_scale = None;
    if let Some(src) = source {
        let err = |i: usize| (src[i] - values[i]).abs();
        let max = (0..values.len()).map(err).fold(0f32, f32::max);
        let scale = if max > 0.0 { max } else { 1.0 };
        error_scale = Some(max);
        paint(panel_w + GAP, &|cy, cx| heat(cell(&err, cy, cx) / scale));
    }
    let legend = PictureLegend {
        width,
        height: panel_h,
        rows_per_pixel: rows.max(1) as f64 / cells_y as f64 / zoom_y as f64,
        cols_per_pixel,
        value_scale,
        error_scale,
    };
    (img, legend)
}

/// −1 → blue, 0 → white, +1 → red (clamped).
fn diverging(t: f32) -> Rgb<u8> {
    let t = t.clamp(-1.0, 1.0);
    let fade = |a: f32| (255.0 * (1.0 - a)).round() as u8;
    if t >= 0.0 {
        Rgb([255, fade(t), fade(t)])
    } else {
        Rgb([fade(-t), fade(-t), 255])
    }
}

/// 0 → black, 0.5 → red, 1 → yellow (clamped).
fn heat(t: f32) -> Rgb<u8> {
    let t = t.clamp(0.0, 1.0);
    let r = (2.0 * t).min(1.0);
    let g = (2.0 * t - 1.0).max(0.0);
    Rgb([(255.0 * r).round() as u8, (255.0 * g).round() as u8, 0])
}
