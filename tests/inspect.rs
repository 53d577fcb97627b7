//! The statistics and the picture of `edo inspect`.

use edo::inspect::{error_stats, picture, table_error_stats};
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
