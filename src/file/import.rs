//! Reading tables from the files they come in.
//!
//! Dense tables (floats) come from safetensors tensors (`F32`, `F16`, `BF16`, `F64`), `.npy` arrays
//! (`<f4`, `<f2`, `<f8`) and word2vec / GloVe text. Packed tables come from byte arrays in the
//! layouts other tools write, read without requantising:
//!
//! | [`FileLayout`]   | array                         | becomes          | written by                                  |
//! |--------------|-------------------------------|------------------|---------------------------------------------|
//! | `Fbgemm8`    | u8 `[rows, dim + 8]`          | [`Format::Int8`] | `torch.ops.fbgemm` / `embedding_bag_byte_prepack` |
//! | `Fbgemm4`    | u8 `[rows, ⌈dim/2⌉ + 4]`      | [`Format::Int4`] | `embedding_bag_4bit_prepack`                 |
//! | `Packbits`   | u8 `[rows, ⌈dim/8⌉]`          | [`Format::Binary`] | `numpy.packbits(x > 0, axis=-1)`, sentence-transformers `ubinary` |
//! | `Packbits`   | i8 `[rows, ⌈dim/8⌉]`          | [`Format::Binary`] | sentence-transformers `binary` (packbits − 128) |
//! | `PackbitsLsb`| u8 `[rows, ⌈dim/8⌉]`          | [`Format::Binary`] | faiss (`pack_bitstrings`): LSB-first bits    |
//!
//! The dim of a 4-bit or binary array is ambiguous from its width (`⌈dim/2⌉`, `⌈dim/8⌉`); pass it
//! when it is not the largest the width allows. Bits of a binary row past `dim` are cleared.
//!
//! Imported FBGEMM 8-bit rows keep their full-precision f32 scales. edo's own INT8 rounds the scale
//! so that GPU and CPU decode bit for bit alike; an imported table can differ between the two by
//! one ulp where a GPU compiler fuses the multiply-add.

use std::borrow::Cow;

use half::{bf16, f16};

use super::{npy, Vocab};
use crate::format::{Format, PackedTable};
use crate::Error;

/// How to read an array's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileLayout {
    /// Floats, one row per table row.
    Dense,
    /// FBGEMM fused 8-bit row-wise: `dim` codes, f32 scale, f32 bias per row.
    Fbgemm8,
    /// FBGEMM fused 4-bit row-wise: `⌈dim/2⌉` code bytes, fp16 scale, fp16 bias per row.
    Fbgemm4 {
        /// Values per row, when the width leaves it ambiguous (an odd dim).
        dim: Option<usize>,
    },
    /// `numpy.packbits` sign bits, MSB-first; as `u8` or as sentence-transformers' `int8`.
    Packbits {
        /// Values per row, when not a multiple of 8.
        dim: Option<usize>,
    },
    /// Sign bits packed LSB-first, as faiss packs binary codes (`faiss.pack_bitstrings`,
    /// `IndexBinary*` inputs): element `i` is bit `i mod 8` of byte `i / 8`.
    PackbitsLsb {
        /// Values per row, when not a multiple of 8.
        dim: Option<usize>,
    },
}

impl FileLayout {
    /// Parses a layout name (`dense`, `fbgemm8`, `fbgemm4`, `packbits`), with the dim for the
    /// layouts that may need it.
    pub fn from_name(name: &str, dim: Option<usize>) -> Option<FileLayout> {
        Some(match name.to_ascii_lowercase().as_str() {
            "dense" | "float" => FileLayout::Dense,
            "fbgemm8" | "fused8" | "int8" => FileLayout::Fbgemm8,
            "fbgemm4" | "fused4" | "int4" => FileLayout::Fbgemm4 { dim },
            "packbits" | "ubinary" | "binary" => FileLayout::Packbits { dim },
            "packbits-lsb" | "faiss" | "lsb" => FileLayout::PackbitsLsb { dim },
            _ => return None,
        })
    }
}

/// An imported table: dense floats, or rows already packed in one of edo's formats.
#[derive(Clone, Debug)]
pub enum Table {
    /// Floats, to quantise to any format.
    Dense {
        /// The values, row-major.
        data: Vec<f32>,
        /// Rows.
        rows: usize,
        /// Values per row.
        dim: usize,
    },
    /// A table already packed (FBGEMM or packbits rows, or an `.edo` file's), kept as it is.
    Packed(PackedTable),
}

