//! What `edo inspect` reports: quantisation error statistics of a table against its source, and a
//! picture of the table and of its error.

use image::{Rgb, RgbImage};
use serde::Serialize;

use edo::format::{Format, PackedTable};

/// Error of a decoded table against the values it was made from.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorStats {
    /// Values compared.
    pub values: usize,
    /// Largest absolute error.
    pub max_abs: f64,
    /// Mean absolute error.
    pub mean_abs: f64,
    /// Root mean square error.
    pub rmse: f64,
    /// Per-row relative error `‖x − x̂‖ / ‖x‖` (rows of norm 0 count their absolute error).
    pub row_relative: Quantiles,
    /// The row with the largest relative error.
    pub worst_row: usize,
    /// Mean and minimum cosine similarity of each row with its decoded row.
    pub mean_cosine: f64,
    /// The least cosine similarity of a row with its decoded row.
    pub min_cosine: f64,
    /// Rows where some value misses the format's documented error bound, when the bound applies
    /// (the table was quantised by edo from these values); `None` otherwise.
    pub rows_beyond_bound: Option<usize>,
}

/// Median, 90th, 99th percentile and maximum.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
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
/// rows that miss that format's documented error bound. (The tests' whole-table reference for
/// [`table_error_stats`].)
#[cfg(test)]
pub fn error_stats(source: &[f32], decoded: &[f32], dim: usize, bound_format: Option<Format>) -> ErrorStats {
    let mut acc = ErrorAccumulator::new(dim, bound_format);
    acc.add(source, decoded);
    acc.finish()
}

/// Compares `table` with the `source` it was made from, decoding a block of rows at a time so a
/// large table is never held decoded in memory.
pub fn table_error_stats(source: &[f32], table: &PackedTable, bound_format: Option<Format>) -> ErrorStats {
    const BLOCK: usize = 4096;
    let dim = table.dim();
    assert_eq!(source.len(), table.rows() * dim, "source and table differ in size");
    let mut acc = ErrorAccumulator::new(dim, bound_format);
    let mut decoded = vec![0f32; BLOCK.min(table.rows()) * dim];
    for start in (0..table.rows()).step_by(BLOCK) {
        let n = BLOCK.min(table.rows() - start);
        for (i, out) in decoded[..n * dim].chunks_exact_mut(dim).enumerate() {
            table.decode_row_into(start + i, out);
        }
        acc.add(&source[start * dim..(start + n) * dim], &decoded[..n * dim]);
    }
    acc.finish()
}

/// [`ErrorStats`] gathered block of rows by block of rows.
pub struct ErrorAccumulator {
    dim: usize,
    bound_format: Option<Format>,
    values: usize,
    max_abs: f64,
    sum_abs: f64,
    sum_sq: f64,
    rel: Vec<f64>,
    cos_sum: f64,
    cos_min: f64,
    beyond: usize,
}

impl ErrorAccumulator {
    /// Statistics of rows of `dim` values, checked against the documented bound of `bound_format`
    /// when given.
    pub fn new(dim: usize, bound_format: Option<Format>) -> ErrorAccumulator {
        ErrorAccumulator {
            dim,
            bound_format,
            values: 0,
            max_abs: 0.0,
            sum_abs: 0.0,
            sum_sq: 0.0,
            rel: Vec::new(),
            cos_sum: 0.0,
            cos_min: f64::INFINITY,
            beyond: 0,
        }
    }

