//! [`PackedTable`]: a whole table's rows packed in one format, its words owned or borrowed from
//! shared bytes (a memory-mapped file), and what is made of it — quantised, decoded, requantised,
//! aligned for a GPU, updated.

use super::*;

/// A whole table packed in one format: `rows` rows of `dim` values, each
/// [`Format::row_words`] words long, stored contiguously.
///
/// The words are either owned or borrowed from shared bytes (a memory-mapped table file), so a
/// table larger than memory can be looked up and uploaded without being read whole.
#[derive(Clone)]
pub struct PackedTable {
    format: Format,
    rows: usize,
    dim: usize,
    words: Words,
    /// Bytes a row starts on when the table is uploaded to a GPU ([`PackedTable::with_row_alignment`]).
    row_alignment: u32,
}

/// The row alignment of a table that asks for none: a row starts on a word.
pub const NO_ROW_ALIGNMENT: usize = 4;

/// The bytes a [`PackedTable`] can borrow its words from (a memory map, a fetched file).
pub type SharedBytes = std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>;

enum Words {
    /// Words a caller handed over ([`PackedTable::from_words`]), as they are.
    Owned(Vec<u32>),
    /// `len` words from word `start` of `buf`, the first that begins a cache line: tables edo
    /// builds in memory start on a line, so a row of whole lines (an FP32 row of 64 values, 256
    /// bytes) spans as many lines as it has, not one more, which makes random gathers faster
    /// (docs/benchmarks.md, "Design measurements"). `buf` is an ordinary zeroed `Vec` with 15
    /// words to spare, not an allocation aligned to 64 bytes: the allocator hands out untouched
    /// zero pages only at its own alignment, and zeroing a whole table on one thread before the
    /// workers fill it made quantising much slower.
    Aligned { buf: Vec<u32>, start: usize, len: usize },
    /// `len` words starting at byte `start` of `bytes`; the start is 4-byte aligned in memory
    /// (checked when built).
    Shared { bytes: SharedBytes, start: usize, len: usize },
}

impl Words {
    /// `len` zero words starting on a cache line, allocated fallibly.
    fn aligned(len: usize, what: &'static str) -> Result<Words, Error> {
        let padded = len.checked_add(15).ok_or(Error::HostOutOfMemory { what, bytes: u64::MAX })?;
        Ok(Words::at_line(crate::alloc::zeroed::<u32>(padded, what)?, len))
    }

    /// The `len` words of `buf` (`len + 15` of them) from the first that begins a line.
    fn at_line(buf: Vec<u32>, len: usize) -> Words {
        // The buffer is 4-byte aligned: 0 to 15 words to the next line.
        let start = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
        Words::Aligned { buf, start, len }
    }

    /// A copy of `words` starting on a cache line.
    fn aligned_copy(words: &[u32]) -> Words {
        let mut buf = vec![0; words.len() + 15];
        crate::alloc::advise_huge_pages(&mut buf);
        let mut copy = Words::at_line(buf, words.len());
        copy.as_mut().copy_from_slice(words);
        copy
    }

    /// The words, to write; shared bytes are copied into memory first (and not written).
    fn as_mut(&mut self) -> &mut [u32] {
        if let Words::Shared { .. } = self {
            *self = Words::aligned_copy(self);
        }
        match self {
            Words::Owned(w) => w,
            Words::Aligned { buf, start, len } => &mut buf[*start..*start + *len],
            Words::Shared { .. } => unreachable!("copied above"),
        }
    }
}

impl Clone for Words {
    fn clone(&self) -> Self {
        match self {
            Words::Owned(w) => Words::Owned(w.clone()),
            // A copy starts on a line of its own.
            Words::Aligned { .. } => Words::aligned_copy(self),
            Words::Shared { bytes, start, len } => Words::Shared { bytes: bytes.clone(), start: *start, len: *len },
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            Words::Owned(w) => w,
            Words::Aligned { buf, start, len } => &buf[*start..*start + *len],
            Words::Shared { bytes, start, len } => bytemuck::cast_slice(&(**bytes).as_ref()[*start..*start + 4 * *len]),
        }
    }
}

