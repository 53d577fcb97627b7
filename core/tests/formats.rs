//! Formats and the CPU path: round trips within the documented bounds, exact layouts (numpy
//! packbits, FBGEMM fused rows), edge cases, typed errors. No GPU needed.

use edo_core::synth::{embedding_table, Rng};
use edo_core::{Bounds, Error, Format, PackedTable};

const DIMS: [usize; 8] = [1, 3, 7, 8, 33, 100, 384, 1000];

fn random_table(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    // Mix of the embedding-like generator and rows with wide, shifted or tiny ranges.
    let mut data = embedding_table(rows, dim, seed);
    let mut rng = Rng::new(seed ^ 77);
    for r in 0..rows {
        let kind = r % 5;
        for x in &mut data[r * dim..(r + 1) * dim] {
            match kind {
                1 => *x = *x * 1000.0 + 20.0,
                2 => *x *= 1e-6,
                3 => *x = rng.next_f32() * 2.0 - 1.0,
                _ => {}
            }
        }
    }
    data
}

#[test]
fn round_trips_stay_within_the_documented_bounds() {
    for format in Format::ALL {
        for (k, &dim) in DIMS.iter().enumerate() {
            let rows = 37;
            let data = random_table(rows, dim, 1000 + k as u64);
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            assert_eq!(table.words().len(), rows * format.row_words(dim));
            let decoded = table.dequantize();
            for r in 0..rows {
                let row = &data[r * dim..(r + 1) * dim];
                let bounds = format.error_bounds(row);
                for c in 0..dim {
                    let (x, y) = (row[c], decoded[r * dim + c]);
                    assert!((x - y).abs() <= bounds[c], "{format} dim {dim} row {r} col {c}: {x} -> {y}, |err| {} > bound {}", (x - y).abs(), bounds[c]);
                }
            }
        }
    }
}

#[test]
fn bounds_are_tight_enough_to_mean_something() {
    // A bound that is always huge would pass any decoder: check the INT8 bound is about half a step.
    let row: Vec<f32> = (0..256).map(|i| i as f32 / 255.0).collect();
    let b = Format::Int8.error_bounds(&row)[0];
    assert!(b < 0.0021 && b > 0.0019, "int8 bound for a unit range is ~1/510, got {b}");
    let b4 = Format::Int4.error_bounds(&row)[0];
    assert!(b4 < 0.04, "int4 bound for a unit range is ~1/30, got {b4}");
    assert_eq!(Format::F32.error_bounds(&row), vec![0.0; 256]);
}

#[test]
fn fp32_and_fp16_are_exact_where_they_should_be() {
    let data = [0.0f32, -0.0, 1.0, -2.5, 65504.0, 6.1e-5, 3.0e-8];
    let f32t = PackedTable::quantize(Format::F32, &data, 1, data.len()).unwrap();
    assert_eq!(f32t.dequantize(), data);
    let f16t = PackedTable::quantize(Format::F16, &data, 1, data.len()).unwrap();
    let back = f16t.dequantize();
    assert_eq!(&back[..5], &data[..5], "values representable in fp16 survive exactly");
    // Element 2k is the low half of word k.
    assert_eq!(f16t.words()[1] & 0xFFFF, half::f16::from_f32(1.0).to_bits() as u32);
    assert_eq!(f16t.words()[1] >> 16, half::f16::from_f32(-2.5).to_bits() as u32);
}

