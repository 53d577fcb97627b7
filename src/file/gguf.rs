//! GGUF files (llama.cpp's model files): the header, the tensor list, and any 2-D tensor as a
//! table.
//!
//! A GGUF file (versions 2 and 3) is the magic `GGUF`, a version, the tensor and key-value
//! counts, the key-values (typed; strings and arrays length-prefixed), one record per tensor
//! (name, dims with the row length first, ggml type, offset), then the tensors' bytes from the
//! first multiple of `general.alignment` (default 32) after the header. All little-endian.
//!
//! [`Gguf::parse`] reads the header only, never allocating from a count it has not checked
//! against the bytes that back it: every length, count and offset is checked against the file's
//! size and [`GgufLimits`], and every failure is [`Error::BadFile`] or [`Error::LimitExceeded`].
//! Tensors whose bytes run past the end of the file (a split part, a truncated download) are
//! listed; [`Gguf::table`] refuses them and [`Gguf::table_rows`] reads the rows that are there.
//! [`Gguf::table`] then reads one tensor's bytes — from a memory map, only those pages are touched:
//! F32, F16 and BF16 as floats; Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 kept as the packed blocks they
//! are ([`Format::Q8_0`] …). [`write()`] writes a table as a one-tensor GGUF file.

use std::borrow::Cow;

use super::tensor::{self, FileLayout, Imported};
use crate::format::{Format, PackedTable};
use crate::Error;

const WHAT: &str = "GGUF file";
const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;

/// The token embedding table of a llama.cpp model: the tensor read when none is named.
pub const EMBEDDING_TENSOR: &str = "token_embd.weight";

/// What a GGUF header may claim before it is refused. The defaults hold any real model's header
/// (a 256 000-token vocabulary is a few MB) and bound what a hostile one can make a reader do.
#[derive(Clone, Copy, Debug)]
pub struct GgufLimits {
    /// Bytes of header (key-values and tensor records).
    pub header_bytes: u64,
    /// Bytes of one string.
    pub string_bytes: u64,
    /// Tensors.
    pub tensors: u64,
}

impl Default for GgufLimits {
    fn default() -> Self {
        GgufLimits { header_bytes: 256 << 20, string_bytes: 16 << 20, tensors: 1 << 20 }
    }
}

/// A metadata value, as [`Gguf::metadata`] keeps it: scalars and strings whole, arrays as their
/// element type and length.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any unsigned integer type.
    UInt(u64),
    /// Any signed integer type.
    Int(i64),
    /// FLOAT32 or FLOAT64.
    Float(f64),
    /// BOOL.
    Bool(bool),
    /// STRING (invalid UTF-8 replaced).
    Str(String),
    /// ARRAY: the element type's name and the number of elements.
    Array {
        /// The element type (`u32`, `string`, …).
        elem: &'static str,
        /// Elements.
        len: u64,
    },
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::UInt(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(s) if s.chars().count() > 80 => write!(f, "{:?}… ({} bytes)", s.chars().take(80).collect::<String>(), s.len()),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Array { elem, len } => write!(f, "[{elem}; {len}]"),
        }
    }
}

/// One tensor record of a GGUF header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`token_embd.weight`).
    pub name: String,
    /// Its dims, ggml's order: the row length (values per row) first.
    pub dims: Vec<u64>,
    /// Its ggml type id (`GGML_TYPE_*`).
    pub ggml_type: u32,
    /// Where its bytes start, from the start of the data section.
    pub offset: u64,
    /// Its bytes, when the type is one edo knows the size of.
    pub bytes: Option<u64>,
}

impl TensorInfo {
    /// The ggml type's name (`Q8_0`, `Q4_K`, …), or `type N` for one edo does not know.
    pub fn type_name(&self) -> Cow<'static, str> {
        match ggml_type_info(self.ggml_type) {
            Some((name, ..)) => Cow::Borrowed(name),
            None => Cow::Owned(format!("type {}", self.ggml_type)),
        }
    }

    /// The shape as a table reads it: `[rows, dim]` for a 2-D tensor (outer dims first).
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A parsed GGUF header.
#[derive(Clone, Debug)]
pub struct Gguf {
    /// The file's version (2 or 3).
    pub version: u32,
    /// The key-values, in file order.
    pub metadata: Vec<(String, Value)>,
    /// The tensor records, in file order.
    pub tensors: Vec<TensorInfo>,
    /// Where the data section starts in the file.
    pub data_start: u64,
    /// The file's length.
    pub file_len: u64,
}

