//! Static embedding models: on the CPU path, made resident on an engine, indexing a corpus.

use super::*;

/// A static embedding model — model2vec's "potion" models, sentence-transformers'
/// `StaticEmbedding`, WordLlama: tokenizer, table (in any edo format) and pooling. `embed` runs it
/// on the CPU path; `EdoEngine.uploadModel` puts its table on the GPU.
#[wasm_bindgen]
pub struct EdoModel {
    pub(crate) inner: StaticModel,
}

#[wasm_bindgen]
impl EdoModel {
    /// A model from the bytes of an `.edo` model file (`edo quantize-model`).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: Vec<u8>) -> Result<EdoModel, Failure> {
        Ok(EdoModel { inner: StaticModel::from_edo_bytes(bytes).map_err(err)? })
    }

    /// A sentence-transformers static model from its files: `modules.json` and
    /// `config_sentence_transformers.json` (either may be absent; checked as natively), and its
    /// StaticEmbedding module's `tokenizer.json` and `model.safetensors`.
    #[wasm_bindgen(js_name = fromSentenceTransformers)]
    pub fn from_sentence_transformers(modules: Option<Vec<u8>>, config: Option<Vec<u8>>, tokenizer: &[u8], safetensors: &[u8]) -> Result<EdoModel, Failure> {
        let layout = SentenceTransformersLayout::check(modules.as_deref(), config.as_deref()).map_err(err)?;
        Ok(EdoModel { inner: StaticModel::from_sentence_transformers(tokenizer, safetensors, layout.normalize).map_err(err)? })
    }

    /// The folder of the StaticEmbedding module a `modules.json` names ("" for the top), checked;
    /// undefined when it names none.
    #[wasm_bindgen(js_name = sentenceTransformersModule)]
    pub fn sentence_transformers_module(modules: &[u8]) -> Result<Option<String>, Failure> {
        Ok(SentenceTransformersLayout::check(Some(modules), None).map_err(err)?.module)
    }

    /// A model from a folder's files: `config.json` (`undefined` for none), `tokenizer.json` and
    /// `model.safetensors` (model2vec's layout, or sentence-transformers' `embedding.weight`),
    /// encoded as model2vec encodes them. For sentence-transformers' own encoding of its folders,
    /// see `fromSentenceTransformers`.
    #[wasm_bindgen(js_name = fromFiles)]
    pub fn from_files(config: Option<Vec<u8>>, tokenizer: &[u8], safetensors: &[u8]) -> Result<EdoModel, Failure> {
        let config = config.unwrap_or_else(|| b"{}".to_vec());
        Ok(EdoModel { inner: StaticModel::from_bytes(&config, tokenizer, safetensors).map_err(err)? })
    }

    /// A model from an `.edo` model file at `url`, fetched whole.
    #[wasm_bindgen(js_name = fromUrl)]
    pub async fn from_url(url: String) -> Result<EdoModel, Failure> {
        let bytes = fetch_all(&url).await.map_err(err)?;
        EdoModel::from_bytes(bytes)
    }

    /// The same model with its table in another format.
    pub fn quantize(&self, format: &str) -> Result<EdoModel, Failure> {
        Ok(EdoModel { inner: self.inner.quantize(format_of(format)?).map_err(err)? })
    }

    /// The model as `.edo` model file bytes (table, tokenizer, mapping, weights, settings).
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.inner.to_edo().to_bytes()
    }

    /// Values per sentence vector.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.dim()
    }
    /// Token ids the tokenizer can produce.
    #[wasm_bindgen(getter, js_name = vocabSize)]
    pub fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    /// Rows of the table (fewer than the vocabulary when tokens share rows).
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.inner.table().rows()
    }
    /// The table's format.
    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.inner.table().format().name().into()
    }
    /// Bytes each row of the table starts on once uploaded to a GPU: 4 (packed), or what the
    /// model file asks for.
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.inner.table().row_alignment()
    }
    /// Bytes of the packed table.
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.inner.table().bytes() as f64
    }
    /// Whether sentence vectors are L2-normalised.
    #[wasm_bindgen(getter)]
    pub fn normalize(&self) -> bool {
        self.inner.normalize()
    }

    /// The token ids of `text` that count (after the model's cut, truncation and unknown-token
    /// removal).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, Failure> {
        Ok(self.inner.tokenize(&[text]).map_err(err)?.remove(0))
    }

    /// Sentence vectors of `texts` on the CPU path: `texts.length × dim` values.
    pub fn embed(&self, texts: Vec<String>) -> Result<Vec<f32>, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.inner.encode(&texts).map_err(err)
    }
}