impl PartialEq for PackedTable {
    fn eq(&self, other: &Self) -> bool {
        self.format == other.format
            && self.rows == other.rows
            && self.dim == other.dim
            && self.row_alignment == other.row_alignment
            && *self.words == *other.words
    }
}

impl std::fmt::Debug for PackedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedTable")
            .field("format", &self.format)
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .field("mapped", &matches!(self.words, Words::Shared { .. }))
            .field("row_alignment", &self.row_alignment)
            .finish_non_exhaustive()
    }
}

impl PackedTable {
    /// Quantises a row-major `rows × dim` f32 table (`data.len() == rows * dim`).
    ///
    /// Fails with [`Error::NonFinite`] naming the first row (lowest index) holding a NaN or an
    /// infinity, and with [`Error::OutOfRange`] for values the format cannot hold.
    /// Runs on all cores natively.
    pub fn quantize(format: Format, data: &[f32], rows: usize, dim: usize) -> Result<Self, Error> {
        check_shape(data.len(), rows, dim)?;
        Self::quantize_by(format, RowValues::Given(data), rows, dim, false)
    }

    /// Quantises as [`PackedTable::quantize`] does, but choosing the parameters of each group of
    /// values to minimise its squared error (a search over scales with a least-squares fit of
    /// scale and bias to the codes, as ggml's k-quants choose theirs) where the format has such a
    /// choice: the group-wise formats (`int4_g64` …). Decoding is unchanged. Each group's squared
    /// error is at most `quantize`'s; the per-value [`Format::error_bounds`] no longer hold,
    /// since an outlier may be clipped. Other formats quantise as `quantize` does.
    pub fn quantize_min_error(format: Format, data: &[f32], rows: usize, dim: usize) -> Result<Self, Error> {
        check_shape(data.len(), rows, dim)?;
        Self::quantize_by(format, RowValues::Given(data), rows, dim, true)
    }

    fn quantize_by(format: Format, values: RowValues<'_>, rows: usize, dim: usize, min_error: bool) -> Result<Self, Error> {
        let row_words = format.row_words(dim);
        let mut table = PackedTable::zeroed(format, rows, dim, "packed table")?;
        // Each worker encodes a contiguous block of rows and reports its first failure; the
        // lowest failing row wins so the error is the same whatever the thread count.
        let first_error = crate::par::for_each_chunk_mut(table.words_mut(), row_words, 1024, |first_row, block| {
            // A decoded row lives here while it is encoded: one row a worker, not a whole table.
            let mut decoded = match values {
                RowValues::Given(_) => Vec::new(),
                RowValues::DecodedFrom(_) => vec![0f32; dim],
            };
            for (i, out) in block.chunks_exact_mut(row_words).enumerate() {
                let r = first_row + i;
                let row = match values {
                    RowValues::Given(data) => &data[r * dim..(r + 1) * dim],
                    RowValues::DecodedFrom(source) => {
                        source.decode_row_into(r, &mut decoded);
                        &decoded[..]
                    }
                };
                let encoded = if min_error { format.encode_row_min_error(row, out) } else { format.encode_row(row, out) };
                if let Err(e) = encoded {
                    return Some(Error::from_encode(r, e, format));
                }
            }
            None
        });
        match first_error {
            Some(e) => Err(e),
            None => Ok(table),
        }
    }

    /// A table of zero words, allocated fallibly (`what` names it in the error) and starting on
    /// a cache line, for the caller to fill through [`PackedTable::words_mut`].
    #[doc(hidden)]
    pub fn zeroed(format: Format, rows: usize, dim: usize, what: &'static str) -> Result<Self, Error> {
        let len = Self::expected_words(format, rows, dim)?;
        Ok(PackedTable { format, rows, dim, words: Words::aligned(len, what)?, row_alignment: NO_ROW_ALIGNMENT as u32 })
    }

    /// The packed words, to write; a table borrowed from shared bytes is copied into memory
    /// first (the bytes are not written).
    #[doc(hidden)]
    pub fn words_mut(&mut self) -> &mut [u32] {
        self.words.as_mut()
    }

