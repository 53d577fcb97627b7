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
pub(crate) struct FastWordPiece {
    clean_text: bool,
    handle_chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
    /// Ids of the pieces that start a word, and of those that continue one (without the prefix).
    starts: FxHashMap<Box<str>, u32>,
    continuations: FxHashMap<Box<str>, u32>,
    /// The longest key of each map, in bytes: no longer substring can match.
    longest_start: usize,
    longest_continuation: usize,
    unk: u32,
    max_input_chars_per_word: usize,
    /// Added tokens, as written and normalised: a text holding one goes to `tokenizers`.
    added: Vec<String>,
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
    pub(crate) fn from_json(bytes: &[u8]) -> Option<FastWordPiece> {
        let json: Json = serde_json::from_slice(bytes).ok()?;
        let n = json.normalizer?;
        if n["type"] != "BertNormalizer" || json.pre_tokenizer?["type"] != "BertPreTokenizer" || json.model["type"] != "WordPiece" {
            return None;
        }
        let flag = |v: &serde_json::Value, default: bool| if v.is_null() { Some(default) } else { v.as_bool() };
        let lowercase = flag(&n["lowercase"], true)?;
        let m = &json.model;
        let prefix = m["continuing_subword_prefix"].as_str().unwrap_or("##");
        let vocab = m["vocab"].as_object()?;
        let unk = u32::try_from(vocab.get(m["unk_token"].as_str().unwrap_or("[UNK]"))?.as_u64()?).ok()?;
        let (mut starts, mut continuations) = (FxHashMap::default(), FxHashMap::default());
        for (token, id) in vocab {
            let id = u32::try_from(id.as_u64()?).ok()?;
            // `tokenizers` looks a word's first piece up as it is and a later one as prefix +
            // piece, in one map: every token can start a word; those with the prefix continue one.
            starts.insert(token.as_str().into(), id);
            if let Some(rest) = token.strip_prefix(prefix) {
                continuations.insert(rest.into(), id);
            }
        }
        let longest = |m: &FxHashMap<Box<str>, u32>| m.keys().map(|k| k.len()).max().unwrap_or(0);
        let mut fast = FastWordPiece {
            clean_text: flag(&n["clean_text"], true)?,
            handle_chinese_chars: flag(&n["handle_chinese_chars"], true)?,
            strip_accents: flag(&n["strip_accents"], lowercase)?,
            lowercase,
            longest_start: longest(&starts),
            longest_continuation: longest(&continuations),
            starts,
            continuations,
            unk,
            max_input_chars_per_word: usize::try_from(m["max_input_chars_per_word"].as_u64().unwrap_or(100)).ok()?,
            added: Vec::new(),
        };
        let mut added = Vec::new();
        for t in json.added_tokens.into_iter().filter(|t| !t.content.is_empty()) {
            let mut normalized = String::new();
            fast.normalize(&t.content, &mut normalized);
            added.push(t.content);
            if !normalized.is_empty() {
                added.push(normalized);
            }
        }
        fast.added = added;
        Some(fast)
    }

    /// Appends the ids of `text` to `ids` (unknown words as the unknown token, as `tokenizers`
    /// gives them), at most `limit` of them; `false` (and nothing appended) where the text must go
    /// to `tokenizers` instead.
    pub(crate) fn encode(&self, text: &str, limit: usize, normalized: &mut String, ids: &mut Vec<u32>) -> bool {
        normalized.clear();
        self.normalize(text, normalized);
        if self.added.iter().any(|a| text.contains(a.as_str()) || normalized.contains(a.as_str())) {
            return false;
        }
        let end = ids.len() + limit;
        for word in normalized.split(char::is_whitespace) {
            // BertPreTokenizer: each punctuation character is a word of its own.
            let mut rest = word;
            while !rest.is_empty() && ids.len() < end {
                let cut = rest.char_indices().find(|&(_, c)| is_bert_punc(c)).map(|(i, c)| if i == 0 { c.len_utf8() } else { i });
                let (piece, tail) = rest.split_at(cut.unwrap_or(rest.len()));
                self.word(piece, ids);
                rest = tail;
            }
        }
        ids.truncate(end);
        true
    }

    /// WordPiece of one pre-tokenized word: the longest piece in the vocabulary, then the longest
    /// continuation, and so on; a word with a part no piece matches (or too long) is unknown.
    fn word(&self, word: &str, ids: &mut Vec<u32>) {
        let first = ids.len();
        if word.chars().count() > self.max_input_chars_per_word {
            ids.push(self.unk);
            return;
        }
        let mut start = 0;
        while start < word.len() {
            let (map, longest) = if start == 0 { (&self.starts, self.longest_start) } else { (&self.continuations, self.longest_continuation) };
            let mut end = floor_char_boundary(word, (start + longest).min(word.len()));
            let mut found = None;
            while end > start {
                if let Some(&id) = map.get(&word[start..end]) {
                    found = Some(id);
                    break;
                }
                end = floor_char_boundary(word, end - 1);
            }
            match found {
                Some(id) => ids.push(id),
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }

    /// `BertNormalizer`: clean (control characters dropped, whitespace to spaces), CJK ideographs
    /// spaced, accents stripped (NFD, nonspacing marks dropped), lowercased — in that order.
    fn normalize(&self, text: &str, out: &mut String) {
        if text.is_ascii() {
            // No ideographs, no decompositions, no marks; lowercase is ASCII's.
            out.extend(text.chars().filter_map(|c| {
                if self.clean_text && (c == '\0' || is_control(c)) {
                    return None;
                }
                let c = if self.clean_text && is_whitespace(c) { ' ' } else { c };
                Some(if self.lowercase { c.to_ascii_lowercase() } else { c })
            }));
            return;
        }
        let mut cleaned = String::with_capacity(text.len() + 8);
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
            let mut stripped = String::with_capacity(cleaned.len());
            let mut rest = cleaned.as_str();
            while !rest.is_empty() {
                let ascii = rest.bytes().position(|b| !b.is_ascii()).unwrap_or(rest.len());
                stripped.push_str(&rest[..ascii]);
                rest = &rest[ascii..];
                let run = rest.find(|c: char| c.is_ascii()).unwrap_or(rest.len());
                stripped.extend(rest[..run].nfd().map(|(c, _)| c).filter(|c| !c.is_mark_nonspacing()));
                rest = &rest[run..];
            }
            stripped
        } else {
            cleaned
        };
        if self.lowercase {
            out.extend(stripped.chars().flat_map(char::to_lowercase));
        } else {
            out.push_str(&stripped);
        }
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

// The character classes of `tokenizers`' normalizers/bert.rs and pre_tokenizers/bert.rs.

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    // ASCII's "other" characters are its controls (no Cf, Cn, Co, Cs there): no table lookup.
    !matches!(c, '\t' | '\n' | '\r') && if c.is_ascii() { c.is_ascii_control() } else { c.is_other() }
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
        c.is_punctuation()
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
            assert_eq!(is_bert_punc(c), c.is_ascii_punctuation() || c.is_punctuation(), "{b}");
            assert_eq!(is_control(c), !matches!(c, '\t' | '\n' | '\r') && c.is_other(), "{b}");
        }
    }
}