    /// Adds whole rows: `source` and `decoded` hold the same rows, `dim` values each.
    pub fn add(&mut self, source: &[f32], decoded: &[f32]) {
        assert_eq!(source.len(), decoded.len(), "source and decoded rows differ in size");
        let dim = self.dim.max(1);
        for (x, y) in source.chunks_exact(dim).zip(decoded.chunks_exact(dim)) {
            let (mut e2, mut x2, mut y2, mut xy) = (0f64, 0f64, 0f64, 0f64);
            for (&a, &b) in x.iter().zip(y) {
                let (a, b) = (a as f64, b as f64);
                let e = (a - b).abs();
                self.max_abs = self.max_abs.max(e);
                self.sum_abs += e;
                e2 += e * e;
                x2 += a * a;
                y2 += b * b;
                xy += a * b;
            }
            self.sum_sq += e2;
            self.rel.push(if x2 > 0.0 { (e2 / x2).sqrt() } else { e2.sqrt() });
            let cos = if x2 > 0.0 && y2 > 0.0 {
                xy / (x2.sqrt() * y2.sqrt())
            } else if x2 == y2 {
                1.0
            } else {
                0.0
            };
            self.cos_sum += cos;
            self.cos_min = self.cos_min.min(cos);
            if let Some(f) = self.bound_format {
                let bounds = f.error_bounds(x);
                if x.iter().zip(y).zip(&bounds).any(|((&a, &b), &bound)| (a - b).abs() > bound) {
                    self.beyond += 1;
                }
            }
        }
        self.values += source.len();
    }

    /// The statistics of every row added.
    pub fn finish(self) -> ErrorStats {
        let rows = self.rel.len();
        let n = self.values.max(1) as f64;
        let worst_row = self.rel.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
        ErrorStats {
            values: self.values,
            max_abs: self.max_abs,
            mean_abs: self.sum_abs / n,
            rmse: (self.sum_sq / n).sqrt(),
            row_relative: Quantiles::of(self.rel),
            worst_row,
            mean_cosine: if rows == 0 { 1.0 } else { self.cos_sum / rows as f64 },
            min_cosine: if rows == 0 { 1.0 } else { self.cos_min },
            rows_beyond_bound: self.bound_format.map(|_| self.beyond),
        }
    }
}

/// How a picture maps the table onto pixels, for the legend a caller prints.
#[derive(Clone, Debug, Serialize)]
pub struct PictureLegend {
    /// Picture width in pixels.
    pub width: u32,
    /// Picture height in pixels.
    pub height: u32,
    /// Table rows per pixel row (rows are sampled evenly, not averaged).
    pub rows_per_pixel: f64,
    /// Columns averaged into one pixel column.
    pub cols_per_pixel: usize,
    /// Values at ±`value_scale` are full blue / red (the 99th percentile of |x|).
    pub value_scale: f32,
    /// |error| at `error_scale` is full yellow (the largest |error| among the rows shown);
    /// absent without a source.
    pub error_scale: Option<f32>,
}

const MAX_SIDE: usize = 1024;
const GAP: u32 = 12;