    /// Quantises rows `rows` (in that order) of a row-major f32 table of `dim` columns: the
    /// compact table of a pruned or mixed-precision table. Errors name the row of `data`.
    #[doc(hidden)]
    pub fn quantize_rows(format: Format, data: &[f32], dim: usize, rows: &[u32]) -> Result<Self, Error> {
        let mut values = Vec::with_capacity(rows.len() * dim);
        for &r in rows {
            values.extend_from_slice(&data[r as usize * dim..(r as usize + 1) * dim]);
        }
        PackedTable::quantize(format, &values, rows.len(), dim).map_err(|e| match e {
            Error::NonFinite { row, col, value } => Error::NonFinite { row: rows[row] as usize, col, value },
            Error::OutOfRange { row, col, value, format } => Error::OutOfRange { row: rows[row] as usize, col, value, format },
            other => other,
        })
    }

    /// Wraps already packed words (for instance read from a file), checking the length.
    pub fn from_words(format: Format, rows: usize, dim: usize, words: Vec<u32>) -> Result<Self, Error> {
        let expected = Self::expected_words(format, rows, dim)?;
        if words.len() != expected {
            return Err(Error::ShapeMismatch { what: "packed words", expected, actual: words.len() });
        }
        Ok(PackedTable { format, rows, dim, words: Words::Owned(words), row_alignment: NO_ROW_ALIGNMENT as u32 })
    }

    /// Borrows the packed words from `bytes[start..]` without copying them when they are 4-byte
    /// aligned in memory (a memory map always is), and copies them otherwise.
    #[doc(hidden)]
    pub fn from_shared(format: Format, rows: usize, dim: usize, bytes: SharedBytes, start: usize) -> Result<Self, Error> {
        let len = Self::expected_words(format, rows, dim)?;
        let slice = (*bytes).as_ref();
        let Some(body) = len.checked_mul(4).and_then(|n| slice.get(start..start.checked_add(n)?)) else {
            return Err(Error::ShapeMismatch { what: "packed bytes", expected: len.saturating_mul(4), actual: slice.len().saturating_sub(start) });
        };
        if bytemuck::try_cast_slice::<u8, u32>(body).is_ok() {
            return Ok(PackedTable { format, rows, dim, words: Words::Shared { bytes: bytes.clone(), start, len }, row_alignment: NO_ROW_ALIGNMENT as u32 });
        }
        let words = words_le(body);
        Ok(PackedTable { format, rows, dim, words: Words::Owned(words), row_alignment: NO_ROW_ALIGNMENT as u32 })
    }

    pub(crate) fn expected_words(format: Format, rows: usize, dim: usize) -> Result<usize, Error> {
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        rows.checked_mul(format.row_words(dim)).ok_or(Error::LimitExceeded { what: "packed table words", requested: u64::MAX, max: usize::MAX as u64 })
    }

    /// Re-quantises rows `ids` from `values` (`ids.len() × dim`, row after row) in place; the
    /// other rows are untouched. All rows are encoded before any is written, so a bad id or value
    /// (typed error, the row named by its table index) changes nothing. An id listed twice takes
    /// its last row. A table borrowed from a mapped file is copied into memory first; the file
    /// is not written.
    pub fn update_rows(&mut self, ids: &[u32], values: &[f32]) -> Result<(), Error> {
        let (dim, rw) = (self.dim, self.row_words());
        if values.len() != ids.len() * dim {
            return Err(Error::ShapeMismatch { what: "values of the updated rows (ids × dim)", expected: ids.len() * dim, actual: values.len() });
        }
        crate::Bounds::Error.check(ids, self.rows)?;
        let mut encoded = vec![0u32; ids.len() * rw];
        for ((&id, row), out) in ids.iter().zip(values.chunks_exact(dim)).zip(encoded.chunks_exact_mut(rw)) {
            self.format.encode_row(row, out).map_err(|e| Error::from_encode(id as usize, e, self.format))?;
        }
        let words = self.words_mut();
        for (&id, row) in ids.iter().zip(encoded.chunks_exact(rw)) {
            let r = id as usize;
            words[r * rw..(r + 1) * rw].copy_from_slice(row);
        }
        Ok(())
    }

    /// Whether the words are borrowed from shared bytes (a memory-mapped file) rather than owned.
    pub fn is_mapped(&self) -> bool {
        matches!(self.words, Words::Shared { .. })
    }

