//! Table files, and import from / export to the formats embedding tables come in.
//!
//! # The `.edo` table file
//!
//! A table file is a [safetensors](https://huggingface.co/docs/safetensors) file — the ecosystem's
//! tensor container, readable by any safetensors library — with a fixed set of tensors and
//! `edo.*` keys in its `__metadata__`:
//!
//! | tensor         | dtype | shape                | holds                                            |
//! |----------------|-------|----------------------|--------------------------------------------------|
//! | `rows`         | U32   | `[rows, row_words]`  | the packed rows (a GPU pads them to `edo.row_alignment`) |
//! | `crc32`        | U32   | `[chunks]`           | CRC-32 of each `edo.chunk_bytes` bytes of `rows` |
//! | `vocab.offsets`| U64   | `[rows + 1]`         | optional: token `i` is `vocab.bytes[o[i]..o[i+1]]` |
//! | `vocab.bytes`  | U8    | `[n]`                | optional: the tokens, UTF-8, concatenated        |
//! | `model.*`      | any   | any                  | optional: the rest of a static model (below)     |
//! | `keys`         | U64   | `[rows]`             | optional: the key of each row, distinct (a [`crate::live::LiveTable`]'s snapshot) |
//!
//! Metadata: `edo.version` (`1`), `edo.format` ([`Format::name`]), `edo.rows`, `edo.dim`,
//! `edo.chunk_bytes`, `edo.vocab_crc32` when there is a vocabulary, `edo.row_alignment` when the
//! table asks for rows aligned on a GPU ([`PackedTable::with_row_alignment`]; the rows here stay
//! packed without gaps, so a reader that predates the key reads them right),
//! `edo.header_crc32` ([`header_crc32`] of the other `edo.*` keys), and any user keys (which must
//! not start with `edo.`).
//!
//! A **model file** is a table file whose table is a static embedding model's
//! ([`crate::model::StaticModel::to_edo`]): the model's settings as JSON in `edo.model`, its
//! `tokenizer.json` in the U8 tensor `model.tokenizer`, its optional per-token `model.mapping`
//! (U32) and `model.weights` (F32), and `edo.model_crc32`, the CRC-32 of those tensors' bytes in
//! name order. A reader that predates models reads the table and ignores the rest, which is why
//! the version stays 1. safetensors aligns the data to 8 bytes, so a memory-mapped file's rows
//! are used in place: [`TableFile::open`] maps the file and reads nothing but the header;
//! lookups touch only the pages of the rows they read, and a GPU upload reads the file shard by
//! shard. Checksums are per 1 MiB chunk, so a reader can verify just the rows it uses
//! ([`TableFile::verify_rows`]) or everything ([`TableFile::verify`]); each chunk is checked once.
//!
//! Every size in a header is checked against the file before anything is allocated from it: a
//! truncated file, a file that is not safetensors, a header whose shapes overflow or disagree with
//! the file, or a version from a newer edo gives a typed [`Error`], never a panic.
//!
//! # Import and export
//!
//! [`import`] reads a dense table (safetensors f32/f16/bf16 tensors, `.npy` f32/f16/f64, word2vec
//! and GloVe text with their vocabulary) or an already packed one (FBGEMM fused 8-bit and 4-bit
//! row-wise arrays, `numpy.packbits` codes, sentence-transformers' int8 `binary` codes). [`export`]
//! writes the layouts PyTorch/FBGEMM, faiss and sentence-transformers read.

pub mod export;
pub mod gbq;
pub mod gguf;
mod header;
pub mod import;
pub mod npy;
pub mod remote;
mod tensor;

pub(crate) use header::Header;
pub use header::{header_bytes, header_crc32, table_shape, TableShape, HEADER_CRC_KEY};

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use safetensors::tensor::{Dtype, TensorInfo};

use crate::format::{Format, PackedTable, SharedBytes, NO_ROW_ALIGNMENT};
use crate::search::CodeTransform;
use crate::Error;