#[test]
fn int8_layout_is_fbgemm_fused_rowwise() {
    // dim 4: one code word then scale, bias — byte for byte FBGEMM's fused 8-bit row.
    let row = [-1.0f32, 0.0, 0.5, 1.0];
    let t = PackedTable::quantize(Format::Int8, &row, 1, 4).unwrap();
    let bytes: &[u8] = bytemuck::cast_slice(t.words());
    assert_eq!(bytes.len(), 4 + 8);
    // FBGEMM: inverse_scale = 255 / (range + 1e-8); code = lrintf((x - min) * inverse_scale).
    let inv = 255.0f32 / (2.0 + 1e-8);
    let expect: Vec<u8> = row.iter().map(|x| ((x + 1.0) * inv).round_ties_even() as u8).collect();
    assert_eq!(&bytes[..4], &expect[..]);
    assert_eq!(&bytes[..4], &[0, 128, 191, 255]);
    let scale = f32::from_le_bytes(bytes[4..8].try_into().unwrap());
    let bias = f32::from_le_bytes(bytes[8..12].try_into().unwrap());
    assert_eq!(bias, -1.0);
    assert!((scale - 2.0 / 255.0).abs() <= 2.0 / 255.0 * 2f32.powi(-16), "scale {scale}");
    assert_eq!(scale.to_bits() & 0xFF, 0, "scale has 16 significant bits");
    // Every code times the scale is exact: decoding is the same fused or not.
    for q in 0..=255u32 {
        let p = q as f32 * scale;
        assert_eq!((q as f64 * scale as f64) as f32, p);
        assert_eq!(p as f64, q as f64 * scale as f64, "q = {q}");
    }
}

#[test]
fn int4_layout_is_fbgemm_fused_4bit() {
    // Codes 0..15 rising: element 2k in the low nibble.
    let row: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let t = PackedTable::quantize(Format::Int4, &row, 1, 16).unwrap();
    let bytes: &[u8] = bytemuck::cast_slice(t.words());
    assert_eq!(bytes.len(), 8 + 4);
    assert_eq!(&bytes[..8], &[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]);
    let scale = half::f16::from_le_bytes([bytes[8], bytes[9]]);
    let bias = half::f16::from_le_bytes([bytes[10], bytes[11]]);
    assert_eq!((scale.to_f32(), bias.to_f32()), (1.0, 0.0));
    assert_eq!(t.dequantize(), row);
}

#[test]
fn binary_layout_is_numpy_packbits() {
    // numpy.packbits([1,0,1,1,0,0,0,1, 1,1]) == [0b10110001, 0b11000000]
    let row = [0.3f32, -1.0, 2.0, 0.1, 0.0, -0.5, -0.1, 9.0, 1.0, 1.0];
    for format in [Format::Binary, Format::BinaryScaled] {
        let t = PackedTable::quantize(format, &row, 1, row.len()).unwrap();
        let bytes: &[u8] = bytemuck::cast_slice(&t.words()[..1]);
        assert_eq!(&bytes[..2], &[0b1011_0001, 0b1100_0000], "{format}");
        assert_eq!(&bytes[2..], &[0, 0], "{format}: padding is zero");
    }
    // Whole words of 32 values and a short last one: numpy.packbits's bytes, written out here.
    for dim in [31, 32, 33, 64, 70, 100] {
        let data = edo_core::synth::embedding_table(3, dim, 4);
        let t = PackedTable::quantize(Format::Binary, &data, 3, dim).unwrap();
        for (r, values) in data.chunks(dim).enumerate() {
            let mut want = vec![0u8; 4 * Format::Binary.code_words(dim)];
            for (i, &x) in values.iter().enumerate() {
                want[i / 8] |= u8::from(x > 0.0) << (7 - i % 8);
            }
            assert_eq!(bytemuck::cast_slice::<u32, u8>(t.row(r)), &want[..], "dim {dim}, row {r}");
        }
    }
    let t = PackedTable::quantize(Format::Binary, &row, 1, row.len()).unwrap();
    assert_eq!(t.dequantize(), row.iter().map(|&x| if x > 0.0 { 1.0 } else { -1.0 }).collect::<Vec<_>>());
    let s = PackedTable::quantize(Format::BinaryScaled, &row, 1, row.len()).unwrap();
    let mean_abs = row.iter().map(|x| x.abs()).sum::<f32>() / row.len() as f32;
    let back = s.dequantize();
    assert!((back[0] - mean_abs).abs() < 1e-6 && (back[1] + mean_abs).abs() < 1e-6);
}

