//! What the readers of tensor files share (`import` for safetensors, `.npy` and text, `gguf`,
//! `gbq`): the array layouts of [`FileLayout`], the imported [`Table`] (dense or packed) and
//! [`Imported`] (a table and its vocabulary), and the decoding of a raw array of floats or of
//! packed rows into a table. The readers depend on it, and it on none of them.

use std::borrow::Cow;

use half::{bf16, f16};

use super::Vocab;
use crate::format::{Format, PackedTable};
use crate::Error;

/// How to read an array's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Rows of `format` as [`super::export::packed_array`] (`edo export`) writes them: a
    /// group-wise or zero-point row's codes then its parameters, ggml's and the k-quants' blocks
    /// as GGUF holds them, … — so any export reads back as it was. (INT8, INT4 and binary are
    /// exported in FBGEMM's and packbits' layouts, which `from_name` gives for their names.)
    Packed {
        /// The rows' format.
        format: Format,
        /// Values per row, when the width fits several dims (a ggml row is whole blocks; a 4-bit
        /// row's last byte holds one value or two).
        dim: Option<usize>,
    },
}

impl FileLayout {
    /// Parses a layout name (`dense`, `fbgemm8`, `fbgemm4`, `packbits`, `packbits-lsb`, or a
    /// format's name for [`FileLayout::Packed`]; `fp32` and `fp16`, exported as float arrays, are
    /// `Dense`), with the dim for the layouts that may need it.
    pub fn from_name(name: &str, dim: Option<usize>) -> Option<FileLayout> {
        Some(match name.to_ascii_lowercase().as_str() {
            "dense" | "float" => FileLayout::Dense,
            "fbgemm8" | "fused8" | "int8" => FileLayout::Fbgemm8,
            "fbgemm4" | "fused4" | "int4" => FileLayout::Fbgemm4 { dim },
            "packbits" | "ubinary" | "binary" => FileLayout::Packbits { dim },
            "packbits-lsb" | "faiss" | "lsb" => FileLayout::PackbitsLsb { dim },
            // A format's name: FP32 and FP16 rows are exported as float arrays, INT8, INT4 and
            // binary in FBGEMM's and packbits' layouts (by any of their names), the rest packed.
            other => match Format::from_name(other)? {
                Format::F32 | Format::F16 => FileLayout::Dense,
                Format::Int8 => FileLayout::Fbgemm8,
                Format::Int4 => FileLayout::Fbgemm4 { dim },
                Format::Binary => FileLayout::Packbits { dim },
                format => FileLayout::Packed { format, dim },
            },
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
            Table::Dense { data, rows, dim } => Ok(PackedTable::quantize(format, data, *rows, *dim)?),
            Table::Packed(t) => Ok(t.requantize(format)?),
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
            (FileLayout::Dense, Elem::U8 | Elem::I8) => Err(bad(
                what,
                "a byte array holds packed rows: name its layout (fbgemm8, fbgemm4, packbits, packbits-lsb, or the format `edo export` wrote it in, e.g. q8_0)"
                    .into(),
            )),
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
                    FileLayout::Packed { format, dim } => (format, dim.map_or_else(|| only_dim(format, self.cols, what), |d| Ok(Some(d)))?),
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

    pub(crate) fn floats(&self) -> Result<Vec<f32>, Error> {
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
        FileLayout::Packed { .. } => " (docs/formats.md gives each format's bytes a row)",
        _ => " (packbits rows are ⌈dim/8⌉ bytes; pass the dim if it is not a multiple of 8)",
    }
}

/// The one dim whose rows of `format` are `cols` bytes ([`Format::unpadded_row_bytes`], which
/// grows with the dim), `None` when none is; an error naming them when several are (a ggml row's
/// last block is whole whatever its values).
fn only_dim(format: Format, cols: usize, what: &'static str) -> Result<Option<usize>, Error> {
    let bytes = |d: usize| format.unpadded_row_bytes(d);
    // The first dim whose rows take at least `at_least` bytes, among 1 ..= 8·cols (every format
    // spends at least a bit a value).
    let first = |at_least: usize| {
        let (mut lo, mut hi) = (1usize, cols.saturating_mul(8).saturating_add(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if bytes(mid) >= at_least {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let (low, high) = (first(cols), first(cols.saturating_add(1)) - 1);
    if cols == 0 || low > high || bytes(low) != cols {
        return Ok(None);
    }
    if low < high {
        return Err(Error::AmbiguousDim { what, format, cols, low, high });
    }
    Ok(Some(low))
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
        return Ok(PackedTable::from_words(format, 0, dim, Vec::new())?);
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

fn bad(what: &'static str, reason: String) -> Error {
    Error::BadFile { what, reason }
}