/// A table read from a file, with its vocabulary when the file has one.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The table read.
    pub table: Table,
    /// The tokens of the rows, for word2vec text and `.edo` files that have them.
    pub vocab: Option<Vocab>,
    /// Tokens of a text table that were not valid UTF-8 and were read with U+FFFD replacements.
    pub lossy_tokens: usize,
}

impl Imported {
    /// Rows of the table.
    pub fn rows(&self) -> usize {
        match &self.table {
            Table::Dense { rows, .. } => *rows,
            Table::Packed(t) => t.rows(),
        }
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        match &self.table {
            Table::Dense { dim, .. } => *dim,
            Table::Packed(t) => t.dim(),
        }
    }
    /// The format the table arrives in (`F32` for dense input).
    pub fn format(&self) -> Format {
        match &self.table {
            Table::Dense { .. } => Format::F32,
            Table::Packed(t) => t.format(),
        }
    }
    /// The table's values as f32 (decoded when packed): the reference quantisation error is
    /// measured against.
    pub fn values(&self) -> Cow<'_, [f32]> {
        match &self.table {
            Table::Dense { data, .. } => Cow::Borrowed(data),
            Table::Packed(t) => Cow::Owned(t.dequantize()),
        }
    }
    /// The table in `format`: quantised from the floats, kept as is when already packed in
    /// `format`, or decoded and requantised otherwise.
    pub fn to_format(&self, format: Format) -> Result<PackedTable, Error> {
        match &self.table {
            Table::Dense { data, rows, dim } => PackedTable::quantize(format, data, *rows, *dim),
            Table::Packed(t) => t.requantize(format),
        }
    }
}

/// Element types of the arrays import reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    F64,
    F32,
    F16,
    Bf16,
    U8,
    I8,
}

/// A 2-D array view shared by the safetensors and npy readers.
pub(crate) struct Array<'a> {
    pub(crate) elem: Elem,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: &'a [u8],
}

impl Array<'_> {
    pub(crate) fn into_table(self, layout: FileLayout, what: &'static str) -> Result<Table, Error> {
        match (layout, self.elem) {
            (FileLayout::Dense, Elem::U8 | Elem::I8) => Err(bad(what, "a byte array holds packed rows: name its layout (fbgemm8, fbgemm4 or packbits)".into())),
            (FileLayout::Dense, _) => {
                if self.cols == 0 {
                    return Err(Error::ZeroDim);
                }
                Ok(Table::Dense { data: self.floats()?, rows: self.rows, dim: self.cols })
            }
            (_, Elem::U8) | (FileLayout::Packbits { .. } | FileLayout::PackbitsLsb { .. }, Elem::I8) => {
                let (format, dim) = match layout {
                    FileLayout::Fbgemm8 => (Format::Int8, self.cols.checked_sub(8).filter(|&d| d > 0)),
                    FileLayout::Fbgemm4 { dim } => (Format::Int4, dim.or(self.cols.checked_sub(4).map(|c| c.saturating_mul(2)))),
                    FileLayout::Packbits { dim } | FileLayout::PackbitsLsb { dim } => (Format::Binary, dim.or(Some(self.cols.saturating_mul(8)))),
                    FileLayout::Dense => unreachable!("matched above"),
                };
                let dim = dim
                    .filter(|&d| d > 0 && d <= self.cols.saturating_mul(8) && format.unpadded_row_bytes(d) == self.cols)
                    .ok_or_else(|| bad(what, format!("{} columns are not a {format} row of any dim{}", self.cols, layout_dim_hint(layout))))?;
                let flip = if self.elem == Elem::I8 { 0x80 } else { 0 };
                let lsb_first = matches!(layout, FileLayout::PackbitsLsb { .. });
                Ok(Table::Packed(from_unpadded(format, self.rows, dim, self.data, flip, lsb_first, what)?))
            }
            (_, e) => Err(bad(what, format!("{layout:?} rows are bytes (uint8), not {e:?}"))),
        }
    }

    fn floats(&self) -> Result<Vec<f32>, Error> {
        let d = self.data;
        Ok(match self.elem {
            Elem::F32 => d.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Elem::F16 => d.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Elem::Bf16 => d.chunks_exact(2).map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Elem::F64 => {
                let mut out = Vec::with_capacity(d.len() / 8);
                for (i, b) in d.chunks_exact(8).enumerate() {
                    let x = f64::from_le_bytes(b.try_into().expect("chunks of 8"));
                    let y = x as f32;
                    if x.is_finite() && !y.is_finite() {
                        return Err(Error::BeyondF32 { row: i / self.cols, col: i % self.cols, value: x });
                    }
                    out.push(y);
                }
                out
            }
            Elem::U8 | Elem::I8 => unreachable!("byte arrays are packed rows"),
        })
    }
}

