//! Static embedding models — model2vec's "potion" models, sentence-transformers'
//! `StaticEmbedding` — run end to end: text in, sentence vectors out.
//!
//! A static model is an embedding table, a tokenizer and a pooling step, so edo runs all of it:
//! the tokenizer on the host (the model's `tokenizer.json`, run by edo's own id-only tokenizer —
//! HF `tokenizers`' pipeline redone for WordPiece, BPE, Unigram and WordLevel models, the same
//! ids two to four times faster — or, natively, by `tokenizers` itself for the parts edo's does
//! not run), the table in any edo format, and the pooling — on the CPU path (in the same pass as
//! the tokenizer, a block of texts per core), or as EmbeddingBag fused with the table's decoder
//! on the GPU — then L2 normalisation when the model asks for it. A whole model deploys as one
//! `.edo` model file ([`StaticModel::to_edo`]), natively or in a browser (where edo's own
//! tokenizer is the only one: [`Error::TokenizerPart`] names what it does not run).
//!
//! The encoding is model2vec 0.10's `StaticModel.encode`, read from its source:
//! 1. each text is cut to `max_length × median token length` characters (the median of the
//!    vocabulary's token lengths, in characters, rounded down);
//! 2. tokenized without special tokens, and truncated to `max_length` tokens;
//! 3. unknown tokens dropped (the model's `unk_token`, or a Unigram model's `unk_id`);
//! 4. each token's row — through `mapping` when the vocabulary was quantised — times its weight
//!    (`weights`, when present), averaged over the text's tokens; a text with no tokens is a zero
//!    vector;
//! 5. divided by its L2 norm (+ 1e-32) when `normalize` is set.
//!
//! An INT8 model2vec table holds integer codes whose one global scale is not saved; they are
//! used as they are, which normalisation makes right (and model2vec does the same).
//!
//! A sentence-transformers folder is encoded as its `StaticEmbedding` forward pass
//! ([`StaticModel::from_sentence_transformers`]: no cut, unknown tokens kept, the tokenizer's
//! own [`Truncation`]), a WordLlama model as WordLlama does ([`StaticModel::from_wordllama`]).

#[cfg(native)]
use std::path::Path;
use std::sync::Arc;

use crate::bags::{Bags, Pooling};
use crate::format::{Format, PackedTable, SharedBytes};
use crate::{Bounds, Error};

mod encode;
mod file;
mod tokenizer;

pub use crate::cpu::normalize_rows;
use edo_tokenizer::{FastWordPiece, Pipeline};
pub use encode::TokenBags;
use encode::*;
use tokenizer::*;

/// The most bytes of one text edo tokenizes, after the cut to `max_length × median token length`
/// characters (so only a model without a `max_length`, such as WordLlama's, meets it): longer
/// texts are refused with [`Error::LimitExceeded`], not cut.
pub const MAX_TEXT_BYTES: usize = 4 << 20;

/// A static embedding model: tokenizer, table, per-token rows and weights, pooling settings.
#[derive(Clone)]
pub struct StaticModel {
    tokenizer: Tokenizer,
    /// The `tokenizer.json` it was read from, kept for [`StaticModel::to_edo`].
    tokenizer_json: Arc<[u8]>,
    /// edo's id-only tokenizer, when the model's is BERT's WordPiece (the same ids, faster).
    fast: Option<Arc<FastWordPiece>>,
    table: PackedTable,
    /// Row of each token id (`mapping`), when it is not the id itself.
    mapping: Option<Vec<u32>>,
    /// Weight of each token id.
    weights: Option<Vec<f32>>,
    normalize: bool,
    max_length: Option<usize>,
    median_token_length: usize,
    unk: Option<u32>,
    vocab_size: usize,
    /// Token ids past the table read its last row (WordLlama clips them) instead of failing.
    clip_ids: bool,
    /// The tokenizer's own truncation, applied after `max_length`'s (sentence-transformers
    /// keeps it; model2vec and WordLlama set their own).
    truncation: Option<Truncation>,
}

/// A `tokenizer.json`'s own truncation (its `truncation` object), which sentence-transformers'
/// `StaticEmbedding` leaves in place: at most `max_length` tokens of a text count, the first ones
/// or, with `keep_last`, the last ones (`"direction": "Left"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The most tokens of a text that count.
    pub max_length: usize,
    /// Whether the last `max_length` tokens count rather than the first.
    pub keep_last: bool,
}

