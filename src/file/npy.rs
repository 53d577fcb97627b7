//! NumPy `.npy` arrays (format versions 1, 2 and 3), read and written the way `numpy.save` does.
//!
//! Only C-order, little-endian (or byte-sized) arrays of the dtypes edo uses are accepted.
//! Everything in the header is checked against the file before anything is allocated.

use crate::Error;

const MAGIC: &[u8] = b"\x93NUMPY";
const WHAT: &str = ".npy file";

/// Element types edo reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<f8`.
    F64,
    /// `<f4`.
    F32,
    /// `<f2`.
    F16,
    /// `|u1`.
    U8,
    /// `|i1`.
    I8,
    /// Row ids (what `edo plan --write` stores a mixed table's hot rows as); not a table.
    U32,
}

impl Dtype {
    fn descr(self) -> &'static str {
        match self {
            Dtype::F64 => "<f8",
            Dtype::F32 => "<f4",
            Dtype::F16 => "<f2",
            Dtype::U8 => "|u1",
            Dtype::I8 => "|i1",
            Dtype::U32 => "<u4",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F64 => 8,
            Dtype::F32 | Dtype::U32 => 4,
            Dtype::F16 => 2,
            Dtype::U8 | Dtype::I8 => 1,
        }
    }
    fn from_descr(d: &str) -> Option<Dtype> {
        Some(match d {
            "<f8" => Dtype::F64,
            "<f4" => Dtype::F32,
            "<f2" => Dtype::F16,
            "|u1" | "<u1" | "u1" | "B" => Dtype::U8,
            "|i1" | "<i1" | "i1" | "b" => Dtype::I8,
            "<u4" => Dtype::U32,
            _ => return None,
        })
    }
}

/// An array read from a `.npy` file: its dtype, shape and raw little-endian data.
#[derive(Debug)]
pub struct Array<'a> {
    /// The element type.
    pub dtype: Dtype,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// The elements, little-endian, in C order.
    pub data: &'a [u8],
}

/// Parses a `.npy` file held in memory.
pub fn read(bytes: &[u8]) -> Result<Array<'_>, Error> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("no .npy magic (\\x93NUMPY) at the start".into()));
    }
    let major = bytes[6];
    let (header_len, header_start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header".into()));
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(bad(format!("format version {v}.{} is not supported (1, 2 and 3 are)", bytes[7]))),
    };
    let Some(header) = bytes.get(header_start..header_start + header_len) else {
        return Err(bad(format!("header of {header_len} bytes runs past the end of the file ({} bytes)", bytes.len())));
    };
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text".into()))?;
    let descr = dict_value(header, "descr")?;
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let dtype = Dtype::from_descr(descr).ok_or_else(|| bad(format!("dtype {descr:?} is not supported (float32, float16, float64, uint8, int8 are)")))?;
    let fortran = dict_value(header, "fortran_order")?.trim().to_string();
    match fortran.as_str() {
        "False" => {}
        "True" => return Err(bad("Fortran-ordered arrays are not supported; save numpy.ascontiguousarray(a)".into())),
        other => return Err(bad(format!("fortran_order is {other:?}"))),
    }
    let shape_text = dict_value(header, "shape")?;
    let shape_text = shape_text.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(|| bad("shape is not a tuple".into()))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>().map_err(|_| bad(format!("shape entry {s:?} is not a count"))))
        .collect::<Result<Vec<_>, _>>()?;
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows".into()))?;
    let data_len = elements.checked_mul(dtype.size()).ok_or_else(|| bad("shape overflows".into()))?;
    let data = &bytes[header_start + header_len..];
    if data.len() != data_len {
        return Err(bad(format!("shape {shape:?} of {descr} needs {data_len} data bytes, the file has {}", data.len())));
    }
    Ok(Array { dtype, shape, data })
}

/// The text of the value of `'key'` in a Python dict literal, up to the next top-level comma.
fn dict_value<'h>(header: &'h str, key: &str) -> Result<&'h str, Error> {
    let pattern = format!("'{key}'");
    let at = header.find(&pattern).ok_or_else(|| bad(format!("header has no '{key}'")))?;
    let rest = header[at + pattern.len()..].trim_start();
    let rest = rest.strip_prefix(':').ok_or_else(|| bad(format!("'{key}' has no value")))?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Ok(&rest[..i]),
            _ => {}
        }
    }
    Err(bad(format!("'{key}' is not terminated")))
}

/// The bytes of a `.npy` file, as `numpy.save` writes them (version 1.0, header padded with
/// spaces to a multiple of 64 bytes and ended by a newline).
pub fn write(dtype: Dtype, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}", dtype.descr());
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn bad(reason: String) -> Error {
    Error::BadFile { what: WHAT, reason }
}