#[wasm_bindgen]
impl EdoEngine {
    /// Makes a model's table resident: on WebGPU the tokens' rows are pooled (and normalised)
    /// on the GPU; on the CPU path the model runs as `EdoModel.embed` does.
    #[wasm_bindgen(js_name = uploadModel)]
    pub async fn upload_model(&self, model: &EdoModel) -> Result<EdoResidentModel, Failure> {
        let placed = self.backend.place(model.inner.clone()).await.map_err(err)?;
        Ok(EdoResidentModel { inner: ModelOn { placed, backend: self.backend.clone() } })
    }
}

#[wasm_bindgen]
impl EdoEngine {
    /// Compiles the kernels a model whose table is in `format` with `dim` values (rows aligned to
    /// `row_alignment` bytes, the model's `rowAlignment`; packed when absent) runs to embed a few
    /// texts, ahead of its first embedding: start it, read the model file meanwhile
    /// (`tableShape` gives the format, dim and row alignment from the file's first bytes), then
    /// await it. At dims up to 256, one `embed` of thousands of texts (2 048 at dim 256) compiles
    /// its own shape of the bag kernel at its first use.
    /// Resolves at once on the CPU path (after checking the alignment).
    #[wasm_bindgen(js_name = prepareModel)]
    pub async fn prepare_model(&self, format: String, dim: usize, row_alignment: Option<usize>) -> Result<(), Failure> {
        let format = format_of(&format)?;
        let bytes = row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT);
        match self.engine() {
            Some(e) => e.prepare_model(format, dim, bytes).await.map_err(err),
            None => edo::format::check_row_alignment(bytes).map_err(err),
        }
    }
}

/// A model ready to embed on the engine (see `EdoEngine.uploadModel`).
#[wasm_bindgen]
pub struct EdoResidentModel {
    pub(crate) inner: ModelOn,
}

/// A model on the GPU (its host copy inside, for recovery) or on the CPU path, and the backend
/// its indexes go to.
#[derive(Clone)]
pub(crate) struct ModelOn {
    pub(crate) placed: Placed<GpuStaticModel>,
    pub(crate) backend: Backend,
}

impl ModelOn {
    fn model(&self) -> &StaticModel {
        self.placed.model()
    }
}

/// Texts embedded per GPU job when indexing a corpus: a job's tokens and vectors stay small.
pub(crate) const INDEX_BATCH: usize = 1024;

#[wasm_bindgen]
impl EdoResidentModel {
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        web_name(self.inner.placed.backend()).into()
    }
    /// Values per sentence vector.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.model().dim()
    }

    /// Sentence vectors of `texts`, `texts.length × dim` values: tokenized here, pooled on the
    /// GPU (or the CPU path).
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<f32>, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.embed_strs(&texts).await.map_err(err)
    }

    /// Sentence vectors of `texts` left on the GPU (see `EdoGpuRows`); `UNSUPPORTED` on the CPU
    /// path.
    #[wasm_bindgen(js_name = embedGpu)]
    pub async fn embed_gpu(&self, texts: Vec<String>) -> Result<EdoGpuRows, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        match &self.inner.placed {
            Placed::Gpu(g) => EdoGpuRows::new(g.run(async |m| m.encode(&texts).await).await),
            Placed::Cpu(_) => Err(not_on_gpu()),
        }
    }

    /// A semantic-search index of `lines`: their sentence vectors, kept as binary codes for the
    /// Hamming search and as INT8 rows for rescoring, resident on the engine.
    pub async fn index(&self, lines: Vec<String>) -> Result<EdoSearchIndex, Failure> {
        let strs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dim = self.inner.model().dim();
        let mut vectors = Vec::with_capacity(lines.len() * dim);
        for chunk in strs.chunks(INDEX_BATCH) {
            vectors.extend(self.embed_strs(chunk).await.map_err(err)?);
        }
        let rows = lines.len();
        let codes = PackedTable::quantize(Format::Binary, &vectors, rows, dim).map_err(err)?;
        let int8 = PackedTable::quantize(Format::Int8, &vectors, rows, dim).map_err(err)?;
        let backend = &self.inner.backend;
        let tables = IndexOn { codes: backend.place(codes).await.map_err(err)?, int8: backend.place(int8).await.map_err(err)? };
        Ok(EdoSearchIndex { model: EdoResidentModel { inner: self.inner.clone() }, tables })
    }
}

impl EdoResidentModel {
    pub(crate) async fn embed_strs(&self, texts: &[&str]) -> Result<Vec<f32>, edo::Error> {
        self.inner.placed.encode(texts).await
    }
}