fn layout_dim_hint(layout: FileLayout) -> &'static str {
    match layout {
        FileLayout::Fbgemm8 => " (fbgemm8 rows are dim + 8 bytes)",
        FileLayout::Fbgemm4 { .. } => " (fbgemm4 rows are ⌈dim/2⌉ + 4 bytes; pass the dim if it is odd)",
        _ => " (packbits rows are ⌈dim/8⌉ bytes; pass the dim if it is not a multiple of 8)",
    }
}

/// Packs rows given without word padding (codes, then parameters: the FBGEMM and packbits
/// layouts) into `format`'s words. Parameters must be finite; binary bits past `dim` are cleared.
pub(crate) fn from_unpadded(format: Format, rows: usize, dim: usize, data: &[u8], xor: u8, lsb_first: bool, what: &'static str) -> Result<PackedTable, Error> {
    let src_row = format.unpadded_row_bytes(dim);
    let row_words = format.row_words(dim);
    let code_bytes = format.code_bytes(dim);
    let expected = rows.checked_mul(src_row).ok_or_else(|| bad(what, "shape overflows".into()))?;
    if data.len() != expected {
        return Err(Error::ShapeMismatch { what: "bytes of packed rows", expected, actual: data.len() });
    }
    if rows == 0 {
        // Nothing to allocate: the width alone is the file's claim, not its bytes.
        return PackedTable::from_words(format, 0, dim, Vec::new());
    }
    let mut table = PackedTable::zeroed(format, rows, dim, "imported table")?;
    let mut src_bytes = vec![0u8; src_row];
    let mut decoded = vec![0f32; dim];
    for (r, (src, dst)) in data.chunks_exact(src_row.max(1)).zip(table.words_mut().chunks_exact_mut(row_words)).enumerate() {
        let src = if xor != 0 || lsb_first {
            src_bytes.copy_from_slice(src);
            for s in &mut src_bytes[..code_bytes] {
                *s = if lsb_first { (*s ^ xor).reverse_bits() } else { *s ^ xor };
            }
            &src_bytes
        } else {
            src
        };
        format.read_external(src, dim, dst);
        // A scale, bias or value that is not finite would decode to rows of NaN or ∞.
        format.decode_row(dst, &mut decoded);
        if let Some(col) = decoded.iter().position(|x| !x.is_finite()) {
            return Err(bad(what, format!("row {r}: value {col} decodes to {} (a scale, bias or value that is not finite)", decoded[col])));
        }
    }
    Ok(table)
}

