//! edo's own tokenizer: the parts of HF `tokenizers`' pipeline that static embedding models use,
//! computing token ids and nothing else — the tokenizer of browser builds (which leave the
//! `tokenizers` crate, its regex engines and their Unicode tables out of the `.wasm`), and
//! natively the fast path of every tokenizer it can run.
//!
//! Read from `tokenizers` 0.22's source and tested against it (tests/model.rs): the added tokens
//! split out of the text as written, then of each normalised piece (leftmost longest, `lstrip`
//! and `rstrip` honoured); each remaining piece normalised, pre-tokenized and run through the
//! model. What it runs:
//! - normalizers: `BertNormalizer`, `Prepend`, `Replace` (a string pattern), `NFC`, `NFD`,
//!   `NFKC`, `NFKD`, `Lowercase`, `Strip`, `StripAccents`, `Precompiled` (SentencePiece's
//!   charsmap), and `Sequence`s of them;
//! - pre-tokenizers: `BertPreTokenizer`, `Metaspace`, `WhitespaceSplit`, `ByteLevel` (GPT-2's
//!   split and byte alphabet), `Split` (a string, or a regex of the syntax `split_regex`
//!   runs: GPT-2's, Llama 3's, Qwen's patterns; every behaviour, inverted or not), and `Sequence`s;
//! - models: `WordPiece`, `BPE` (byte fallback, unknown-token fusing, subword prefix and word
//!   suffix, `ignore_merges`; no dropout), `Unigram` (SentencePiece's Viterbi, byte fallback),
//!   `WordLevel`.
//!
//! - added tokens with `single_word`, `lstrip`, `rstrip` and `normalized`.
//!
//! Anything else (a regex beyond that syntax, BPE dropout, a `ByteLevel` normalizer, …) is refused
//! by name: natively the model then tokenizes with `tokenizers`; in a browser build loading it
//! fails with edo's `Error::TokenizerPart`.

use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use unicode_normalization_alignments::UnicodeNormalization;

use crate::split_regex::{is_word_char, Regex};

mod bpe;
mod json;
mod unigram;

use crate::wordpiece::{bert_words, new_cache_id, BertNormalizer, Pieces, Scratch, Trie};
use bpe::*;
use json::*;
use unigram::*;

/// A tokenizer.json, read into the parts edo runs (see the module docs).
#[derive(Clone, Debug)]
pub struct Pipeline {
    normalizers: Vec<Normalizer>,
    pre_tokenizers: Vec<PreTokenizer>,
    model: Model,
    /// Added tokens matched in the text as written (`normalized: false`), and in each normalised
    /// piece (`normalized: true`, their content normalised).
    raw: Added,
    normalized: Added,
}

/// What a tokenizer.json holds besides its pipeline: every token with its id (`vocab` and
/// `added` together are `tokenizers`' `get_vocab(true)`).
pub struct Parsed {
    /// The pipeline that runs the file.
    pub pipeline: Pipeline,
    /// The model's vocabulary (shared with the model, not a copy).
    pub vocab: Arc<FxHashMap<String, u32>>,
    /// Added tokens outside it, with the ids they were given past it.
    pub added: Vec<(String, u32)>,
    /// The unknown token's id.
    pub unk: Option<u32>,
}

/// Why a tokenizer.json is not one edo's own tokenizer runs.
#[derive(Debug)]
pub enum Refusal {
    /// A part it does not run, named.
    Unsupported(String),
    /// A file that is not a tokenizer.json (or one `tokenizers` would refuse).
    Bad(String),
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::Unsupported(what.into()))
}

fn bad<T>(what: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::Bad(what.into()))
}

