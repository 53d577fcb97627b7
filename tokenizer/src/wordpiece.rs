//! BERT's WordPiece tokenizer (model2vec's "potion" models use it) computing token ids and nothing
//! else: the same ids as HF `tokenizers` — its `BertNormalizer`, `BertPreTokenizer` and
//! `WordPiece`, read from `tokenizers` 0.22's source — without the offsets, alignments, strings
//! and per-token structs the general pipeline builds, which are most of its time.
//!
//! It applies only where it is exactly equal: a `tokenizer.json` of precisely that normalizer,
//! pre-tokenizer and model (any other part, a post-processor aside, and edo uses `tokenizers`);
//! and a text in which no added token (`[CLS]`, `[MASK]`, …) could match, since `tokenizers`
//! splits those out first (such a text goes to `tokenizers` too). The Unicode tables are the
//! ones `tokenizers` uses (`unicode_categories`, `unicode-normalization-alignments`), so the
//! normalisation is the same character for character. Tested against `tokenizers` itself on
//! every fixture text and on random strings of hard characters.

use rustc_hash::FxHashMap;
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// A WordPiece tokenizer that gives ids only (see the module docs).
#[derive(Clone, Debug)]
pub struct FastWordPiece {
    normalizer: BertNormalizer,
    pieces: Pieces,
    /// Added tokens, as written and normalised: a text holding one goes to `tokenizers`.
    added: Vec<String>,
    /// The first bytes of `added`: a text without any of them holds none (one scan, not one per
    /// added token).
    added_first: [bool; 256],
    /// Which model a thread's [`WordCache`] holds.
    cache_id: u64,
}

/// The words one thread has run through one model, and their ids: texts repeat their words, and
/// a word's merges, best path or pieces cost more than a lookup (`tokenizers` keeps such a cache
/// for BPE too). Used for BPE, Unigram and the fast WordPiece.
#[derive(Default)]
pub(crate) struct WordCache {
    /// The model the words are of ([`new_cache_id`]); another model's empties the cache.
    model: u64,
    ids: FxHashMap<Box<str>, Box<[u32]>>,
}

/// The longest word a [`WordCache`] keeps, in bytes, and how many it keeps before it starts over
/// (at most about 2 MB a thread).
const CACHED_BYTES: usize = 64;
const CACHED_WORDS: usize = 1 << 14;

/// A number no other model read in this process has, for [`WordCache`].
pub(crate) fn new_cache_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl WordCache {
    /// Appends the ids of word `w` of model `model`: from the cache, or `run` (and cached when
    /// it succeeds).
    pub(crate) fn ids<E>(&mut self, model: u64, w: &str, ids: &mut Vec<u32>, run: impl FnOnce(&str, &mut Vec<u32>) -> Result<(), E>) -> Result<(), E> {
        if self.model != model {
            self.ids.clear();
            self.model = model;
        }
        if let Some(found) = self.ids.get(w) {
            ids.extend_from_slice(found);
            return Ok(());
        }
        let first = ids.len();
        run(w, ids)?;
        if w.len() <= CACHED_BYTES {
            if self.ids.len() >= CACHED_WORDS {
                self.ids.clear();
            }
            self.ids.insert(w.into(), ids[first..].into());
        }
        Ok(())
    }
}

/// Buffers one thread reuses from text to text.
#[derive(Default)]
pub struct Scratch {
    pub(crate) normalized: String,
    /// The words of the model this thread ran last (the fast WordPiece's, or the pipeline's
    /// BPE or Unigram model's).
    pub(crate) words: WordCache,
    cleaned: String,
    stripped: String,
}

#[derive(serde::Deserialize)]
struct Json {
    normalizer: Option<serde_json::Value>,
    pre_tokenizer: Option<serde_json::Value>,
    model: serde_json::Value,
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
}

#[derive(serde::Deserialize)]
struct AddedToken {
    content: String,
}