#[test]
fn constant_rows_decode_to_the_constant() {
    for dim in [1, 5, 64] {
        let data = vec![0.75f32; dim];
        for format in [Format::F32, Format::F16, Format::Int8, Format::Int4] {
            let t = PackedTable::quantize(format, &data, 1, dim).unwrap();
            assert_eq!(t.dequantize(), data, "{format} dim {dim}");
        }
        // Binary: the sign survives; a zero row is all "not positive".
        let zeros = vec![0.0f32; dim];
        let t = PackedTable::quantize(Format::BinaryScaled, &zeros, 1, dim).unwrap();
        assert_eq!(t.dequantize(), vec![-0.0; dim]);
    }
    // INT8 of a constant row: scale 0, bias the constant, all codes 0.
    let t = PackedTable::quantize(Format::Int8, &[3.0; 4], 1, 4).unwrap();
    assert_eq!(t.words(), &[0, 0f32.to_bits(), 3f32.to_bits()]);
}

#[test]
fn non_finite_values_are_typed_errors_naming_the_row() {
    let (rows, dim) = (50, 7);
    for format in Format::ALL {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut data = embedding_table(rows, dim, 5);
            data[17 * dim + 3] = bad;
            data[40 * dim + 1] = bad; // a later bad row is not the one reported
            match PackedTable::quantize(format, &data, rows, dim) {
                Err(Error::NonFinite { row: 17, col: 3, value }) => assert!(value.is_nan() || value == bad),
                other => panic!("{format} with {bad}: {other:?}"),
            }
        }
    }
    // The error is the lowest bad row however many threads encode (bad rows in every block).
    let (rows, dim) = (20_000, 4);
    let mut data = embedding_table(rows, dim, 6);
    for r in [19_000, 12_345, 5_000] {
        data[r * dim] = f32::NAN;
    }
    let err = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap_err();
    assert!(matches!(err, Error::NonFinite { row: 5_000, col: 0, .. }), "{err}");
    assert!(err.to_string().contains("row 5000"), "{err}");
}

#[test]
fn values_beyond_fp16_range_are_out_of_range_errors() {
    let data = [1.0f32, 70000.0];
    assert!(matches!(PackedTable::quantize(Format::F16, &data, 1, 2), Err(Error::OutOfRange { row: 0, col: 1, format: Format::F16, .. })));
    assert!(matches!(PackedTable::quantize(Format::Int4, &[-1e6f32, 0.0], 1, 2), Err(Error::OutOfRange { row: 0, col: 0, format: Format::Int4, .. })));
    // INT8 stores f32 scales: huge values are fine unless max − min overflows.
    assert!(PackedTable::quantize(Format::Int8, &data, 1, 2).is_ok());
    assert!(matches!(PackedTable::quantize(Format::Int8, &[-3e38f32, 3e38], 1, 2), Err(Error::OutOfRange { row: 0, format: Format::Int8, .. })));
}

#[test]
fn shapes_are_checked() {
    assert_eq!(PackedTable::quantize(Format::Int8, &[1.0; 10], 3, 3), Err(Error::ShapeMismatch { what: "table values (rows × dim)", expected: 9, actual: 10 }));
    assert_eq!(PackedTable::quantize(Format::Int8, &[], 3, 0), Err(Error::ZeroDim));
    assert!(matches!(PackedTable::from_words(Format::Int4, 2, 9, vec![0; 5]), Err(Error::ShapeMismatch { expected: 6, actual: 5, .. })));
    let empty = PackedTable::quantize(Format::Int4, &[], 0, 9).unwrap();
    assert_eq!(empty.rows(), 0);
    assert_eq!(edo_core::cpu::gather(&empty, &[], Bounds::Error).unwrap(), Vec::<f32>::new());
    assert_eq!(edo_core::cpu::gather(&empty, &[0], Bounds::Zero).unwrap(), vec![0.0; 9]);
    assert!(matches!(edo_core::cpu::gather(&empty, &[0], Bounds::Clamp), Err(Error::IdOutOfRange { .. })));
}