    /// The table's format.
    pub fn format(&self) -> Format {
        self.format
    }
    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Words per packed row.
    pub fn row_words(&self) -> usize {
        self.format.row_words(self.dim)
    }

    /// The same table, asking that each row start on a multiple of `bytes` (a power of two from
    /// 4 to 256) where it is uploaded to a GPU, as FBGEMM's `row_alignment` does: rows there are
    /// padded to [`PackedTable::gpu_row_words`] words, so that 16-byte loads can read them. The
    /// host's rows and a file's stay packed without gaps (a `.edo` file records the alignment,
    /// not the padding); what it costs the GPU's memory is the padding, per format in
    /// docs/benchmarks.md. 4 asks for nothing (the default).
    ///
    /// Fails with [`Error::Unsupported`] for any other number of bytes.
    pub fn with_row_alignment(mut self, bytes: usize) -> Result<Self, Error> {
        check_row_alignment(bytes)?;
        self.row_alignment = bytes as u32;
        Ok(self)
    }

    /// The bytes a row starts on when uploaded to a GPU ([`PackedTable::with_row_alignment`]).
    pub fn row_alignment(&self) -> usize {
        self.row_alignment as usize
    }

    /// Words per row on a GPU: [`PackedTable::row_words`], padded to the row alignment.
    pub fn gpu_row_words(&self) -> usize {
        aligned_row_words(self.row_words(), self.row_alignment as usize)
    }

    /// Bytes of the rows on a GPU: [`PackedTable::bytes`] and the padding of aligned rows.
    pub fn gpu_bytes(&self) -> u64 {
        4 * self.rows as u64 * self.gpu_row_words() as u64
    }
    /// All packed words, row after row.
    pub fn words(&self) -> &[u32] {
        &self.words
    }
    /// The packed words of one row.
    #[inline]
    pub fn row(&self, r: usize) -> &[u32] {
        let w = self.row_words();
        &self.words[r * w..(r + 1) * w]
    }
    /// Bytes of packed storage (what the GPU holds, but for the padding of aligned rows).
    pub fn bytes(&self) -> u64 {
        4 * self.words.len() as u64
    }
    /// Bytes the same table takes as dense f32.
    pub fn f32_bytes(&self) -> u64 {
        4 * (self.rows as u64) * (self.dim as u64)
    }

    /// Decodes row `r` into `out` (`out.len() == dim`). Panics if `r >= rows`.
    pub fn decode_row_into(&self, r: usize, out: &mut [f32]) {
        self.format.decode_row(self.row(r), out)
    }

    /// The same table in `format`: itself when already in it, else decoded and quantised again
    /// (with the same [`PackedTable::row_alignment`]), a row at a time: no decoded copy of the
    /// whole table is made, so the memory it takes is the new table's.
    pub fn requantize(&self, format: Format) -> Result<PackedTable, Error> {
        if format == self.format {
            return Ok(self.clone());
        }
        // FP32 rows are the values themselves; other rows are decoded one at a time as they are
        // encoded, never the whole table at once.
        let values = if self.format == Format::F32 { RowValues::Given(bytemuck::cast_slice(self.words())) } else { RowValues::DecodedFrom(self) };
        let table = PackedTable::quantize_by(format, values, self.rows, self.dim, false)?;
        // The rows keep the alignment asked of them on a GPU.
        Ok(PackedTable { row_alignment: self.row_alignment, ..table })
    }

    /// Decodes the whole table to dense f32 (multi-threaded natively).
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.dim];
        crate::par::for_each_chunk_mut(&mut out, self.dim, 1024, |first_row, block| {
            for (i, dst) in block.chunks_exact_mut(self.dim).enumerate() {
                self.decode_row_into(first_row + i, dst);
            }
            None::<()>
        });
        out
    }
}

/// Where [`PackedTable::quantize_by`] takes each row's values from.
#[derive(Clone, Copy)]
enum RowValues<'a> {
    /// A row-major `rows × dim` f32 table.
    Given(&'a [f32]),
    /// Another table's rows, decoded.
    DecodedFrom(&'a PackedTable),
}
