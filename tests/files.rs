//! Table files, import and export, against reference files written by numpy and safetensors
//! (`scripts/fixtures/make_file_fixtures.py`), and malformed files of every kind.

use std::collections::BTreeMap;
use std::path::PathBuf;

use edo::file::import::{self, FileLayout, Table};
use edo::file::{export, npy, TableFile, Vocab};
use edo::synth::embedding_table;
use edo::{Error, Format, PackedTable};

mod common;

const ROWS: usize = 37;
const DIM: usize = 13;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/files").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The f32 values of a reference `.npy`.
fn npy_f32(name: &str) -> Vec<f32> {
    let bytes = fixture(name);
    let a = npy::read(&bytes).unwrap();
    assert_eq!(a.dtype, npy::Dtype::F32, "{name}");
    a.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn dense(imported: &import::Imported) -> (&[f32], usize, usize) {
    match &imported.table {
        Table::Dense { data, rows, dim } => (data, *rows, *dim),
        Table::Packed(t) => panic!("expected dense, got {:?}", t.format()),
    }
}

fn packed(imported: import::Imported) -> PackedTable {
    match imported.table {
        Table::Packed(t) => t,
        Table::Dense { .. } => panic!("expected packed rows"),
    }
}

fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a.to_bits() != b.to_bits()) {
        panic!("{what}: first difference at value {i}: {} vs {}", got[i], want[i]);
    }
}

#[test]
fn npy_floats_import_exactly() {
    let want = npy_f32("table_f32.npy");
    let f32_table = import::npy(&fixture("table_f32.npy"), FileLayout::Dense).unwrap();
    assert_eq!(dense(&f32_table), (&want[..], ROWS, DIM));
    let f64_table = import::npy(&fixture("table_f64.npy"), FileLayout::Dense).unwrap();
    assert_bits_eq(dense(&f64_table).0, &want, "f64 narrowed");
    let f16_table = import::npy(&fixture("table_f16.npy"), FileLayout::Dense).unwrap();
    let want16: Vec<f32> = want.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
    assert_bits_eq(dense(&f16_table).0, &want16, "f16 widened");
}

#[test]
fn export_writes_the_bytes_numpy_writes() {
    let values = npy_f32("table_f32.npy");
    for (format, reference) in [(Format::F32, "table_f32.npy"), (Format::F16, "table_f16.npy"), (Format::Int4, "fbgemm4.npy"), (Format::Binary, "ubinary.npy")]
    {
        let table = PackedTable::quantize(format, &values, ROWS, DIM).unwrap();
        assert!(export::packed_array(&table).to_npy() == fixture(reference), "{format} export differs from {reference}");
    }
    // Dense export of any table is its decoded values.
    let t = PackedTable::quantize(Format::Int8, &values, ROWS, DIM).unwrap();
    let a = npy::read(&export::dense_array(&t).to_npy()).unwrap().data.to_vec();
    assert_eq!(a, bytemuck::cast_slice::<f32, u8>(&t.dequantize()));
}

#[test]
fn fbgemm_8bit_rows_round_trip_byte_for_byte() {
    let bytes = fixture("fbgemm8.npy");
    let table = packed(import::npy(&bytes, FileLayout::Fbgemm8).unwrap());
    assert_eq!((table.format(), table.rows(), table.dim()), (Format::Int8, ROWS, DIM));
    assert_bits_eq(&table.dequantize(), &npy_f32("fbgemm8_dequant.npy"), "FBGEMM 8-bit decode");
    assert!(export::packed_array(&table).to_npy() == bytes, "fbgemm8.npy export");

    let st = fixture("fbgemm8.safetensors");
    let from_st = packed(import::safetensors(&st, None, FileLayout::Fbgemm8).unwrap());
    assert_eq!(from_st, table);
    assert!(export::packed_array(&table).to_safetensors("weight", &BTreeMap::new()) == st, "safetensors export");

    // edo's own INT8: FBGEMM's codes and bias, the scale rounded to 16 significant bits.
    let ours = PackedTable::quantize(Format::Int8, &npy_f32("table_f32.npy"), ROWS, DIM).unwrap();
    let ours = export::packed_array(&ours).data;
    for (r, (a, b)) in ours.chunks_exact(DIM + 8).zip(bytes[bytes.len() - ROWS * (DIM + 8)..].chunks_exact(DIM + 8)).enumerate() {
        assert_eq!(a[..DIM], b[..DIM], "row {r} codes");
        assert_eq!(a[DIM + 4..], b[DIM + 4..], "row {r} bias");
        let scale = |s: &[u8]| f32::from_le_bytes(s[DIM..DIM + 4].try_into().unwrap());
        assert!((scale(a) - scale(b)).abs() <= scale(b) * 2f32.powi(-16), "row {r} scale");
    }
}