impl Truncation {
    /// The truncation a `tokenizer.json` sets (`None`: none), as `tokenizers` applies it to one
    /// text encoded without special tokens.
    fn of_tokenizer(tokenizer: &[u8]) -> Result<Option<Truncation>, Error> {
        #[derive(serde::Deserialize)]
        struct File {
            truncation: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            max_length: u64,
            direction: Option<String>,
            strategy: Option<String>,
        }
        let file: File = serde_json::from_slice(tokenizer).map_err(|e| bad(format!("tokenizer.json: truncation: {e}")))?;
        let Some(t) = file.truncation else { return Ok(None) };
        if t.strategy.as_deref() == Some("OnlySecond") {
            // `tokenizers` fails every text longer than max_length: there is no second text.
            return Err(bad("tokenizer.json: truncation strategy OnlySecond truncates the second text of a pair; a sentence has none"));
        }
        let keep_last = match t.direction.as_deref() {
            None | Some("Right") => false,
            Some("Left") => true,
            Some(other) => return Err(bad(format!("tokenizer.json: truncation direction {other:?} (Right or Left)"))),
        };
        let max_length = usize::try_from(t.max_length).map_err(|_| bad("tokenizer.json: truncation max_length is too large"))?;
        Ok(Some(Truncation { max_length, keep_last }))
    }
}

impl std::fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticModel")
            .field("vocab_size", &self.vocab_size)
            .field("rows", &self.table.rows())
            .field("dim", &self.table.dim())
            .field("format", &self.table.format())
            .field("normalize", &self.normalize)
            .field("max_length", &self.max_length)
            .finish_non_exhaustive()
    }
}

fn bad(reason: impl Into<String>) -> Error {
    Error::BadFile { what: "static embedding model", reason: reason.into() }
}

/// What a sentence-transformers static model's `modules.json` and
/// `config_sentence_transformers.json` say, checked: edo runs a `StaticEmbedding` module, then an
/// optional `Normalize`, with no default prompt; anything else is refused rather than left out.
#[derive(Clone, Debug, PartialEq)]
pub struct SentenceTransformersLayout {
    /// The `StaticEmbedding` module's folder ("" for the top); `None` without a `modules.json`.
    pub module: Option<String>,
    /// Whether a `Normalize` module follows it.
    pub normalize: bool,
}

impl SentenceTransformersLayout {
    /// Reads and checks the two files' bytes (either may be absent).
    pub fn check(modules: Option<&[u8]>, config: Option<&[u8]>) -> Result<SentenceTransformersLayout, Error> {
        #[derive(serde::Deserialize)]
        struct Module {
            path: String,
            #[serde(rename = "type")]
            kind: String,
        }
        let modules: Vec<Module> = match modules {
            Some(bytes) => serde_json::from_slice(bytes).map_err(|e| bad(format!("modules.json: {e}")))?,
            None => Vec::new(),
        };
        let (mut module, mut normalize) = (None, false);
        for m in &modules {
            // `sentence_transformers.models.StaticEmbedding` (3.x) or
            // `sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding` (6.x).
            match m.kind.rsplit('.').next() {
                Some("StaticEmbedding") if module.is_none() => module = Some(m.path.clone()),
                Some("Normalize") if module.is_some() => normalize = true,
                _ => return Err(bad(format!("modules.json: module {:?} ({}); edo runs a StaticEmbedding module, then an optional Normalize", m.path, m.kind))),
            }
        }
        if let Some(bytes) = config {
            let config: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("config_sentence_transformers.json: {e}")))?;
            if let Some(name) = config["default_prompt_name"].as_str() {
                if config["prompts"][name].as_str().is_some_and(|prompt| !prompt.is_empty()) {
                    return Err(bad(format!(
                        "config_sentence_transformers.json: default prompt {name:?}, which sentence-transformers puts before every text; edo does not"
                    )));
                }
            }
        }
        Ok(SentenceTransformersLayout { module, normalize })
    }
}

