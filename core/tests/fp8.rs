//! FP8 against ml_dtypes: the fixture (tests/data/fp8/fp8.safetensors,
//! scripts/fixtures/make_fp8_fixtures.py, ml_dtypes 0.6.0) holds hard values with their casts, and hard rows
//! with the scales, codes and decoded values edo must equal bit for bit.

use edo_core::format::{Fp8E4M3, Fp8E5M2};
use edo_core::{Format, PackedTable};
use safetensors::SafeTensors;

fn fixture() -> Vec<u8> {
    std::fs::read(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/fp8/fp8.safetensors")).unwrap()
}

fn f32s(st: &SafeTensors, name: &str) -> Vec<f32> {
    st.tensor(name).unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn casts_equal_ml_dtypes_bit_for_bit() {
    let bytes = fixture();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let values = f32s(&st, "values");
    assert!(values.len() > 1000);
    type Cast = (fn(f32) -> u8, fn(u8) -> f32);
    let casts: [(&str, Cast); 2] = [("e4m3", (Fp8E4M3::from_f32, Fp8E4M3::to_f32)), ("e5m2", (Fp8E5M2::from_f32, Fp8E5M2::to_f32))];
    for (name, (from, to)) in casts {
        let want = st.tensor(name).unwrap().data();
        for (&x, &code) in values.iter().zip(want) {
            assert_eq!(from(x), code, "{name}: {x:e} ({:#010x}) cast to {:#04x}, ml_dtypes {code:#04x}", x.to_bits(), from(x));
        }
        // Every code edo can produce decodes to itself.
        for code in 0..=255u8 {
            let v = to(code);
            if v.is_finite() {
                assert_eq!(from(v), code, "{name} {code:#04x} = {v:e}");
            }
        }
    }
}

#[test]
fn rows_equal_ml_dtypes_scales_codes_and_values() {
    let bytes = fixture();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let shape = st.tensor("rows").unwrap().shape().to_vec();
    let (rows, dim) = (shape[0], shape[1]);
    let data = f32s(&st, "rows");
    for (name, format) in [("e4m3", Format::Fp8E4M3), ("e5m2", Format::Fp8E5M2)] {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let scales = f32s(&st, &format!("{name}.scales"));
        let codes = st.tensor(&format!("{name}.codes")).unwrap().data();
        for r in 0..rows {
            let words = table.row(r);
            let ours: &[u8] = bytemuck::cast_slice(&words[..words.len() - 1]);
            assert_eq!(&ours[..dim], &codes[r * dim..(r + 1) * dim], "{name} row {r}: codes");
            assert_eq!(words[words.len() - 1], scales[r].to_bits(), "{name} row {r}: scale");
        }
        let decoded = table.dequantize();
        assert_eq!(bits(&decoded), bits(&f32s(&st, &format!("{name}.decoded"))), "{name}: decoded values");
        for (r, row) in data.chunks_exact(dim).enumerate() {
            for (c, ((x, y), b)) in row.iter().zip(&decoded[r * dim..]).zip(format.error_bounds(row)).enumerate() {
                assert!((x - y).abs() <= b, "{name} row {r} col {c}: |{x} − {y}| > {b}");
            }
        }
    }
}