#[derive(Clone, Debug)]
enum Normalizer {
    Bert(BertNormalizer),
    Prepend(String),
    Replace { pattern: String, content: String },
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Lowercase,
    Strip { left: bool, right: bool },
    StripAccents,
    Precompiled(Box<spm_precompiled::Precompiled>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum PrependScheme {
    Always,
    First,
    Never,
}

#[derive(Clone, Debug)]
enum PreTokenizer {
    Bert,
    Metaspace {
        replacement: char,
        prepend: PrependScheme,
        split: bool,
    },
    WhitespaceSplit,
    /// GPT-2's byte-level step: a space before a piece that has none (`add_prefix_space`), the
    /// piece split by GPT-2's regex (`use_regex`), then each byte of each part read as one of the
    /// 256 characters of [`BYTE_CHARS`] (the BPE vocabulary's alphabet).
    ByteLevel {
        add_prefix_space: bool,
        regex: Option<Arc<Regex>>,
    },
    /// Splits at the matches of a pattern (`None`: an empty string, which never matches), kept
    /// as `behavior` says; `invert` swaps the matches and what lies between them.
    Split {
        regex: Option<Arc<Regex>>,
        behavior: Behavior,
        invert: bool,
    },
}

/// What `Split` does with a match (`tokenizers`' `SplitDelimiterBehavior`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

/// GPT-2's pre-tokenization regex (`tokenizers`' `ByteLevel` with `use_regex`).
const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// GPT-2's byte alphabet: each byte as a printable character (`tokenizers`' `bytes_char`): the
/// printable bytes of Latin-1 as themselves, the others as U+0100 onwards in byte order.
const BYTE_CHARS: [char; 256] = {
    let mut out = ['\0'; 256];
    let mut n = 0;
    let mut b = 0;
    while b < 256 {
        let printable = (b >= b'!' as usize && b <= b'~' as usize) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        out[b] = if printable {
            char::from_u32(b as u32).expect("a Latin-1 character")
        } else {
            n += 1;
            char::from_u32(255 + n).expect("U+0100 onwards")
        };
        b += 1;
    }
    out
};

#[derive(Clone, Debug)]
enum Model {
    WordPiece(Pieces),
    Bpe(Bpe),
    Unigram(Unigram),
    WordLevel { vocab: Arc<FxHashMap<String, u32>>, unk: Option<u32> },
}

impl Refusal {
    /// What it says.
    pub fn message(&self) -> String {
        match self {
            Refusal::Unsupported(part) => part.clone(),
            Refusal::Bad(why) => format!("a file it cannot read ({why})"),
        }
    }
}

impl Pipeline {
    /// The pipeline of a tokenizer.json, or why edo's own tokenizer does not run it.
    pub fn from_json(bytes: &[u8]) -> Result<Parsed, Refusal> {
        let json: Json = serde_json::from_slice(bytes).map_err(|e| Refusal::Bad(e.to_string()))?;
        let mut normalizers = Vec::new();
        if let Some(n) = &json.normalizer {
            normalizer(n, &mut normalizers)?;
        }
        let mut pre_tokenizers = Vec::new();
        if let Some(p) = &json.pre_tokenizer {
            pre_tokenizer(p, &mut pre_tokenizers)?;
        }
        let (model, vocab, unk_token, unk_id) = model(json.model, bytes)?;
        let model_size = vocab.len() as u32;
        let mut added = Vec::new();

        // `tokenizers`' AddedVocabulary::add_tokens: a token already in the vocabulary keeps its
        // id, a new one takes the next id past the vocabulary.
        let mut pipeline = Pipeline { normalizers, pre_tokenizers, model, raw: Added::default(), normalized: Added::default() };
        let mut next = model_size;
        let mut seen = FxHashMap::default();
        for t in json.added_tokens.into_iter().filter(|t| !t.content.is_empty()) {
            if seen.insert(t.content.clone(), ()).is_some() {
                return unsupported(format!("an added token listed twice ({:?})", t.content));
            }
            let id = match vocab.get(&t.content) {
                Some(&id) => id,
                None => {
                    added.push((t.content.clone(), next));
                    next += 1;
                    next - 1
                }
            };
            let token = AddedToken { id, lstrip: t.lstrip, rstrip: t.rstrip, single_word: t.single_word };
            if t.normalized {
                let mut content = String::new();
                pipeline.normalize(&t.content, &mut content, &mut Scratch::default(), &mut String::new());
                pipeline.normalized.push(content, token);
            } else {
                pipeline.raw.push(t.content, token);
            }
        }
        pipeline.raw.finish();
        pipeline.normalized.finish();
        // The unknown token's id as `tokenizers`' `token_to_id` gives it (added tokens included).
        let unk = unk_id.or_else(|| unk_token.and_then(|t| vocab.get(&t).copied().or_else(|| added.iter().find(|(a, _)| *a == t).map(|&(_, id)| id))));
        Ok(Parsed { pipeline, vocab, added, unk })
    }

    /// Whether its model is a WordPiece one.
    pub fn is_wordpiece(&self) -> bool {
        matches!(self.model, Model::WordPiece(_))
    }

    /// Appends the ids of `text` to `ids`.
    pub fn encode(&self, text: &str, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        // Added tokens in the text as written, then in each normalised piece between them.
        let mut start = 0;
        let mut result = Ok(());
        self.raw.split(text, |piece, token| {
            if result.is_err() {
                return;
            }
            match token {
                Some(id) => ids.push(id),
                None => result = self.encode_piece(piece, start, buffers, ids),
            }
            start += piece.len();
        });
        result
    }

    /// One piece between added tokens (at byte `offset` of the text): normalised, its added
    /// tokens split out, the rest pre-tokenized and run through the model.
    fn encode_piece(&self, piece: &str, offset: usize, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        let mut normalized = std::mem::take(&mut buffers.normalized);
        self.normalize(piece, &mut normalized, &mut buffers.scratch, &mut buffers.next);
        let mut result = Ok(());
        self.normalized.split(&normalized, |part, token| {
            if result.is_err() || part.is_empty() {
                return;
            }
            match token {
                Some(id) => ids.push(id),
                // Metaspace's "first" scheme: the part that starts the text.
                None => result = self.pre_tokenize(part, offset == 0 && starts(&normalized, part), 0, buffers, ids),
            }
        });
        buffers.normalized = normalized;
        result
    }

    /// `text` through the normalizers, into `out` (`next`: a buffer between two of them).
    fn normalize(&self, text: &str, out: &mut String, scratch: &mut Scratch, next: &mut String) {
        out.clear();
        out.push_str(text);
        for n in &self.normalizers {
            next.clear();
            match n {
                Normalizer::Bert(b) => {
                    b.normalize(out, scratch);
                    next.push_str(&scratch.normalized);
                }
                Normalizer::Prepend(p) => {
                    if !out.is_empty() {
                        next.push_str(p);
                        next.push_str(out);
                    }
                }
                Normalizer::Replace { pattern, content } => {
                    if pattern.is_empty() {
                        next.push_str(out);
                    } else {
                        // `str::replace`, into the buffer.
                        let mut last = 0;
                        for (i, _) in out.match_indices(pattern.as_str()) {
                            next.push_str(&out[last..i]);
                            next.push_str(content);
                            last = i + pattern.len();
                        }
                        next.push_str(&out[last..]);
                    }
                }
                Normalizer::Nfc => next.extend(out.nfc().map(|(c, _)| c)),
                Normalizer::Nfd => next.extend(out.nfd().map(|(c, _)| c)),
                Normalizer::Nfkc => next.extend(out.nfkc().map(|(c, _)| c)),
                Normalizer::Nfkd => next.extend(out.nfkd().map(|(c, _)| c)),
                Normalizer::Lowercase => next.extend(out.chars().flat_map(char::to_lowercase)),
                Normalizer::Strip { left, right } => {
                    let mut s = out.as_str();
                    if *left {
                        s = s.trim_start_matches(char::is_whitespace);
                    }
                    if *right {
                        s = s.trim_end_matches(char::is_whitespace);
                    }
                    next.push_str(s);
                }
                Normalizer::StripAccents => next.extend(out.chars().filter(|&c| !unicode_normalization_alignments::char::is_combining_mark(c))),
                Normalizer::Precompiled(p) => next.push_str(&p.normalize_string(out)),
            }
            std::mem::swap(out, next);
        }
    }

    /// `text` through pre-tokenizers `k..` (`first`: it starts the text), each word through the
    /// model.
    fn pre_tokenize(&self, text: &str, first: bool, k: usize, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        let Some(pre) = self.pre_tokenizers.get(k) else {
            return self.model.tokenize(text, buffers, ids);
        };
        let mut result = Ok(());
        match pre {
            PreTokenizer::Bert => bert_words(text, |w| {
                result = self.pre_tokenize(w, first && starts(text, w), k + 1, buffers, ids);
                result.is_ok()
            }),
            PreTokenizer::WhitespaceSplit => {
                for w in text.split(char::is_whitespace).filter(|w| !w.is_empty()) {
                    self.pre_tokenize(w, first && starts(text, w), k + 1, buffers, ids)?;
                }
            }
            PreTokenizer::Metaspace { replacement, prepend, split } => {
                // The buffer is taken while the words below run (a second Metaspace under this
                // one starts its own).
                let mut s = std::mem::take(&mut buffers.metaspace);
                s.clear();
                let prepend = match prepend {
                    PrependScheme::Always => true,
                    PrependScheme::First => first,
                    PrependScheme::Never => false,
                };
                // `tokenizers` prepends to a non-empty text that does not start with it.
                if prepend && !text.is_empty() && !text.starts_with(' ') && !text.starts_with(*replacement) {
                    s.push(*replacement);
                }
                s.extend(text.chars().map(|c| if c == ' ' { *replacement } else { c }));
                result = if *split {
                    // Each replacement starts a word (merged with the next).
                    let mut start = 0;
                    let mut words = s.match_indices(*replacement).map(|(i, _)| i).chain([s.len()]).filter_map(|i| {
                        let word = (i > start).then_some((start, i));
                        start = i;
                        word
                    });
                    words.try_for_each(|(a, b)| self.pre_tokenize(&s[a..b], first && a == 0, k + 1, buffers, ids))
                } else {
                    self.pre_tokenize(&s, first, k + 1, buffers, ids)
                };
                buffers.metaspace = s;
            }
            PreTokenizer::ByteLevel { add_prefix_space, regex } => {
                let mut s = std::mem::take(&mut buffers.byte_level);
                s.clear();
                if *add_prefix_space && !text.starts_with(' ') {
                    s.push(' ');
                }
                s.push_str(text);
                // The parts and the mapped text are taken out of the buffers too, as `s` is.
                let (mut parts, mut mapped) = (std::mem::take(&mut buffers.split_parts), std::mem::take(&mut buffers.byte_mapped));
                match regex {
                    Some(r) => split_parts(Some(r), Behavior::Isolated, false, &s, &mut buffers.split_spans, &mut parts),
                    None => {
                        parts.clear();
                        parts.push((0, s.len()));
                    }
                }
                for &(a, b) in &parts {
                    mapped.clear();
                    mapped.extend(s.as_bytes()[a..b].iter().map(|&byte| BYTE_CHARS[byte as usize]));
                    result = self.pre_tokenize(&mapped, first && a == 0, k + 1, buffers, ids);
                    if result.is_err() {
                        break;
                    }
                }
                (buffers.byte_level, buffers.split_parts, buffers.byte_mapped) = (s, parts, mapped);
            }
            PreTokenizer::Split { regex, behavior, invert } => {
                let mut parts = std::mem::take(&mut buffers.split_parts);
                split_parts(regex.as_deref(), *behavior, *invert, text, &mut buffers.split_spans, &mut parts);
                result = parts.iter().try_for_each(|&(a, b)| self.pre_tokenize(&text[a..b], first && a == 0, k + 1, buffers, ids));
                buffers.split_parts = parts;
            }
        }
        result
    }
}

/// Whether `part`, a slice of `text`, starts it.
fn starts(text: &str, part: &str) -> bool {
    std::ptr::eq(text.as_ptr(), part.as_ptr())
}

/// Buffers one thread reuses from text to text.
#[derive(Default)]
pub struct Buffers {
    scratch: Scratch,
    normalized: String,
    /// The normalizers' second buffer.
    next: String,
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Merge>,
    best: Vec<(f64, u32, u32)>,
    /// Metaspace's text with its replacements.
    metaspace: String,
    /// ByteLevel's text with its prefix space, and a part of it in the byte alphabet.
    byte_level: String,
    byte_mapped: String,
    /// A Split's (or ByteLevel's regex's) matches and gaps, and the parts it keeps.
    split_spans: Vec<(usize, usize, bool)>,
    split_parts: Vec<(usize, usize)>,
    /// A Unigram word's best path, as spans.
    spans: Vec<(usize, usize, u32)>,
}

/// [`WordCache::ids`] with the thread's buffers, which `run` uses too.
fn cached_word(
    model: u64,
    w: &str,
    buffers: &mut Buffers,
    ids: &mut Vec<u32>,
    run: impl FnOnce(&str, &mut Buffers, &mut Vec<u32>) -> Result<(), String>,
) -> Result<(), String> {
    let mut words = std::mem::take(&mut buffers.scratch.words);
    let result = words.ids(model, w, ids, |w, ids| run(w, buffers, ids));
    buffers.scratch.words = words;
    result
}

fn normalizer(n: &serde_json::Value, out: &mut Vec<Normalizer>) -> Result<(), Refusal> {
    let kind = n["type"].as_str().unwrap_or("");
    let flag = |name: &str, default: bool| match &n[name] {
        serde_json::Value::Null => Ok(default),
        v => v.as_bool().ok_or_else(|| Refusal::Bad(format!("{kind}.{name} is not true or false"))),
    };
    out.push(match kind {
        "Sequence" => {
            for n in n["normalizers"].as_array().map(Vec::as_slice).unwrap_or_default() {
                normalizer(n, out)?;
            }
            return Ok(());
        }
        "BertNormalizer" => match BertNormalizer::from_json(n) {
            Some(b) => Normalizer::Bert(b),
            None => return bad("a BertNormalizer with a switch that is not true or false"),
        },
        "Prepend" => match n["prepend"].as_str() {
            Some(p) => Normalizer::Prepend(p.to_string()),
            None => return bad("a Prepend normalizer without its text"),
        },
        "Replace" => match (n["pattern"]["String"].as_str(), n["content"].as_str()) {
            (Some(pattern), Some(content)) => Normalizer::Replace { pattern: pattern.into(), content: content.into() },
            _ if !n["pattern"]["Regex"].is_null() => return unsupported("a Replace normalizer with a regex"),
            _ => return bad("a Replace normalizer without its pattern or content"),
        },
        "NFC" => Normalizer::Nfc,
        "NFD" => Normalizer::Nfd,
        "NFKC" => Normalizer::Nfkc,
        "NFKD" => Normalizer::Nfkd,
        "Lowercase" => Normalizer::Lowercase,
        "Strip" => Normalizer::Strip { left: flag("strip_left", true)?, right: flag("strip_right", true)? },
        "StripAccents" => Normalizer::StripAccents,
        "Precompiled" => match read_precompiled(n) {
            Ok(p) => Normalizer::Precompiled(Box::new(p)),
            Err(e) => return bad(e),
        },
        other => return unsupported(format!("the normalizer {other:?}")),
    });
    Ok(())
}

/// A `Precompiled` normaliser, read by `spm_precompiled` and checked so that running it cannot
/// index out of its charsmap (see `charsmap_fault`).
pub fn read_precompiled(n: &serde_json::Value) -> Result<spm_precompiled::Precompiled, String> {
    let p = <spm_precompiled::Precompiled as serde::Deserialize>::deserialize(n).map_err(|e| format!("a precompiled normaliser that is not one: {e}"))?;
    // spm_precompiled decoded this string; the same decoder gives the same bytes.
    let charsmap = n["precompiled_charsmap"].as_str().and_then(|b| base64::decode(b).ok()).unwrap_or_default();
    match charsmap_fault(&charsmap) {
        Some(why) => Err(format!("a precompiled normaliser whose charsmap {why}")),
        None => Ok(p),
    }
}

/// The most bytes `spm_precompiled` looks up in its trie at once: a grapheme of fewer than 6
/// bytes, else one character.
const CHARSMAP_KEY_BYTES: usize = 5;

/// Why running a SentencePiece `precompiled_charsmap` through `spm_precompiled` 0.1.4 would index
/// out of bounds and panic (`None`: no text can make it). Its layout: a u32 trie size in bytes,
/// the trie's u32 units (a double array), then the replacement strings, each ending in a NUL.
/// Every trie walk a text of keys of at most [`CHARSMAP_KEY_BYTES`] can make is made, byte by byte,
/// as `DoubleArray::common_prefix_search` walks it (the same arithmetic, in `usize`): each unit it
/// reads must exist, and each replacement it finds must start on a character of the strings.
pub(crate) fn charsmap_fault(charsmap: &[u8]) -> Option<String> {
    let Some(size) = charsmap.get(..4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize / 4) else {
        return Some("is shorter than its header".into());
    };
    let Some(trie) = charsmap.get(4..4 + size * 4) else { return Some("is shorter than its trie size says".into()) };
    let units: Vec<usize> = trie.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize).collect();
    let Ok(strings) = std::str::from_utf8(&charsmap[4 + size * 4..]) else { return Some("holds strings that are not UTF-8".into()) };
    let offset = |u: usize| (u >> 10) << ((u & (1 << 9)) >> 6);
    let label = |u: usize| u & ((1 << 31) | 0xFF);
    let has_leaf = |u: usize| (u >> 8) & 1 == 1;
    let value = |u: usize| u & ((1 << 31) - 1);
    let Some(&root) = units.first() else { return Some("has an empty trie".into()) };
    let unit = |i: usize| units.get(i).copied().ok_or_else(|| format!("has a trie that leads to unit {i} of its {}", units.len()));
    // Node positions reached by keys of each length; a node is walked from the first time (the
    // shortest key) it is reached.
    let mut level = vec![offset(root)];
    let mut seen = std::collections::HashSet::new();
    for _ in 0..CHARSMAP_KEY_BYTES {
        let mut next = Vec::new();
        for &pos in &level {
            // A NUL byte ends the walk.
            for c in 1..=255usize {
                let u = match unit(pos ^ c) {
                    Ok(u) => u,
                    Err(why) => return Some(why),
                };
                if label(u) != c {
                    continue;
                }
                let child = pos ^ c ^ offset(u);
                if has_leaf(u) {
                    let at = match unit(child) {
                        Ok(leaf) => value(leaf),
                        Err(why) => return Some(why),
                    };
                    if !strings.is_char_boundary(at) {
                        return Some(format!("has a replacement at byte {at} of its {}-byte strings, not at a character", strings.len()));
                    }
                }
                if seen.insert(child) {
                    next.push(child);
                }
            }
        }
        level = next;
    }
    None
}

fn pre_tokenizer(p: &serde_json::Value, out: &mut Vec<PreTokenizer>) -> Result<(), Refusal> {
    let kind = p["type"].as_str().unwrap_or("");
    out.push(match kind {
        "Sequence" => {
            for p in p["pretokenizers"].as_array().map(Vec::as_slice).unwrap_or_default() {
                pre_tokenizer(p, out)?;
            }
            return Ok(());
        }
        "BertPreTokenizer" => PreTokenizer::Bert,
        "WhitespaceSplit" => PreTokenizer::WhitespaceSplit,
        "Metaspace" => {
            let mut chars = p["replacement"].as_str().unwrap_or("").chars();
            let (Some(replacement), None) = (chars.next(), chars.next()) else {
                return bad("a Metaspace pre-tokenizer whose replacement is not one character");
            };
            let prepend = match p["prepend_scheme"].as_str() {
                None | Some("always") => PrependScheme::Always,
                Some("first") => PrependScheme::First,
                Some("never") => PrependScheme::Never,
                Some(other) => return bad(format!("a Metaspace prepend_scheme {other:?}")),
            };
            let prepend = match (p["add_prefix_space"].as_bool(), prepend) {
                (Some(false), PrependScheme::Never) => PrependScheme::Never,
                (Some(false), _) if p["prepend_scheme"].is_null() => PrependScheme::Never,
                (Some(false), _) => return bad("add_prefix_space does not match declared prepend_scheme"),
                _ => prepend,
            };
            PreTokenizer::Metaspace { replacement, prepend, split: p["split"].as_bool().unwrap_or(true) }
        }
        "ByteLevel" => {
            let regex = match p["use_regex"].as_bool().unwrap_or(true) {
                true => Some(Arc::new(Regex::new(GPT2_PATTERN).expect("GPT-2's pattern compiles"))),
                false => None,
            };
            PreTokenizer::ByteLevel { add_prefix_space: p["add_prefix_space"].as_bool().unwrap_or(true), regex }
        }
        "Split" => {
            let regex = match (p["pattern"]["Regex"].as_str(), p["pattern"]["String"].as_str()) {
                (Some(pattern), None) => Some(Regex::new(pattern).or_else(unsupported)?),
                (None, Some("")) => None,
                (None, Some(literal)) => Some(Regex::literal(literal)),
                _ => return bad("a Split pre-tokenizer whose pattern is neither a Regex nor a String"),
            };
            let behavior = match p["behavior"].as_str() {
                Some("Removed") => Behavior::Removed,
                Some("Isolated") => Behavior::Isolated,
                Some("MergedWithPrevious") => Behavior::MergedWithPrevious,
                Some("MergedWithNext") => Behavior::MergedWithNext,
                Some("Contiguous") => Behavior::Contiguous,
                other => return bad(format!("a Split behavior {other:?}")),
            };
            PreTokenizer::Split { regex: regex.map(Arc::new), behavior, invert: p["invert"].as_bool().unwrap_or(false) }
        }
        other => return unsupported(format!("the pre-tokenizer {other:?}")),
    });
    Ok(())
}

/// The parts of `text` a `Split` keeps, in order (`tokenizers`' `Pattern::find_matches` then
/// `NormalizedString::split`): the matches and what lies between them, each flagged, merged or
/// dropped as `behavior` says; empty parts left out.
fn split_parts(regex: Option<&Regex>, behavior: Behavior, invert: bool, text: &str, spans: &mut Vec<(usize, usize, bool)>, parts: &mut Vec<(usize, usize)>) {
    spans.clear();
    let mut prev = 0;
    for (a, b) in regex.into_iter().flat_map(|r| r.find_iter(text)) {
        if prev != a {
            spans.push((prev, a, invert));
        }
        spans.push((a, b, !invert));
        prev = b;
    }
    if prev != text.len() {
        spans.push((prev, text.len(), invert));
    }
    parts.clear();
    let mut previous_match = false;
    match behavior {
        Behavior::Isolated => parts.extend(spans.iter().map(|&(a, b, _)| (a, b))),
        Behavior::Removed => parts.extend(spans.iter().filter(|s| !s.2).map(|&(a, b, _)| (a, b))),
        Behavior::Contiguous | Behavior::MergedWithPrevious => {
            for &(a, b, is_match) in spans.iter() {
                let merge = if behavior == Behavior::Contiguous { is_match == previous_match } else { is_match && !previous_match };
                match parts.last_mut() {
                    Some(last) if merge => last.1 = b,
                    _ => parts.push((a, b)),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithNext => {
            for &(a, b, is_match) in spans.iter().rev() {
                match parts.last_mut() {
                    Some(last) if is_match && !previous_match => last.0 = a,
                    _ => parts.push((a, b)),
                }
                previous_match = is_match;
            }
            parts.reverse();
        }
    }
    parts.retain(|&(a, b)| a < b);
}

/// The model of a tokenizer.json, its vocabulary (shared with the model), and its unknown token (by
/// name, or a Unigram model's by id).
type ModelParts = (Model, Arc<FxHashMap<String, u32>>, Option<String>, Option<u32>);

fn model(mut m: ModelJson, bytes: &[u8]) -> Result<ModelParts, Refusal> {
    let kind = m.kind.clone().unwrap_or_default();
    let unk_token = m.unk_token.clone();
    match (kind.as_str(), m.vocab.take()) {
        ("WordPiece", Some(VocabJson::Map(vocab))) => {
            // The WordPiece tries are built from the model object as JSON.
            #[derive(serde::Deserialize)]
            struct Only {
                model: serde_json::Value,
            }
            let only: Only = serde_json::from_slice(bytes).map_err(|e| Refusal::Bad(e.to_string()))?;
            match Pieces::from_json(&only.model) {
                Some(p) => Ok((Model::WordPiece(p), Arc::new(vocab), unk_token, None)),
                None => bad("a WordPiece model without its unknown token in the vocabulary"),
            }
        }
        ("WordLevel", Some(VocabJson::Map(vocab))) => {
            // `tokenizers`' WordLevel falls back on "<unk>" when the file names no unknown token.
            let fallback = vocab.get(m.unk_token.as_deref().unwrap_or("<unk>")).copied();
            let vocab = Arc::new(vocab);
            Ok((Model::WordLevel { vocab: vocab.clone(), unk: fallback }, vocab, unk_token, None))
        }
        ("BPE", Some(VocabJson::Map(vocab))) => {
            if m.dropout.is_some_and(|d| d != 0.0) {
                return unsupported("BPE dropout");
            }
            let merges = m.merges.take().unwrap_or_default();
            let bpe = Bpe::new(Arc::new(vocab), &merges, &m)?;
            let vocab = bpe.vocab.clone();
            Ok((Model::Bpe(bpe), vocab, unk_token, None))
        }
        ("Unigram", Some(VocabJson::Scored(pieces))) => {
            let unigram = Unigram::new(pieces, m.unk_id, m.byte_fallback.unwrap_or(false))?;
            let vocab = unigram.ids.clone();
            Ok((Model::Unigram(unigram), vocab, None, m.unk_id.map(|u| u as u32)))
        }
        ("WordPiece" | "WordLevel" | "BPE" | "Unigram", _) => bad(format!("a {kind} model without a vocabulary of its kind")),
        (other, _) => unsupported(format!("the model {other:?}")),
    }
}

impl Model {
    /// Appends the ids of one pre-tokenized word.
    fn tokenize(&self, word: &str, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        if word.is_empty() {
            return Ok(());
        }
        match self {
            Model::WordPiece(p) => p.word(word, ids),
            Model::WordLevel { vocab, unk } => match vocab.get(word).copied().or(*unk) {
                Some(id) => ids.push(id),
                None => return Err("WordLevel: a word outside the vocabulary, and no unknown token".into()),
            },
            Model::Bpe(b) => b.word(word, buffers, ids)?,
            Model::Unigram(u) => cached_word(u.cache_id, word, buffers, ids, |w, buffers, ids| u.word(w, buffers, ids))?,
        }
        Ok(())
    }
}

/// Added tokens, matched leftmost longest (as `tokenizers`' Aho-Corasick automaton does).
#[derive(Clone, Debug, Default)]
struct Added {
    /// Tokens by their first byte, longest first.
    by_first: Vec<Vec<(String, AddedToken)>>,
}

#[derive(Clone, Copy, Debug)]
struct AddedToken {
    id: u32,
    lstrip: bool,
    rstrip: bool,
    /// Matched only with no word character (`\w`) on either side.
    single_word: bool,
}

impl Added {
    fn push(&mut self, content: String, token: AddedToken) {
        if content.is_empty() {
            return;
        }
        if self.by_first.is_empty() {
            self.by_first = vec![Vec::new(); 256];
        }
        self.by_first[content.as_bytes()[0] as usize].push((content, token));
    }

    fn finish(&mut self) {
        for tokens in &mut self.by_first {
            // Longest first; the first listed among equal lengths (equal contents are refused).
            tokens.sort_by_key(|(c, _)| std::cmp::Reverse(c.len()));
        }
    }

    /// Calls `f` on the pieces of `text` in order: a piece between tokens with `None` (never
    /// empty), a token with its id (its text with the spaces it strips).
    fn split<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str, Option<u32>)) {
        if self.by_first.is_empty() {
            if !text.is_empty() {
                f(text, None);
            }
            return;
        }
        let bytes = text.as_bytes();
        let (mut done, mut i) = (0, 0);
        while i < bytes.len() {
            let found = self.by_first[bytes[i] as usize].iter().find(|(c, _)| bytes[i..].starts_with(c.as_bytes()));
            let Some((content, token)) = found else {
                i += 1;
                continue;
            };
            let (mut start, mut stop) = (i, i + content.len());
            // A single-word token inside a word is passed over, as `tokenizers`' automaton does
            // (scanning on after it).
            if token.single_word && (text[..start].chars().next_back().is_some_and(is_word_char) || text[stop..].chars().next().is_some_and(is_word_char)) {
                i = stop;
                continue;
            }
            if token.lstrip {
                // The spaces before it, not those a previous token took.
                start = done.max(text[..start].trim_end_matches(char::is_whitespace).len());
            }
            if token.rstrip {
                stop = text.len() - text[stop..].trim_start_matches(char::is_whitespace).len();
            }
            if done < start {
                f(&text[done..start], None);
            }
            f(&text[start..stop], Some(token.id));
            done = stop;
            i = stop;
        }
        if done < text.len() {
            f(&text[done..], None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_before(json: &serde_json::Value) -> Option<char> {
        match Pipeline::from_json(&serde_json::to_vec(json).unwrap()).map(|p| p.pipeline.model) {
            Ok(Model::Bpe(b)) => b.split_before,
            _ => panic!("a BPE model edo reads"),
        }
    }

    /// Merges read as pairs or lines, and refused in any other shape.
    #[test]
    fn bpe_merges_are_pairs_or_lines() {
        let bpe = |merges: serde_json::Value| {
            let json = serde_json::json!({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": merges}});
            Pipeline::from_json(&serde_json::to_vec(&json).unwrap()).map(|p| match p.pipeline.model {
                Model::Bpe(b) => b.merges,
                _ => panic!("a BPE model"),
            })
        };
        let want: FxHashMap<(u32, u32), (u32, u32)> = [((0, 1), (0, 2))].into_iter().collect();
        assert_eq!(bpe(serde_json::json!([["a", "b"]])).ok(), Some(want.clone()));
        assert_eq!(bpe(serde_json::json!(["a b"])).ok(), Some(want));
        for bad in [
            serde_json::json!([["a"]]),
            serde_json::json!([["a", "b", "c"]]),
            serde_json::json!([5]),
            serde_json::json!(["a b c"]),
            serde_json::json!([["a", 1]]),
        ] {
            assert!(matches!(bpe(bad.clone()), Err(Refusal::Bad(_))), "{bad}");
        }
    }

    /// A BPE model splits its words before `▁` only when no merge joins across one, and only
    /// without a subword prefix, suffix or ignored merges (tests/model.rs checks the ids of both
    /// against `tokenizers`).
    #[test]
    fn bpe_splits_before_metaspace_only_where_no_merge_joins_across() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/models/bpe_f16/tokenizer.json");
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        // The fixture's merges join across: "e" + "▁" is its second.
        assert_eq!(split_before(&json), None);
        let mut apart = json.clone();
        let joins_across = |m: &serde_json::Value| m[1].as_str().unwrap().starts_with('▁') && !m[0].as_str().unwrap().ends_with('▁');
        apart["model"]["merges"].as_array_mut().unwrap().retain(|m| !joins_across(m));
        assert_eq!(split_before(&apart), Some('▁'));
        for (field, value) in [("end_of_word_suffix", "</w>".into()), ("ignore_merges", true.into())] {
            let mut j = apart.clone();
            j["model"][field] = value;
            assert_eq!(split_before(&j), None, "{field}");
        }
        // With a prefix the merges name other tokens: the fixture's are then not all in its
        // vocabulary. A one-token model shows it.
        let prefixed = serde_json::json!({"model": {"type": "BPE", "continuing_subword_prefix": "##", "vocab": {"▁": 0, "a": 1, "##a": 2}, "merges": []}});
        assert_eq!(split_before(&prefixed), None);
        let mut plain = prefixed.clone();
        plain["model"]["continuing_subword_prefix"] = serde_json::Value::Null;
        assert_eq!(split_before(&plain), Some('▁'));
    }
}