impl StaticModel {
    /// Loads a model folder, encoded as the library that wrote it encodes it:
    /// - model2vec's (`config.json`, `tokenizer.json`, `model.safetensors` with `embeddings` and
    ///   the optional `weights` and `mapping`) as model2vec does ([`StaticModel::from_bytes`]);
    /// - sentence-transformers' (`config_sentence_transformers.json` or `modules.json` without a
    ///   `config.json`; the `StaticEmbedding` module's files at the top or under
    ///   `0_StaticEmbedding/`) as sentence-transformers does
    ///   ([`StaticModel::from_sentence_transformers`]; normalised when `modules.json` ends with
    ///   `Normalize`). Other modules, or a default prompt, are refused rather than left out.
    #[cfg(native)]
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<StaticModel, Error> {
        let dir = dir.as_ref();
        if !dir.join("config.json").exists() && (dir.join("config_sentence_transformers.json").exists() || dir.join("modules.json").exists()) {
            return StaticModel::from_sentence_transformers_dir(dir);
        }
        let sub = dir.join("0_StaticEmbedding");
        let base = if !dir.join("model.safetensors").exists() && sub.join("model.safetensors").exists() { sub } else { dir.to_path_buf() };
        let config = match dir.join("config.json") {
            p if p.exists() => read_file(&p)?,
            _ => b"{}".to_vec(),
        };
        let weights = map_weights(&base.join("model.safetensors"))?;
        StaticModel::load(&config, &read_file(&base.join("tokenizer.json"))?, Weights::Shared(&weights), true)
    }

    /// A sentence-transformers folder: its module list (`StaticEmbedding`, then an optional
    /// `Normalize`) and its default prompt checked, the `StaticEmbedding` module's files read.
    #[cfg(native)]
    fn from_sentence_transformers_dir(dir: &Path) -> Result<StaticModel, Error> {
        let optional = |name: &str| -> Result<Option<Vec<u8>>, Error> {
            let p = dir.join(name);
            if p.exists() {
                read_file(&p).map(Some)
            } else {
                Ok(None)
            }
        };
        let layout = SentenceTransformersLayout::check(optional("modules.json")?.as_deref(), optional("config_sentence_transformers.json")?.as_deref())?;
        let base = match &layout.module {
            Some(path) => dir.join(path),
            None if dir.join("model.safetensors").exists() => dir.to_path_buf(),
            None => dir.join("0_StaticEmbedding"),
        };
        let weights = map_weights(&base.join("model.safetensors"))?;
        StaticModel::sentence_transformers(&read_file(&base.join("tokenizer.json"))?, Weights::Shared(&weights), layout.normalize)
    }

    /// A model from the bytes of its three files (what a browser fetched): `config.json` (`{}`
    /// for none), `tokenizer.json` and `model.safetensors`.
    pub fn from_bytes(config: &[u8], tokenizer: &[u8], safetensors: &[u8]) -> Result<StaticModel, Error> {
        StaticModel::load(config, tokenizer, Weights::Borrowed(safetensors), true)
    }

    /// [`StaticModel::from_bytes`]; with `one_row_per_token` false the table may have fewer rows
    /// than the vocabulary has ids (WordLlama's; the ids past it clip).
    fn load(config: &[u8], tokenizer: &[u8], weights: Weights<'_>, one_row_per_token: bool) -> Result<StaticModel, Error> {
        let safetensors = match weights {
            Weights::Borrowed(bytes) => bytes,
            Weights::Shared(bytes) => (**bytes).as_ref(),
        };
        let config: serde_json::Value = serde_json::from_slice(config).map_err(|e| bad(format!("config.json: {e}")))?;
        let Vocabulary { tokenizer: tok, vocab_size, median_token_length, unk, fast } = Vocabulary::parse(tokenizer)?;

        let st = safetensors::SafeTensors::deserialize(safetensors).map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let name = ["embeddings", "embedding.weight"].into_iter().find(|n| st.tensor(n).is_ok()).ok_or_else(|| Error::MissingTensor {
            name: "embeddings".into(),
            available: st.names().iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
        })?;
        let view = st.tensor(name).expect("found above");
        let [rows, dim] = view.shape() else { return Err(bad(format!("{name} has shape {:?}; a table is 2-D", view.shape()))) };
        let (rows, dim) = (*rows, *dim);
        // An f32 tensor (aligned, as safetensors writers pad the header) is the table as it lies
        // in a mapped file, with no copy; from bytes in memory it is copied once. Other types are
        // converted (and a non-finite value is reported by the conversion's checks).
        let data = view.data();
        let table = match bytemuck::try_cast_slice::<u8, f32>(data) {
            Ok(values) if view.dtype() == safetensors::Dtype::F32 && values.iter().all(|x| x.is_finite()) => match weights {
                Weights::Shared(bytes) => {
                    let start = data.as_ptr() as usize - safetensors.as_ptr() as usize;
                    PackedTable::from_shared(Format::F32, rows, dim, bytes.clone(), start)?
                }
                Weights::Borrowed(_) => PackedTable::quantize(Format::F32, values, rows, dim)?,
            },
            _ => PackedTable::quantize(Format::F32, &floats(&view, name)?, rows, dim)?,
        };

        let mapping = match st.tensor("mapping") {
            Ok(m) => Some(check_mapping(ints(&m, "mapping")?, vocab_size, rows)?),
            Err(_) => None,
        };
        check_rows(mapping.is_some(), one_row_per_token, vocab_size, rows)?;
        let weights = match st.tensor("weights") {
            Ok(w) => Some(check_weights(floats(&w, "weights")?, vocab_size)?),
            Err(_) => None,
        };

        let max_length = match &config["max_length"] {
            serde_json::Value::Null => None,
            v => Some(v.as_u64().ok_or_else(|| bad("config.json: max_length is not a count"))? as usize),
        };
        // model2vec's default when the config does not say.
        let max_length = if config.get("max_length").is_none() { Some(512) } else { max_length };
        let normalize = config["normalize"].as_bool().unwrap_or(false);
        Ok(StaticModel {
            tokenizer: tok,
            tokenizer_json: tokenizer.into(),
            fast,
            table,
            mapping,
            weights,
            normalize,
            max_length,
            median_token_length,
            unk,
            vocab_size,
            clip_ids: false,
            truncation: None,
        })
    }