#[test]
fn fbgemm_4bit_rows_import_with_their_dim() {
    let bytes = fixture("fbgemm4.npy");
    let table = packed(import::npy(&bytes, FileLayout::Fbgemm4 { dim: Some(DIM) }).unwrap());
    assert_eq!((table.format(), table.dim()), (Format::Int4, DIM));
    assert_bits_eq(&table.dequantize(), &npy_f32("fbgemm4_dequant.npy"), "FBGEMM 4-bit decode");
    assert!(export::packed_array(&table).to_npy() == bytes);
    // 11 bytes per row also fit dim 14: that is what an unannotated array reads as.
    assert_eq!(packed(import::npy(&bytes, FileLayout::Fbgemm4 { dim: None }).unwrap()).dim(), 14);
    // A dim the width cannot hold is refused.
    let e = import::npy(&bytes, FileLayout::Fbgemm4 { dim: Some(20) }).unwrap_err();
    assert!(matches!(e, Error::BadFile { .. }), "{e}");
}

/// Every format's export (`edo export` of packed rows) reads back as the table it was: from a
/// `.npy` with the format named as the layout, from a safetensors file by its own metadata.
#[test]
fn every_formats_export_reads_back_as_it_was() {
    // FP32 and FP16 export as float arrays (`npy_floats_import_exactly`).
    for format in Format::ALL.into_iter().filter(|f| !matches!(f, Format::F32 | Format::F16)) {
        assert_eq!(FileLayout::from_name(format.name(), None).map(|l| l == FileLayout::Dense), Some(false), "{format}");
        for dim in [1, 13, 40, 300] {
            let rows = 9;
            let table = PackedTable::quantize(format, &embedding_table(rows, dim, 5), rows, dim).unwrap();
            let array = export::packed_array(&table);
            let what = format!("{format} dim {dim}");
            let read = |layout| import::npy(&array.to_npy(), layout);
            let named = FileLayout::from_name(format.name(), Some(dim)).unwrap();
            assert_eq!(packed(read(named).unwrap_or_else(|e| panic!("{what}: {e}"))), table, "{what}");
            // Without the dim: the one that fits, or an error naming the range.
            match read(FileLayout::from_name(format.name(), None).unwrap()) {
                // FBGEMM's 4-bit rows and packbits read the most values the width holds (an
                // even dim, a multiple of 8), as those ecosystems' tables have; the CLI says so.
                Ok(t) if matches!(format, Format::Int4 | Format::Binary) => {
                    let t = packed(t);
                    assert_eq!(t.dim(), if format == Format::Int4 { dim.next_multiple_of(2) } else { dim.next_multiple_of(8) }, "{what}");
                }
                Ok(t) => assert_eq!(packed(t), table, "{what}, dim inferred"),
                Err(e) => assert!(matches!(e, Error::AmbiguousDim { low, high, .. } if low <= dim && dim <= high && low < high), "{what}: {e}"),
            }
            let meta: BTreeMap<String, String> = [("edo.format".to_string(), format.name().to_string()), ("edo.dim".to_string(), dim.to_string())].into();
            let st = array.to_safetensors("weight", &meta);
            assert_eq!(packed(import::safetensors(&st, None, FileLayout::Dense).unwrap_or_else(|e| panic!("{what}: {e}"))), table, "{what}, safetensors");
        }
    }
    // q8_0's rows are whole blocks of 34 bytes: 1 to 32 values fit one.
    let table = PackedTable::quantize(Format::Q8_0, &embedding_table(3, 20, 1), 3, 20).unwrap();
    let e = import::npy(&export::packed_array(&table).to_npy(), FileLayout::from_name("q8_0", None).unwrap()).unwrap_err();
    assert!(matches!(e, Error::AmbiguousDim { format: Format::Q8_0, cols: 34, low: 1, high: 32, .. }), "{e}");
    assert!(e.to_string().contains("any dim from 1 to 32: pass the dim"), "{e}");
    // A width no dim of the format has (q4_0 rows are 18 bytes a block of 32), and a name that
    // is neither a layout nor a format.
    let e = import::npy(&export::packed_array(&table).to_npy(), FileLayout::from_name("q4_0", None).unwrap()).unwrap_err();
    assert!(matches!(e, Error::BadFile { .. }), "{e}");
    assert_eq!(FileLayout::from_name("int3", None), None);
    assert_eq!(FileLayout::from_name("fp16", None), Some(FileLayout::Dense));
}

