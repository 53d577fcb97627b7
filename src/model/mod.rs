//! Static embedding models — model2vec's "potion" models, sentence-transformers'
//! `StaticEmbedding` — run end to end: text in, sentence vectors out.
//!
//! A static model is an embedding table, a tokenizer and a pooling step, so edo runs all of it:
//! the tokenizer on the host (HF `tokenizers`, from the model's `tokenizer.json`; for BERT
//! WordPiece tokenizers edo's own id-only WordPiece, which gives the same ids several times
//! faster), the table in any edo format, and the pooling — on the CPU path (for WordPiece models
//! in the same pass as the tokenizer, a block of texts per core), or as EmbeddingBag fused with
//! the table's decoder on the GPU — then L2 normalisation when the model asks for it. A whole
//! model deploys as one `.edo` model file ([`StaticModel::to_edo`]), natively or in a browser.
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

#[cfg(native)]
use std::path::Path;
use std::sync::Arc;

use crate::bags::{Bags, Pooling};
use crate::format::{Format, PackedTable};
use crate::{Bounds, Error};

mod file;
mod wordpiece;

use wordpiece::FastWordPiece;

/// The most bytes of one text edo tokenizes, after the cut to `max_length × median token length`
/// characters (so only a model without a `max_length`, such as WordLlama's, meets it): longer
/// texts are refused with [`Error::LimitExceeded`], not cut.
pub const MAX_TEXT_BYTES: usize = 4 << 20;

/// A static embedding model: tokenizer, table, per-token rows and weights, pooling settings.
#[derive(Clone)]
pub struct StaticModel {
    tokenizer: tokenizers::Tokenizer,
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

impl StaticModel {
    /// Loads a model folder: model2vec's (`config.json`, `tokenizer.json`, `model.safetensors`
    /// with `embeddings` and the optional `weights` and `mapping`) or sentence-transformers'
    /// static layouts (`embedding.weight`, at the top or under `0_StaticEmbedding/`).
    #[cfg(native)]
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<StaticModel, Error> {
        let dir = dir.as_ref();
        let read = |p: &Path| std::fs::read(p).map_err(|e| Error::Io { path: p.display().to_string(), message: e.to_string() });
        let sub = dir.join("0_StaticEmbedding");
        let base = if !dir.join("model.safetensors").exists() && sub.join("model.safetensors").exists() { sub } else { dir.to_path_buf() };
        let config = ["config.json", "config_sentence_transformers.json"].iter().map(|n| dir.join(n)).find(|p| p.exists());
        let config = match config {
            Some(p) => read(&p)?,
            None => b"{}".to_vec(),
        };
        StaticModel::from_bytes(&config, &read(&base.join("tokenizer.json"))?, &read(&base.join("model.safetensors"))?)
    }

    /// A model from the bytes of its three files (what a browser fetched): `config.json` (`{}`
    /// for none), `tokenizer.json` and `model.safetensors`.
    pub fn from_bytes(config: &[u8], tokenizer: &[u8], safetensors: &[u8]) -> Result<StaticModel, Error> {
        StaticModel::load(config, tokenizer, safetensors, true)
    }

    /// [`StaticModel::from_bytes`]; with `one_row_per_token` false the table may have fewer rows
    /// than the vocabulary has ids (WordLlama's; the ids past it clip).
    fn load(config: &[u8], tokenizer: &[u8], safetensors: &[u8], one_row_per_token: bool) -> Result<StaticModel, Error> {
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
        let values = floats(&view, name)?;
        let table = PackedTable::quantize(Format::F32, &values, rows, dim)?;

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
        })
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
        let mut model = StaticModel::load(br#"{"max_length": null}"#, tokenizer, safetensors, false)?;
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
        Ok(StaticModel { table: self.table.requantize(format)?, ..self.clone() })
    }