    /// A sentence-transformers `StaticEmbedding` model from its tokenizer (`tokenizer.json`) and
    /// its weights (safetensors with `embedding.weight`, or model2vec's `embeddings` with the
    /// optional `mapping` and `weights`), as sentence-transformers 6.2's forward runs it: the
    /// tokenizer without special tokens and with its own truncation when its `tokenizer.json`
    /// sets one ([`StaticModel::truncation`]); every token counts (unknown ones too, no cut to a
    /// number of characters); the mean of the rows (`EmbeddingBag`), a zero vector for a text with
    /// no tokens; divided by its L2 norm when `normalize` (its `Normalize` module).
    pub fn from_sentence_transformers(tokenizer: &[u8], safetensors: &[u8], normalize: bool) -> Result<StaticModel, Error> {
        StaticModel::sentence_transformers(tokenizer, Weights::Borrowed(safetensors), normalize)
    }

    fn sentence_transformers(tokenizer: &[u8], weights: Weights<'_>, normalize: bool) -> Result<StaticModel, Error> {
        let mut model = StaticModel::load(br#"{"max_length": null}"#, tokenizer, weights, true)?;
        model.unk = None;
        model.normalize = normalize;
        model.truncation = Truncation::of_tokenizer(tokenizer)?;
        Ok(model)
    }

    /// A WordLlama model from its tokenizer (a `tokenizer.json`) and its weights (safetensors with
    /// `embedding.weight`), as WordLlama 0.4's `WordLlamaInference.embed` runs it: every token
    /// counts (unknown ones too, no cut, no truncation), token ids past the table read its last
    /// row, the mean over the tokens, not normalised (see [`StaticModel::with_normalize`]).
    /// `dim` keeps the first `dim` columns (Matryoshka truncation; `None`: all). Binarise the
    /// vectors for Hamming search with [`crate::search::binarize`] (`x > 0`, WordLlama's bits).
    /// One difference: WordLlama normalises a zero vector (a text with no tokens) to NaN; edo
    /// keeps it zero.
    pub fn from_wordllama(tokenizer: &[u8], safetensors: &[u8], dim: Option<usize>) -> Result<StaticModel, Error> {
        // WordLlama's table has a row per id of the base vocabulary; ids past it clip.
        let mut model = StaticModel::load(br#"{"max_length": null}"#, tokenizer, Weights::Borrowed(safetensors), false)?;
        model.unk = None;
        model.clip_ids = true;
        if let Some(d) = dim {
            let full = model.table.dim();
            if d == 0 || d > full {
                return Err(Error::ShapeMismatch { what: "Matryoshka dims (1 to the table's)", expected: full, actual: d });
            }
            let values = model.table.dequantize();
            let kept: Vec<f32> = values.chunks_exact(full).flat_map(|r| r[..d].iter().copied()).collect();
            model.table = PackedTable::quantize(Format::F32, &kept, model.table.rows(), d)?;
        }
        Ok(model)
    }

    /// The same model, normalising its vectors or not.
    pub fn with_normalize(mut self, normalize: bool) -> StaticModel {
        self.normalize = normalize;
        self
    }

    /// The model with its table in `format` (the tokenizer, rows and weights as they are).
    pub fn quantize(&self, format: Format) -> Result<StaticModel, Error> {
        Ok(self.with_table(self.table.requantize(format)?, self.mapping.clone()))
    }

    /// This model with another table and mapping, everything else shared or copied (not the old
    /// table: `..self.clone()` would copy it only to drop it).
    fn with_table(&self, table: PackedTable, mapping: Option<Vec<u32>>) -> StaticModel {
        StaticModel {
            tokenizer: self.tokenizer.clone(),
            tokenizer_json: self.tokenizer_json.clone(),
            fast: self.fast.clone(),
            table,
            mapping,
            weights: self.weights.clone(),
            normalize: self.normalize,
            max_length: self.max_length,
            median_token_length: self.median_token_length,
            unk: self.unk,
            vocab_size: self.vocab_size,
            clip_ids: self.clip_ids,
            truncation: self.truncation,
        }
    }

    /// The model with its table's rows stored in `order` (row `k` holds the row `order[k]`),
    /// most used first when `order` comes from [`StaticModel::row_counts`] through
    /// [`crate::prune::frequency_order`]: the rows a corpus's tokens touch most lie together.
    /// Token ids stay the tokenizer's; the model's `mapping` (made if it had none) sends each to
    /// its row's new place, so every text gets the same vector, bit for bit. `order` must be a
    /// permutation of the table's rows ([`Error::NotAPermutation`]).
    pub fn reorder(&self, order: &[u32]) -> Result<StaticModel, Error> {
        let reordered = crate::PrunedTable::reorder(&self.table, order)?;
        let last = self.table.rows().saturating_sub(1);
        let (table, remap) = reordered.into_parts();
        // Each token's row as `token_row` finds it (WordLlama's ids past the table clip to its
        // last row), then where that row now lies.
        let mapping = (0..self.vocab_size)
            .map(|t| {
                let id = if self.clip_ids { t.min(last) } else { t };
                remap[self.mapping.as_ref().map_or(id, |m| m[id] as usize)]
            })
            .collect();
        Ok(self.with_table(table, Some(mapping)))
    }

    /// How many times `texts`' tokens look up each row of the table (one count a row): the
    /// counts [`StaticModel::reorder`] orders by, from a corpus like the one the model will embed.
    pub fn row_counts(&self, texts: &[&str]) -> Result<Vec<u64>, Error> {
        crate::prune::lookup_counts(&self.bags(texts)?.rows, self.table.rows())
    }

    /// The model with its table's rows starting on multiples of `bytes` once uploaded to a GPU
    /// ([`PackedTable::with_row_alignment`]: a power of two from 4 to 256); INT8, FP8 and q8_0
    /// rows aligned to 16 bytes, of a dim that is a multiple of 16, are pooled sixteen codes a
    /// load. The host's rows, and a file's, stay packed; the model's `.edo` file records it.
    pub fn with_row_alignment(mut self, bytes: usize) -> Result<StaticModel, Error> {
        self.table = self.table.with_row_alignment(bytes)?;
        Ok(self)
    }

    /// The embedding table (one row per token, or per cluster of tokens with a mapping).
    pub fn table(&self) -> &PackedTable {
        &self.table
    }
    /// The table row of each token id, when it is not the id itself: a quantised vocabulary's
    /// clusters (model2vec), or rows reordered by [`StaticModel::reorder`].
    pub fn mapping(&self) -> Option<&[u32]> {
        self.mapping.as_deref()
    }
    /// The table row and the weight of token id `id`, as encoding looks them up: through the
    /// mapping and weights when the model has them; WordLlama's ids past its table read its
    /// last row, any other model's must be below [`StaticModel::vocab_size`]
    /// ([`Error::IdOutOfRange`]).
    pub fn row_of(&self, id: u32) -> Result<(usize, f32), Error> {
        self.token_row(id, 0)
    }
    /// Values per sentence vector.
    pub fn dim(&self) -> usize {
        self.table.dim()
    }
    /// Token ids the tokenizer can produce.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }
    /// Whether vectors are L2-normalised.
    pub fn normalize(&self) -> bool {
        self.normalize
    }
    /// model2vec's `max_length`: the most tokens of a text that count, after its cut to
    /// `max_length × median token length` characters (`None`: no cut, no limit).
    pub fn max_length(&self) -> Option<usize> {
        self.max_length
    }
    /// The tokenizer's own truncation, applied after `max_length` (sentence-transformers models).
    pub fn truncation(&self) -> Option<Truncation> {
        self.truncation
    }

    /// How a text's ids are truncated: at most the first `.0` while tokenizing, then only the
    /// last `.1` kept.
    fn token_limits(&self) -> (usize, Option<usize>) {
        let first = self.max_length.unwrap_or(usize::MAX);
        match self.truncation {
            Some(t) if t.keep_last => (first, Some(t.max_length)),
            Some(t) => (first.min(t.max_length), None),
            None => (first, None),
        }
    }

    /// Each text's token ids, as model2vec's `tokenize` gives them after the cut to
    /// `max_length × median token length` characters and the truncation to `max_length` tokens.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, Error> {
        let (ids, ends) = self.tokenize_flat(texts)?;
        let mut start = 0;
        Ok(ends
            .iter()
            .map(|&end| {
                let text = ids[start..end].to_vec();
                start = end;
                text
            })
            .collect())
    }

    /// The ids of all `texts` one after another, and where each text's ids end.
    fn tokenize_flat(&self, texts: &[&str]) -> Result<(Vec<u32>, Vec<usize>), Error> {
        let cut = texts.iter().map(|t| self.cut(t)).collect::<Result<Vec<&str>, Error>>()?;
        let (limit, last) = self.token_limits();
        let unk = self.unk;
        // model2vec: truncated to max_length, then unknown tokens dropped.
        let finish = |ids: &mut Vec<u32>, start: usize| {
            ids.truncate(start.saturating_add(limit));
            keep_last(ids, start, last);
            if let Some(unk) = unk {
                let mut kept = start;
                for i in start..ids.len() {
                    if ids[i] != unk {
                        ids[kept] = ids[i];
                        kept += 1;
                    }
                }
                ids.truncate(kept);
            }
        };
        let mut ids = Vec::new();
        let mut ends = Vec::with_capacity(cut.len());
        #[cfg(native)]
        if let (Tokenizer::Hf(hf), None) = (&self.tokenizer, &self.fast) {
            // The tokenizer encodes a batch on all cores.
            let encodings = hf.encode_batch_fast(cut, false).map_err(|e| Error::Tokenizer { message: e.to_string() })?;
            for e in &encodings {
                let start = ids.len();
                ids.extend_from_slice(e.get_ids());
                finish(&mut ids, start);
                ends.push(ids.len());
            }
            return Ok((ids, ends));
        }
        // edo's own tokenizers, a block of texts per core, each block's ids in one vector; a text
        // they leave to `tokenizers` (natively, one with an added token that only it runs) is
        // marked and encoded after.
        #[derive(Default)]
        struct Block {
            ids: Vec<u32>,
            ends: Vec<usize>,
            rest: Vec<usize>,
        }
        let n_blocks = if cut.len() >= 16 { crate::par::threads() } else { 1 };
        let per = cut.len().div_ceil(n_blocks).max(1);
        let mut blocks: Vec<Block> = (0..n_blocks).map(|_| Block::default()).collect();
        let failed = crate::par::for_each_chunk_mut(&mut blocks, 1, 1, |first, blocks| {
            BUFFERS.with_borrow_mut(|(buffers, ..)| {
                for (k, block) in blocks.iter_mut().enumerate() {
                    let texts = ((first + k) * per).min(cut.len())..((first + k + 1) * per).min(cut.len());
                    for i in texts {
                        let start = block.ids.len();
                        match self.encode_own(cut[i], limit, buffers, &mut block.ids) {
                            Ok(true) => finish(&mut block.ids, start),
                            Ok(false) => block.rest.push(i),
                            Err(e) => return Some(e),
                        }
                        block.ends.push(block.ids.len());
                    }
                }
                None
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let rest: Vec<usize> = blocks.iter().flat_map(|b| b.rest.iter().copied()).collect();
        let slow_ids = self.tokenize_slow(&rest.iter().map(|&i| cut[i]).collect::<Vec<_>>())?;
        let mut slow = rest
            .iter()
            .copied()
            .zip(slow_ids.into_iter().map(|mut ids| {
                finish(&mut ids, 0);
                ids
            }))
            .peekable();
        ids.reserve(blocks.iter().map(|b| b.ids.len()).sum());
        let mut i = 0;
        for block in &blocks {
            let mut start = 0;
            for &end in &block.ends {
                match slow.peek() {
                    Some((j, _)) if *j == i => ids.extend(slow.next().expect("peeked").1),
                    _ => ids.extend_from_slice(&block.ids[start..end]),
                }
                start = end;
                ends.push(ids.len());
                i += 1;
            }
        }
        Ok((ids, ends))
    }

    /// Appends the ids of `text` by edo's own tokenizers (its WordPiece, at most `limit` ids, or
    /// its pipeline); `false` (nothing appended) where only `tokenizers` runs it.
    fn encode_own(&self, text: &str, limit: usize, buffers: &mut ThreadBuffers, ids: &mut Vec<u32>) -> Result<bool, Error> {
        if let Some(fast) = &self.fast {
            if fast.encode(text, limit, &mut buffers.scratch, ids) {
                return Ok(true);
            }
        }
        match &self.tokenizer {
            Tokenizer::Own(p) => {
                p.encode(text, &mut buffers.pipeline, ids).map_err(|message| Error::Tokenizer { message })?;
                Ok(true)
            }
            #[cfg(native)]
            Tokenizer::Hf(_) => Ok(false),
        }
    }

    /// The ids of texts only `tokenizers` runs (none in a browser build).
    fn tokenize_slow(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        match &self.tokenizer {
            #[cfg(native)]
            Tokenizer::Hf(hf) => Ok(hf
                .encode_batch_fast(texts.to_vec(), false)
                .map_err(|e| Error::Tokenizer { message: e.to_string() })?
                .iter()
                .map(|e| e.get_ids().to_vec())
                .collect()),
            // encode_own runs every text through the pipeline: none is left for this.
            Tokenizer::Own(_) => Err(Error::Tokenizer { message: "no tokenizer for texts edo's own leaves".into() }),
        }
    }

    /// [`StaticModel::tokenize`] through `tokenizers` alone, never edo's own tokenizers: the
    /// reference they are tested against.
    #[doc(hidden)]
    #[cfg(native)]
    pub fn tokenize_reference(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, Error> {
        let hf = match &self.tokenizer {
            Tokenizer::Hf(hf) => hf.clone(),
            Tokenizer::Own(_) => Box::new(load_tokenizer(&self.tokenizer_json)?),
        };
        StaticModel { fast: None, tokenizer: Tokenizer::Hf(hf), ..self.clone() }.tokenize(texts)
    }

    /// Why edo's own tokenizer does not run a `tokenizer.json` (`None`: it does).
    #[doc(hidden)]
    pub fn own_tokenizer_refusal(tokenizer_json: &[u8]) -> Option<String> {
        Pipeline::from_json(tokenizer_json).err().map(|r| r.message())
    }

    /// Whether edo's own tokenizer runs this model's `tokenizer.json` (the same ids as HF
    /// `tokenizers`, faster); `false`: natively, `tokenizers` runs it. In a browser build, always
    /// (a model it does not run does not load there).
    pub fn has_own_tokenizer(&self) -> bool {
        matches!(self.tokenizer, Tokenizer::Own(_))
    }

    /// Whether edo's own id-only WordPiece tokenizes this model's texts (BERT's WordPiece
    /// tokenizers: the same ids as `tokenizers`, several times faster).
    pub fn has_fast_tokenizer(&self) -> bool {
        self.fast.is_some()
    }

    /// `text` cut to `max_length × median token length` characters, as model2vec cuts it.
    fn cut<'t>(&self, text: &'t str) -> Result<&'t str, Error> {
        let text = match self.max_length.map(|m| m.saturating_mul(self.median_token_length)) {
            // No more bytes than the characters it may keep: no character to count.
            Some(chars) if text.len() > chars => match text.char_indices().nth(chars) {
                Some((end, _)) => &text[..end],
                None => text,
            },
            _ => text,
        };
        if text.len() > MAX_TEXT_BYTES {
            return Err(Error::LimitExceeded { what: "bytes of one text", requested: text.len() as u64, max: MAX_TEXT_BYTES as u64 });
        }
        Ok(text)
    }

    /// The bags that pool `texts`' tokens into their mean: a text's tokens' rows, each weighted by
    /// its token weight over the text's token count.
    pub fn bags(&self, texts: &[&str]) -> Result<TokenBags, Error> {
        let (ids, ends) = self.tokenize_flat(texts)?;
        let mut rows = Vec::with_capacity(ids.len());
        let mut weights = Vec::with_capacity(ids.len());
        let mut offsets = Vec::with_capacity(texts.len() + 1);
        let mut start = 0;
        for end in ends {
            offsets.push(rows.len() as u32);
            let n = (end - start) as f32;
            for &id in &ids[start..end] {
                let (row, weight) = self.token_row(id, rows.len())?;
                rows.push(row as u32);
                weights.push(weight / n);
            }
            start = end;
        }
        offsets.push(rows.len() as u32);
        Ok(TokenBags { rows, offsets, weights })
    }

    /// The table row and the weight of token `id` (the `index`-th token, for the error): through
    /// `mapping` and `weights` when the model has them; WordLlama's ids past its table clip,
    /// any other model's must be ids of its vocabulary.
    fn token_row(&self, id: u32, index: usize) -> Result<(usize, f32), Error> {
        let mut id = id as usize;
        if self.clip_ids {
            id = id.min(self.table.rows().saturating_sub(1));
        } else if id >= self.vocab_size {
            return Err(Error::IdOutOfRange { index, id: id as u32, rows: self.vocab_size });
        }
        Ok((self.mapping.as_ref().map_or(id, |m| m[id] as usize), self.weights.as_ref().map_or(1.0, |w| w[id])))
    }

    /// Sentence vectors of `texts` on the CPU path: `texts.len() × dim` values.
    pub fn encode(&self, texts: &[&str]) -> Result<Vec<f32>, Error> {
        let mut out = crate::cpu::zeroed(texts.len(), self.dim(), "sentence vectors")?;
        self.encode_into(texts, &mut out)?;
        Ok(out)
    }

    /// [`StaticModel::encode`] into `out` (`texts.len() × dim` values, overwritten): a caller
    /// that encodes batch after batch reuses one buffer rather than having the system map, zero
    /// and unmap a new one for every batch. On an error `out` holds no meaningful values.
    pub fn encode_into(&self, texts: &[&str], out: &mut [f32]) -> Result<(), Error> {
        let expected = texts.len() * self.dim();
        if out.len() != expected {
            return Err(Error::ShapeMismatch { what: "sentence vectors (texts × dim)", expected, actual: out.len() });
        }
        if self.encode_fused(texts, out)? {
            return Ok(());
        }
        let bags = self.bags(texts)?;
        let bags = bags.as_bags();
        crate::cpu::embedding_bags_into(&[&self.table], bags.len(), &bags, Pooling::Sum, Bounds::Error, crate::Layout::Concat, out)?;
        if self.normalize {
            normalize_rows(out, self.dim());
        }
        Ok(())
    }
}

/// A file of a model folder, read whole.
#[cfg(native)]
fn read_file(p: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(p).map_err(|e| Error::io(p.display(), e))
}

/// A model's safetensors: bytes in memory, or a mapped file the table may borrow from.
#[derive(Clone, Copy)]
enum Weights<'a> {
    Borrowed(&'a [u8]),
    #[cfg_attr(web, allow(dead_code))]
    Shared(&'a SharedBytes),
}

/// A model folder's `model.safetensors`, mapped: an FP32 table is used where it lies. Populated
/// as it is mapped: a model is read whole (its values are checked before use).
#[cfg(native)]
fn map_weights(path: &Path) -> Result<SharedBytes, Error> {
    Ok(Arc::new(crate::file::map_file_populated(path)?))
}

/// A tensor's values as f32: floats as the table readers convert them, or I8 codes as they are.
fn floats(view: &safetensors::tensor::TensorView<'_>, name: &str) -> Result<Vec<f32>, Error> {
    if view.dtype() == safetensors::Dtype::I8 {
        return Ok(view.data().iter().map(|&b| b as i8 as f32).collect());
    }
    crate::file::import::float_tensor(view).unwrap_or_else(|| Err(bad(format!("{name} is {:?}; edo reads F32, F16, BF16, F64 and I8 tables", view.dtype()))))
}

/// A tensor's values as i64: I64, I32, U32.
fn ints(view: &safetensors::tensor::TensorView<'_>, name: &str) -> Result<Vec<i64>, Error> {
    use safetensors::Dtype as D;
    let d = view.data();
    Ok(match view.dtype() {
        D::I64 => d.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect(),
        D::I32 => d.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64).collect(),
        D::U32 => d.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as i64).collect(),
        other => return Err(bad(format!("{name} is {other:?}; edo reads I64, I32 and U32 row maps"))),
    })
}