/// A picture of `table`: blue for negative, white for zero, red for positive. With `source`
/// (the values the table was made from), a second panel on the right shows `|source − x̂|` from
/// black (0) through red to yellow (the largest error in the picture). Large tables are sampled
/// to at most 1024 × 1024 cells, decoding only the rows shown; small ones are magnified so each
/// value is visible.
pub fn picture(table: &PackedTable, source: Option<&[f32]>) -> (RgbImage, PictureLegend) {
    let (rows, dim) = (table.rows(), table.dim());
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

    // The rows shown, decoded, and their |error|.
    let shown: Vec<usize> = (0..cells_y.min(rows)).map(|cy| if rows <= MAX_SIDE { cy } else { cy * rows / cells_y }).collect();
    let mut decoded = vec![0f32; shown.len() * dim];
    for (&r, out) in shown.iter().zip(decoded.chunks_exact_mut(dim.max(1))) {
        table.decode_row_into(r, out);
    }
    let errors: Option<Vec<f32>> = source.map(|src| {
        shown.iter().enumerate().flat_map(|(i, &r)| (0..dim).map(move |c| (i, r, c))).map(|(i, r, c)| (src[r * dim + c] - decoded[i * dim + c]).abs()).collect()
    });
    let cell = |v: &[f32], cy: usize, cx: usize| -> f32 {
        let c0 = cx * cols_per_pixel;
        let c1 = (c0 + cols_per_pixel).min(dim);
        v[cy * dim + c0..cy * dim + c1].iter().sum::<f32>() / (c1 - c0).max(1) as f32
    };
    let mut mags: Vec<f32> = decoded.iter().step_by((decoded.len() / 100_000).max(1)).map(|v| v.abs()).collect();
    mags.sort_by(f32::total_cmp);
    let value_scale = mags.get((mags.len().saturating_sub(1) as f64 * 0.99) as usize).copied().filter(|&s| s > 0.0).unwrap_or(1.0);
    let mut paint = |x0: u32, shade: &dyn Fn(usize, usize) -> Rgb<u8>| {
        for cy in 0..shown.len() {
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
    paint(0, &|cy, cx| diverging(cell(&decoded, cy, cx) / value_scale));
    let mut error_scale = None;
    if let Some(err) = &errors {
        let max = err.iter().copied().fold(0f32, f32::max);
        let scale = if max > 0.0 { max } else { 1.0 };
        error_scale = Some(max);
        paint(panel_w + GAP, &|cy, cx| heat(cell(err, cy, cx) / scale));
    }
    let legend =
        PictureLegend { width, height: panel_h, rows_per_pixel: rows.max(1) as f64 / cells_y as f64 / zoom_y as f64, cols_per_pixel, value_scale, error_scale };
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

/// The statistics and the picture of `edo inspect`.
#[cfg(test)]
mod tests {
    use super::{error_stats, picture, table_error_stats};
    use edo::synth::embedding_table;
    use edo::{Format, PackedTable};

    #[test]
    fn error_statistics_of_a_known_error() {
        // Row 0 exact, row 1 off by 0.5 in one value of four.
        let source = [1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0];
        let decoded = [1.0, 2.0, 3.0, 4.0, 1.5, 1.0, 1.0, 1.0];
        let s = error_stats(&source, &decoded, 4, None);
        assert_eq!(s.max_abs, 0.5);
        assert_eq!(s.mean_abs, 0.5 / 8.0);
        assert!((s.rmse - (0.25f64 / 8.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.worst_row, 1);
        assert!((s.row_relative.max - 0.25).abs() < 1e-12, "‖e‖/‖x‖ = 0.5 / 2");
        assert!((s.min_cosine - 4.5 / (2.0 * 5.25f64.sqrt())).abs() < 1e-12);
        assert_eq!(s.rows_beyond_bound, None);
    }

    #[test]
    fn blockwise_statistics_equal_the_whole_table_and_respect_the_bound() {
        let (rows, dim) = (10_000, 19);
        let data = embedding_table(rows, dim, 5);
        for format in [Format::Int8, Format::Int4, Format::F16] {
            let t = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let whole = error_stats(&data, &t.dequantize(), dim, Some(format));
            let blocks = table_error_stats(&data, &t, Some(format));
            assert_eq!(format!("{whole:?}"), format!("{blocks:?}"), "{format}");
            assert_eq!(blocks.rows_beyond_bound, Some(0), "{format}: the documented bound holds");
            assert!(blocks.mean_cosine > 0.99 && blocks.max_abs > 0.0);
        }
    }

    #[test]
    fn pictures_sample_large_tables_and_magnify_small_ones() {
        let (rows, dim) = (5000, 1500);
        let data = embedding_table(rows, dim, 2);
        let t = PackedTable::quantize(Format::Int4, &data, rows, dim).unwrap();
        let (img, legend) = picture(&t, Some(&data));
        assert_eq!((legend.cols_per_pixel, img.height()), (2, 1024), "1500 columns in pairs, 1024 sampled rows");
        assert_eq!(img.width(), 2 * 750 + 12);
        assert!(legend.error_scale.unwrap() > 0.0 && legend.rows_per_pixel > 4.8);

        let small = PackedTable::quantize(Format::F32, &[-1.0, 0.0, 1.0, 0.5], 2, 2).unwrap();
        let (img, legend) = picture(&small, None);
        assert_eq!((img.width(), img.height()), (32, 32), "2 × 2 values at 16 px each");
        assert_eq!(legend.error_scale, None);
        assert_eq!(img.get_pixel(0, 0).0, [0, 0, 255], "−1 is full blue");
        assert_eq!(img.get_pixel(16, 0).0, [255, 255, 255], "0 is white");
        assert_eq!(img.get_pixel(0, 16).0, [255, 0, 0], "+1 is full red");
    }
}
