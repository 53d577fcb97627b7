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
//! | `Packed`     | u8 `[rows, bytes of a row]`   | its format       | `edo export` of any format (a safetensors export names it) |
//!
//! The dim of a 4-bit or binary array is ambiguous from its width (`⌈dim/2⌉`, `⌈dim/8⌉`); pass it
//! when it is not the largest the width allows. Bits of a binary row past `dim` are cleared.
//!
//! Imported FBGEMM 8-bit rows keep their full-precision f32 scales. edo's own INT8 rounds the scale
//! so that GPU and CPU decode bit for bit alike; an imported table can differ between the two by
//! one ulp where a GPU compiler fuses the multiply-add.

use std::borrow::Cow;

pub use super::tensor::{FileLayout, Imported, Table};

use super::tensor::{Array, Elem};
use super::{npy, Vocab};
use crate::{Error, Format};

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
    // Bytes `edo export` wrote name their format and dim in the metadata: read back as written.
    let layout = match (layout, elem) {
        (FileLayout::Dense, Elem::U8 | Elem::I8) => exported_layout(bytes).unwrap_or(layout),
        _ => layout,
    };
    let table = Array { elem, rows: *rows, cols: *cols, data: view.data() }.into_table(layout, WHAT)?;
    Ok(Imported { table, vocab: None, lossy_tokens: 0 })
}

/// The layout `edo export` records in a safetensors file of packed rows: `edo.format` and
/// `edo.dim` in its metadata.
fn exported_layout(bytes: &[u8]) -> Option<FileLayout> {
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).ok()?;
    let kv = meta.metadata().as_ref()?;
    let format = Format::from_name(kv.get("edo.format")?)?;
    Some(FileLayout::Packed { format, dim: kv.get("edo.dim").and_then(|d| d.parse().ok()) })
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
        npy::Dtype::U32 | npy::Dtype::I32 | npy::Dtype::I64 => return Err(bad(WHAT, format!("an integer array ({:?}) holds row ids, not a table", a.dtype))),
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
    let kind = FileKind::from_path(path).ok_or_else(|| {
        let message = "unknown file type; edo reads .safetensors, .npy, .txt/.vec (word2vec, GloVe), .gguf and .edo";
        Error::io(path.display(), std::io::Error::new(std::io::ErrorKind::InvalidInput, message))
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
