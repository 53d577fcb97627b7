//! ggml's block formats and GGUF files, against the `gguf` Python package: the fixture
//! (tests/data/ggml/blocks.gguf, scripts/fixtures/make_ggml_fixtures.py) holds hard values, their
//! `quants.quantize` bytes and `quants.dequantize` values, which edo must equal bit for bit.

use std::path::PathBuf;

use edo::file::gguf::{self, Gguf, GgufLimits, Value};
use edo::file::import::{self, FileLayout, Table};
use edo::{Error, Format, PackedTable};

const BLOCK_FORMATS: [Format; 5] = [Format::Q8_0, Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1];
const K_FORMATS: [Format; 2] = [Format::Q4K, Format::Q6K];

fn fixture() -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ggml/blocks.gguf")).unwrap()
}

fn dense(g: &Gguf, bytes: &[u8], name: &str) -> (Vec<f32>, usize, usize) {
    match g.table(bytes, name).unwrap().table {
        Table::Dense { data, rows, dim } => (data, rows, dim),
        Table::Packed(t) => panic!("{name} is packed as {}", t.format()),
    }
}

fn raw<'a>(g: &Gguf, bytes: &'a [u8], name: &str) -> &'a [u8] {
    let t = g.tensor(name).unwrap();
    let start = (g.data_start + t.offset) as usize;
    &bytes[start..start + t.bytes.unwrap() as usize]
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// edo quantises to the same bytes as `gguf.quants.quantize`, reads them back as the same
/// words, and decodes them to `quants.dequantize`'s values bit for bit.
#[test]
fn block_formats_equal_the_gguf_package() {
    let bytes = fixture();
    let g = Gguf::parse(&bytes).unwrap();
    let (input, rows, dim) = dense(&g, &bytes, "input");
    assert_eq!((rows, dim), (24, 96));
    for format in BLOCK_FORMATS {
        let name = format.name();
        let ours = PackedTable::quantize(format, &input, rows, dim).unwrap();
        let exported = edo::file::export::packed_array(&ours);
        assert_eq!(exported.data, raw(&g, &bytes, name), "{name}: quantised bytes differ from gguf's");
        let Table::Packed(theirs) = g.table(&bytes, name).unwrap().table else { panic!("{name} read as floats") };
        assert_eq!(theirs.format(), format);
        assert_eq!(theirs, ours, "{name}: read words differ from quantised words");
        let (want, ..) = dense(&g, &bytes, &format!("{name}.dequantized"));
        assert_eq!(bits(&theirs.dequantize()), bits(&want), "{name}: decoded values differ from gguf's dequantize");
        // Every value is within the documented bound.
        for (r, row) in input.chunks_exact(dim).enumerate() {
            let decoded = &want[r * dim..(r + 1) * dim];
            for (c, ((x, y), b)) in row.iter().zip(decoded).zip(format.error_bounds(row)).enumerate() {
                assert!((x - y).abs() <= b, "{name} row {r} col {c}: |{x} − {y}| > {b}");
            }
        }
    }
    // F16 and BF16 tensors read as the floats they hold.
    let (f16, ..) = dense(&g, &bytes, "f16");
    let (bf16, ..) = dense(&g, &bytes, "bf16");
    for ((x, h), b) in input.iter().zip(&f16).zip(&bf16) {
        assert_eq!(half::f16::from_f32(*x).to_f32().to_bits(), h.to_bits());
        assert!((x - b).abs() <= x.abs() / 128.0, "{x} as bf16 read {b}");
    }
}

/// k-quant super-blocks (random codes and sub-block scales, hard fp16 scales) decode to
/// `quants.dequantize`'s values bit for bit, and edo's own k-quant encoding stays within the
/// documented bound on the fixture's hard rows.
#[test]
fn k_quants_decode_as_the_gguf_package() {
    let bytes = fixture();
    let g = Gguf::parse(&bytes).unwrap();
    for format in K_FORMATS {
        let name = format.name();
        let Table::Packed(theirs) = g.table(&bytes, name).unwrap().table else { panic!("{name} read as floats") };
        assert_eq!((theirs.format(), theirs.rows(), theirs.dim()), (format, 8, 512));
        let (want, ..) = dense(&g, &bytes, &format!("{name}.dequantized"));
        assert!(want.iter().all(|x| x.is_finite()), "{name}: the fixture's values are finite");
        assert_eq!(bits(&theirs.dequantize()), bits(&want), "{name}: decoded values differ from gguf's dequantize");
        // Quantising the decoded values again gives values within the bound of them, or, where
        // a super-block's scale would pass fp16's range (the ±65504 scales), a typed error.
        let mut checked = 0;
        for (r, row) in want.chunks_exact(512).enumerate() {
            let again = match PackedTable::quantize(format, row, 1, 512) {
                Ok(t) => t.dequantize(),
                Err(edo::CoreError::OutOfRange { value, .. }) if value.abs() > 65504.0 * 15.0 => continue,
                Err(e) => panic!("{name} row {r}: {e}"),
            };
            for (c, ((x, y), b)) in row.iter().zip(&again).zip(format.error_bounds(row)).enumerate() {
                assert!((x - y).abs() <= b, "{name} row {r} col {c}: |{x} − {y}| > {b}");
            }
            checked += 1;
        }
        assert!(checked >= 5, "{name}: only {checked} rows requantised");
    }
    let (input, rows, dim) = dense(&g, &bytes, "input");
    for format in K_FORMATS {
        let decoded = PackedTable::quantize(format, &input, rows, dim).unwrap().dequantize();
        for (r, row) in input.chunks_exact(dim).enumerate() {
            for (c, ((x, y), b)) in row.iter().zip(&decoded[r * dim..]).zip(format.error_bounds(row)).enumerate() {
                assert!((x - y).abs() <= b, "{format} row {r} col {c}: |{x} − {y}| > {b}");
            }
        }
    }
}