/// How a tensor type becomes a table.
pub(crate) enum TensorFormat {
    /// Floats, to quantise to any format.
    Floats(tensor::Elem),
    /// Blocks kept as they are.
    Packed(Format),
}

/// ggml's types: name, values per block, bytes per block (the `gguf` package's
/// `GGML_QUANT_SIZES`, 0.19.0).
fn ggml_type_info(t: u32) -> Option<(&'static str, u64, u64)> {
    Some(match t {
        0 => ("F32", 1, 4),
        1 => ("F16", 1, 2),
        2 => ("Q4_0", 32, 18),
        3 => ("Q4_1", 32, 20),
        6 => ("Q5_0", 32, 22),
        7 => ("Q5_1", 32, 24),
        8 => ("Q8_0", 32, 34),
        9 => ("Q8_1", 32, 40),
        10 => ("Q2_K", 256, 84),
        11 => ("Q3_K", 256, 110),
        12 => ("Q4_K", 256, 144),
        13 => ("Q5_K", 256, 176),
        14 => ("Q6_K", 256, 210),
        15 => ("Q8_K", 256, 292),
        16 => ("IQ2_XXS", 256, 66),
        17 => ("IQ2_XS", 256, 74),
        18 => ("IQ3_XXS", 256, 98),
        19 => ("IQ1_S", 256, 50),
        20 => ("IQ4_NL", 32, 18),
        21 => ("IQ3_S", 256, 110),
        22 => ("IQ2_S", 256, 82),
        23 => ("IQ4_XS", 256, 136),
        24 => ("I8", 1, 1),
        25 => ("I16", 1, 2),
        26 => ("I32", 1, 4),
        27 => ("I64", 1, 8),
        28 => ("F64", 1, 8),
        29 => ("IQ1_M", 256, 56),
        30 => ("BF16", 1, 2),
        34 => ("TQ1_0", 256, 54),
        35 => ("TQ2_0", 256, 66),
        39 => ("MXFP4", 32, 17),
        _ => return None,
    })
}

/// A cursor over the header bytes; every read is checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    limits: GgufLimits,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], Error> {
        let end = (self.at as u64).checked_add(n).filter(|&e| e <= self.bytes.len() as u64);
        let Some(end) = end else {
            return Err(bad(format!("truncated: {what} at byte {} needs {n} bytes, the file has {}", self.at, self.bytes.len())));
        };
        if end > self.limits.header_bytes {
            return Err(Error::LimitExceeded { what: "GGUF header bytes", requested: end, max: self.limits.header_bytes });
        }
        let slice = &self.bytes[self.at..end as usize];
        self.at = end as usize;
        Ok(slice)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }

    fn string(&mut self, what: &str) -> Result<String, Error> {
        let len = self.u64(what)?;
        if len > self.limits.string_bytes {
            return Err(Error::LimitExceeded { what: "GGUF string bytes", requested: len, max: self.limits.string_bytes });
        }
        Ok(String::from_utf8_lossy(self.take(len, what)?).into_owned())
    }

    /// A value of type `t`; arrays (`depth` levels deep at most) are skipped over, their elements
    /// checked against the bytes left before any is read.
    fn value(&mut self, t: u32, depth: u32, what: &str) -> Result<Value, Error> {
        let fixed = |r: &mut Self, n: u64| -> Result<u64, Error> {
            let b = r.take(n, what)?;
            let mut v = [0u8; 8];
            v[..b.len()].copy_from_slice(b);
            Ok(u64::from_le_bytes(v))
        };
        Ok(match t {
            0 => Value::UInt(fixed(self, 1)?),
            1 => Value::Int(fixed(self, 1)? as u8 as i8 as i64),
            2 => Value::UInt(fixed(self, 2)?),
            3 => Value::Int(fixed(self, 2)? as u16 as i16 as i64),
            4 => Value::UInt(fixed(self, 4)?),
            5 => Value::Int(fixed(self, 4)? as u32 as i32 as i64),
            6 => Value::Float(f32::from_bits(fixed(self, 4)? as u32) as f64),
            7 => match fixed(self, 1)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(bad(format!("{what}: a BOOL of value {b}"))),
            },
            8 => Value::Str(self.string(what)?),
            9 => {
                if depth == 0 {
                    return Err(bad(format!("{what}: arrays nested too deep")));
                }
                let elem = self.u32(what)?;
                let len = self.u64(what)?;
                let elem_name = value_type_name(elem).ok_or_else(|| bad(format!("{what}: an array of unknown type {elem}")))?;
                // Every element takes at least one byte (a string's length takes eight).
                let least = if elem == 8 { 8 } else { value_size(elem).unwrap_or(1) };
                if len.saturating_mul(least) > (self.bytes.len() - self.at) as u64 {
                    return Err(bad(format!("truncated: {what} claims {len} elements of {elem_name}, more than the file holds")));
                }
                match value_size(elem) {
                    Some(size) => {
                        self.take(len * size, what)?;
                    }
                    None => {
                        for _ in 0..len {
                            self.value(elem, depth - 1, what)?;
                        }
                    }
                }
                Value::Array { elem: elem_name, len }
            }
            10 => Value::UInt(fixed(self, 8)?),
            11 => Value::Int(fixed(self, 8)? as i64),
            12 => Value::Float(f64::from_bits(fixed(self, 8)?)),
            t => return Err(bad(format!("{what}: unknown value type {t}"))),
        })
    }
}

