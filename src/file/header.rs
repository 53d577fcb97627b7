//! A table file's header: its checksum, the shape it declares, and `Header`, what it says checked
//! against itself and the file's length.

use super::*;

/// The metadata key of the header's own checksum ([`header_crc32`]).
pub const HEADER_CRC_KEY: &str = "edo.header_crc32";

/// CRC-32 of a table file's `edo.*` metadata but `edo.header_crc32` itself: each key and its
/// value, in byte order of the keys, each followed by a zero byte. A file stores it as
/// `edo.header_crc32`, so a header damaged where its shape is still plausible — a digit of
/// `edo.dim` changed, which leaves an INT8 row as many words — is refused, not read as another
/// table. User keys (not `edo.`) are not covered.
pub fn header_crc32<'a, K: AsRef<str> + 'a, V: AsRef<str> + 'a>(metadata: impl IntoIterator<Item = (&'a K, &'a V)>) -> u32 {
    let mut own: Vec<(&str, &str)> =
        metadata.into_iter().map(|(k, v)| (k.as_ref(), v.as_ref())).filter(|(k, _)| k.starts_with("edo.") && *k != HEADER_CRC_KEY).collect();
    own.sort_unstable();
    let mut crc = crc32fast::Hasher::new();
    for (k, v) in own {
        crc.update(k.as_bytes());
        crc.update(&[0]);
        crc.update(v.as_bytes());
        crc.update(&[0]);
    }
    crc.finalize()
}

/// What a table file (or model file) declares of its table, from the header alone
/// ([`table_shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableShape {
    /// The rows' format.
    pub format: Format,
    /// Rows.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Bytes each row starts on once uploaded to a GPU (`edo.row_alignment`;
    /// [`NO_ROW_ALIGNMENT`] when the file asks for none).
    pub row_alignment: usize,
}

/// The format, rows, dim and row alignment a table file (or model file) declares, from its first
/// bytes: at least the 8-byte length and the header it gives ([`header_bytes`] of them), for a
/// file of `file_len` bytes. A reader can act on the shape (compile its kernels with
/// [`crate::Engine::prepare_model`] or [`crate::Engine::prepare_rows`], size its buffers) before
/// the rest of the file has arrived.
pub fn table_shape(prefix: &[u8], file_len: u64) -> Result<TableShape, Error> {
    let h = Header::parse(prefix, file_len)?;
    Ok(TableShape { format: h.format, rows: h.rows, dim: h.dim, row_alignment: h.row_alignment })
}

/// Bytes at the start of a table file that hold its header (the 8-byte length and the JSON), from
/// its first 8 bytes.
pub fn header_bytes(first8: &[u8]) -> Result<usize, Error> {
    Ok(Header::PREFIX + Header::json_len(first8)?)
}

/// What a table file's header says, checked against itself and the file's length: where the
/// rows, checksums and vocabulary lie (absolute byte ranges of the file).
pub(crate) struct Header {
    pub format: Format,
    pub rows: usize,
    pub dim: usize,
    pub chunk_bytes: usize,
    /// Bytes a row starts on once uploaded to a GPU (`edo.row_alignment`; 4 when absent).
    pub row_alignment: usize,
    pub rows_range: Range<usize>,
    pub crc: Range<usize>,
    /// Offsets, token bytes, and the expected checksum (as written).
    pub vocab: Option<(Range<usize>, Range<usize>, String)>,
    /// A model file's settings, `model.*` tensors (name, dtype, shape, bytes) and checksum.
    #[allow(clippy::type_complexity)]
    pub model: Option<(String, Vec<(String, Dtype, Vec<usize>, Range<usize>)>, String)>,
    pub metadata: BTreeMap<String, String>,
    /// A reordered table's id map (version [`ID_MAP_VERSION`] files only).
    pub id_map: Option<Range<usize>>,
    /// The id map's checksum as written (`edo.id_map_crc32`; there with the map).
    pub id_map_crc: Option<String>,
    /// A binary table's code transform: its mean, rotation and checksum (as written) (version
    /// [`CODE_TRANSFORM_VERSION`] files only).
    pub codes: Option<(Range<usize>, Option<Range<usize>>, String)>,
    /// A keyed table's keys and their checksum as written (version [`KEYS_VERSION`] files only).
    pub keys: Option<(Range<usize>, String)>,
}

impl Header {
    /// Bytes of the header's length prefix.
    pub const PREFIX: usize = 8;

    /// The header's JSON length, from the file's first 8 bytes.
    pub fn json_len(prefix: &[u8]) -> Result<usize, Error> {
        let Some(n) = prefix.get(..Self::PREFIX) else { return Err(bad("shorter than a safetensors header".into())) };
        let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
        // safetensors' own bound on a header (100 MB).
        if n > 100_000_000 {
            return Err(bad(format!("a header of {n} bytes")));
        }
        Ok(n as usize)
    }