impl FastWordPiece {
    /// The fast tokenizer of `tokenizer.json`, when it is BERT's WordPiece exactly; `None` for
    /// anything else.
    pub fn from_json(bytes: &[u8]) -> Option<FastWordPiece> {
        let json: Json = serde_json::from_slice(bytes).ok()?;
        if json.pre_tokenizer?["type"] != "BertPreTokenizer" {
            return None;
        }
        let mut fast = FastWordPiece {
            normalizer: BertNormalizer::from_json(&json.normalizer?)?,
            pieces: Pieces::from_json(&json.model)?,
            added: Vec::new(),
            added_first: [false; 256],
            cache_id: new_cache_id(),
        };
        let mut added = Vec::new();
        let mut scratch = Scratch::default();
        for t in json.added_tokens.into_iter().filter(|t| !t.content.is_empty()) {
            fast.normalizer.normalize(&t.content, &mut scratch);
            added.push(t.content);
            if !scratch.normalized.is_empty() {
                added.push(scratch.normalized.clone());
            }
        }
        for a in &added {
            fast.added_first[a.as_bytes()[0] as usize] = true;
        }
        fast.added = added;
        Some(fast)
    }

    /// Appends the ids of `text` to `ids` (unknown words as the unknown token, as `tokenizers`
    /// gives them), at most `limit` of them; `false` (and nothing appended) where the text must go
    /// to `tokenizers` instead.
    pub fn encode(&self, text: &str, limit: usize, scratch: &mut Scratch, ids: &mut Vec<u32>) -> bool {
        self.normalizer.normalize(text, scratch);
        let normalized = scratch.normalized.as_str();
        let may_hold = |s: &str| s.bytes().any(|b| self.added_first[b as usize]);
        if (may_hold(text) || may_hold(normalized)) && self.added.iter().any(|a| text.contains(a.as_str()) || normalized.contains(a.as_str())) {
            return false;
        }
        let end = ids.len().saturating_add(limit);
        // Each word's pieces from the thread's cache, or found and cached.
        let mut words = std::mem::take(&mut scratch.words);
        let mut word = |w: &str, ids: &mut Vec<u32>| {
            let found: Result<(), std::convert::Infallible> = words.ids(self.cache_id, w, ids, |w, ids| {
                self.pieces.word(w, ids);
                Ok(())
            });
            let Ok(()) = found;
        };
        if normalized.is_ascii() {
            // The same split, a byte at a time: ASCII's whitespace and punctuation by table.
            let bytes = normalized.as_bytes();
            let mut start = 0;
            for (i, &b) in bytes.iter().enumerate() {
                let class = ASCII_CLASS[b as usize];
                if class == OTHER {
                    continue;
                }
                if start < i {
                    word(&normalized[start..i], ids);
                }
                if class == PUNCT {
                    self.pieces.word(&normalized[i..i + 1], ids);
                }
                start = i + 1;
                if ids.len() >= end {
                    break;
                }
            }
            if start < bytes.len() && ids.len() < end {
                word(&normalized[start..], ids);
            }
            ids.truncate(end);
            scratch.words = words;
            return true;
        }
        bert_words(normalized, |piece| {
            word(piece, ids);
            ids.len() < end
        });
        ids.truncate(end);
        scratch.words = words;
        true
    }
}

/// BertPreTokenizer: `text` split at whitespace (dropped), each punctuation character a word of
/// its own; `word` is called on each word until it returns `false`.
pub(crate) fn bert_words(text: &str, mut word: impl FnMut(&str) -> bool) {
    for w in text.split(char::is_whitespace) {
        let mut rest = w;
        while !rest.is_empty() {
            let cut = rest.char_indices().find(|&(_, c)| is_bert_punc(c)).map(|(i, c)| if i == 0 { c.len_utf8() } else { i });
            let (piece, tail) = rest.split_at(cut.unwrap_or(rest.len()));
            if !word(piece) {
                return;
            }
            rest = tail;
        }
    }
}

/// A WordPiece model (`tokenizers`' `WordPiece`): the vocabulary's pieces as tries, the unknown
/// token, the longest word it splits.
#[derive(Clone, Debug)]
pub(crate) struct Pieces {
    /// The pieces that start a word, and those that continue one (without the prefix).
    starts: Trie,
    continuations: Trie,
    unk: u32,
    max_input_chars_per_word: usize,
}