#[test]
fn memory_is_within_one_percent_plus_a_word_per_row_of_theory() {
    for format in Format::ALL {
        for dim in DIMS {
            let rows = 1000;
            let theory = (rows * format.unpadded_row_bytes(dim)) as f64;
            let bytes = (rows * format.row_bytes(dim)) as f64;
            assert!(bytes <= theory * 1.01 + (4 * rows) as f64, "{format} dim {dim}: {bytes} vs {theory}");
        }
    }
    // The headline ratios at dim 128.
    let ratio = |f: Format| f.row_bytes(128) as f64 / (4.0 * 128.0);
    assert_eq!(ratio(Format::F16), 0.5);
    assert!((ratio(Format::Int8) - 0.2656).abs() < 1e-3);
    assert_eq!(ratio(Format::Binary), 1.0 / 32.0);
    // A row's last group, cut short, stores only the codes its values reach: GloVe's 300 values
    // in int4_g128 are 150 bytes of codes (38 words) and 3 words of parameters, not three whole
    // groups (204 bytes); q8_0's 40 values are 10 words of codes and one of two scales (a whole
    // second block would make 68 bytes); q5_1's 40 are a block (5 words), a word of nibbles and
    // one of fifth bits, then two words of scales and minimums.
    for (format, dim, bytes) in [
        (Format::Int4G128, 300, 164),
        (Format::Int4G128, 64, 36),
        (Format::Int8Zp32, 13, 20),
        (Format::Int8G64, 100, 108),
        (Format::Q8_0, 40, 44),
        (Format::Q8_0, 300, 320),
        (Format::Q5_1, 40, 36),
        (Format::Q4_0, 7, 8),
    ] {
        assert_eq!(format.row_bytes(dim), bytes, "{format} dim {dim}");
    }
}

#[test]
fn cpu_gather_follows_the_bounds_policy() {
    let (rows, dim) = (100, 7);
    let data = embedding_table(rows, dim, 9);
    for format in Format::ALL {
        let t = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let decoded = t.dequantize();
        let row = |r: usize| decoded[r * dim..(r + 1) * dim].to_vec();
        // 35 ids, bad ones throughout: more than one block of the 16 rows a WASM gather touches
        // together (here, a table in the caches, it does not; the test below does).
        let ids = [5u32, 100, 99, u32::MAX, 0].repeat(7);
        assert_eq!(edo_core::cpu::gather(&t, &ids, Bounds::Error), Err(Error::IdOutOfRange { index: 1, id: 100, rows }));
        let zero = edo_core::cpu::gather(&t, &ids, Bounds::Zero).unwrap();
        let clamp = edo_core::cpu::gather(&t, &ids, Bounds::Clamp).unwrap();
        let want = |bad: Vec<f32>| [row(5), bad.clone(), row(99), bad, row(0)].concat().repeat(7);
        assert_eq!(zero, want(vec![0.0; dim]), "{format}");
        assert_eq!(clamp, want(row(99)), "{format}");
        let mut short = vec![0.0; 3];
        assert!(matches!(edo_core::cpu::gather_into(&t, &ids, Bounds::Zero, &mut short), Err(Error::ShapeMismatch { .. })));
    }
}

#[test]
fn cpu_gather_on_many_threads_equals_row_by_row_decoding() {
    let (rows, dim) = (5000, 37);
    let data = random_table(rows, dim, 11);
    let ids = edo_core::synth::uniform_ids(20_011, rows, 12);
    for format in Format::ALL {
        let t = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let got = edo_core::cpu::gather(&t, &ids, Bounds::Error).unwrap();
        let mut want = vec![0f32; dim];
        for (i, &id) in ids.iter().enumerate() {
            t.decode_row_into(id as usize, &mut want);
            assert_eq!(&got[i * dim..(i + 1) * dim], &want[..], "{format} id {id}");
        }
    }
}