    /// Parses the header from the first bytes of a file of `file_len` bytes (`prefix` holds at
    /// least the length and the JSON).
    pub fn parse(prefix: &[u8], file_len: u64) -> Result<Header, Error> {
        let n = Self::json_len(prefix)?;
        let data_start = Self::PREFIX + n;
        let Some(json) = prefix.get(Self::PREFIX..data_start) else { return Err(bad(format!("truncated in its {n}-byte header"))) };
        let meta: safetensors::tensor::Metadata = serde_json::from_slice(json).map_err(|e| bad(format!("not a readable safetensors file ({e})")))?;
        if (data_start + meta.data_len()) as u64 != file_len {
            return Err(bad(format!("the header describes {} bytes of data, the file holds {}", meta.data_len(), file_len.saturating_sub(data_start as u64))));
        }
        let empty = HashMap::new();
        let kv = meta.metadata().as_ref().unwrap_or(&empty);
        let Some(version) = kv.get("edo.version") else {
            return Err(bad("a safetensors file without edo metadata; import a tensor from it with `edo quantize`".into()));
        };
        let (mapped, coded, keyed) = match version.trim() {
            v if v == VERSION.to_string() => (false, false, false),
            v if v == ID_MAP_VERSION.to_string() => (true, false, false),
            v if v == CODE_TRANSFORM_VERSION.to_string() => (false, true, false),
            v if v == KEYS_VERSION.to_string() => (false, false, true),
            _ => return Err(Error::UnsupportedVersion { found: version.clone(), supported: KEYS_VERSION }),
        };
        let get = |key: &str| kv.get(key).ok_or_else(|| bad(format!("metadata {key} is missing")));
        let number = |key: &str| -> Result<usize, Error> {
            let v = get(key)?;
            v.parse::<usize>().map_err(|_| bad(format!("metadata {key} = {v:?} is not a count")))
        };
        let format_name = get("edo.format")?;
        let format = Format::from_name(format_name).ok_or_else(|| bad(format!("unknown format {format_name:?}")))?;
        let rows = number("edo.rows")?;
        let dim = number("edo.dim")?;
        let chunk_bytes = number("edo.chunk_bytes")?;
        if dim == 0 || chunk_bytes == 0 {
            return Err(bad("edo.dim and edo.chunk_bytes must be positive".into()));
        }
        let row_alignment = if kv.contains_key("edo.row_alignment") { number("edo.row_alignment")? } else { NO_ROW_ALIGNMENT };
        if crate::format::check_row_alignment(row_alignment).is_err() {
            return Err(bad(format!("edo.row_alignment = {row_alignment} (a row alignment is a power of two from 4 to 256 bytes)")));
        }
        let row_words = format.row_words(dim);
        let tensor = |name: &str, dtype: Dtype| -> Result<&TensorInfo, Error> {
            let info = meta.info(name).ok_or_else(|| bad(format!("tensor {name:?} is missing")))?;
            if info.dtype != dtype {
                return Err(bad(format!("tensor {name:?} is {:?}, expected {dtype:?}", info.dtype)));
            }
            Ok(info)
        };
        let range = |info: &TensorInfo| data_start + info.data_offsets.0..data_start + info.data_offsets.1;
        let rows_info = tensor("rows", Dtype::U32)?;
        if rows_info.shape != [rows, row_words] {
            // Earlier builds stored a row's last group (a k-quant's super-block) whole, padding
            // included: the words of a row of whole groups.
            let group = format.group();
            let padded = (group > 0).then(|| dim.checked_next_multiple_of(group).map(|d| format.row_words(d))).flatten();
            if padded.is_some_and(|w| w != row_words && rows_info.shape == [rows, w]) {
                return Err(bad(format!(
                    "its {format} rows of dim {dim} hold a whole zero-padded last group of {group} values ({} words), as edo builds up to 2026-12-05 wrote them; this edo stores only the codes the values reach ({row_words} words): quantise the table again from its source with this edo",
                    rows_info.shape[1]
                )));
            }
            return Err(bad(format!("tensor \"rows\" has shape {:?}, but {rows} rows of {format} dim {dim} need [{rows}, {row_words}]", rows_info.shape)));
        }
        let rows_bytes = rows_info.data_offsets.1 - rows_info.data_offsets.0;
        let crc_info = tensor("crc32", Dtype::U32)?;
        let chunks = rows_bytes.div_ceil(chunk_bytes);
        if crc_info.shape != [chunks] {
            return Err(bad(format!("tensor \"crc32\" has shape {:?}, expected [{chunks}]", crc_info.shape)));
        }
        let vocab = match (meta.info("vocab.offsets"), meta.info("vocab.bytes")) {
            (None, None) => None,
            (Some(_), Some(_)) => {
                let offsets_info = tensor("vocab.offsets", Dtype::U64)?;
                let bytes_info = tensor("vocab.bytes", Dtype::U8)?;
                if offsets_info.shape != [rows + 1] {
                    return Err(bad(format!("tensor \"vocab.offsets\" has shape {:?}, expected [{}]", offsets_info.shape, rows + 1)));
                }
                Some((range(offsets_info), range(bytes_info), get("edo.vocab_crc32")?.clone()))
            }
            _ => return Err(bad("tensors \"vocab.offsets\" and \"vocab.bytes\" come together".into())),
        };
        let mut model_tensors: Vec<_> = meta
            .tensors()
            .into_iter()
            .filter(|(name, _)| name.starts_with("model."))
            .map(|(name, info)| (name, info.dtype, info.shape.clone(), range(info)))
            .collect();
        model_tensors.sort_by(|a, b| a.0.cmp(&b.0));
        // The writer lays 4-byte tensors out before 1-byte ones; a model holds no others.
        if let Some((name, dtype, ..)) = model_tensors.iter().find(|(_, dtype, ..)| !matches!(dtype.bitsize(), 8 | 32)) {
            return Err(bad(format!("tensor {name:?} is {dtype:?}; model tensors have 1- or 4-byte elements")));
        }
        let model = match kv.get("edo.model") {
            Some(settings) => Some((settings.clone(), model_tensors, get("edo.model_crc32")?.clone())),
            None if model_tensors.is_empty() => None,
            None => return Err(bad(format!("tensor {:?} without the edo.model settings", model_tensors[0].0))),
        };
        let id_map = match (mapped, meta.info("id_map")) {
            (true, Some(_)) => {
                let info = tensor("id_map", Dtype::U32)?;
                if info.shape != [rows] {
                    return Err(bad(format!("tensor \"id_map\" has shape {:?}, expected [{rows}]", info.shape)));
                }
                Some(range(info))
            }
            (true, None) => return Err(bad(format!("a version {ID_MAP_VERSION} file (a reordered table) without its \"id_map\""))),
            (false, Some(_)) => return Err(bad(format!("an \"id_map\" in a version {version} file (a reordered table is version {ID_MAP_VERSION})"))),
            (false, None) => None,
        };
        let codes = match (coded, meta.info("codes.mean")) {
            (true, Some(_)) => {
                if format != Format::Binary {
                    return Err(bad(format!("a code transform for {format} rows (it belongs to binary codes)")));
                }
                let mean = tensor("codes.mean", Dtype::F32)?;
                if mean.shape != [dim] {
                    return Err(bad(format!("tensor \"codes.mean\" has shape {:?}, expected [{dim}]", mean.shape)));
                }
                let rotation = match meta.info("codes.rotation") {
                    None => None,
                    Some(_) => {
                        let r = tensor("codes.rotation", Dtype::F32)?;
                        if r.shape != [dim, dim] {
                            return Err(bad(format!("tensor \"codes.rotation\" has shape {:?}, expected [{dim}, {dim}]", r.shape)));
                        }
                        Some(range(r))
                    }
                };
                Some((range(mean), rotation, get("edo.codes_crc32")?.clone()))
            }
            (true, None) => return Err(bad(format!("a version {CODE_TRANSFORM_VERSION} file (binary codes with a transform) without its \"codes.mean\""))),
            (false, _) if meta.info("codes.mean").is_some() || meta.info("codes.rotation").is_some() => {
                return Err(bad(format!("a code transform in a version {version} file (binary codes with a transform are version {CODE_TRANSFORM_VERSION})")));
            }
            (false, _) => None,
        };
        let keys = match (keyed, meta.info("keys")) {
            (true, Some(_)) => {
                let info = tensor("keys", Dtype::U64)?;
                if info.shape != [rows] {
                    return Err(bad(format!("tensor \"keys\" has shape {:?}, expected [{rows}]", info.shape)));
                }
                Some((range(info), get("edo.keys_crc32")?.clone()))
            }
            (true, None) => return Err(bad(format!("a version {KEYS_VERSION} file (a keyed table) without its \"keys\""))),
            (false, Some(_)) => return Err(bad(format!("\"keys\" in a version {version} file (a keyed table is version {KEYS_VERSION})"))),
            (false, None) => None,
        };
        let id_map_crc = kv.get("edo.id_map_crc32").cloned();
        if id_map_crc.is_some() != id_map.is_some() {
            return Err(bad("an \"id_map\" and its edo.id_map_crc32 come together".into()));
        }
        // Last, so that every other check of a damaged header still names what it finds.
        let expected = get(HEADER_CRC_KEY).map_err(|_| {
            bad(format!(
                "metadata {HEADER_CRC_KEY} is missing (edo builds up to 2026-12-05 wrote none): quantise the table again from its source with this edo"
            ))
        })?;
        if expected.parse::<u32>().ok() != Some(header_crc32(kv)) {
            return Err(bad(format!("its edo.* metadata does not match {HEADER_CRC_KEY}: the header is damaged")));
        }
        let metadata = kv.iter().filter(|(k, _)| !k.starts_with("edo.")).map(|(k, v)| (k.clone(), v.clone())).collect();
        Ok(Header {
            format,
            rows,
            dim,
            chunk_bytes,
            row_alignment,
            rows_range: range(rows_info),
            crc: range(crc_info),
            vocab,
            metadata,
            model,
            id_map,
            id_map_crc,
            codes,
            keys,
        })
    }
}
