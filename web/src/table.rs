//! Tables in WASM memory: built from values, read from files' bytes, quantised, written back;
//! and the shape a file's header declares.

use super::*;

/// A packed table in host memory (WASM linear memory), with its vocabulary if it has one; or a
/// reordered or pruned one, its rows stored in another order or some left out, looked up by the
/// same ids through its id map.
#[wasm_bindgen]
pub struct EdoTable {
    /// `Dense` or `Pruned` (a reordering, or rows left out).
    pub(crate) inner: AnyTable,
    pub(crate) vocab: Option<Vocab>,
    /// What binary codes went through (centred or ITQ codes); queries go through it too.
    pub(crate) codes: Option<CodeTransform>,
}

#[wasm_bindgen]
impl EdoTable {
    /// Quantises a row-major `rows × dim` table to `format`. With `keep` (a byte a row), only the
    /// rows whose byte is not 0 are stored: the others take no memory and read as zeros (FBGEMM's
    /// pruned tables). Keeping every row makes a plain table. With `row_alignment` (bytes, a power
    /// of two from 4 to 256), each stored row starts on a multiple of it once uploaded to a GPU
    /// ([`PackedTable::with_row_alignment`]).
    #[wasm_bindgen(js_name = fromFloat32)]
    pub fn from_float32(data: &[f32], rows: usize, dim: usize, format: &str, keep: Option<Vec<u8>>, row_alignment: Option<usize>) -> Result<EdoTable, Failure> {
        let format = format_of(format)?;
        // Checked before the rows are quantised.
        let alignment = row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT);
        edo::format::check_row_alignment(alignment).map_err(err)?;
        let inner = match keep.filter(|k| k.len() != rows || k.contains(&0)) {
            None => {
                let table = PackedTable::quantize(format, data, rows, dim).map_err(err)?;
                AnyTable::Dense(table.with_row_alignment(alignment).map_err(err)?)
            }
            Some(keep) => {
                let keep: Vec<bool> = keep.iter().map(|&k| k != 0).collect();
                let pruned = PrunedTable::quantize(format, data, rows, dim, &keep).map_err(err)?;
                AnyTable::Pruned(pruned.with_row_alignment(alignment).map_err(err)?)
            }
        };
        Ok(EdoTable { inner, vocab: None, codes: None })
    }

    /// edo's built-in synthetic table (the demo's default), as f32.
    pub fn synthetic(rows: usize, dim: usize, seed: u32) -> Result<EdoTable, Failure> {
        Ok(EdoTable { inner: AnyTable::Dense(edo::synth::embedding_packed(rows, dim, seed as u64).map_err(err)?), vocab: None, codes: None })
    }

    /// Reads the bytes of a file, its kind from `name`'s extension: an `.edo` table file (checked
    /// against its checksums), or a `.npy` / `.safetensors` / `.gguf` (`tensor`, by default
    /// `token_embd.weight`; ggml blocks kept as they are) / word2vec `.txt` table, which is
    /// quantised to `format` (default: kept as f32, or as packed for byte arrays, whose `layout`
    /// must be named: fbgemm8, fbgemm4, packbits, packbits-lsb, or the format `edo export` wrote
    /// them in; `dim` where the width fits several).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(
        bytes: Vec<u8>,
        name: &str,
        format: Option<String>,
        layout: Option<String>,
        tensor: Option<String>,
        dim: Option<u32>,
    ) -> Result<EdoTable, Failure> {
        let kind = FileKind::from_path(std::path::Path::new(name))
            .ok_or_else(|| Failure::arg(format!("{name}: edo reads .edo, .npy, .safetensors, .gguf and .txt/.vec files")))?;
        let layout = match layout.as_deref() {
            None | Some("") => FileLayout::Dense,
            Some(l) => FileLayout::from_name(l, dim.map(|d| d as usize)).ok_or_else(|| Failure::arg(format!("unknown layout {l:?}")))?,
        };
        let mut codes = None;
        let imported = match kind {
            FileKind::Edo => {
                // A reordered table's file (it holds an id map) is read with its map; the bytes
                // are shared by the two tries, not copied.
                let bytes = SharedBytes(Arc::new(bytes));
                let file = match TableFile::from_bytes(bytes.clone()) {
                    Err(edo::Error::Unsupported(edo::Unsupported::ReorderedTableFile)) => return EdoTable::reordered_file(bytes, format.as_deref()),
                    file => file.map_err(err)?,
                };
                file.verify().map_err(err)?;
                let vocab = file.vocab().cloned();
                codes = file.code_transform().cloned();
                import::Imported { table: import::Table::Packed(file.into_table()), vocab, lossy_tokens: 0 }
            }
            FileKind::Npy => import::npy(&bytes, layout).map_err(err)?,
            FileKind::Safetensors => import::safetensors(&bytes, tensor.as_deref(), layout).map_err(err)?,
            FileKind::Text => import::text(&bytes).map_err(err)?,
            FileKind::Gguf => {
                let file = edo::file::gguf::Gguf::parse(&bytes).map_err(err)?;
                file.table(&bytes, tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR)).map_err(err)?
            }
        };
        let target = match format.as_deref() {
            Some(f) if !f.is_empty() => format_of(f)?,
            _ => imported.format(),
        };
        // Codes made through a transform stay binary codes: in another format their values would
        // be the transformed rows' signs, searched without the transform.
        if let (Some(t), true) = (&codes, target != Format::Binary) {
            return Err(Failure::arg(format!("{name} holds {} codes: they stay binary (make {target} rows from the table they came from)", t.kind())));
        }
        let inner = AnyTable::Dense(imported.to_format(target).map_err(err)?);
        Ok(EdoTable { inner, vocab: imported.vocab, codes })
    }

    /// The same table in another format (decoded and requantised); a reordered or pruned table
    /// keeps its id map.
    pub fn quantize(&self, format: &str) -> Result<EdoTable, Failure> {
        let format = format_of(format)?;
        if let (Some(t), true) = (&self.codes, format != Format::Binary) {
            return Err(Failure::arg(format!("these are {} codes: they stay binary (make {format} rows from the table they came from)", t.kind())));
        }
        let inner = match &self.inner {
            AnyTable::Pruned(p) => AnyTable::Pruned(PrunedTable::from_remap(p.table().requantize(format).map_err(err)?, p.remap().to_vec()).map_err(err)?),
            t => AnyTable::Dense(dense_of(t, "quantize")?.requantize(format).map_err(err)?),
        };
        Ok(EdoTable { inner, vocab: self.vocab.clone(), codes: self.codes.clone() })
    }

    /// The table with its rows stored by lookup count, the most looked-up first (`edo reorder`):
    /// `counts` holds one count a row. Lookups take the same ids and give the same rows; the
    /// rows they touch most lie together. The vocabulary is not carried over (a reordered table
    /// is looked up by id).
    #[wasm_bindgen(js_name = reorderByCounts)]
    pub fn reorder_by_counts(&self, counts: &[u32]) -> Result<EdoTable, Failure> {
        let table = self.dense("reorderByCounts")?;
        if counts.len() != table.rows() {
            return Err(Failure::arg(format!("counts has {} counts; {} were expected (one a row)", counts.len(), table.rows())));
        }
        self.reordered(table, &counts.iter().map(|&c| u64::from(c)).collect::<Vec<_>>())
    }

    /// [`EdoTable::reorder_by_counts`] with the counts of a trace of the ids looked up (an id out
    /// of range is an error).
    #[wasm_bindgen(js_name = reorderByTrace)]
    pub fn reorder_by_trace(&self, ids: &[u32]) -> Result<EdoTable, Failure> {
        let table = self.dense("reorderByTrace")?;
        self.reordered(table, &edo::prune::lookup_counts(ids, table.rows()).map_err(err)?)
    }

    /// Whether the table is reordered or pruned: its rows are stored in another order than its
    /// ids, or some are left out; lookups go through its id map.
    #[wasm_bindgen(getter)]
    pub fn remapped(&self) -> bool {
        matches!(self.inner, AnyTable::Pruned(_))
    }

    /// Bytes each row starts on once uploaded to a GPU: 4 (packed) unless the table asked for
    /// more (`rowAlignment` of `createTable`, or an `.edo` file's).
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.stored().row_alignment()
    }

    /// Rows stored: `rows` for a plain or reordered table, fewer for a pruned one.
    #[wasm_bindgen(getter, js_name = storedRows)]
    pub fn stored_rows(&self) -> usize {
        self.stored().rows()
    }

    /// Binary codes of this table's rows that keep more neighbours than their signs: `kind`
    /// "centered" (the mean row subtracted first) or "itq" (centred, then rotated by a rotation
    /// trained on the rows, `iterations` steps, default 50; needs more rows than dim). The codes
    /// keep their transform: `uploadCodes` searches with queries put through it, and `toBytes`
    /// stores it.
    #[wasm_bindgen(js_name = quantizeCodes)]
    pub fn quantize_codes(&self, kind: &str, iterations: Option<usize>) -> Result<EdoTable, Failure> {
        let table = self.dense("quantizeCodes")?;
        if matches!(table.format(), Format::Binary | Format::BinaryScaled) {
            // Their values are ±1 (or ±scale) signs already, of rows no longer here.
            return Err(Failure::arg(format!("quantizeCodes of a {} table: make codes from the table of values they came from", table.format())));
        }
        let values = table.dequantize();
        let dim = table.dim();
        let transform = match kind {
            "centered" | "centred" => CodeTransform::centered(&values, dim),
            "itq" => CodeTransform::itq(&values, dim, &ItqOptions { iterations: iterations.unwrap_or(50), ..Default::default() }),
            _ => return Err(Failure::arg(format!("unknown codes {kind:?} (centered, itq)"))),
        }
        .map_err(err)?;
        let inner = AnyTable::Dense(transform.encode(&values).map_err(err)?);
        Ok(EdoTable { inner, vocab: self.vocab.clone(), codes: Some(transform) })
    }

    /// The transform binary codes went through: "centered", "itq", or undefined (plain signs, or
    /// not codes).
    #[wasm_bindgen(getter)]
    pub fn codes(&self) -> Option<String> {
        self.codes.as_ref().map(|t| t.kind().to_string())
    }

    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.stored().format().name().into()
    }
    /// Rows the ids address (for a pruned table, counting the rows left out).
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        Lookup::rows(&self.inner)
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        Lookup::dim(&self.inner)
    }
    /// Bytes of packed storage (what the GPU holds; with a reordered or pruned table's id map).
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        Lookup::bytes(&self.inner) as f64
    }
    /// Bytes of the same table as f32 (every row of `rows`).
    #[wasm_bindgen(getter, js_name = f32Bytes)]
    pub fn f32_bytes(&self) -> f64 {
        // In u64: rows × dim × 4 passes a wasm32 usize at 2³² bytes.
        (self.rows() as u64 * self.dim() as u64 * 4) as f64
    }

    /// Decoded rows of `ids` on the CPU path (an id out of range is an error; a pruned row
    /// reads as zeros).
    pub fn gather(&self, ids: &[u32]) -> Result<Vec<f32>, Failure> {
        Ok(self.inner.lookup(&Request::gather(ids, Bounds::Error)).map_err(err)?.into_f32())
    }

    /// The row of `token`, if the table has a vocabulary holding it.
    #[wasm_bindgen(js_name = idOf)]
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.vocab.as_ref().and_then(|v| v.id(token).ok())
    }

    /// The table as `.edo` file bytes; `chunkBytes` sets the bytes of rows per checksum (default
    /// 1 MiB; small chunks, such as 4096, suit files read remotely row by row).
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self, chunk_bytes: Option<usize>) -> Result<Vec<u8>, Failure> {
        let table = match &self.inner {
            // Its rows and id map; a pruned table (rows left out) is refused: the format does
            // not hold absent rows.
            AnyTable::Pruned(p) if !p.is_reordering() => {
                return Err(Failure {
                    code: "UNSUPPORTED",
                    message: format!("toBytes of a pruned table ({} of {} rows kept): a .edo file stores every row", p.table().rows(), p.original_rows()),
                })
            }
            AnyTable::Pruned(p) => return p.to_bytes(chunk_bytes, &Default::default()).map_err(err),
            t => dense_of(t, "toBytes")?,
        };
        let mut file = TableFile::new(table.clone());
        if let Some(bytes) = chunk_bytes {
            file = file.with_chunk_bytes(bytes).map_err(err)?;
        }
        if let Some(v) = &self.vocab {
            file = file.with_vocab(v.clone()).map_err(err)?;
        }
        if let Some(t) = &self.codes {
            file = file.with_code_transform(t.clone()).map_err(err)?;
        }
        Ok(file.to_bytes())
    }
}