#[test]
fn packbits_codes_import_as_binary() {
    let values = npy_f32("table_f32.npy");
    let want = PackedTable::quantize(Format::Binary, &values, ROWS, DIM).unwrap();
    let ub = packed(import::npy(&fixture("ubinary.npy"), FileLayout::Packbits { dim: Some(DIM) }).unwrap());
    assert_eq!(ub, want);
    let b8 = packed(import::npy(&fixture("binary_int8.npy"), FileLayout::Packbits { dim: Some(DIM) }).unwrap());
    assert_eq!(b8, want, "sentence-transformers int8 'binary' is packbits − 128");
    // faiss packs LSB-first: the same bits, each byte reversed.
    let mut lsb = export::packed_array(&want);
    lsb.data.iter_mut().for_each(|b| *b = b.reverse_bits());
    assert_eq!(packed(import::npy(&lsb.to_npy(), FileLayout::PackbitsLsb { dim: Some(DIM) }).unwrap()), want);
    // Bits past dim are cleared, whatever the file holds.
    let mut dirty = export::packed_array(&want);
    for r in 0..ROWS {
        dirty.data[2 * r + 1] |= 0x07;
    }
    assert_eq!(packed(import::npy(&dirty.to_npy(), FileLayout::Packbits { dim: Some(DIM) }).unwrap()), want);
    // A byte array needs its layout named.
    let e = import::npy(&fixture("ubinary.npy"), FileLayout::Dense).unwrap_err();
    assert!(e.to_string().contains("layout"), "{e}");
}

#[test]
fn safetensors_checkpoint_tensors_by_name() {
    let st = fixture("model.safetensors");
    let words = import::safetensors(&st, Some("embeddings.word_embeddings.weight"), FileLayout::Dense).unwrap();
    assert_eq!((words.rows(), words.dim()), (ROWS, DIM));
    assert_bits_eq(dense(&words).0, &npy_f32("word_embeddings_as_f32.npy"), "BF16 widened");
    let types = import::safetensors(&st, Some("embeddings.token_type_embeddings.weight"), FileLayout::Dense).unwrap();
    assert_eq!(types.rows(), 2);

    match import::safetensors(&st, None, FileLayout::Dense).unwrap_err() {
        e @ Error::MissingTensor { .. } => {
            assert!(e.to_string().starts_with("the file holds several 2-D tensors: say which (--tensor"), "{e}");
            assert!(e.to_string().contains("embeddings.word_embeddings.weight [37, 13] BF16"), "{e}");
        }
        e => panic!("{e}"),
    }
    match import::safetensors(&st, Some("word_embeddings"), FileLayout::Dense).unwrap_err() {
        Error::MissingTensor { name, available } => {
            assert_eq!(name, "word_embeddings");
            assert!(!available.contains("LayerNorm"), "only 2-D tensors are offered: {available}");
        }
        e => panic!("{e}"),
    }
    let e = import::safetensors(&st, Some("embeddings.LayerNorm.weight"), FileLayout::Dense).unwrap_err();
    assert!(e.to_string().contains("2-D"), "{e}");
}

#[test]
fn word2vec_and_glove_text_keep_the_vocabulary() {
    let want = npy_f32("table_f32.npy");
    for name in ["glove.txt", "word2vec.txt"] {
        let t = import::text(std::str::from_utf8(&fixture(name)).unwrap()).unwrap();
        assert_bits_eq(dense(&t).0, &want, name);
        let vocab = t.vocab.as_ref().unwrap();
        assert_eq!(vocab.len(), ROWS);
        assert_eq!(vocab.id("word5").unwrap(), 5);
        assert_eq!(vocab.token(36), Some("word36"));
        assert!(matches!(vocab.id("nope"), Err(Error::UnknownToken { .. })));
        // Export as text and read back: same values, same tokens.
        let table = t.to_format(Format::F32).unwrap();
        let text = export::text(&table, Some(vocab)).unwrap();
        let again = import::text(&text).unwrap();
        assert_bits_eq(dense(&again).0, &want, "text round trip");
        assert_eq!(again.vocab.as_ref(), Some(vocab));
    }
}

