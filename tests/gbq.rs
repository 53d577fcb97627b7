//! ONNX Runtime's GatherBlockQuantized: the fixtures (tests/data/gbq/*.safetensors,
//! scripts/fixtures/make_gbq_fixtures.py, onnxruntime 1.23.2) hold the operator's inputs and its output for
//! a list of rows, which edo's lookups must equal bit for bit.

use std::path::PathBuf;

use edo::file::gbq::{Gbq, GbqScales};
use edo::file::import::{self, FileLayout, Table};
use edo::{Bounds, Error, Format, PackedTable};
use half::f16;
use safetensors::{Dtype, SafeTensors};

/// Every case and the format edo keeps it in (`None`: the decoded floats).
const CASES: [(&str, Option<Format>); 8] = [
    ("b4_g32_f16_zp", Some(Format::Int4Zp32)),
    ("b4_g128_f32exact", Some(Format::Int4Zp128)),
    ("b8_g64_f16_zp", Some(Format::Int8Zp64)),
    ("b8_g128_f16", Some(Format::Int8Zp128)),
    ("b4_g64_f32exact_zp", Some(Format::Int4Zp64)),
    ("b8_g16_f32_zp", None),
    ("b4_g256_f16", None),
    ("b4_g32_f32_zp", None),
];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/gbq/{name}.safetensors"))).unwrap()
}

/// The rows gathered and onnxruntime's output for them, as f32 (exact: f16 widens exactly), and
/// whether that output was f16.
fn expected(bytes: &[u8]) -> (Vec<u32>, Vec<f32>, bool) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let ids = st.tensor("indices").unwrap().data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    let y = st.tensor("expected").unwrap();
    let f16_out = y.dtype() == Dtype::F16;
    let values = if f16_out {
        y.data().chunks_exact(2).map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()).collect()
    } else {
        y.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    (ids, values, f16_out)
}

/// edo's f32 values as the operator outputs them: rounded to f16 when its scales are f16.
fn as_output(v: &[f32], f16_out: bool) -> Vec<u32> {
    v.iter().map(|&x| if f16_out { f16::from_f32(x).to_f32().to_bits() } else { x.to_bits() }).collect()
}