impl Pieces {
    /// The model of a tokenizer.json's `model` object, when it is a WordPiece one edo can run.
    pub(crate) fn from_json(m: &serde_json::Value) -> Option<Pieces> {
        if m["type"] != "WordPiece" {
            return None;
        }
        let prefix = m["continuing_subword_prefix"].as_str().unwrap_or("##");
        let vocab = m["vocab"].as_object()?;
        let unk = u32::try_from(vocab.get(m["unk_token"].as_str().unwrap_or("[UNK]"))?.as_u64()?).ok()?;
        let (mut starts, mut continuations) = (Trie::default(), Trie::default());
        for (token, id) in vocab {
            let id = u32::try_from(id.as_u64()?).ok()?;
            // `tokenizers` looks a word's first piece up as it is and a later one as prefix +
            // piece, in one map: every token can start a word; those with the prefix continue one.
            starts.insert(token, id);
            if let Some(rest) = token.strip_prefix(prefix) {
                continuations.insert(rest, id);
            }
        }
        starts.finish();
        continuations.finish();
        let max_input_chars_per_word = match &m["max_input_chars_per_word"] {
            serde_json::Value::Null => 100,
            v => usize::try_from(v.as_u64()?).ok()?,
        };
        Some(Pieces { starts, continuations, unk, max_input_chars_per_word })
    }