/// The 2-D tensors of a safetensors file, as `name [rows, cols] dtype` lines for messages.
fn tensor_list(st: &safetensors::SafeTensors<'_>) -> String {
    let mut names: Vec<String> = st.iter().filter(|(_, t)| t.shape().len() == 2).map(|(n, t)| format!("{n} {:?} {:?}", t.shape(), t.dtype())).collect();
    names.sort();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The element type of a safetensors dtype edo reads.
fn elem_of(dtype: safetensors::Dtype) -> Option<Elem> {
    Some(match dtype {
        safetensors::Dtype::F64 => Elem::F64,
        safetensors::Dtype::F32 => Elem::F32,
        safetensors::Dtype::F16 => Elem::F16,
        safetensors::Dtype::BF16 => Elem::Bf16,
        safetensors::Dtype::U8 => Elem::U8,
        safetensors::Dtype::I8 => Elem::I8,
        _ => return None,
    })
}

/// A safetensors tensor of floats (F32, F16, BF16 or F64) as f32, converted as the table readers
/// convert them (an f64 past f32's range is [`Error::BeyondF32`]); `None` for another dtype.
pub(crate) fn float_tensor(view: &safetensors::tensor::TensorView<'_>) -> Option<Result<Vec<f32>, Error>> {
    let elem = elem_of(view.dtype()).filter(|e| !matches!(e, Elem::U8 | Elem::I8))?;
    let rows = view.shape().first().copied().unwrap_or(1);
    let cols = view.shape().iter().skip(1).product::<usize>().max(1);
    Some(Array { elem, rows, cols, data: view.data() }.floats())
}

/// Reads tensor `tensor` of a safetensors file (or its only 2-D tensor when `None`).
pub fn safetensors(bytes: &[u8], tensor: Option<&str>, layout: FileLayout) -> Result<Imported, Error> {
    const WHAT: &str = "safetensors file";
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    // ONNX Runtime's GatherBlockQuantized triplet: data (U8), scales and maybe zero_points.
    let is_gbq = st.tensor("data").is_ok_and(|t| t.dtype() == safetensors::Dtype::U8) && st.tensor("scales").is_ok();
    if tensor.is_none() && is_gbq {
        let table = super::gbq::Gbq::from_safetensors(bytes)?.to_table()?;
        return Ok(Imported { table, vocab: None, lossy_tokens: 0 });
    }
    let name = match tensor {
        Some(n) => n.to_string(),
        None => {
            let two_d: Vec<String> = st.iter().filter(|(_, t)| t.shape().len() == 2).map(|(n, _)| n.to_string()).collect();
            match two_d.as_slice() {
                [one] => one.clone(),
                _ => return Err(Error::MissingTensor { name: String::new(), available: tensor_list(&st) }),
            }
        }
    };
    let view = st.tensor(&name).map_err(|_| Error::MissingTensor { name: name.clone(), available: tensor_list(&st) })?;
    let Some(elem) = elem_of(view.dtype()) else {
        return Err(bad(WHAT, format!("tensor {name:?} is {:?}; edo imports F32, F16, BF16, F64, U8 and I8", view.dtype())));
    };
    let [rows, cols] = view.shape() else {
        return Err(bad(WHAT, format!("tensor {name:?} has shape {:?}; an embedding table is 2-D", view.shape())));
    };
    let table = Array { elem, rows: *rows, cols: *cols, data: view.data() }.into_table(layout, WHAT)?;
    Ok(Imported { table, vocab: None, lossy_tokens: 0 })
}

/// Reads a 2-D `.npy` array.
pub fn npy(bytes: &[u8], layout: FileLayout) -> Result<Imported, Error> {
    const WHAT: &str = ".npy file";
    let a = npy::read(bytes)?;
    let [rows, cols] = a.shape[..] else {
        return Err(bad(WHAT, format!("array has shape {:?}; an embedding table is 2-D", a.shape)));
    };
    let elem = match a.dtype {
        npy::Dtype::F64 => Elem::F64,
        npy::Dtype::F32 => Elem::F32,
        npy::Dtype::F16 => Elem::F16,
        npy::Dtype::U8 => Elem::U8,
        npy::Dtype::I8 => Elem::I8,
        npy::Dtype::U32 => return Err(bad(WHAT, "a u32 array holds row ids, not a table".into())),
    };
    let table = Array { elem, rows, cols, data: a.data }.into_table(layout, WHAT)?;
    Ok(Imported { table, vocab: None, lossy_tokens: 0 })
}

/// Reads word2vec / GloVe / fastText `.vec` text: one `token v1 v2 … vD` line per row, separated
/// by spaces or tabs, with an optional word2vec `rows dim` first line (checked when present). Keeps
/// the tokens as the vocabulary. Blank lines are skipped; a line with a different number of values
/// is an error naming the line. Tokens that are not valid UTF-8 (fastText cuts multi-byte
/// characters) are kept with U+FFFD in place of the bad bytes and counted in
/// [`Imported::lossy_tokens`].
pub fn text(text: impl AsRef<[u8]>) -> Result<Imported, Error> {
    let mut tokens = Vec::new();
    let mut data = Vec::new();
    let mut dim = 0usize;
    let mut declared: Option<(usize, usize)> = None;
    let mut lossy = 0usize;
    for (i, line) in text.as_ref().split(|&b| b == b'\n').enumerate() {
        let line_no = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut fields = line.split(|&b| b == b' ' || b == b'\t').filter(|f| !f.is_empty());
        let Some(token) = fields.next() else { continue };
        let number = |f: &[u8]| std::str::from_utf8(f).ok().and_then(|s| s.parse::<f32>().ok());
        if i == 0 {
            // word2vec's "rows dim" header: exactly two integers.
            let rest: Vec<&[u8]> = fields.clone().collect();
            let int = |f: &[u8]| std::str::from_utf8(f).ok().and_then(|s| s.parse::<usize>().ok());
            if let ([d], Some(r)) = (rest.as_slice(), int(token)) {
                if let Some(d) = int(d) {
                    declared = Some((r, d));
                    continue;
                }
            }
        }
        let before = data.len();
        for f in fields {
            let v = number(f).ok_or_else(|| Error::Parse { line: line_no, reason: format!("{:?} is not a number", String::from_utf8_lossy(f)) })?;
            data.push(v);
        }
        let n = data.len() - before;
        if dim == 0 {
            if n == 0 {
                return Err(Error::Parse { line: line_no, reason: "a token with no values".into() });
            }
            dim = n;
            if let Some((_, d)) = declared {
                if d != dim {
                    return Err(Error::Parse { line: line_no, reason: format!("{dim} values, but the header declares dim {d}") });
                }
            }
        } else if n != dim {
            return Err(Error::Parse { line: line_no, reason: format!("{n} values where earlier lines have {dim}") });
        }
        let token = String::from_utf8_lossy(token);
        if matches!(token, Cow::Owned(_)) {
            lossy += 1;
        }
        tokens.push(token.into_owned());
    }
    if tokens.is_empty() {
        return Err(Error::Parse { line: 1, reason: "no vectors in the text".into() });
    }
    if let Some((r, _)) = declared {
        if r != tokens.len() {
            return Err(Error::Parse { line: 1, reason: format!("the header declares {r} rows, the text has {}", tokens.len()) });
        }
    }
    let rows = tokens.len();
    Ok(Imported { table: Table::Dense { data, rows, dim }, vocab: Some(Vocab::new(tokens)), lossy_tokens: lossy })
}

/// What kind of file a path holds, from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A `.safetensors` checkpoint.
    Safetensors,
    /// A NumPy `.npy` array.
    Npy,
    /// word2vec, GloVe or fastText text (`.txt`, `.vec`).
    Text,
    /// An edo table file.
    Edo,
    /// A GGUF model file (llama.cpp).
    Gguf,
}