impl EdoTable {
    /// A reordered table's `.edo` file (one with an id map), requantised to `format` if given.
    fn reordered_file(bytes: SharedBytes, format: Option<&str>) -> Result<EdoTable, Failure> {
        let table = EdoTable { inner: AnyTable::Pruned(PrunedTable::from_file_bytes(bytes).map_err(err)?), vocab: None, codes: None };
        match format.filter(|f| !f.is_empty()) {
            Some(f) => table.quantize(f),
            None => Ok(table),
        }
    }

    /// `table`'s rows stored by `counts` (one a row), most first.
    fn reordered(&self, table: &PackedTable, counts: &[u64]) -> Result<EdoTable, Failure> {
        if let Some(t) = &self.codes {
            return Err(Failure::arg(format!(
                "these are {} codes: a reordered table would not keep their transform (reorder the table before making codes)",
                t.kind()
            )));
        }
        let order = edo::prune::frequency_order(counts);
        Ok(EdoTable { inner: AnyTable::Pruned(PrunedTable::reorder(table, &order).map_err(err)?), vocab: None, codes: None })
    }

    /// The packed table the rows are stored in.
    fn stored(&self) -> &PackedTable {
        match &self.inner {
            AnyTable::Dense(t) => t,
            AnyTable::Pruned(p) => p.table(),
            // (Not made by this API; its hot rows' table.)
            AnyTable::Mixed(m) => m.hot(),
        }
    }