/// Tables past the caches (8 MiB and more), where a WASM gather touches the rows of 16 ids while
/// it decodes the 16 before them: ids in and out of range, a short last block, every row as
/// decoding it alone gives.
#[test]
fn cpu_gather_of_tables_past_the_caches_equals_row_by_row_decoding() {
    let (rows, dim) = (140_001, 125);
    let data = random_table(rows, dim, 13);
    let mut ids = edo_core::synth::uniform_ids(1_003, rows, 14);
    for i in (5..ids.len()).step_by(37) {
        ids[i] = (rows + i) as u32;
    }
    for format in [Format::Int8, Format::Int4, Format::F16] {
        let t = PackedTable::quantize(format, &data, rows, dim).unwrap();
        assert!(t.bytes() >= 8 << 20, "{format}: {} bytes", t.bytes());
        let got = edo_core::cpu::gather(&t, &ids, Bounds::Zero).unwrap();
        let mut want = vec![0f32; dim];
        for (i, &id) in ids.iter().enumerate() {
            if (id as usize) < rows {
                t.decode_row_into(id as usize, &mut want);
            } else {
                want.fill(0.0);
            }
            assert_eq!(&got[i * dim..(i + 1) * dim], &want[..], "{format} id {id}");
        }
    }
}

#[test]
fn format_names_round_trip() {
    for f in Format::ALL {
        assert_eq!(Format::from_name(f.name()), Some(f));
    }
    assert_eq!(Format::from_name("INT8"), Some(Format::Int8));
    assert_eq!(Format::from_name("int3"), None);
}

/// Updating rows in place gives the table quantised from the updated values; a bad update
/// changes nothing.
#[test]
fn update_rows_requantises_in_place_and_all_or_nothing() {
    let (rows, dim) = (300, 13);
    let mut data = edo_core::synth::embedding_table(rows, dim, 3);
    let fresh = edo_core::synth::embedding_table(4, dim, 4);
    for format in Format::ALL {
        let mut t = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let before = t.clone();
        // Row 7 twice: the last wins.
        let ids = [0u32, 7, 299, 7];
        t.update_rows(&ids, &fresh).unwrap();
        let mut want = data.clone();
        for (&id, row) in ids.iter().zip(fresh.chunks_exact(dim)) {
            want[id as usize * dim..(id as usize + 1) * dim].copy_from_slice(row);
        }
        assert_eq!(t, PackedTable::quantize(format, &want, rows, dim).unwrap(), "{format}");
        // A NaN in the second row, or an id out of range: an error naming it, nothing written.
        let mut bad = fresh[..2 * dim].to_vec();
        bad[dim + 5] = f32::NAN;
        let mut u = before.clone();
        assert!(matches!(u.update_rows(&[1, 2], &bad), Err(Error::NonFinite { row: 2, col: 5, .. })));
        assert!(matches!(u.update_rows(&[1, 300], &fresh[..2 * dim]), Err(Error::IdOutOfRange { index: 1, id: 300, .. })));
        assert!(matches!(u.update_rows(&[1], &fresh[..2 * dim]), Err(Error::ShapeMismatch { .. })));
        assert_eq!(u, before, "{format}: a failed update changed the table");
    }
    data.truncate(0);
}