/// The name of a metadata value type.
fn value_type_name(t: u32) -> Option<&'static str> {
    ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"].get(t as usize).copied()
}

/// The bytes of a fixed-size metadata value type.
fn value_size(t: u32) -> Option<u64> {
    match t {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

impl Gguf {
    /// Parses the header of a GGUF file (`bytes` is the whole file) with the default limits.
    pub fn parse(bytes: &[u8]) -> Result<Gguf, Error> {
        Gguf::parse_with(bytes, GgufLimits::default())
    }

    /// Parses the header of a GGUF file with the caller's limits.
    pub fn parse_with(bytes: &[u8], limits: GgufLimits) -> Result<Gguf, Error> {
        let mut r = Reader { bytes, at: 0, limits };
        if r.take(4, "the magic")? != MAGIC {
            return Err(bad("not a GGUF file (no GGUF magic)".into()));
        }
        let version = r.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(Error::UnsupportedVersion { found: format!("GGUF {version}"), supported: 3 });
        }
        let n_tensors = r.u64("the tensor count")?;
        let n_kv = r.u64("the key-value count")?;
        if n_tensors > limits.tensors {
            return Err(Error::LimitExceeded { what: "GGUF tensors", requested: n_tensors, max: limits.tensors });
        }
        // A key-value takes at least 13 bytes, a tensor record at least 28: counts the file cannot
        // hold are refused before anything is read from them.
        let left = (bytes.len() - r.at) as u64;
        if n_kv.saturating_mul(13) > left || n_tensors.saturating_mul(28) > left {
            return Err(bad(format!("truncated: {n_kv} key-values and {n_tensors} tensors do not fit in {left} bytes")));
        }
        let mut metadata = Vec::new();
        let mut alignment = DEFAULT_ALIGNMENT;
        for i in 0..n_kv {
            let key = r.string(&format!("key {i}"))?;
            let t = r.u32(&format!("the type of {key:?}"))?;
            let value = r.value(t, 2, &format!("the value of {key:?}"))?;
            if key == "general.alignment" {
                alignment = match value {
                    Value::UInt(a) if t == 4 && a.is_power_of_two() => a,
                    _ => return Err(bad(format!("general.alignment is {value}; it must be a power of two as u32"))),
                };
            }
            metadata.push((key, value));
        }
        let mut tensors = Vec::new();
        for i in 0..n_tensors {
            let name = r.string(&format!("the name of tensor {i}"))?;
            let n_dims = r.u32(&format!("the dims of {name:?}"))?;
            if !(1..=4).contains(&n_dims) {
                return Err(bad(format!("tensor {name:?} has {n_dims} dims (1 to 4 allowed)")));
            }
            let mut dims = Vec::new();
            for _ in 0..n_dims {
                dims.push(r.u64(&format!("the dims of {name:?}"))?);
            }
            let ggml_type = r.u32(&format!("the type of {name:?}"))?;
            let offset = r.u64(&format!("the offset of {name:?}"))?;
            if !offset.is_multiple_of(alignment) {
                return Err(bad(format!("tensor {name:?} starts at offset {offset}, not a multiple of the alignment {alignment}")));
            }
            let bytes = match ggml_type_info(ggml_type) {
                Some((type_name, block, block_bytes)) => {
                    if !dims[0].is_multiple_of(block) {
                        return Err(bad(format!("tensor {name:?} is {type_name} with rows of {} values, not whole blocks of {block}", dims[0])));
                    }
                    let values = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
                    Some(values.and_then(|v| (v / block).checked_mul(block_bytes)).ok_or_else(|| bad(format!("tensor {name:?}: dims {dims:?} overflow")))?)
                }
                None => None,
            };
            tensors.push(TensorInfo { name, dims, ggml_type, offset, bytes });
        }
        let data_start = (r.at as u64).div_ceil(alignment) * alignment;
        // Tensors may run past the end (a split part, a truncated download): they are listed,
        // and reading them says so. Their claims still have to be addressable.
        for t in &tensors {
            if let Some(n) = t.bytes {
                if t.offset.checked_add(n).and_then(|end| end.checked_add(data_start)).is_none() {
                    return Err(bad(format!("tensor {:?} ({} bytes at offset {}) lies past any file", t.name, n, t.offset)));
                }
            }
        }
        Ok(Gguf { version, metadata, tensors, data_start, file_len: bytes.len() as u64 })
    }

    /// Maps the file at `path` and parses its header; only the header's pages are read.
    #[cfg(native)]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Gguf, Error> {
        let path = path.as_ref();
        let map = super::map_file(path)?;
        Gguf::parse(&map).map_err(|e| super::in_file(path, e))
    }

    /// Maps the file at `path` and reads the rows of tensor `name` that it holds — all of them
    /// in a whole file, the first ones in a file cut short (one part of a split model, a
    /// truncated download) — touching only their pages. A tensor with no row in the file is an
    /// error.
    #[cfg(native)]
    pub fn read_present_rows(path: impl AsRef<std::path::Path>, name: &str) -> Result<Imported, Error> {
        let path = path.as_ref();
        let map = super::map_file(path)?;
        let g = Gguf::parse(&map).map_err(|e| super::in_file(path, e))?;
        let present = g.present_rows(g.tensor(name)?);
        if present == 0 {
            return Err(super::in_file(path, bad(format!("no row of tensor {name:?} is in the file"))));
        }
        g.table_rows(&map, name, 0..present).map_err(|e| super::in_file(path, e))
    }

    /// Whether [`Gguf::table`] reads this tensor: 2-D, of a type edo reads.
    pub fn is_table(&self, t: &TensorInfo) -> bool {
        t.dims.len() == 2 && self.table_format(t).is_some()
    }

    /// How edo reads a tensor of this type: as floats, as a packed [`Format`], or not at all.
    pub(crate) fn table_format(&self, t: &TensorInfo) -> Option<TensorFormat> {
        Some(match t.ggml_type {
            0 => TensorFormat::Floats(tensor::Elem::F32),
            1 => TensorFormat::Floats(tensor::Elem::F16),
            28 => TensorFormat::Floats(tensor::Elem::F64),
            30 => TensorFormat::Floats(tensor::Elem::Bf16),
            ty => TensorFormat::Packed(Format::ALL.into_iter().find(|f| f.group() > 0 && f.ggml_type() == Some(ty))?),
        })
    }

    /// The record of the tensor called `name`.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, Error> {
        self.tensors.iter().find(|t| t.name == name).ok_or_else(|| Error::MissingTensor { name: name.to_string(), available: self.table_list() })
    }

    /// The 2-D tensors, as `name [rows, dim] TYPE`, for messages.
    fn table_list(&self) -> String {
        let list: Vec<String> = self.tensors.iter().filter(|t| t.dims.len() == 2).map(|t| format!("{} {:?} {}", t.name, t.shape(), t.type_name())).collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }

    /// Reads tensor `name` of the file (`bytes` is the whole file, as given to [`Gguf::parse`])
    /// as a table: F32, F16 and BF16 as floats, ggml block types as packed tables of the
    /// matching [`Format`], bytes as they are. Other types are [`Error::Unsupported`].
    pub fn table(&self, bytes: &[u8], name: &str) -> Result<Imported, Error> {
        let t = self.tensor(name)?;
        let (_, rows) = table_dims(t)?;
        let present = self.present_rows(t);
        if present < rows {
            return Err(bad(format!("tensor {name:?} is cut short: {present} of its {rows} rows are in the file (a split part or a truncated download; `edo quantize --partial` and `Gguf::read_present_rows` read those)")));
        }
        self.table_rows(bytes, name, 0..rows)
    }

    /// Whole rows of a 2-D tensor that lie within the file (all of them unless the file is a
    /// split part or truncated).
    pub fn present_rows(&self, t: &TensorInfo) -> u64 {
        let (Some(bytes), &[dim, rows]) = (t.bytes, &t.dims[..]) else { return 0 };
        let row_bytes = bytes / rows.max(1);
        let there = self.file_len.saturating_sub(self.data_start).saturating_sub(t.offset);
        if dim == 0 || row_bytes == 0 {
            return rows;
        }
        (there / row_bytes).min(rows)
    }

    /// Reads rows `rows` of tensor `name` (as [`Gguf::table`]); they must lie within the file,
    /// which may be a split part or truncated ([`Gguf::present_rows`]).
    pub fn table_rows(&self, bytes: &[u8], name: &str, rows: std::ops::Range<u64>) -> Result<Imported, Error> {
        let t = self.tensor(name)?;
        let (dim, all_rows) = table_dims(t)?;
        let n = t.bytes.ok_or_else(|| bad(format!("tensor {name:?} is of a ggml type edo does not know ({})", t.ggml_type)))?;
        if rows.start > rows.end || rows.end > all_rows {
            return Err(bad(format!("rows {rows:?} of tensor {name:?}, which has {all_rows}")));
        }
        let row_bytes = n / all_rows.max(1);
        let start = self.data_start + t.offset + rows.start * row_bytes;
        let data = (rows.end - rows.start)
            .checked_mul(row_bytes)
            .and_then(|len| bytes.get(usize::try_from(start).ok()?..usize::try_from(start + len).ok()?))
            .ok_or_else(|| bad(format!("rows {rows:?} of tensor {name:?} run past the end of the file")))?;
        let too_big = |v: u64| usize::try_from(v).map_err(|_| Error::LimitExceeded { what: "GGUF tensor dims", requested: v, max: usize::MAX as u64 });
        let (rows, dim) = (too_big(rows.end - rows.start)?, too_big(dim)?);
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        let table = match self.table_format(t) {
            Some(TensorFormat::Floats(elem)) => tensor::Array { elem, rows, cols: dim, data }.into_table(FileLayout::Dense, WHAT)?,
            Some(TensorFormat::Packed(format)) => tensor::Table::Packed(tensor::from_unpadded(format, rows, dim, data, 0, false, WHAT)?),
            None => return Err(Error::Unsupported(crate::Unsupported::GgufTensorType)),
        };
        Ok(Imported { table, vocab: None, lossy_tokens: 0 })
    }
}