    /// WordPiece of one pre-tokenized word: the longest piece in the vocabulary, then the longest
    /// continuation, and so on; a word with a part no piece matches (or too long) is unknown.
    pub(crate) fn word(&self, word: &str, ids: &mut Vec<u32>) {
        let first = ids.len();
        // Characters, counted only when the bytes could exceed the limit.
        if word.len() > self.max_input_chars_per_word && word.chars().count() > self.max_input_chars_per_word {
            ids.push(self.unk);
            return;
        }
        let mut start = 0;
        while start < word.len() {
            // `tokenizers` tries word[start..end] for `end` from the word's end down, a character
            // at a time: the longest piece starting at `start`, which the trie walk finds.
            let trie = if start == 0 { &self.starts } else { &self.continuations };
            match trie.longest_prefix(&word.as_bytes()[start..]) {
                Some((id, len)) => {
                    ids.push(id);
                    start += len;
                }
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// `tokenizers`' `BertNormalizer`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BertNormalizer {
    clean_text: bool,
    handle_chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

impl BertNormalizer {
    /// The normaliser of a tokenizer.json's `normalizer` object, when it is a `BertNormalizer`.
    pub(crate) fn from_json(n: &serde_json::Value) -> Option<BertNormalizer> {
        if n["type"] != "BertNormalizer" {
            return None;
        }
        let flag = |v: &serde_json::Value, default: bool| if v.is_null() { Some(default) } else { v.as_bool() };
        let lowercase = flag(&n["lowercase"], true)?;
        Some(BertNormalizer {
            clean_text: flag(&n["clean_text"], true)?,
            handle_chinese_chars: flag(&n["handle_chinese_chars"], true)?,
            strip_accents: flag(&n["strip_accents"], lowercase)?,
            lowercase,
        })
    }

    /// `BertNormalizer`: clean (control characters dropped, whitespace to spaces), CJK ideographs
    /// spaced, accents stripped (NFD, nonspacing marks dropped), lowercased — in that order. The
    /// result is `scratch.normalized`.
    pub(crate) fn normalize(&self, text: &str, scratch: &mut Scratch) {
        let out = &mut scratch.normalized;
        out.clear();
        if text.is_ascii() {
            // No ideographs, no decompositions, no marks; lowercase is ASCII's.
            let mut bytes = std::mem::take(out).into_bytes();
            bytes.extend(text.bytes().filter_map(|b| {
                if self.clean_text && (b == 0 || is_control(b as char)) {
                    return None;
                }
                let b = if self.clean_text && is_whitespace(b as char) { b' ' } else { b };
                Some(if self.lowercase { b.to_ascii_lowercase() } else { b })
            }));
            *out = String::from_utf8(bytes).expect("ASCII in, ASCII out");
            return;
        }
        let cleaned = &mut scratch.cleaned;
        cleaned.clear();
        for c in text.chars() {
            if self.clean_text && (c == '\0' || c == '\u{fffd}' || is_control(c)) {
                continue;
            }
            let c = if self.clean_text && is_whitespace(c) { ' ' } else { c };
            if self.handle_chinese_chars && is_chinese_char(c) {
                cleaned.extend([' ', c, ' ']);
            } else {
                cleaned.push(c);
            }
        }
        let stripped = if self.strip_accents {
            // NFD, run by run of non-ASCII characters: an ASCII character neither decomposes nor
            // combines (it is a starter, class 0), so canonical reordering never crosses one.
            let stripped = &mut scratch.stripped;
            stripped.clear();
            let mut rest = cleaned.as_str();
            while !rest.is_empty() {
                let ascii = rest.bytes().position(|b| !b.is_ascii()).unwrap_or(rest.len());
                stripped.push_str(&rest[..ascii]);
                rest = &rest[ascii..];
                let run = rest.find(|c: char| c.is_ascii()).unwrap_or(rest.len());
                stripped.extend(rest[..run].nfd().map(|(c, _)| c).filter(|&c| !is_nonspacing_mark(c)));
                rest = &rest[run..];
            }
            stripped.as_str()
        } else {
            cleaned.as_str()
        };
        if self.lowercase {
            out.extend(stripped.chars().flat_map(char::to_lowercase));
        } else {
            out.push_str(stripped);
        }
    }
}

/// The vocabulary's pieces as a byte trie, stored flat: a node's children are a run of
/// (byte, node) pairs, sorted by byte, found by a short scan (the root's by a 256-entry table), and
/// each node holds the id of the piece ending there. Pieces are UTF-8, so every match ends on a
/// character boundary. One step is a scan of a few bytes, not a hash lookup.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trie {
    /// Per node: where its children start in `child_bytes`/`child_nodes`, and how many.
    first: Vec<u32>,
    count: Vec<u16>,
    /// Per node: the id of the piece ending there.
    ids: Vec<Option<u32>>,
    child_bytes: Vec<u8>,
    child_nodes: Vec<u32>,
    /// The root's children by byte.
    root: Vec<Option<u32>>,
    /// While building: node × byte → node.
    building: FxHashMap<u64, u32>,
}

impl Trie {
    pub(crate) fn insert(&mut self, piece: &str, id: u32) {
        if self.ids.is_empty() {
            self.ids.push(None);
        }
        let mut node = 0u32;
        for &b in piece.as_bytes() {
            let next = self.ids.len() as u32;
            node = *self.building.entry((node as u64) << 8 | b as u64).or_insert(next);
            if node == next {
                self.ids.push(None);
            }
        }
        self.ids[node as usize] = Some(id);
    }

    /// Lays the edges out flat (after the last `insert`).
    pub(crate) fn finish(&mut self) {
        let n = self.ids.len().max(1);
        self.ids.resize(n, None);
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new(); n];
        for (&key, &child) in &self.building {
            children[(key >> 8) as usize].push((key as u8, child));
        }
        self.building = FxHashMap::default();
        self.root = vec![None; 256];
        for &(b, child) in &children[0] {
            self.root[b as usize] = Some(child);
        }
        for mut c in children {
            c.sort_unstable();
            self.first.push(self.child_bytes.len() as u32);
            self.count.push(c.len() as u16);
            self.child_bytes.extend(c.iter().map(|&(b, _)| b));
            self.child_nodes.extend(c.iter().map(|&(_, n)| n));
        }
    }

    fn child(&self, node: u32, b: u8) -> Option<u32> {
        if node == 0 {
            return self.root[b as usize];
        }
        let (first, count) = (self.first[node as usize] as usize, self.count[node as usize] as usize);
        let bytes = &self.child_bytes[first..first + count];
        let at = if count <= 16 { bytes.iter().position(|&x| x == b) } else { bytes.binary_search(&b).ok() };
        at.map(|i| self.child_nodes[first + i])
    }

    /// The id and byte length of the longest piece that `bytes` starts with (not the empty one).
    pub(crate) fn longest_prefix(&self, bytes: &[u8]) -> Option<(u32, usize)> {
        if self.root.is_empty() {
            return None;
        }
        let mut node = 0u32;
        let mut found = None;
        for (i, &b) in bytes.iter().enumerate() {
            match self.child(node, b) {
                Some(next) => node = next,
                None => break,
            }
            if let Some(id) = self.ids[node as usize] {
                found = Some((id, i + 1));
            }
        }
        found
    }

    /// Each piece that `bytes` starts with, shortest first: `f(id, byte length)`.
    pub(crate) fn prefixes(&self, bytes: &[u8], mut f: impl FnMut(u32, usize)) {
        if self.root.is_empty() {
            return;
        }
        let mut node = 0u32;
        for (i, &b) in bytes.iter().enumerate() {
            match self.child(node, b) {
                Some(next) => node = next,
                None => return,
            }
            if let Some(id) = self.ids[node as usize] {
                f(id, i + 1);
            }
        }
    }
}

// The character classes of `tokenizers`' normalizers/bert.rs and pre_tokenizers/bert.rs.

const OTHER: u8 = 0;
const SPACE: u8 = 1;
const PUNCT: u8 = 2;

/// BertPreTokenizer's classes of the ASCII bytes: whitespace (`char::is_whitespace`), punctuation
/// (`is_bert_punc`), other.
const ASCII_CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8 as char;
        // `char::is_whitespace` also holds for U+000B, which `is_ascii_whitespace` leaves out.
        t[b] = if c.is_ascii_whitespace() || b == 0x0b {
            SPACE
        } else if c.is_ascii_punctuation() {
            PUNCT
        } else {
            OTHER
        };
        b += 1;
    }
    t
};

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    // ASCII's "other" characters are its controls (no Cf, Cn, Co, Cs there): no table lookup.
    !matches!(c, '\t' | '\n' | '\r') && if c.is_ascii() { c.is_ascii_control() } else { categories(c) & OTHER_CATEGORY != 0 }
}