/// The table-file version this edo writes and reads.
pub const VERSION: u32 = 1;

/// The version a file with an id map (a reordered table, [`crate::PrunedTable::to_bytes`])
/// declares, so that a reader that does not apply the map refuses it instead of returning rows
/// in their stored order.
pub const ID_MAP_VERSION: u32 = 2;
/// The version a binary table with a code transform (centred or ITQ codes,
/// [`crate::search::CodeTransform`]) declares, so that a reader that would search it with plain
/// sign codes of its queries refuses it instead.
pub const CODE_TRANSFORM_VERSION: u32 = 3;
/// The version a file whose rows are addressed by 64-bit keys declares (a
/// [`crate::live::LiveTable`]'s snapshot: row `i` holds key `keys[i]`, in no order), so that a
/// reader that would look rows up by their position refuses it instead.
pub const KEYS_VERSION: u32 = 4;
/// Bytes of `rows` covered by one CRC-32.
pub const CHUNK_BYTES: usize = 1 << 20;

const WHAT: &str = "edo table file";

/// Tokens naming the rows of a table (token `i` is row `i`).
#[derive(Clone, Debug, PartialEq)]
pub struct Vocab {
    tokens: Vec<String>,
    index: HashMap<String, u32>,
}

impl Vocab {
    /// Builds a vocabulary. A token listed twice maps to its first row (the later row stays
    /// reachable by id), as word2vec readers do.
    pub fn new(tokens: Vec<String>) -> Vocab {
        let mut index = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            index.entry(t.clone()).or_insert(i as u32);
        }
        Vocab { tokens, index }
    }
    /// Tokens in the vocabulary.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// Whether the vocabulary has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    /// The row of `token`.
    pub fn id(&self, token: &str) -> Result<u32, Error> {
        self.index.get(token).copied().ok_or_else(|| Error::UnknownToken { token: token.to_string() })
    }
    /// The token of row `id`.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }
    /// The tokens, by row.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }
    /// Tokens that appear more than once (each counted once per repeat).
    pub fn duplicates(&self) -> usize {
        self.tokens.len() - self.index.len()
    }

    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let mut offsets = Vec::with_capacity(8 * (self.tokens.len() + 1));
        let mut bytes = Vec::new();
        offsets.extend_from_slice(&0u64.to_le_bytes());
        for t in &self.tokens {
            bytes.extend_from_slice(t.as_bytes());
            offsets.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        }
        (offsets, bytes)
    }
}

/// A packed table with its vocabulary and metadata, as stored in a `.edo` file.
pub struct TableFile {
    table: PackedTable,
    vocab: Option<Vocab>,
    metadata: BTreeMap<String, String>,
    crcs: Vec<u32>,
    chunk_bytes: usize,
    verified: Vec<AtomicBool>,
    model: Option<ModelParts>,
    /// A reordered table's id → stored row map.
    id_map: Option<Vec<u32>>,
    /// What the codes of a binary table went through (queries go through it too).
    code_transform: Option<CodeTransform>,
    /// A keyed table's key per row.
    keys: Option<Vec<u64>>,
}

/// What a model file holds beside its table: the settings (JSON) and the `model.*` tensors, by
/// name.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ModelParts {
    pub settings: String,
    pub tensors: BTreeMap<String, ModelTensor>,
}

/// One `model.*` tensor of a model file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelTensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl ModelParts {
    fn crc(&self) -> u32 {
        let mut crc = crc32fast::Hasher::new();
        for t in self.tensors.values() {
            crc.update(&t.data);
        }
        crc.finalize()
    }
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile")
            .field("table", &self.table)
            .field("vocab", &self.vocab.as_ref().map(Vocab::len))
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