/// Writes `table` as a GGUF file (version 3) holding one tensor, `name`, of the table's ggml
/// type, with `metadata` as string key-values. Formats without a ggml type (int8, int4, binary)
/// are [`Error::Unsupported`]; block formats need rows of whole blocks (32 values; 256 for the
/// k-quants).
pub fn write(table: &PackedTable, name: &str, metadata: &[(&str, &str)], out: &mut impl std::io::Write) -> Result<(), Error> {
    let format = table.format();
    let ggml_type = format.ggml_type().ok_or(Error::Unsupported(crate::Unsupported::GgufExportFormat))?;
    let (_, block, _) = ggml_type_info(ggml_type).expect("edo's ggml types are known");
    if !(table.dim() as u64).is_multiple_of(block) {
        return Err(Error::Unsupported(crate::Unsupported::GgufPartialBlocks));
    }
    let mut head = Vec::new();
    let string = |head: &mut Vec<u8>, s: &str| {
        head.extend_from_slice(&(s.len() as u64).to_le_bytes());
        head.extend_from_slice(s.as_bytes());
    };
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&1u64.to_le_bytes());
    head.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        string(&mut head, k);
        head.extend_from_slice(&8u32.to_le_bytes());
        string(&mut head, v);
    }
    string(&mut head, name);
    head.extend_from_slice(&2u32.to_le_bytes());
    head.extend_from_slice(&(table.dim() as u64).to_le_bytes());
    head.extend_from_slice(&(table.rows() as u64).to_le_bytes());
    head.extend_from_slice(&ggml_type.to_le_bytes());
    head.extend_from_slice(&0u64.to_le_bytes());
    head.resize(head.len().div_ceil(DEFAULT_ALIGNMENT as usize) * DEFAULT_ALIGNMENT as usize, 0);
    let io = |e: std::io::Error| Error::io("GGUF output", e);
    out.write_all(&head).map_err(io)?;
    let mut row = vec![0u8; format.unpadded_row_bytes(table.dim())];
    for r in 0..table.rows() {
        format.write_external(table.row(r), table.dim(), &mut row);
        out.write_all(&row).map_err(io)?;
    }
    Ok(())
}

/// (dim, rows) of a 2-D tensor; a tensor of another rank is no table.
fn table_dims(t: &TensorInfo) -> Result<(u64, u64), Error> {
    match t.dims[..] {
        [dim, rows] => Ok((dim, rows)),
        _ => Err(bad(format!("tensor {:?} has shape {:?}; an embedding table is 2-D", t.name, t.shape()))),
    }
}

fn bad(reason: String) -> Error {
    Error::BadFile { what: WHAT, reason }
}
