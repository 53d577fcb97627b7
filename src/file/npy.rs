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
    /// `<i4`: ids (a trace of lookups); not a table.
    I32,
    /// `<i8`: ids, numpy's default integer (a trace of lookups); not a table.
    I64,
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
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::U32 | Dtype::I32 => 4,
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
            "<i4" => Dtype::I32,
            "<i8" => Dtype::I64,
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
    let mut out = header(dtype, shape, 0);
    out.extend_from_slice(data);
    out
}

/// The magic, version and header of a `.npy` file, padded with spaces to a multiple of 64 bytes
/// and to at least `min_len` bytes.
fn header(dtype: Dtype, shape: &[usize], min_len: usize) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}", dtype.descr());
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.max(min_len).next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// Writes a 2-D `.npy` array (rows × `cols`) a block of rows at a time, so that memory holds one
/// block, not the array: the header goes first, and the rows after it as they come.
///
/// When the row count is not known up front ([`RowWriter::new`]), the header is written with
/// room for any count (as numpy's own `open_memmap` leaves room to grow) and rewritten with the
/// real one by [`RowWriter::finish`], which seeks back to it: a file, not a pipe. With the count
/// known ([`RowWriter::with_rows`]) nothing is rewritten, and any writer will do.
#[derive(Debug)]
pub struct RowWriter<W: std::io::Write> {
    out: W,
    dtype: Dtype,
    cols: usize,
    rows: usize,
    count: Count<W>,
    header_len: usize,
}

/// What a [`RowWriter`]'s header says of the row count.
#[derive(Debug)]
enum Count<W> {
    /// The count, known up front.
    Promised(usize),
    /// Room for any count, and how to write the final header over it (`W` can seek).
    Unknown(fn(&mut W, &[u8]) -> std::io::Result<()>),
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, what)
}

impl<W: std::io::Write + std::io::Seek> RowWriter<W> {
    /// A writer of any number of rows of `cols` elements of `dtype`, to a seekable `out` at its
    /// start.
    pub fn new(mut out: W, dtype: Dtype, cols: usize) -> std::io::Result<Self> {
        // Room for the longest count there is; `finish` pads the real header to the same length.
        let header = header(dtype, &[usize::MAX, cols], 0);
        out.write_all(&header)?;
        let rewrite: fn(&mut W, &[u8]) -> std::io::Result<()> = |out, header| {
            let end = out.stream_position()?;
            out.seek(std::io::SeekFrom::Start(0))?;
            out.write_all(header)?;
            out.seek(std::io::SeekFrom::Start(end)).map(|_| ())
        };
        Ok(RowWriter { out, dtype, cols, rows: 0, count: Count::Unknown(rewrite), header_len: header.len() })
    }
}

impl<W: std::io::Write> RowWriter<W> {
    /// A writer of exactly `rows` rows of `cols` elements of `dtype`: the header is final.
    pub fn with_rows(mut out: W, dtype: Dtype, cols: usize, rows: usize) -> std::io::Result<Self> {
        let header = header(dtype, &[rows, cols], 0);
        out.write_all(&header)?;
        Ok(RowWriter { out, dtype, cols, rows: 0, count: Count::Promised(rows), header_len: header.len() })
    }

    /// Appends whole rows: `data` holds a multiple of `cols` elements, little-endian. More rows
    /// than [`RowWriter::with_rows`] promised are refused.
    pub fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        let row_bytes = self.cols * self.dtype.size();
        if row_bytes == 0 && !data.is_empty() || row_bytes > 0 && !data.len().is_multiple_of(row_bytes) {
            return Err(invalid(format!("{} bytes are not whole rows of {row_bytes} bytes", data.len())));
        }
        let rows = data.len().checked_div(row_bytes).unwrap_or(0);
        if let Count::Promised(p) = self.count {
            if self.rows + rows > p {
                return Err(invalid(format!("{} rows, more than the {p} the header states", self.rows + rows)));
            }
        }
        self.out.write_all(data)?;
        self.rows += rows;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Completes the file: writes the header with the count of rows written (when it was not
    /// known up front) or checks that every promised row was written, and flushes. Returns the
    /// writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        match self.count {
            Count::Promised(p) if p != self.rows => return Err(invalid(format!("{} rows written; the header states {p}", self.rows))),
            Count::Promised(_) => {}
            Count::Unknown(rewrite) => {
                let header = header(self.dtype, &[self.rows, self.cols], self.header_len);
                debug_assert_eq!(header.len(), self.header_len, "a count never takes more room than usize::MAX");
                rewrite(&mut self.out, &header)?;
            }
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

fn bad(reason: String) -> Error {
    Error::BadFile { what: WHAT, reason }
}

#[cfg(test)]
mod tests {
    use super::{read, write, Dtype, RowWriter};

    /// A file written block by block reads back as the same array `write` gives, whether the
    /// count was known up front or rewritten at the end; wrong counts and partial rows are errors.
    #[test]
    fn row_writer_writes_what_write_does() {
        let rows: Vec<f32> = (0..7 * 3).map(|i| i as f32 * 0.5 - 2.0).collect();
        let bytes: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut w = RowWriter::new(std::io::Cursor::new(Vec::new()), Dtype::F32, 3).unwrap();
        for block in bytes.chunks(12 * 2) {
            w.push(block).unwrap();
        }
        assert_eq!(w.rows(), 7);
        let file = w.finish().unwrap().into_inner();
        let a = read(&file).unwrap();
        assert_eq!((a.dtype, a.shape.clone(), a.data), (Dtype::F32, vec![7, 3], &bytes[..]));
        assert_eq!(file.len() % 64, bytes.len() % 64, "the header is a multiple of 64 bytes");

        let mut w = RowWriter::with_rows(Vec::new(), Dtype::F32, 3, 7).unwrap();
        w.push(&bytes[..12]).unwrap();
        w.push(&bytes[12..]).unwrap();
        assert_eq!(w.finish().unwrap(), write(Dtype::F32, &[7, 3], &bytes));

        let mut short = RowWriter::with_rows(Vec::new(), Dtype::F32, 3, 8).unwrap();
        short.push(&bytes).unwrap();
        assert!(short.finish().is_err(), "a row short");
        let mut long = RowWriter::with_rows(Vec::new(), Dtype::F32, 3, 6).unwrap();
        assert!(long.push(&bytes).is_err(), "a row too many");
        assert!(RowWriter::new(std::io::Cursor::new(Vec::new()), Dtype::F32, 3).unwrap().push(&bytes[..8]).is_err(), "part of a row");
        let empty = RowWriter::new(std::io::Cursor::new(Vec::new()), Dtype::F32, 3).unwrap().finish().unwrap().into_inner();
        assert_eq!(read(&empty).unwrap().shape, vec![0, 3]);
    }
}