// Unicode categories the BERT normaliser and pre-tokenizer ask about.
const OTHER_CATEGORY: u8 = 1;
const PUNCTUATION: u8 = 2;
const NONSPACING_MARK: u8 = 4;

/// `c`'s categories, as `unicode_categories` answers them (`is_other`, `is_punctuation`,
/// `is_mark_nonspacing`) — which takes a dozen binary searches over its tables a character. The
/// characters below U+3000 (the alphabets, Latin to Mongolian; 12 KiB, made at first use) and the
/// CJK ideographs (letters: none of the three) are answered from a table.
fn categories(c: char) -> u8 {
    const TABLE: usize = 0x3000;
    static FIRST: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    let u = c as usize;
    if u < TABLE {
        return FIRST.get_or_init(|| (0..TABLE as u32).map(|u| char::from_u32(u).map_or(0, categories_of)).collect())[u];
    }
    if (0x4E00..=0x9FFF).contains(&u) {
        return 0;
    }
    categories_of(c)
}

fn categories_of(c: char) -> u8 {
    let mut k = 0;
    if c.is_other() {
        k |= OTHER_CATEGORY;
    }
    if c.is_punctuation() {
        k |= PUNCTUATION;
    }
    if c.is_mark_nonspacing() {
        k |= NONSPACING_MARK;
    }
    k
}

/// Whether `c` is a nonspacing mark (Mn), the accents BERT's normaliser strips.
fn is_nonspacing_mark(c: char) -> bool {
    !c.is_ascii() && categories(c) & NONSPACING_MARK != 0
}

fn is_chinese_char(c: char) -> bool {
    matches!(
        c as usize,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F
    )
}

fn is_bert_punc(c: char) -> bool {
    // Unicode's punctuation within ASCII is a subset of ASCII's: no table lookup for ASCII.
    if c.is_ascii() {
        c.is_ascii_punctuation()
    } else {
        categories(c) & PUNCTUATION != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ASCII shortcuts in the character classes are exact.
    #[test]
    fn ascii_shortcuts_equal_the_unicode_tables() {
        for b in 0..128u8 {
            let c = b as char;
            let class = if c.is_whitespace() {
                SPACE
            } else if c.is_ascii_punctuation() || c.is_punctuation() {
                PUNCT
            } else {
                OTHER
            };
            assert_eq!(ASCII_CLASS[b as usize], class, "{b}");
            assert_eq!(is_bert_punc(c), c.is_ascii_punctuation() || c.is_punctuation(), "{b}");
            assert_eq!(is_control(c), !matches!(c, '\t' | '\n' | '\r') && c.is_other(), "{b}");
        }
    }

    /// The category table and the CJK shortcut answer as `unicode_categories` does, for every
    /// character.
    #[test]
    fn category_table_equals_the_unicode_tables() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(categories(c), categories_of(c), "U+{:04X}", c as u32);
            assert_eq!(is_bert_punc(c), c.is_ascii_punctuation() || c.is_punctuation(), "U+{:04X}", c as u32);
            assert_eq!(is_nonspacing_mark(c), c.is_mark_nonspacing(), "U+{:04X}", c as u32);
            assert_eq!(is_control(c), !matches!(c, '\t' | '\n' | '\r') && c.is_other(), "U+{:04X}", c as u32);
        }
    }
}