    /// The table, for what needs its rows in id order (`what`, named in the error).
    pub(crate) fn dense(&self, what: &str) -> Result<&PackedTable, Failure> {
        dense_of(&self.inner, what)
    }
}

/// `table` if it is a plain packed one; else an `UNSUPPORTED` failure naming `what`.
pub(crate) fn dense_of<'a>(table: &'a AnyTable, what: &str) -> Result<&'a PackedTable, Failure> {
    match table {
        AnyTable::Dense(t) => Ok(t),
        _ => Err(Failure {
            code: "UNSUPPORTED",
            message: format!("{what} of a reordered or pruned table: its rows are not stored in id order (use the table it was made from)"),
        }),
    }
}

/// A file's bytes, shared by the readers that try them.
#[derive(Clone)]
pub(crate) struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The shape an `.edo` file (table or model) declares in its header.
#[wasm_bindgen]
pub struct EdoShape {
    pub(crate) format: String,
    pub(crate) rows: usize,
    pub(crate) dim: usize,
    pub(crate) row_alignment: usize,
}

#[wasm_bindgen]
impl EdoShape {
    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.format.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.rows
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Bytes each row starts on once uploaded to a GPU: 4 (packed), or what the file asks for.
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.row_alignment
    }
}

/// The format, rows, dim and row alignment of an `.edo` file, read from its header alone (only
/// the header's bytes are copied into WASM memory).
#[wasm_bindgen(js_name = tableShape)]
pub fn table_shape(bytes: &js_sys::Uint8Array) -> Result<EdoShape, Failure> {
    let len = bytes.length();
    let first8 = bytes.subarray(0, len.min(8)).to_vec();
    let header = edo::file::header_bytes(&first8).map_err(err)?;
    let prefix = bytes.subarray(0, len.min(u32::try_from(header).unwrap_or(u32::MAX))).to_vec();
    let shape = edo::file::table_shape(&prefix, len as u64).map_err(err)?;
    Ok(EdoShape { format: shape.format.name().into(), rows: shape.rows, dim: shape.dim, row_alignment: shape.row_alignment })
}
