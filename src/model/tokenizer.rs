//! Reading a model's `tokenizer.json`: edo's own pipeline where it runs the file, else (natively)
//! HF `tokenizers`; what model2vec derives from the vocabulary; and the checks of the mapping,
//! rows and weights beside it.

use super::*;

/// A model's tokenizer: edo's own pipeline where it runs the file (always, in a browser build),
/// else HF `tokenizers`.
#[derive(Clone)]
pub(super) enum Tokenizer {
    Own(Arc<Pipeline>),
    #[cfg(native)]
    Hf(Box<tokenizers::Tokenizer>),
}

/// A `tokenizer.json`, read: the tokenizer and what model2vec derives from its vocabulary.
pub(super) struct Vocabulary {
    pub(super) tokenizer: Tokenizer,
    /// Token ids the tokenizer can produce (the largest + 1).
    pub(super) vocab_size: usize,
    pub(super) median_token_length: usize,
    /// The unknown token's id, which model2vec drops.
    pub(super) unk: Option<u32>,
    pub(super) fast: Option<Arc<FastWordPiece>>,
}

/// The deepest nesting of arrays and objects a tokenizer.json may have (real ones have 6 or 7).
pub(super) const MAX_JSON_DEPTH: usize = 64;

/// How deeply `json`'s arrays and objects nest (a scan that skips strings; the text is valid
/// JSON or the parse after it says so).
pub(super) fn json_depth(json: &[u8]) -> usize {
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
/// its own, where its reader returns an error rather than panicking on it (as `tokenizers` 0.22
/// does).
#[cfg(native)]
pub(super) fn check_precompiled(normalizer: &serde_json::Value) -> Result<(), Error> {
    match normalizer {
        serde_json::Value::Object(o) if o.get("type").and_then(|t| t.as_str()) == Some("Precompiled") => {
            edo_tokenizer::read_precompiled(normalizer).map(drop).map_err(|e| bad(format!("tokenizer.json: {e}")))
        }
        serde_json::Value::Object(o) => o.get("normalizers").map_or(Ok(()), check_precompiled),
        serde_json::Value::Array(a) => a.iter().try_for_each(check_precompiled),
        _ => Ok(()),
    }
}

/// `tokenizers::Tokenizer::from_bytes`, checked first for what makes tokenizers 0.22 panic
/// (`expect`) instead of returning an error: nesting past serde_json's limit, a precompiled
/// normaliser whose charsmap is not one. Any other panic of its deserialisers is caught and
/// becomes the error too. (Text that is not UTF-8 is refused before.)
#[cfg(native)]
pub(super) fn load_tokenizer(bytes: &[u8]) -> Result<tokenizers::Tokenizer, Error> {
    #[derive(serde::Deserialize)]
    struct File {
        normalizer: Option<serde_json::Value>,
    }
    let file: File = serde_json::from_slice(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
    file.normalizer.as_ref().map_or(Ok(()), check_precompiled)?;
    let load = || tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")));
    let mut tokenizer = std::panic::catch_unwind(load).unwrap_or_else(|panic| {
        let why = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
        Err(bad(format!("tokenizer.json: the tokenizers crate could not read it ({why})")))
    })?;
    // edo cuts and truncates itself; padding would add tokens.
    tokenizer.with_truncation(None).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

impl Vocabulary {
    pub(super) fn parse(bytes: &[u8]) -> Result<Vocabulary, Error> {
        std::str::from_utf8(bytes).map_err(|e| bad(format!("tokenizer.json is not UTF-8 text: {e}")))?;
        let depth = json_depth(bytes);
        if depth > MAX_JSON_DEPTH {
            return Err(bad(format!("tokenizer.json nests {depth} arrays and objects deep (at most {MAX_JSON_DEPTH})")));
        }
        // edo's own tokenizer first; the model's kind is read on its own (a second pass over the
        // file) only when that refuses the file.
        let (tokenizer, (vocab_size, median_token_length), unk, wordpiece) = match Pipeline::from_json(bytes) {
            Ok(parsed) => {
                let tokens = parsed.vocab.iter().map(|(t, &id)| (t.as_str(), id)).chain(parsed.added.iter().map(|(t, id)| (t.as_str(), *id)));
                let stats = vocab_stats(tokens);
                let wordpiece = parsed.pipeline.is_wordpiece();
                (Tokenizer::Own(Arc::new(parsed.pipeline)), stats, parsed.unk, wordpiece)
            }
            Err(refusal) => {
                let kind = model_kind(bytes)?;
                if !matches!(kind.as_str(), "WordPiece" | "BPE" | "Unigram" | "WordLevel") {
                    return Err(Error::UnsupportedTokenizer { model: if kind.is_empty() { "none".into() } else { kind } });
                }
                let (tokenizer, stats, unk) = fallback_tokenizer(bytes, &kind, refusal)?;
                (tokenizer, stats, unk, kind == "WordPiece")
            }
        };
        // Its own parse of the file (the vocabulary as JSON): only for a WordPiece model.
        let fast = if wordpiece { FastWordPiece::from_json(bytes).map(Arc::new) } else { None };
        Ok(Vocabulary { tokenizer, vocab_size, median_token_length, unk, fast })
    }
}

/// The `type` of a tokenizer.json's model ("" when it names none).
pub(super) fn model_kind(bytes: &[u8]) -> Result<String, Error> {
    // Only this field, not a tree of the whole file.
    #[derive(serde::Deserialize)]
    struct File {
        model: Option<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let file: File = serde_json::from_slice(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
    Ok(file.model.and_then(|m| m.kind).unwrap_or_default())
}

/// A tokenizer, its vocabulary's size and median token length ([`vocab_stats`]), and its unknown
/// token's id.
pub(super) type Fallback = (Tokenizer, (usize, usize), Option<u32>);

/// A tokenizer whose file edo's own tokenizer refuses (a model of a supported kind): the
/// `tokenizers` crate's natively, with its vocabulary's figures and unknown token; in the browser,
/// the refusal as an error.
#[cfg(native)]
pub(super) fn fallback_tokenizer(bytes: &[u8], kind: &str, _: edo_tokenizer::Refusal) -> Result<Fallback, Error> {
    // A part only `tokenizers` runs (or a file it may read where edo's parse is stricter): it
    // reads the file, or says why not.
    let tokenizer = load_tokenizer(bytes)?;
    #[derive(serde::Deserialize)]
    struct Unk {
        model: UnkModel,
    }
    #[derive(serde::Deserialize)]
    struct UnkModel {
        unk_token: Option<String>,
        unk_id: Option<u64>,
    }
    let m: Unk = serde_json::from_slice(bytes).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
    let unk = match kind {
        "Unigram" => m.model.unk_id.map(|u| u as u32),
        _ => m.model.unk_token.as_deref().and_then(|t| tokenizer.token_to_id(t)),
    };
    let stats = vocab_stats(tokenizer.get_vocab(true).iter().map(|(t, &id)| (t.as_str(), id)));
    Ok((Tokenizer::Hf(Box::new(tokenizer)), stats, unk))
}

#[cfg(web)]
pub(super) fn fallback_tokenizer(_: &[u8], _: &str, refusal: edo_tokenizer::Refusal) -> Result<Fallback, Error> {
    Err(match refusal {
        edo_tokenizer::Refusal::Unsupported(part) => Error::TokenizerPart { part },
        edo_tokenizer::Refusal::Bad(why) => bad(format!("tokenizer.json: {why}")),
    })
}

/// A vocabulary's size (one past its largest id) and model2vec's median token length
/// (`int(np.median(lengths in characters))`), from its `(token, id)` pairs.
pub(super) fn vocab_stats<'a>(tokens: impl Iterator<Item = (&'a str, u32)>) -> (usize, usize) {
    let mut vocab_size = 0;
    let mut lengths = Vec::with_capacity(tokens.size_hint().0);
    for (t, id) in tokens {
        vocab_size = vocab_size.max(id as usize + 1);
        lengths.push(t.chars().count());
    }
    lengths.sort_unstable();
    let median = match lengths.len() {
        0 => 0,
        n if n % 2 == 1 => lengths[n / 2],
        n => (lengths[n / 2 - 1] + lengths[n / 2]) / 2,
    };
    (vocab_size, median)
}

/// A `mapping` (token id → row), checked: one entry per token id, each a row of the table.
pub(super) fn check_mapping(rows_of: Vec<i64>, vocab_size: usize, rows: usize) -> Result<Vec<u32>, Error> {
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
pub(super) fn check_rows(mapped: bool, one_row_per_token: bool, vocab_size: usize, rows: usize) -> Result<(), Error> {
    if !mapped && rows != vocab_size && (one_row_per_token || rows == 0) {
        return Err(Error::ShapeMismatch { what: "table rows (one per token of the vocabulary)", expected: vocab_size, actual: rows });
    }
    Ok(())
}

/// Per-token `weights`, checked: one per token id, all finite.
pub(super) fn check_weights(weights: Vec<f32>, vocab_size: usize) -> Result<Vec<f32>, Error> {
    if weights.len() != vocab_size {
        return Err(Error::ShapeMismatch { what: "weights (one per token id)", expected: vocab_size, actual: weights.len() });
    }
    if let Some(index) = weights.iter().position(|x| !x.is_finite()) {
        return Err(Error::NonFiniteWeight { index, value: weights[index] });
    }
    Ok(weights)
}