#[test]
fn lookups_equal_onnxruntime_bit_for_bit() {
    for (name, format) in CASES {
        let bytes = fixture(name);
        let imported = import::safetensors(&bytes, None, FileLayout::Dense).unwrap();
        let (ids, want, f16_out) = expected(&bytes);
        let got = match (&imported.table, format) {
            (Table::Packed(t), Some(f)) => {
                assert_eq!(t.format(), f, "{name}");
                edo::cpu::gather(t, &ids, Bounds::Error).unwrap()
            }
            (Table::Dense { data, dim, .. }, None) => ids.iter().flat_map(|&i| data[i as usize * dim..][..*dim].to_vec()).collect(),
            (t, f) => panic!("{name}: read as {:?}, expected {f:?}", matches!(t, Table::Packed(_))),
        };
        let want_bits: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
        assert_eq!(as_output(&got, f16_out), want_bits, "{name}: edo's rows differ from onnxruntime's");
        // The decoded values are the operator's formula in f32, whatever the table is kept in.
        let gbq = Gbq::from_safetensors(&bytes).unwrap();
        let decoded = gbq.decode().unwrap();
        let rows: Vec<f32> = ids.iter().flat_map(|&i| decoded[i as usize * gbq.dim..][..gbq.dim].to_vec()).collect();
        assert_eq!(rows.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn zero_point_tables_round_trip_byte_for_byte() {
    for (name, format) in CASES {
        let Some(format) = format else { continue };
        let bytes = fixture(name);
        let source = Gbq::from_safetensors(&bytes).unwrap();
        let Table::Packed(table) = source.to_table().unwrap() else { panic!("{name}") };
        let back = Gbq::from_safetensors(&Gbq::from_table(&table).unwrap().to_safetensors()).unwrap();
        assert_eq!((back.bits, back.block_size, back.rows, back.dim), (source.bits, source.block_size, source.rows, source.dim), "{name}");
        assert_eq!(back.data, source.data, "{name}: data");
        match (&source.scales, &back.scales) {
            (GbqScales::F16(a), GbqScales::F16(b)) => assert_eq!(a, b, "{name}: scales"),
            (GbqScales::F32(a), GbqScales::F16(b)) => {
                assert!(a.iter().zip(b).all(|(x, h)| f16::from_bits(*h).to_f32().to_bits() == x.to_bits()), "{name}: f32 scales written as the same f16 values")
            }
            other => panic!("{name}: {other:?}"),
        }
        // Zero points: the same bytes as far as the operator reads them (4-bit ones: the codes of
        // the flattened scales; the slack after them, random in the fixture, edo writes as 0).
        match (&source.zero_points, &back.zero_points) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                assert_eq!(a.len(), b.len(), "{name}");
                let codes = source.rows * source.blocks();
                let (used, half) = if source.bits == 4 { (codes / 2, codes % 2 == 1) } else { (codes, false) };
                assert_eq!(a[..used], b[..used], "{name}: zero points");
                if half {
                    assert_eq!(a[used] & 0xF, b[used], "{name}: the last zero point");
                }
            }
            other => panic!("{name}: zero points {other:?}"),
        }
        // And the table read back is the same words.
        let Table::Packed(again) = back.to_table().unwrap() else { panic!() };
        assert_eq!(again, table, "{name} ({format})");
    }
}

#[test]
fn quantised_zero_point_tables_export_and_stay_within_their_bound() {
    let (rows, dim) = (50, 200);
    let data = edo::synth::embedding_table(rows, dim, 3);
    for format in [Format::Int4Zp32, Format::Int4Zp64, Format::Int4Zp128, Format::Int8Zp32, Format::Int8Zp64, Format::Int8Zp128] {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let gbq = Gbq::from_table(&table).unwrap();
        assert_eq!(gbq.decode().unwrap(), table.dequantize(), "{format}: the operator's formula gives edo's values");
        let Table::Packed(back) = gbq.to_table().unwrap() else { panic!() };
        assert_eq!(back, table, "{format}");
        // Zero is exact, as the operator's asymmetric quantisation promises.
        let mut zeros = data.clone();
        zeros[..dim].fill(0.0);
        zeros[dim + 5] = 0.0;
        let t = PackedTable::quantize(format, &zeros, rows, dim).unwrap().dequantize();
        assert!(t[..dim].iter().all(|&x| x == 0.0) && t[dim + 5] == 0.0, "{format}");
    }
    // Other formats are refused, naming what to do.
    let int4 = PackedTable::quantize(Format::Int4G32, &data, rows, dim).unwrap();
    assert!(matches!(Gbq::from_table(&int4), Err(e @ Error::Unsupported(edo::Unsupported::GbqExportFormat)) if e.to_string().contains("int4_zp")));
}

#[test]
fn malformed_triplets_are_typed_errors() {
    let good = Gbq::from_safetensors(&fixture("b4_g32_f16_zp")).unwrap();
    type Spoil = Box<dyn Fn(&mut Gbq)>;
    let cases: [(&str, Spoil); 6] = [
        ("bits 3", Box::new(|g| g.bits = 3)),
        ("block 24", Box::new(|g| g.block_size = 24)),
        ("block 8", Box::new(|g| g.block_size = 8)),
        (
            "short data",
            Box::new(|g| {
                g.data.pop();
            }),
        ),
        ("short scales", Box::new(|g| g.scales = GbqScales::F32(vec![1.0; 3]))),
        ("long zero points", Box::new(|g| g.zero_points.as_mut().unwrap().push(0))),
    ];
    for (what, spoil) in cases {
        let mut g = good.clone();
        spoil(&mut g);
        assert!(matches!(g.check(), Err(Error::BadFile { .. })), "{what}");
        assert!(matches!(g.to_table(), Err(Error::BadFile { .. })), "{what}");
        // Written out and read back, the file is refused too.
        if what != "bits 3" {
            assert!(matches!(Gbq::from_safetensors(&g.to_safetensors()), Err(Error::BadFile { .. })), "{what}");
        }
    }
    // NaN scales decode to NaN: refused when the table is read as floats.
    let mut nan = Gbq::from_safetensors(&fixture("b4_g256_f16")).unwrap();
    if let GbqScales::F16(s) = &mut nan.scales {
        s[3] = 0x7e00;
    }
    assert!(matches!(nan.to_table(), Err(Error::BadFile { reason, .. }) if reason.contains("NaN")));
    // Not a safetensors file.
    assert!(matches!(Gbq::from_safetensors(b"not a file"), Err(Error::BadFile { .. })));
}

/// The `gbq` fuzz target's corpus: the seeds (the fixtures) read and decode; whatever libFuzzer
/// added may fail, but never panic.
#[test]
fn gbq_fuzz_corpus_reads_without_panicking() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gbq");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let seed = path.file_name().unwrap().to_string_lossy().starts_with("seed-");
        match Gbq::from_safetensors(&bytes) {
            Ok(g) => {
                let table = g.to_table();
                assert!(!seed || table.is_ok(), "{}: {table:?}", path.display());
                let _ = g.decode();
                seeds += seed as usize;
            }
            Err(e) => assert!(!seed, "{}: {e}", path.display()),
        }
        let _ = import::safetensors(&bytes, None, FileLayout::Dense);
    }
    assert_eq!(seeds, CASES.len());
}