/// A table written as GGUF reads back as the same words, its tensor bytes those of the source.
#[test]
fn gguf_round_trips_byte_for_byte() {
    let bytes = fixture();
    let g = Gguf::parse(&bytes).unwrap();
    for format in BLOCK_FORMATS.into_iter().chain(K_FORMATS).chain([Format::F32, Format::F16]) {
        let source = match format {
            Format::F32 | Format::F16 => PackedTable::quantize(format, &dense(&g, &bytes, "input").0, 24, 96).unwrap(),
            _ => match g.table(&bytes, format.name()).unwrap().table {
                Table::Packed(t) => t,
                Table::Dense { .. } => unreachable!(),
            },
        };
        let mut out = Vec::new();
        gguf::write(&source, "token_embd.weight", &[("general.name", "round trip")], &mut out).unwrap();
        let back = Gguf::parse(&out).unwrap();
        assert_eq!(back.metadata, vec![("general.name".to_string(), Value::Str("round trip".into()))]);
        assert_eq!(back.tensors[0].shape(), vec![source.rows() as u64, source.dim() as u64]);
        assert_eq!(back.tensors[0].ggml_type, format.ggml_type().unwrap());
        if format.group() > 0 {
            assert_eq!(raw(&back, &out, "token_embd.weight"), raw(&g, &bytes, format.name()), "{format}");
        }
        let read = back.table(&out, "token_embd.weight").unwrap();
        assert_eq!(read.to_format(format).unwrap(), source, "{format}");
    }
    // Formats GGUF has no type for, and rows that are not whole blocks, are refused.
    let int8 = PackedTable::quantize(Format::Int8, &[1.0; 64], 2, 32).unwrap();
    assert!(matches!(gguf::write(&int8, "t", &[], &mut Vec::new()), Err(Error::Unsupported { .. })));
    let odd = PackedTable::quantize(Format::Q8_0, &[1.0; 66], 2, 33).unwrap();
    assert!(matches!(gguf::write(&odd, "t", &[], &mut Vec::new()), Err(Error::Unsupported { .. })));
}