impl TableFile {
    /// Wraps a table for writing; computes its checksums.
    pub fn new(table: PackedTable) -> TableFile {
        let bytes: &[u8] = bytemuck::cast_slice(table.words());
        let crcs = chunk_crcs(bytes, CHUNK_BYTES);
        let verified = crcs.iter().map(|_| AtomicBool::new(true)).collect();
        TableFile {
            table,
            vocab: None,
            metadata: BTreeMap::new(),
            crcs,
            chunk_bytes: CHUNK_BYTES,
            verified,
            model: None,
            id_map: None,
            code_transform: None,
            keys: None,
        }
    }

    /// The table as a model's, with the model's settings and tensors (names start `model.`).
    pub(crate) fn with_model(mut self, parts: ModelParts) -> TableFile {
        debug_assert!(parts.tensors.keys().all(|k| k.starts_with("model.")));
        self.model = Some(parts);
        self
    }

    /// The table as a reordered one's, with its id → stored row map (checked by the caller).
    pub(crate) fn with_id_map(mut self, map: Vec<u32>) -> TableFile {
        self.id_map = Some(map);
        self
    }

    /// A reordered table's id → stored row map, if the file has one (only
    /// [`crate::PrunedTable::open`], [`crate::PrunedTable::from_file_bytes`] and
    /// [`TableFile::open_stored`] open such a file).
    pub fn id_map(&self) -> Option<&[u32]> {
        self.id_map.as_deref()
    }

    /// The codes as made through `transform` (centred or ITQ codes, [`CodeTransform::encode`]):
    /// stored with them, so that a searcher puts its queries through the same transform. The
    /// table must be [`Format::Binary`] of the transform's dim.
    pub fn with_code_transform(mut self, transform: CodeTransform) -> Result<TableFile, Error> {
        if self.table.format() != Format::Binary {
            return Err(Error::Unsupported(crate::Unsupported::CodeTransformOfNonBinary));
        }
        if transform.dim() != self.table.dim() {
            return Err(Error::ShapeMismatch { what: "code transform values per row (the table's dim)", expected: self.table.dim(), actual: transform.dim() });
        }
        if self.id_map.is_some() {
            // A file holds one or the other (its version says which).
            return Err(Error::Unsupported(crate::Unsupported::ReorderedTableFile));
        }
        if self.keys.is_some() {
            return Err(Error::Unsupported(crate::Unsupported::KeyedTableFile));
        }
        self.code_transform = Some(transform);
        Ok(self)
    }

    /// The rows as addressed by `keys`, one distinct 64-bit key per row (row `i` holds key
    /// `keys[i]`): a [`crate::live::LiveTable`]'s snapshot. A keyed file is version
    /// [`KEYS_VERSION`], and only [`crate::live::LiveTable`] and [`TableFile::open_stored`] open it.
    pub fn with_keys(mut self, keys: Vec<u64>) -> Result<TableFile, Error> {
        if keys.len() != self.table.rows() {
            return Err(Error::ShapeMismatch { what: "keys (one per row)", expected: self.table.rows(), actual: keys.len() });
        }
        if self.id_map.is_some() || self.code_transform.is_some() {
            return Err(Error::Unsupported(crate::Unsupported::KeyedTableFile));
        }
        if let Some(key) = first_duplicate(&keys) {
            return Err(Error::DuplicateKey { key });
        }
        self.keys = Some(keys);
        Ok(self)
    }

    /// A keyed table's key per row, if the file has them.
    pub fn keys(&self) -> Option<&[u64]> {
        self.keys.as_deref()
    }

    /// What the binary codes went through, if the file has a code transform: search the table
    /// with queries encoded by it ([`crate::search::search_rescored_with`]).
    pub fn code_transform(&self) -> Option<&CodeTransform> {
        self.code_transform.as_ref()
    }

    /// A model file's settings and tensors.
    pub(crate) fn model(&self) -> Option<&ModelParts> {
        self.model.as_ref()
    }

    /// Whether this is a model file (a static embedding model's table, tokenizer and settings:
    /// open it with [`crate::model::StaticModel::from_edo`]).
    pub fn is_model(&self) -> bool {
        self.model.is_some()
    }