    /// The embedding table (one row per token, or per cluster of tokens with a mapping).
    pub fn table(&self) -> &PackedTable {
        &self.table
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
    /// The most tokens of a text that count (`None`: all).
    pub fn max_length(&self) -> Option<usize> {
        self.max_length
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
        let limit = self.max_length.unwrap_or(usize::MAX);
        let unk = self.unk;
        // model2vec: truncated to max_length, then unknown tokens dropped.
        let finish = |ids: &mut Vec<u32>, start: usize| {
            ids.truncate(start.saturating_add(limit));
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
        let Some(fast) = &self.fast else {
            // The tokenizer encodes a batch on all cores.
            let encodings = self.tokenizer.encode_batch_fast(cut, false).map_err(|e| Error::Tokenizer { message: e.to_string() })?;
            for e in &encodings {
                let start = ids.len();
                ids.extend_from_slice(e.get_ids());
                finish(&mut ids, start);
                ends.push(ids.len());
            }
            return Ok((ids, ends));
        };
        // edo's WordPiece, a block of texts per core, each block's ids in one vector; a text it
        // leaves to `tokenizers` (an added token in it) is marked and encoded after.
        #[derive(Default)]
        struct Block {
            ids: Vec<u32>,
            ends: Vec<usize>,
            rest: Vec<usize>,
        }
        let n_blocks = if cut.len() >= 16 { crate::par::threads() } else { 1 };
        let per = cut.len().div_ceil(n_blocks).max(1);
        let mut blocks: Vec<Block> = (0..n_blocks).map(|_| Block::default()).collect();
        crate::par::for_each_chunk_mut(&mut blocks, 1, 1, |first, blocks| {
            let mut scratch = wordpiece::Scratch::default();
            for (k, block) in blocks.iter_mut().enumerate() {
                let texts = ((first + k) * per).min(cut.len())..((first + k + 1) * per).min(cut.len());
                for i in texts {
                    let start = block.ids.len();
                    if fast.encode(cut[i], limit, &mut scratch, &mut block.ids) {
                        finish(&mut block.ids, start);
                    } else {
                        block.rest.push(i);
                    }
                    block.ends.push(block.ids.len());
                }
            }
            None::<()>
        });
        let rest: Vec<usize> = blocks.iter().flat_map(|b| b.rest.iter().copied()).collect();
        let mut slow: Vec<Vec<u32>> = Vec::new();
        if !rest.is_empty() {
            let batch: Vec<&str> = rest.iter().map(|&i| cut[i]).collect();
            let encodings = self.tokenizer.encode_batch_fast(batch, false).map_err(|e| Error::Tokenizer { message: e.to_string() })?;
            slow = encodings
                .iter()
                .map(|e| {
                    let mut ids = e.get_ids().to_vec();
                    finish(&mut ids, 0);
                    ids
                })
                .collect();
        }
        let mut slow = rest.iter().copied().zip(slow).peekable();
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

    /// [`StaticModel::tokenize`] through `tokenizers` alone, never edo's own WordPiece: the
    /// reference the fast path is tested against.
    #[doc(hidden)]
    pub fn tokenize_reference(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, Error> {
        StaticModel { fast: None, ..self.clone() }.tokenize(texts)
    }

    /// Whether edo's own id-only WordPiece tokenizes this model's texts (BERT's WordPiece
    /// tokenizers: the same ids as `tokenizers`, several times faster).
    pub fn has_fast_tokenizer(&self) -> bool {
        self.fast.is_some()
    }

    /// `text` cut to `max_length × median token length` characters, as model2vec cuts it.
    fn cut<'t>(&self, text: &'t str) -> Result<&'t str, Error> {
        let text = match self.max_length {
            Some(m) => match text.char_indices().nth(m.saturating_mul(self.median_token_length)) {
                Some((end, _)) => &text[..end],
                None => text,
            },
            None => text,
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
        if let Some(fast) = &self.fast {
            if let Some(out) = self.encode_fused(fast, texts)? {
                return Ok(out);
            }
        }
        let bags = self.bags(texts)?;
        let mut out = crate::cpu::embedding_bag(&self.table, &bags.as_bags(), Pooling::Sum, Bounds::Error)?;
        if self.normalize {
            normalize_rows(&mut out, self.dim());
        }
        Ok(out)
    }
}

/// A `tokenizer.json`, read: the tokenizer and what model2vec derives from its vocabulary.
struct Vocabulary {
    tokenizer: tokenizers::Tokenizer,
    /// Token ids the tokenizer can produce (the largest + 1).
    vocab_size: usize,
    median_token_length: usize,
    /// The unknown token's id, which model2vec drops.
    unk: Option<u32>,
    fast: Option<Arc<FastWordPiece>>,
}

/// The deepest nesting of arrays and objects a tokenizer.json may have (real ones have 6 or 7).
const MAX_JSON_DEPTH: usize = 64;

/// How deeply `json`'s arrays and objects nest (a scan that skips strings; the text is valid
/// JSON or the parse after it says so).
fn json_depth(json: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    max
}

/// Each precompiled normaliser in `normalizer` (a tokenizer.json's, sequences included) read on
/// its own, where tokenizers returns its error rather than panicking on it.
fn check_precompiled(normalizer: &serde_json::Value) -> Result<(), Error> {
    match normalizer {
        serde_json::Value::Object(o) if o.get("type").and_then(|t| t.as_str()) == Some("Precompiled") => {
            <tokenizers::normalizers::Precompiled as serde::Deserialize>::deserialize(normalizer)
                .map(drop)
                .map_err(|e| bad(format!("tokenizer.json: a precompiled normaliser that is not one: {e}")))
        }
        serde_json::Value::Object(o) => o.get("normalizers").map_or(Ok(()), check_precompiled),
        serde_json::Value::Array(a) => a.iter().try_for_each(check_precompiled),
        _ => Ok(()),
    }
}

/// `tokenizers::Tokenizer::from_bytes`, checked first for what makes tokenizers 0.22 panic
/// (`expect`) instead of returning an error: text that is not UTF-8 in a decoder, nesting past
/// serde_json's limit, a precompiled normaliser whose charsmap is not one (`normalizer`, the
/// file's). Natively any other panic of its deserialisers is caught and becomes the error too (a
/// browser build aborts on panics: there the checks are what stands).
fn load_tokenizer(bytes: &[u8], normalizer: Option<&serde_json::Value>) -> Result<tokenizers::Tokenizer, Error> {
    std::str::from_utf8(bytes).map_err(|e| bad(format!("tokenizer.json is not UTF-8 text: {e}")))?;
    let depth = json_depth(bytes);
    if depth > MAX_JSON_DEPTH {
        return Err(bad(format!("tokenizer.json nests {depth} arrays and objects deep (at most {MAX_JSON_DEPTH})")));
    }
    normalizer.map_or(Ok(()), check_precompiled)?;
    let load = || tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")));
    #[cfg(native)]
    {
        std::panic::catch_unwind(load).unwrap_or_else(|panic| {
            let why = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
            Err(bad(format!("tokenizer.json: the tokenizers crate could not read it ({why})")))
        })
    }
    #[cfg(web)]
    load()
}

impl Vocabulary {
    fn parse(bytes: &[u8]) -> Result<Vocabulary, Error> {
        // The model's kind and unknown token: only these fields, not a tree of the whole file (a
        // fifth of the load time of a 32 000-token BPE as a `serde_json::Value`).
        #[derive(serde::Deserialize)]
        struct File {
            model: Option<Model>,
            normalizer: Option<serde_json::Value>,
        }
        #[derive(serde::Deserialize)]
        struct Model {
            #[serde(rename = "type")]
            kind: Option<String>,
            unk_token: Option<String>,
            unk_id: Option<u64>,
        }
        let file: File = serde_json::from_slice(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        let model = file.model.unwrap_or(Model { kind: None, unk_token: None, unk_id: None });
        let kind = model.kind.as_deref().unwrap_or("");
        if !matches!(kind, "WordPiece" | "BPE" | "Unigram" | "WordLevel") {
            return Err(Error::UnsupportedTokenizer { model: if kind.is_empty() { "none".into() } else { kind.into() } });
        }
        let mut tokenizer = load_tokenizer(bytes, file.normalizer.as_ref())?;
        // edo cuts and truncates itself; padding would add tokens.
        tokenizer.with_truncation(None).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        let mut vocab: Vec<(String, u32)> = tokenizer.get_vocab(true).into_iter().collect();
        vocab.sort_by_key(|(_, id)| *id);
        let vocab_size = vocab.iter().map(|(_, id)| *id as usize + 1).max().unwrap_or(0);
        // model2vec: int(np.median(lengths in characters)), the vocabulary in id order.
        let mut lengths: Vec<usize> = vocab.iter().map(|(t, _)| t.chars().count()).collect();
        lengths.sort_unstable();
        let median_token_length = match lengths.len() {
            0 => 0,
            n if n % 2 == 1 => lengths[n / 2],
            n => (lengths[n / 2 - 1] + lengths[n / 2]) / 2,
        };
        let unk = match kind {
            "Unigram" => model.unk_id.map(|u| u as u32),
            _ => model.unk_token.as_deref().and_then(|t| tokenizer.token_to_id(t)),
        };
        // Its own parse of the file (the vocabulary as JSON): only for a WordPiece model.
        let fast = if kind == "WordPiece" { FastWordPiece::from_json(bytes).map(Arc::new) } else { None };
        Ok(Vocabulary { tokenizer, vocab_size, median_token_length, unk, fast })
    }
}

/// A `mapping` (token id → row), checked: one entry per token id, each a row of the table.
fn check_mapping(rows_of: Vec<i64>, vocab_size: usize, rows: usize) -> Result<Vec<u32>, Error> {
    if rows_of.len() != vocab_size {
        return Err(Error::ShapeMismatch { what: "mapping entries (one per token id)", expected: vocab_size, actual: rows_of.len() });
    }
    let mut out = Vec::with_capacity(rows_of.len());
    for (index, r) in rows_of.into_iter().enumerate() {
        if r < 0 || r as u64 >= rows as u64 {
            return Err(bad(format!("mapping[{index}] = {r} is not a row of the {rows}-row table")));
        }
        out.push(r as u32);
    }
    Ok(out)
}

/// Without a mapping, a table has one row per token id (or, with `one_row_per_token` false, at
/// least one row: WordLlama's ids past it clip).
fn check_rows(mapped: bool, one_row_per_token: bool, vocab_size: usize, rows: usize) -> Result<(), Error> {
    if !mapped && rows != vocab_size && (one_row_per_token || rows == 0) {
        return Err(Error::ShapeMismatch { what: "table rows (one per token of the vocabulary)", expected: vocab_size, actual: rows });
    }
    Ok(())
}

/// Per-token `weights`, checked: one per token id, all finite.
fn check_weights(weights: Vec<f32>, vocab_size: usize) -> Result<Vec<f32>, Error> {
    if weights.len() != vocab_size {
        return Err(Error::ShapeMismatch { what: "weights (one per token id)", expected: vocab_size, actual: weights.len() });
    }
    if let Some(index) = weights.iter().position(|x| !x.is_finite()) {
        return Err(Error::NonFiniteWeight { index, value: weights[index] });
    }
    Ok(weights)
}

impl StaticModel {
    /// [`StaticModel::encode`] in one pass over blocks of texts, a block per core: each text
    /// tokenized by edo's WordPiece and its rows pooled straight into its vector, then
    /// normalised. `None` when a text must go to `tokenizers` (then the bags path runs).
    fn encode_fused(&self, fast: &FastWordPiece, texts: &[&str]) -> Result<Option<Vec<f32>>, Error> {
        enum Stop {
            Fallback,
            Failed(Error),
        }
        let cut = texts.iter().map(|t| self.cut(t)).collect::<Result<Vec<&str>, Error>>()?;
        let dim = self.dim();
        let limit = self.max_length.unwrap_or(usize::MAX);
        let mut out = crate::cpu::zeroed(texts.len(), dim, "sentence vectors")?;
        // Split from 16 texts: a text takes a microsecond or two, waking a pool thread a few.
        let stop = crate::par::for_each_chunk_mut(&mut out, dim.max(1), 8, |first, block| {
            // Each thread's buffers live on from call to call: a call of one text allocated more
            // than it computed.
            thread_local! {
                static BUFFERS: std::cell::RefCell<(wordpiece::Scratch, Vec<u32>, Vec<f32>)> = Default::default();
            }
            BUFFERS.with_borrow_mut(|(scratch, ids, row)| {
                row.resize(dim, 0.0);
                for (j, dst) in block.chunks_exact_mut(dim.max(1)).enumerate() {
                    ids.clear();
                    if !fast.encode(cut[first + j], limit, scratch, ids) {
                        return Some(Stop::Fallback);
                    }
                    if let Some(unk) = self.unk {
                        ids.retain(|&id| id != unk);
                    }
                    let n = ids.len() as f32;
                    for (index, &id) in ids.iter().enumerate() {
                        let (r, w) = match self.token_row(id, index) {
                            Ok((r, w)) => (r, w / n),
                            Err(e) => return Some(Stop::Failed(e)),
                        };
                        self.table.decode_row_into(r, row);
                        dst.iter_mut().zip(row.iter()).for_each(|(d, x)| *d += w * x);
                    }
                    if self.normalize {
                        normalize_rows(dst, dim);
                    }
                }
                None
            })
        });
        match stop {
            None => Ok(Some(out)),
            Some(Stop::Fallback) => Ok(None),
            Some(Stop::Failed(e)) => Err(e),
        }
    }
}

/// Texts as bags of table rows, ready to pool: `rows` and `weights` per token, `offsets` with the
/// end of the last bag included.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBags {
    /// The table row of each token.
    pub rows: Vec<u32>,
    /// Where each text's tokens start, and the end of the last.
    pub offsets: Vec<u32>,
    /// Each token's weight over its text's token count.
    pub weights: Vec<f32>,
}

impl TokenBags {
    /// The bags, for [`crate::cpu::embedding_bag`] or [`crate::GpuLookup::bag`] with
    /// [`Pooling::Sum`] (the weights make it the mean).
    pub fn as_bags(&self) -> Bags<'_> {
        Bags::new(&self.rows, &self.offsets).include_last_offset(true).weights(&self.weights)
    }
}

/// Divides each row of `dim` values by its L2 norm + 1e-32, as model2vec does.
pub fn normalize_rows(values: &mut [f32], dim: usize) {
    for row in values.chunks_exact_mut(dim.max(1)) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt() + 1e-32;
        row.iter_mut().for_each(|x| *x /= norm);
    }
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