/// The header lists what inspect shows; reading goes through `import::path` by extension.
#[test]
fn gguf_header_and_import_by_path() {
    let bytes = fixture();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.version, 3);
    assert!(g.metadata.iter().any(|(k, v)| k == "general.architecture" && *v == Value::Str("edo-fixture".into())));
    let names: Vec<&str> = g.tensors.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"q5_1") && names.contains(&"bf16"), "{names:?}");
    assert_eq!(g.tensor("q4_1").unwrap().type_name(), "Q4_1");
    match g.table(&bytes, "no such") {
        Err(Error::MissingTensor { available, .. }) => assert!(available.contains("q8_0 [24, 96] Q8_0"), "{available}"),
        other => panic!("{other:?}"),
    }
    let dir = std::env::temp_dir().join(format!("edo-ggml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("blocks.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let imported = import::path(&path, Some("q4_0"), FileLayout::Dense).unwrap();
    assert_eq!(imported.format(), Format::Q4_0);
    // Without a tensor name, the model's token embeddings are read; this file has none.
    assert!(matches!(import::path(&path, None, FileLayout::Dense), Err(Error::MissingTensor { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every truncation of the file, and headers that claim more than they hold, are typed errors.
#[test]
fn malformed_gguf_headers_are_typed_errors() {
    let bytes = fixture();
    let g = Gguf::parse(&bytes).unwrap();
    // Cut in the header: refused. Cut in the data: listed, and the cut tensor is refused whole
    // but read up to its last whole row.
    let header_end = g.data_start as usize - 32;
    for n in 0..header_end {
        match Gguf::parse(&bytes[..n]) {
            Err(Error::BadFile { .. }) => {}
            other => panic!("{n} bytes: {other:?}"),
        }
    }
    let cut = &bytes[..bytes.len() - 1];
    let short = Gguf::parse(cut).unwrap();
    let last = short.tensors.last().unwrap();
    assert_eq!(short.present_rows(last), 23);
    assert!(matches!(short.table(cut, &last.name), Err(Error::BadFile { reason, .. }) if reason.contains("cut short: 23 of its 24 rows")));
    let first = short.table_rows(cut, &last.name, 0..23).unwrap();
    assert_eq!(first.values()[..], g.table(&bytes, &last.name).unwrap().values()[..23 * 96]);
    assert!(matches!(short.table_rows(cut, &last.name, 0..24), Err(Error::BadFile { .. })));
    assert!(matches!(short.table_rows(cut, &last.name, 20..30), Err(Error::BadFile { .. })));
    let with = |at: usize, patch: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + patch.len()].copy_from_slice(patch);
        Gguf::parse(&b)
    };
    assert!(matches!(with(0, b"GGUG"), Err(Error::BadFile { .. })));
    assert!(matches!(with(4, &1u32.to_le_bytes()), Err(Error::UnsupportedVersion { .. })));
    assert!(matches!(with(8, &u64::MAX.to_le_bytes()), Err(Error::LimitExceeded { .. })));
    assert!(matches!(with(8, &100_000u64.to_le_bytes()), Err(Error::BadFile { .. })));
    assert!(matches!(with(16, &u64::MAX.to_le_bytes()), Err(Error::BadFile { .. })));
    // The first key's length, claiming more than the file.
    assert!(matches!(with(24, &(1u64 << 40).to_le_bytes()), Err(Error::LimitExceeded { .. })));
    assert!(matches!(with(24, &(1u64 << 20).to_le_bytes()), Err(Error::BadFile { .. })));
    // Tighter limits are the caller's to set.
    let tight = GgufLimits { header_bytes: 200, ..GgufLimits::default() };
    assert!(matches!(Gguf::parse_with(&bytes, tight), Err(Error::LimitExceeded { what: "GGUF header bytes", .. })));
    let few = GgufLimits { tensors: 3, ..GgufLimits::default() };
    assert!(matches!(Gguf::parse_with(&bytes, few), Err(Error::LimitExceeded { what: "GGUF tensors", .. })));

    // Hand-made headers: one tensor record after no key-values.
    let header = |n_dims: u32, dims: &[u64], ty: u32, offset: u64, data: usize| {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.push(b't');
        b.extend_from_slice(&n_dims.to_le_bytes());
        for d in dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
        b.resize(b.len().div_ceil(32) * 32 + data, 0);
        b
    };
    let ok = header(2, &[32, 2], 8, 0, 68);
    assert_eq!(Gguf::parse(&ok).unwrap().table(&ok, "t").unwrap().format(), Format::Q8_0);
    let cut = header(2, &[32, 2], 8, 0, 67);
    assert!(matches!(Gguf::parse(&cut).unwrap().table(&cut, "t"), Err(Error::BadFile { .. })));
    for (what, bytes) in [
        ("five dims", header(5, &[32, 1, 1, 1, 1], 8, 0, 68)),
        ("rows not whole blocks", header(2, &[33, 2], 8, 0, 70)),
        ("dims overflowing", header(2, &[1 << 40, 1 << 40], 0, 0, 0)),
        ("misaligned offset", header(2, &[32, 2], 8, 4, 72)),
        ("offset past any file", header(2, &[32, 2], 8, u64::MAX - 31, 68)),
    ] {
        assert!(matches!(Gguf::parse(&bytes), Err(Error::BadFile { .. })), "{what}: {:?}", Gguf::parse(&bytes));
    }
    // No rows, but a row width no table has (in whole blocks, so no bytes to hold): an error or
    // an empty table, never a panic on the width's arithmetic.
    for (dims, ty) in [([u64::MAX - 31, 0], 8u32), ([u64::MAX - 255, 0], 14), ([u64::MAX, 0], 0), ([1 << 62, 0], 12)] {
        let wide = header(2, &dims, ty, 0, 0);
        if let Ok(g) = Gguf::parse(&wide) {
            if let Ok(t) = g.table(&wide, "t") {
                assert_eq!(t.rows(), 0, "{dims:?}");
            }
        }
    }
    // A type edo knows the size of but does not decode (Q5_K), and one it does not know at all.
    let k = header(2, &[256, 1], 13, 0, 176);
    assert!(matches!(Gguf::parse(&k).unwrap().table(&k, "t"), Err(Error::Unsupported { .. })));
    let unknown = header(2, &[32, 1], 99, 0, 0);
    assert!(matches!(Gguf::parse(&unknown).unwrap().table(&unknown, "t"), Err(Error::BadFile { .. })));
    // A 1-D tensor is not a table; NaN scales are refused, not decoded.
    let one_d = header(1, &[32], 0, 0, 128);
    assert!(matches!(Gguf::parse(&one_d).unwrap().table(&one_d, "t"), Err(Error::BadFile { .. })));
    let mut nan = ok.clone();
    let at = nan.len() - 68;
    nan[at..at + 2].copy_from_slice(&half::f16::NAN.to_bits().to_le_bytes());
    assert!(matches!(Gguf::parse(&nan).unwrap().table(&nan, "t"), Err(Error::BadFile { .. })));
}

/// The real file `scripts/fixtures/gguf_reference.sh` fetches (a chunk of Gemma-3-270M's Q4_K_M GGUF) and
/// the `gguf` package's decoding of its rows, or `None` after saying SKIPPED.
pub fn gemma_reference() -> Option<(PathBuf, serde_json::Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/gguf");
    let Ok(json) = std::fs::read_to_string(dir.join("expected.json")) else {
        eprintln!("SKIPPED: no real GGUF reference (run scripts/fixtures/gguf_reference.sh; it needs PyPI)");
        return None;
    };
    Some((dir, serde_json::from_str(&json).unwrap()))
}

fn npy_f32(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let a = edo::file::npy::read(&bytes).unwrap();
    a.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// Real Q8_0 rows of Gemma's token embeddings, read from the GGUF chunk by edo, equal
/// `gguf.quants.dequantize` bit for bit; the chunk's header lists the 262 144-row table as cut
/// short at the rows it holds, and requantising those rows reproduces their bytes.
#[test]
fn real_gguf_rows_equal_the_gguf_package() {
    let Some((dir, e)) = gemma_reference() else { return };
    assert_eq!(e["gguf"], "0.19.0");
    let file = dir.join("gemma-3-270m-part00.gguf");
    let map = std::fs::read(&file).unwrap();
    let g = Gguf::open(&file).unwrap();
    let emb = g.tensor(gguf::EMBEDDING_TENSOR).unwrap();
    assert_eq!(g.data_start + emb.offset, e["token_embd"]["data_offset"].as_u64().unwrap());
    let present = g.present_rows(emb);
    assert_eq!(present, e["token_embd"]["present_rows"].as_u64().unwrap());
    let table = match g.table_rows(&map, gguf::EMBEDDING_TENSOR, 0..present).unwrap().table {
        Table::Packed(t) => t,
        Table::Dense { .. } => panic!("Q8_0 read as floats"),
    };
    assert_eq!((table.format(), table.dim()), (Format::Q8_0, 640));
    let ids: Vec<u32> = {
        let bytes = std::fs::read(dir.join("token_embd.ids.npy")).unwrap();
        edo::file::npy::read(&bytes).unwrap().data.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    let got = edo::cpu::gather(&table, &ids, edo::Bounds::Error).unwrap();
    assert_eq!(bits(&got), bits(&npy_f32(&dir.join("token_embd.dequantized.npy"))), "token_embd.weight rows");
    // Requantising the decoded rows gives back the file's bytes: ggml's quantiser is a fixed
    // point of its own output, and edo's is ggml's.
    let sample = PackedTable::quantize(Format::Q8_0, &got, ids.len(), 640).unwrap();
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(sample.row(i), table.row(id as usize), "row {id} requantised");
    }
    // The whole table is refused, naming the cut.
    assert!(matches!(g.table(&map, gguf::EMBEDDING_TENSOR), Err(Error::BadFile { reason, .. }) if reason.contains("84463 of its 262144 rows")));
}

/// The `gguf` fuzz target's seed corpus: the seeds (files the `gguf` package wrote) read whole;
/// whatever libFuzzer added may fail, but never panic.
#[test]
fn gguf_fuzz_corpus_reads_without_panicking() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gguf");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let seed = path.extension().is_some_and(|e| e == "gguf");
        match Gguf::parse(&bytes) {
            Ok(g) => {
                for t in &g.tensors {
                    let read = g.table(&bytes, &t.name);
                    assert!(!seed || t.dims.len() != 2 || read.is_ok(), "{}: {}: {read:?}", path.display(), t.name);
                }
                if seed {
                    assert!(g.metadata.iter().any(|(k, v)| k == "k.tokens" && *v == Value::Array { elem: "string", len: 3 }));
                    assert!(g.metadata.iter().any(|(k, v)| k == "k.i64" && *v == Value::Int(-1 << 40)));
                    seeds += 1;
                }
            }
            Err(e) => assert!(!seed, "{}: {e}", path.display()),
        }
    }
    assert_eq!(seeds, 8);
}