    /// Checksums every `bytes` bytes of rows instead of every MiB (a multiple of 4, ≥ 4). Small
    /// chunks suit a file read remotely row by row ([`remote::RemoteTable`]): a reader fetches
    /// and verifies whole chunks, so the chunk is the least it transfers per row.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Result<TableFile, Error> {
        if bytes < 4 || !bytes.is_multiple_of(4) {
            return Err(Error::Unsupported(crate::Unsupported::ChecksumChunkBytes));
        }
        let words: &[u8] = bytemuck::cast_slice(self.table.words());
        self.crcs = chunk_crcs(words, bytes);
        self.verified = self.crcs.iter().map(|_| AtomicBool::new(true)).collect();
        self.chunk_bytes = bytes;
        Ok(self)
    }

    /// Bytes of rows per checksum.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Attaches a vocabulary of exactly one token per row.
    pub fn with_vocab(mut self, vocab: Vocab) -> Result<TableFile, Error> {
        if vocab.len() != self.table.rows() {
            return Err(Error::ShapeMismatch { what: "vocabulary tokens (one per row)", expected: self.table.rows(), actual: vocab.len() });
        }
        self.vocab = Some(vocab);
        Ok(self)
    }

    /// Sets a user metadata entry. Keys starting with `edo.` are reserved.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: impl Into<String>) -> Result<(), Error> {
        let key = key.into();
        if key.starts_with("edo.") {
            return Err(Error::Unsupported(crate::Unsupported::ReservedMetadataKey));
        }
        self.metadata.insert(key, value.into());
        Ok(())
    }

    /// The packed table. Its rows are read from the file's bytes (in place when memory-mapped);
    /// use [`TableFile::verify`] or [`TableFile::verify_rows`] to check them against the checksums.
    pub fn table(&self) -> &PackedTable {
        &self.table
    }
    /// The vocabulary, if the file has one.
    pub fn vocab(&self) -> Option<&Vocab> {
        self.vocab.as_ref()
    }
    /// User metadata (without the `edo.*` keys).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
    /// The table, giving up the file.
    pub fn into_table(self) -> PackedTable {
        self.table
    }

    /// The file's bytes. The same table, vocabulary and metadata always give the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (tensors, info) = self.views();
        let mut out = Vec::new();
        write_safetensors(&mut out, &tensors, &info).expect("writing to a Vec cannot fail");
        out
    }

    /// Writes the file to `path` (through a temporary file in the same directory, renamed over
    /// `path` once complete, so a reader never sees half a file).
    #[cfg(native)]
    pub fn write(&self, path: impl AsRef<std::path::Path>) -> Result<(), Error> {
        use std::io::Write;
        let path = path.as_ref();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        let (tensors, info) = self.views();
        let result = std::fs::File::create(&tmp)
            .and_then(|f| {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
                write_safetensors(&mut w, &tensors, &info)?;
                w.flush()?;
                w.get_ref().sync_all()
            })
            .map_err(|e| io_error(path, e))
            .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io_error(path, e)));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Reads a table file from bytes (a browser's `fetch`, a test). Parses and checks the header
    /// only; the rows are borrowed from `bytes` when aligned.
    pub fn from_bytes(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<TableFile, Error> {
        TableFile::from_shared(Arc::new(bytes))
    }

    /// [`TableFile::from_bytes`], also of a keyed table's file ([`TableFile::keys`]) or a
    /// reordered one's ([`TableFile::id_map`]): the bytes' [`TableFile::open_stored`].
    pub fn from_bytes_stored(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<TableFile, Error> {
        TableFile::from_shared_any(Arc::new(bytes))
    }

    /// [`TableFile::from_bytes`], also of a file with an id map.
    pub(crate) fn from_bytes_any(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<TableFile, Error> {
        TableFile::from_shared_any(Arc::new(bytes))
    }

    /// [`TableFile::open`], also of a reordered table's file: its rows as stored, the most
    /// looked-up first, and [`TableFile::id_map`] where each id lies. For tools that describe
    /// files (`edo inspect`); rows are looked up by id through [`crate::PrunedTable::open`].
    #[cfg(native)]
    pub fn open_stored(path: impl AsRef<std::path::Path>) -> Result<TableFile, Error> {
        let path = path.as_ref();
        TableFile::from_shared_any(Arc::new(map_file(path)?)).map_err(|e| in_file(path, e))
    }

    /// Memory-maps a table file. Only the header is read now; rows are paged in as they are used.
    ///
    /// The file must not be modified while mapped (edo's own writer replaces files by renaming,
    /// which is safe); a change shows up as a [`Error::Checksum`] when the rows are verified.
    #[cfg(native)]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<TableFile, Error> {
        let path = path.as_ref();
        TableFile::from_shared(Arc::new(map_file(path)?)).map_err(|e| in_file(path, e))
    }

    /// A table file; one whose rows are reordered (it has an id map) is refused: its rows are
    /// not in id order, and every reader of a plain `TableFile` reads them as if they were.
    fn from_shared(bytes: SharedBytes) -> Result<TableFile, Error> {
        let file = TableFile::from_shared_any(bytes)?;
        if file.id_map.is_some() {
            return Err(Error::Unsupported(crate::Unsupported::ReorderedTableFile));
        }
        if file.keys.is_some() {
            return Err(Error::Unsupported(crate::Unsupported::KeyedTableFile));
        }
        Ok(file)
    }

    fn from_shared_any(bytes: SharedBytes) -> Result<TableFile, Error> {
        let buf: &[u8] = (*bytes).as_ref();
        let h = Header::parse(buf, buf.len() as u64)?;
        if let (Some(r), Some(expected)) = (&h.id_map, &h.id_map_crc) {
            if expected.parse::<u32>().ok() != Some(crc32fast::hash(&buf[r.clone()])) {
                return Err(bad("the id map does not match its checksum".into()));
            }
        }
        let id_map = h.id_map.clone().map(|r| crate::format::words_le(&buf[r]));
        let keys = match &h.keys {
            None => None,
            Some((r, expected)) => {
                if expected.parse::<u32>().ok() != Some(crc32fast::hash(&buf[r.clone()])) {
                    return Err(bad("the keys do not match their checksum".into()));
                }
                let keys: Vec<u64> = buf[r.clone()].chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                if let Some(key) = first_duplicate(&keys) {
                    return Err(bad(format!("key {key} names two rows")));
                }
                Some(keys)
            }
        };
        let crcs = crate::format::words_le(&buf[h.crc.clone()]);
        let vocab = match &h.vocab {
            None => None,
            Some((offsets, text, expected)) => {
                let (offsets, text) = (&buf[offsets.clone()], &buf[text.clone()]);
                let mut crc = crc32fast::Hasher::new();
                crc.update(offsets);
                crc.update(text);
                if expected.parse::<u32>().ok() != Some(crc.finalize()) {
                    return Err(bad("the vocabulary does not match its checksum".into()));
                }
                Some(decode_vocab(offsets, text)?)
            }
        };
        let model = match h.model {
            None => None,
            Some((settings, tensors, expected)) => {
                let tensors = tensors.into_iter().map(|(name, dtype, shape, range)| (name, ModelTensor { dtype, shape, data: buf[range].to_vec() })).collect();
                let parts = ModelParts { settings, tensors };
                if expected.parse::<u32>().ok() != Some(parts.crc()) {
                    return Err(bad("the model's tensors do not match their checksum".into()));
                }
                Some(parts)
            }
        };
        let code_transform = match h.codes {
            None => None,
            Some((mean, rotation, expected)) => {
                let mut crc = crc32fast::Hasher::new();
                crc.update(&buf[mean.clone()]);
                if let Some(r) = &rotation {
                    crc.update(&buf[r.clone()]);
                }
                if expected.parse::<u32>().ok() != Some(crc.finalize()) {
                    return Err(bad("the code transform does not match its checksum".into()));
                }
                let floats = |r: Range<usize>| -> Vec<f32> { crate::format::words_le(&buf[r]).into_iter().map(f32::from_bits).collect() };
                Some(CodeTransform::from_parts(floats(mean), rotation.map(floats))?)
            }
        };
        let table = PackedTable::from_shared(h.format, h.rows, h.dim, bytes.clone(), h.rows_range.start)?.with_row_alignment(h.row_alignment)?;
        let verified = crcs.iter().map(|_| AtomicBool::new(false)).collect();
        Ok(TableFile { table, vocab, metadata: h.metadata, crcs, chunk_bytes: h.chunk_bytes, verified, model, id_map, code_transform, keys })
    }

    /// Checks every row against the checksums.
    pub fn verify(&self) -> Result<(), Error> {
        self.verify_chunks(0..self.crcs.len())
    }

    /// Checks the rows in `rows` (and the rest of the 1 MiB chunks they share) against the
    /// checksums. Chunks already verified are not read again.
    pub fn verify_rows(&self, rows: Range<usize>) -> Result<(), Error> {
        if rows.is_empty() {
            return Ok(());
        }
        let row_bytes = 4 * self.table.row_words();
        let first = rows.start.min(self.table.rows()) * row_bytes / self.chunk_bytes;
        let last = (rows.end.min(self.table.rows()) * row_bytes).div_ceil(self.chunk_bytes);
        self.verify_chunks(first..last)
    }

    /// Checks the rows of `ids` that exist (out-of-range ids are the lookup's bounds policy's
    /// business).
    pub fn verify_ids(&self, ids: &[u32]) -> Result<(), Error> {
        for &id in ids {
            let r = id as usize;
            if r < self.table.rows() {
                self.verify_rows(r..r + 1)?;
            }
        }
        Ok(())
    }

    fn verify_chunks(&self, chunks: Range<usize>) -> Result<(), Error> {
        let bytes: &[u8] = bytemuck::cast_slice(self.table.words());
        for c in chunks {
            if self.verified[c].load(Ordering::Relaxed) {
                continue;
            }
            let start = c * self.chunk_bytes;
            let end = (start + self.chunk_bytes).min(bytes.len());
            if crc32fast::hash(&bytes[start..end]) != self.crcs[c] {
                return Err(Error::Checksum { start: start as u64, end: end as u64 });
            }
            self.verified[c].store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The tensors in file order (8-byte, then 4-byte, then 1-byte elements, so each is aligned)
    /// and the metadata.
    fn views(&self) -> (Vec<(String, Tensor<'_>)>, BTreeMap<String, String>) {
        let t = &self.table;
        let mut info = self.metadata.clone();
        let version = if self.keys.is_some() {
            KEYS_VERSION
        } else if self.code_transform.is_some() {
            CODE_TRANSFORM_VERSION
        } else if self.id_map.is_some() {
            ID_MAP_VERSION
        } else {
            VERSION
        };
        info.insert("edo.version".into(), version.to_string());
        info.insert("edo.format".into(), t.format().name().into());
        info.insert("edo.rows".into(), t.rows().to_string());
        info.insert("edo.dim".into(), t.dim().to_string());
        info.insert("edo.chunk_bytes".into(), self.chunk_bytes.to_string());
        if t.row_alignment() != NO_ROW_ALIGNMENT {
            info.insert("edo.row_alignment".into(), t.row_alignment().to_string());
        }
        let mut views = Vec::new();
        if let Some(keys) = &self.keys {
            let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
            info.insert("edo.keys_crc32".into(), crc32fast::hash(&bytes).to_string());
            views.push(("keys".to_string(), Tensor { dtype: Dtype::U64, shape: vec![keys.len()], data: bytes.into() }));
        }
        let vocab = self.vocab.as_ref().map(|v| {
            let (offsets, bytes) = v.encode();
            let mut crc = crc32fast::Hasher::new();
            crc.update(&offsets);
            crc.update(&bytes);
            info.insert("edo.vocab_crc32".into(), crc.finalize().to_string());
            views.push(("vocab.offsets".to_string(), Tensor { dtype: Dtype::U64, shape: vec![v.len() + 1], data: offsets.into() }));
            ("vocab.bytes".to_string(), Tensor { dtype: Dtype::U8, shape: vec![bytes.len()], data: bytes.into() })
        });
        views.push(("crc32".to_string(), Tensor { dtype: Dtype::U32, shape: vec![self.crcs.len()], data: bytemuck::cast_slice(&self.crcs).to_vec().into() }));
        views.push(("rows".to_string(), Tensor { dtype: Dtype::U32, shape: vec![t.rows(), t.row_words()], data: bytemuck::cast_slice(t.words()).into() }));
        if let Some(map) = &self.id_map {
            let bytes: Vec<u8> = map.iter().flat_map(|x| x.to_le_bytes()).collect();
            info.insert("edo.id_map_crc32".into(), crc32fast::hash(&bytes).to_string());
            views.push(("id_map".to_string(), Tensor { dtype: Dtype::U32, shape: vec![map.len()], data: bytes.into() }));
        }
        if let Some(ct) = &self.code_transform {
            let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            let mut crc = crc32fast::Hasher::new();
            let mean = le(ct.mean());
            crc.update(&mean);
            views.push(("codes.mean".to_string(), Tensor { dtype: Dtype::F32, shape: vec![ct.dim()], data: mean.into() }));
            if let Some(r) = ct.rotation() {
                let r = le(r);
                crc.update(&r);
                views.push(("codes.rotation".to_string(), Tensor { dtype: Dtype::F32, shape: vec![ct.dim(), ct.dim()], data: r.into() }));
            }
            info.insert("edo.codes_crc32".into(), crc.finalize().to_string());
        }
        let mut bytes_last = Vec::new();
        if let Some(model) = &self.model {
            info.insert("edo.model".into(), model.settings.clone());
            info.insert("edo.model_crc32".into(), model.crc().to_string());
            for (name, m) in &model.tensors {
                let tensor = (name.clone(), Tensor { dtype: m.dtype, shape: m.shape.clone(), data: m.data.as_slice().into() });
                match m.dtype.bitsize() {
                    8 => bytes_last.push(tensor),
                    32 => views.push(tensor),
                    // `Header::parse` and `to_edo` admit no other width.
                    other => unreachable!("a {other}-bit model tensor"),
                }
            }
        }
        views.extend(vocab);
        views.extend(bytes_last);
        info.insert(HEADER_CRC_KEY.into(), header_crc32(&info).to_string());
        (views, info)
    }
}

/// The first key that appears twice, if any.
fn first_duplicate(keys: &[u64]) -> Option<u64> {
    let mut seen = rustc_hash::FxHashSet::default();
    seen.reserve(keys.len());
    keys.iter().copied().find(|&k| !seen.insert(k))
}

/// A tensor to serialise.
pub(crate) struct Tensor<'a> {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: std::borrow::Cow<'a, [u8]>,
}

/// Writes a safetensors file: the header lists the metadata (keys sorted) and then the tensors in
/// the order given, which is also their order in the data, so the same input always gives the same
/// bytes (the `safetensors` crate's writer orders the metadata by hash).
pub(crate) fn write_safetensors(out: &mut impl std::io::Write, tensors: &[(String, Tensor<'_>)], metadata: &BTreeMap<String, String>) -> std::io::Result<()> {
    // Written by hand to keep the key order of the reference writer: dtype, shape, data_offsets.
    let mut entries = Vec::new();
    if !metadata.is_empty() {
        entries.push(format!("\"__metadata__\":{}", serde_json::to_string(metadata).expect("strings serialise")));
    }
    let mut offset = 0usize;
    for (name, t) in tensors {
        let end = offset + t.data.len();
        let shape: Vec<String> = t.shape.iter().map(usize::to_string).collect();
        let name = serde_json::to_string(name).expect("strings serialise");
        entries.push(format!("{name}:{{\"dtype\":\"{:?}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}", t.dtype, shape.join(",")));
        offset = end;
    }
    let mut text = format!("{{{}}}", entries.join(","));
    text.push_str(&" ".repeat(text.len().next_multiple_of(8) - text.len()));
    out.write_all(&(text.len() as u64).to_le_bytes())?;
    out.write_all(text.as_bytes())?;
    for (_, t) in tensors {
        out.write_all(&t.data)?;
    }
    Ok(())
}

fn chunk_crcs(bytes: &[u8], chunk: usize) -> Vec<u32> {
    let mut crcs = vec![0u32; bytes.len().div_ceil(chunk)];
    crate::par::for_each_chunk_mut(&mut crcs, 1, 16, |first, block| {
        for (i, c) in block.iter_mut().enumerate() {
            let start = (first + i) * chunk;
            *c = crc32fast::hash(&bytes[start..(start + chunk).min(bytes.len())]);
        }
        None::<()>
    });
    crcs
}

fn decode_vocab(offsets: &[u8], text: &[u8]) -> Result<Vocab, Error> {
    let mut tokens = Vec::with_capacity(offsets.len() / 8);
    let mut prev = 0usize;
    for (i, o) in offsets.chunks_exact(8).enumerate() {
        let o = u64::from_le_bytes(o.try_into().expect("chunks of 8"));
        let o = usize::try_from(o).ok().filter(|&o| o >= prev && o <= text.len());
        let Some(o) = o else {
            return Err(bad(format!("vocab.offsets[{i}] is not within the vocabulary's bytes in order")));
        };
        if i == 0 {
            if o != 0 {
                return Err(bad("vocab.offsets[0] must be 0".into()));
            }
        } else {
            let token = std::str::from_utf8(&text[prev..o]).map_err(|_| bad(format!("token {} is not UTF-8", i - 1)))?;
            tokens.push(token.to_string());
        }
        prev = o;
    }
    if prev != text.len() {
        return Err(bad("vocab.bytes has bytes after the last token".into()));
    }
    Ok(Vocab::new(tokens))
}

fn bad(reason: String) -> Error {
    Error::BadFile { what: WHAT, reason }
}

/// Maps a file read-only, for a reader.
#[cfg(native)]
pub(crate) fn map_file(path: &std::path::Path) -> Result<memmap2::Mmap, Error> {
    map_with(path, &memmap2::MmapOptions::new())
}

/// [`map_file`] of a file that will be read whole, its pages read in as it is mapped: one call
/// instead of a page fault every few pages.
#[cfg(native)]
pub(crate) fn map_file_populated(path: &std::path::Path) -> Result<memmap2::Mmap, Error> {
    map_with(path, memmap2::MmapOptions::new().populate())
}

#[cfg(native)]
fn map_with(path: &std::path::Path, options: &memmap2::MmapOptions) -> Result<memmap2::Mmap, Error> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    // SAFETY: the map is read-only and edo never writes a mapped file; another process
    // truncating it underneath is outside what any mmap-based reader can defend against.
    unsafe { options.map(&file) }.map_err(|e| io_error(path, e))
}

/// A reader's error, with the file named when it is about the file's contents.
#[cfg(native)]
pub(crate) fn in_file(path: &std::path::Path, e: Error) -> Error {
    match e {
        Error::BadFile { what, reason } => Error::BadFile { what, reason: format!("{}: {reason}", path.display()) },
        e => e,
    }
}

#[cfg(native)]
pub(crate) fn io_error(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::io(path.display(), e)
}
impl crate::source::RowSource for TableFile {
    fn format(&self) -> crate::Format {
        self.table().format()
    }
    fn rows(&self) -> usize {
        self.table().rows()
    }
    fn dim(&self) -> usize {
        self.table().dim()
    }
    async fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> Result<(), crate::Error> {
        self.verify_ids(rows)?;
        self.table().read_rows(rows, out).await
    }
}