/// A table mapped from a file is copied on its first update; the file keeps the old rows.
#[test]
fn requantize_keeps_the_same_format_and_decodes_for_another() {
    // Rows enough for two workers' blocks on two threads (each row is decoded as it is encoded),
    // one of them too large for FP16: requantising is quantising the decoded table, errors
    // included.
    let (rows, dim) = (2600, 9);
    let mut data = edo_core::synth::embedding_table(rows, dim, 8);
    data[1700 * dim + 4] = 1e6;
    for from in [Format::F32, Format::Int8, Format::Q8_0, Format::Fp8E4M3] {
        let source = PackedTable::quantize(from, &data, rows, dim).unwrap();
        assert_eq!(source.requantize(from).unwrap(), source);
        let decoded = source.dequantize();
        for to in Format::ALL.into_iter().filter(|&to| to != from) {
            let want = PackedTable::quantize(to, &decoded, rows, dim);
            assert_eq!(source.requantize(to), want, "{from} to {to}");
        }
        assert!(matches!(source.requantize(Format::F16), Err(Error::OutOfRange { row: 1700, .. })), "{from}");
        // The rows keep the alignment asked of them on a GPU.
        let aligned = source.clone().with_row_alignment(16).unwrap();
        let to = if from == Format::Int8 { Format::Q8_0 } else { Format::Int8 };
        assert_eq!(aligned.requantize(to).unwrap().row_alignment(), 16, "{from}");
        // A table of no rows requantises to one of no rows.
        let empty = PackedTable::quantize(from, &[], 0, dim).unwrap();
        for to in Format::ALL {
            assert_eq!(empty.requantize(to), PackedTable::quantize(to, &[], 0, dim), "{from} to {to}, no rows");
        }
    }
}

#[test]
fn the_synthetic_table_is_generated_in_place_and_refuses_impossible_shapes() {
    let (rows, dim) = (1000, 37);
    let packed = edo_core::synth::embedding_packed(rows, dim, 9).unwrap();
    assert_eq!((packed.format(), packed.rows(), packed.dim()), (Format::F32, rows, dim));
    let want: Vec<u32> = edo_core::synth::embedding_table(rows, dim, 9).iter().map(|x| x.to_bits()).collect();
    assert_eq!(packed.words(), &want[..]);
    assert!(matches!(edo_core::synth::embedding_packed(5, 0, 9), Err(Error::ZeroDim)));
    assert!(matches!(edo_core::synth::embedding_packed(usize::MAX / 2, 4, 9), Err(Error::LimitExceeded { .. })));
    // No overflow in words, but more bytes than any allocation may hold: an error, not an abort.
    assert!(matches!(edo_core::synth::embedding_packed(usize::MAX / 8, 1, 9), Err(Error::HostOutOfMemory { .. })));
}

/// `quantize_min_error`: for the group-wise formats every group's squared error is at most
/// `quantize`'s, and less over the table; every other format quantises as `quantize` does.
#[test]
fn min_error_quantisation_never_loses_to_min_max() {
    let (rows, dim) = (300, 200);
    let mut data = edo_core::synth::embedding_table(rows, dim, 5);
    // Outliers in some rows: what clipping is for.
    for r in (0..rows).step_by(3) {
        data[r * dim + (r % dim)] *= 25.0;
    }
    data[7 * dim..8 * dim].fill(0.5);
    for format in Format::ALL {
        let plain = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let searched = PackedTable::quantize_min_error(format, &data, rows, dim).unwrap();
        // Only the FBGEMM-style group-wise formats (int4_g*, int8_g*) search.
        assert_eq!(format.has_min_error_search(), format.name().starts_with("int4_g") || format.name().starts_with("int8_g"), "{format}");
        if !format.has_min_error_search() {
            assert_eq!(searched, plain, "{format}");
            continue;
        }
        let (a, b) = (plain.dequantize(), searched.dequantize());
        let sq = |v: &[f32], r: usize, c: usize| (v[r * dim + c] - data[r * dim + c]) as f64 * (v[r * dim + c] - data[r * dim + c]) as f64;
        let (mut total_plain, mut total_searched) = (0f64, 0f64);
        for r in 0..rows {
            for g in (0..dim).step_by(format.group()) {
                let cols = g..(g + format.group()).min(dim);
                let (p, s): (f64, f64) = (cols.clone().map(|c| sq(&a, r, c)).sum(), cols.map(|c| sq(&b, r, c)).sum());
                assert!(s <= p, "{format} row {r} group at {g}: {s} > {p}");
                total_plain += p;
                total_searched += s;
            }
        }
        assert!(total_searched < total_plain, "{format}: {total_searched} vs {total_plain}");
        // Constant groups stay exact to fp16.
        assert_eq!(b[7 * dim], half::f16::from_f32(0.5).to_f32(), "{format}");
    }
}