impl FileKind {
    /// `.safetensors`, `.npy`, `.txt` / `.vec` / `.w2v`, `.edo`, `.gguf`.
    pub fn from_path(path: &std::path::Path) -> Option<FileKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "safetensors" => FileKind::Safetensors,
            "npy" => FileKind::Npy,
            "txt" | "vec" | "w2v" | "glove" => FileKind::Text,
            "edo" => FileKind::Edo,
            "gguf" => FileKind::Gguf,
            _ => return None,
        })
    }
}

/// Reads a table from a file: the kind from the extension, `tensor` for safetensors and GGUF
/// files (for GGUF, `token_embd.weight` when left out), `layout` for byte arrays. An `.edo` file
/// is read as the packed table it holds.
#[cfg(native)]
pub fn path(path: impl AsRef<std::path::Path>, tensor: Option<&str>, layout: FileLayout) -> Result<Imported, Error> {
    let path = path.as_ref();
    let kind = FileKind::from_path(path).ok_or_else(|| Error::Io {
        path: path.display().to_string(),
        message: "unknown file type; edo reads .safetensors, .npy, .txt/.vec (word2vec, GloVe), .gguf and .edo".into(),
    })?;
    if kind == FileKind::Edo {
        let file = super::TableFile::open(path)?;
        file.verify()?;
        let vocab = file.vocab().cloned();
        return Ok(Imported { table: Table::Packed(file.into_table()), vocab, lossy_tokens: 0 });
    }
    let map = super::map_file(path)?;
    match kind {
        FileKind::Safetensors => safetensors(&map, tensor, layout),
        FileKind::Npy => npy(&map, layout),
        FileKind::Text => text(&map[..]),
        FileKind::Gguf => super::gguf::Gguf::parse(&map).and_then(|g| g.table(&map, tensor.unwrap_or(super::gguf::EMBEDDING_TENSOR))),
        FileKind::Edo => unreachable!("handled above"),
    }
    .map_err(|e| super::in_file(path, e))
}

fn bad(what: &'static str, reason: String) -> Error {
    Error::BadFile { what, reason }
}