#[test]
fn malformed_text_names_the_line() {
    let cases = [
        ("a 1 2\nb 1 2 3\n", 2, "3 values"),
        ("a 1 x\n", 1, "not a number"),
        ("3 2\na 1 2\nb 1 2\n", 1, "declares 3 rows"),
        ("2 3\na 1 2\n", 2, "declares dim 3"),
        ("\n\n", 1, "no vectors"),
        ("a\n", 1, "no values"),
    ];
    for (text, line, reason) in cases {
        match import::text(text) {
            Err(Error::Parse { line: l, reason: r }) => {
                assert_eq!(l, line, "{text:?}: {r}");
                assert!(r.contains(reason), "{text:?}: {r}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    // fastText cuts multi-byte characters: such tokens are kept, with U+FFFD, and counted.
    let t = import::text(b"caf\xc3 1 2\nok 3 4\n").unwrap();
    assert_eq!(t.lossy_tokens, 1);
    assert_eq!(t.vocab.as_ref().unwrap().token(0), Some("caf\u{FFFD}"));
    // NaN in text reaches the quantiser, which names its row and column.
    let t = import::text("a 1 2\nb nan 2\n").unwrap();
    assert!(matches!(t.to_format(Format::Int8), Err(Error::NonFinite { row: 1, col: 0, .. })));
}

fn sample_file(format: Format) -> (TableFile, Vec<f32>) {
    let (rows, dim) = (300, 37);
    let values = embedding_table(rows, dim, 11);
    let table = PackedTable::quantize(format, &values, rows, dim).unwrap();
    let tokens = (0..rows).map(|i| format!("tok{i}·é")).collect();
    let mut file = TableFile::new(table).with_vocab(Vocab::new(tokens)).unwrap();
    file.set_metadata("source", "synthetic").unwrap();
    (file, values)
}

#[test]
fn table_files_round_trip_every_format() {
    let dir = tempdir();
    for format in Format::ALL {
        let (file, _) = sample_file(format);
        let bytes = file.to_bytes();
        let back = TableFile::from_bytes(bytes.clone()).unwrap();
        back.verify().unwrap();
        assert_eq!(back.table(), file.table(), "{format}");
        assert_eq!(back.vocab(), file.vocab());
        assert_eq!(back.metadata().get("source").map(String::as_str), Some("synthetic"));

        let path = dir.join(format!("t-{}.edo", format.name().replace('+', "_")));
        file.write(&path).unwrap();
        assert!(std::fs::read(&path).unwrap() == bytes, "write and to_bytes agree");
        let mapped = TableFile::open(&path).unwrap();
        assert!(mapped.table().is_mapped(), "rows used in place from the map");
        mapped.verify_rows(5..7).unwrap();
        assert_eq!(mapped.table(), file.table());
        // Any safetensors reader sees the packed words.
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let rows = st.tensor("rows").unwrap();
        assert_eq!(rows.shape(), [300, format.row_words(37)]);
        assert_eq!(rows.data(), bytemuck::cast_slice::<u32, u8>(file.table().words()));
    }
}

/// A table's row alignment on a GPU (FBGEMM's `row_alignment`) is kept in its file: the rows
/// stay packed (any reader sees the same words), `edo.row_alignment` says how a GPU lays them
/// out, an unaligned table writes no key, and a key that is no power of two from 4 to 256 is a
/// malformed file.
#[test]
fn row_alignment_round_trips_through_files() {
    // INT8 rows of 48 values: 14 words, 16 on a GPU aligned to 16 bytes.
    let file = TableFile::new(PackedTable::quantize(Format::Int8, &edo::synth::embedding_table(300, 48, 2), 300, 48).unwrap());
    let plain = file.to_bytes();
    assert!(!String::from_utf8_lossy(&plain[..400]).contains("row_alignment"));
    let aligned = TableFile::new(file.table().clone().with_row_alignment(16).unwrap());
    let bytes = aligned.to_bytes();
    let back = TableFile::from_bytes(bytes.clone()).unwrap();
    back.verify().unwrap();
    assert_eq!((back.table().row_alignment(), back.table().row_words(), back.table().gpu_row_words()), (16, 14, 16));
    assert_eq!(back.table(), aligned.table());
    assert_ne!(back.table(), file.table(), "the alignment is part of the table");
    assert_eq!(back.table().words(), file.table().words(), "rows stay packed in the file");
    for bad in ["12", "2", "512", "x"] {
        let broken = with_header(&bytes, |h| h.replace("\"edo.row_alignment\":\"16\"", &format!("\"edo.row_alignment\":\"{bad}\"")));
        assert!(matches!(TableFile::from_bytes(broken), Err(Error::BadFile { .. })), "{bad}");
    }
}

/// Rows whose last group is cut short store only the codes its values reach (the k-quants: the
/// sub-blocks they reach); a file in which an earlier build stored the padded group is refused by
/// name.
#[test]
fn padded_last_group_files_of_earlier_builds_are_refused_by_name() {
    use safetensors::tensor::{Dtype, TensorView};
    for (format, dim, padded_words, words) in [
        (Format::Q6K, 128, 53, 29),
        (Format::Q4K, 40, 36, 12),
        (Format::Q6K, 384, 105, 81),
        (Format::Int4G128, 64, 17, 9),
        (Format::Int4G128, 300, 51, 41),
        (Format::Int8Zp32, 13, 9, 5),
        (Format::Int8G64, 100, 34, 27),
        (Format::Q8_0, 40, 17, 11),
        (Format::Q5_0, 13, 6, 4),
    ] {
        assert_eq!(format.row_words(dim), words, "{format} dim {dim}");
        let rows = 3;
        let data = vec![0u8; 4 * rows * padded_words];
        let crc = vec![0u8; 4];
        let tensors =
            [("rows", TensorView::new(Dtype::U32, vec![rows, padded_words], &data).unwrap()), ("crc32", TensorView::new(Dtype::U32, vec![1], &crc).unwrap())];
        let meta: std::collections::HashMap<String, String> = [
            ("edo.version", "1".to_string()),
            ("edo.format", format.name().to_string()),
            ("edo.rows", rows.to_string()),
            ("edo.dim", dim.to_string()),
            ("edo.chunk_bytes", "1048576".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let bytes = safetensors::serialize(tensors, Some(meta)).unwrap();
        let e = TableFile::from_bytes(bytes).unwrap_err();
        assert!(matches!(e, Error::BadFile { .. }) && e.to_string().contains("quantise the table again"), "{format} dim {dim}: {e}");
    }
}

#[test]
fn reserved_metadata_and_vocab_length_are_checked() {
    let (mut file, _) = sample_file(Format::Int8);
    assert!(matches!(file.set_metadata("edo.rows", "1"), Err(Error::Unsupported { .. })));
    let t = file.table().clone();
    let e = TableFile::new(t).with_vocab(Vocab::new(vec!["a".into()])).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { expected: 300, actual: 1, .. }), "{e}");
}

/// Rewrites the JSON header of a safetensors file (keeping it 8-byte aligned).
fn with_header(bytes: &[u8], edit: impl Fn(&str) -> String) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    let mut new = edit(header.trim_end()).into_bytes();
    new.resize(new.len().next_multiple_of(8), b' ');
    let mut out = (new.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&new);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

#[test]
fn malformed_table_files_are_typed_errors() {
    let (file, _) = sample_file(Format::Int4);
    let good = file.to_bytes();
    let open = |b: Vec<u8>| TableFile::from_bytes(b).and_then(|f| f.verify().map(|()| f));

    // Every truncation.
    for len in 0..good.len() {
        let e = open(good[..len].to_vec()).unwrap_err();
        assert!(matches!(e, Error::BadFile { .. }), "truncated to {len}: {e}");
    }
    // Not a table file at all.
    for junk in [b"hello world, not a table".to_vec(), fixture("table_f32.npy"), vec![0xff; 64]] {
        assert!(matches!(open(junk), Err(Error::BadFile { .. })));
    }
    let e = open(fixture("model.safetensors")).unwrap_err();
    assert!(e.to_string().contains("edo quantize"), "a plain safetensors file points to import: {e}");

    // A lying header: more rows than the data holds, a shape whose product overflows, a version
    // from the future, a format that does not exist.
    let lies: [(&str, &str); 5] = [
        ("\"edo.rows\":\"300\"", "\"edo.rows\":\"301\""),
        ("[300,", "[4611686018427387904,"),
        ("\"edo.version\":\"1\"", "\"edo.version\":\"5\""),
        ("\"edo.format\":\"int4\"", "\"edo.format\":\"int3\""),
        ("\"edo.chunk_bytes\":\"1048576\"", "\"edo.chunk_bytes\":\"0\""),
    ];
    for (from, to) in lies {
        let bad = with_header(&good, |h| {
            assert!(h.contains(from), "{from} not in {h}");
            h.replace(from, to)
        });
        let e = open(bad).unwrap_err();
        match to {
            t if t.contains("version") => assert!(matches!(e, Error::UnsupportedVersion { .. }), "{e}"),
            _ => assert!(matches!(e, Error::BadFile { .. }), "{to}: {e}"),
        }
    }

    // A dim whose rows' words would overflow, in formats of groups and super-blocks too.
    for format in [Format::Int4, Format::Q8_0, Format::Int8G32, Format::Q4K, Format::Q6K] {
        let good = sample_file(format).0.to_bytes();
        for dim in ["4611686018427387904", "18446744073709551615"] {
            let bad = with_header(&good, |h| {
                assert!(h.contains("\"edo.dim\":\"37\""), "{h}");
                h.replace("\"edo.dim\":\"37\"", &format!("\"edo.dim\":\"{dim}\""))
            });
            assert!(matches!(open(bad), Err(Error::BadFile { .. })), "{format} dim {dim}");
        }
    }

    // Damaged rows: the checksum names the bytes; a damaged vocabulary is refused on open.
    let rows_at = good.len() - 4 * file.table().words().len() - file.vocab().unwrap().tokens().iter().map(|t| t.len()).sum::<usize>();
    let mut flipped = good.clone();
    flipped[rows_at + 100] ^= 0x10;
    let f = TableFile::from_bytes(flipped).unwrap();
    assert!(matches!(f.verify_rows(0..1), Err(Error::Checksum { start: 0, .. })));
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    assert!(matches!(TableFile::from_bytes(flipped), Err(Error::BadFile { .. })));

    // A header damaged where its shape stays plausible: dim 37 → 38 leaves an INT4 row as many
    // words, so only the header's own checksum tells.
    let e = open(with_header(&good, |h| h.replace("\"edo.dim\":\"37\"", "\"edo.dim\":\"38\""))).unwrap_err();
    assert!(matches!(e, Error::BadFile { .. }) && e.to_string().contains("edo.header_crc32"), "{e}");
    let e = open(with_header(&good, |h| {
        let at = h.find("\"edo.header_crc32\"").unwrap();
        let end = at + h[at..].find(',').unwrap();
        format!("{}{}", &h[..at], &h[end + 1..])
    }))
    .unwrap_err();
    assert!(matches!(e, Error::BadFile { .. }) && e.to_string().contains("edo.header_crc32 is missing"), "{e}");

    // Single-byte damage anywhere — every byte of the header, every seventh of the data: an
    // error, or (damage in a user key) a file of the same rows; never a panic, never another
    // table.
    let data_start = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    for i in (0..data_start).chain((data_start..good.len()).step_by(7)) {
        let mut b = good.clone();
        b[i] = b[i].wrapping_add(1 + (i % 200) as u8);
        if let Ok(f) = open(b) {
            let (t, g) = (f.table(), file.table());
            assert_eq!((t.format(), t.rows(), t.dim(), t.words()), (g.format(), g.rows(), g.dim(), g.words()), "byte {i} damaged, read as another table");
        }
    }
}

#[test]
fn malformed_npy_files_are_typed_errors() {
    let good = fixture("table_f32.npy");
    for len in 0..good.len() {
        assert!(matches!(import::npy(&good[..len], FileLayout::Dense), Err(Error::BadFile { .. })), "truncated to {len}");
    }
    let header_edit = |from: &str, to: &str| {
        let s = String::from_utf8_lossy(&good[..128]).replace(from, to);
        let mut b = s.into_bytes();
        b.truncate(128);
        b.extend_from_slice(&good[128..]);
        b
    };
    let cases = [
        header_edit("(37, 13)", "(38, 13)"),
        header_edit("(37, 13)", "(9999999999999999999, 13)"),
        header_edit("(37, 13)", "(-1, 13)"),
        header_edit("False", "True "),
        header_edit("<f4", ">f4"),
        header_edit("<f4", "<c8"),
    ];
    for (i, bad) in cases.into_iter().enumerate() {
        assert_eq!(bad.len(), good.len());
        assert!(matches!(import::npy(&bad, FileLayout::Dense), Err(Error::BadFile { .. })), "case {i}");
    }
    let mut v9 = good.clone();
    v9[6] = 9;
    assert!(import::npy(&v9, FileLayout::Dense).unwrap_err().to_string().contains("version 9"));
    // Zero rows of an absurd width: no overflow, whatever the layout.
    let wide = npy::write(npy::Dtype::U8, &[0, usize::MAX / 3], &[]);
    for layout in [FileLayout::Fbgemm8, FileLayout::Fbgemm4 { dim: None }, FileLayout::Packbits { dim: None }, FileLayout::Packbits { dim: Some(usize::MAX) }] {
        let _ = import::npy(&wide, layout);
    }
    // A 3-D array is not a table.
    let cube = npy::write(npy::Dtype::F32, &[2, 2, 2], &[0u8; 32]);
    assert!(import::npy(&cube, FileLayout::Dense).unwrap_err().to_string().contains("2-D"));
}

/// Replays the fuzz corpus — each input as it is, and with its header's checksum made right —
/// and reads byte arrays in every layout: none of it may panic.
#[test]
fn fuzz_corpus_does_not_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/table_file");
    let (mut n, mut opened) = (0, 0);
    let layouts =
        [FileLayout::Dense, FileLayout::Fbgemm4 { dim: None }, FileLayout::from_name("q8_0", None).unwrap(), FileLayout::from_name("q4_k", Some(300)).unwrap()];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for input in std::iter::once(bytes.clone()).chain(common::resigned(&bytes)) {
            if let Ok(f) = TableFile::from_bytes(input) {
                opened += 1;
                let _ = f.verify();
                let rows = f.table().rows();
                let _ = f.verify_rows(rows / 2..rows);
            }
        }
        for layout in layouts {
            let _ = import::npy(&bytes, layout);
            let _ = import::safetensors(&bytes, None, layout);
        }
        n += 1;
    }
    assert!(n >= 4, "corpus has {n} files");
    assert!(opened >= 4, "{opened} inputs of the corpus open: the replay reaches past the header");
}

/// A directory under the temporary directory, removed when it goes out of scope.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> TempDir {
    let dir = std::env::temp_dir().join(format!("edo-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

#[test]
fn f64_values_beyond_f32_are_named_with_their_value() {
    let values: [f64; 4] = [0.5, -1.0, 2.0, -1e39];
    let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    let file = edo::file::npy::write(edo::file::npy::Dtype::F64, &[2, 2], &bytes);
    let err = import::npy(&file, FileLayout::Dense).unwrap_err();
    assert_eq!(err, Error::BeyondF32 { row: 1, col: 1, value: -1e39 });
    assert!(err.to_string().contains("-1e39 is beyond f32's range"), "{err}");
}

/// A table read from a file borrows its bytes; updating rows copies them first.
#[test]
fn update_rows_of_a_mapped_table_copies_on_write() {
    let (rows, dim) = (50, 8);
    let data = edo::synth::embedding_table(rows, dim, 5);
    let t = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let bytes = edo::file::TableFile::new(t.clone()).to_bytes();
    let file = edo::file::TableFile::from_bytes(bytes).unwrap();
    let mut mapped = file.table().clone();
    mapped.update_rows(&[3], &[0.5; 8]).unwrap();
    assert!(!mapped.is_mapped());
    assert!((mapped.words().as_ptr() as usize).is_multiple_of(64), "the copy starts on a cache line");
    assert_eq!(file.table(), &t, "the file's rows are unchanged");
    assert_eq!(edo::cpu::gather(&mapped, &[3], edo::Bounds::Error).unwrap(), vec![0.5; 8]);
}
