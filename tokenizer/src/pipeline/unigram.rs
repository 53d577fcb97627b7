//! The Unigram model (`tokenizers`' `Unigram`: SentencePiece's Viterbi over the pieces).

use super::*;

/// A Unigram model (`tokenizers`' `Unigram`: SentencePiece's Viterbi over the pieces).
#[derive(Clone, Debug)]
pub(crate) struct Unigram {
    pub(crate) scores: Vec<f64>,
    /// Each piece's id (the last listed, for a piece listed twice).
    pub(crate) ids: Arc<FxHashMap<String, u32>>,
    pub(crate) trie: Trie,
    pub(crate) unk: Option<u32>,
    pub(crate) unk_score: f64,
    /// The id of each byte's `<0xXX>` piece, with byte fallback.
    pub(crate) bytes: Option<Vec<Option<u32>>>,
    /// Which model a thread's [`WordCache`] holds.
    pub(crate) cache_id: u64,
}

/// SentencePiece's penalty for an unknown character, below the lowest score.
pub(crate) const UNK_PENALTY: f64 = 10.0;

impl Unigram {
    pub(crate) fn new(pieces: Vec<(String, f64)>, unk: Option<usize>, byte_fallback: bool) -> Result<Unigram, Refusal> {
        if let Some(u) = unk {
            if pieces.is_empty() {
                return bad("a Unigram model with an empty vocabulary");
            }
            if u >= pieces.len() {
                return bad("a Unigram model whose unk_id is not in its vocabulary");
            }
        }
        let mut ids = FxHashMap::default();
        let mut min = f64::INFINITY;
        for (id, (piece, score)) in pieces.iter().enumerate() {
            ids.insert(piece.clone(), id as u32);
            min = min.min(*score);
        }
        let mut trie = Trie::default();
        for (piece, &id) in &ids {
            trie.insert(piece, id);
        }
        trie.finish();
        let bytes = byte_fallback.then(|| (0..=255u8).map(|b| ids.get(&format!("<0x{b:02X}>")).copied()).collect());
        Ok(Unigram {
            scores: pieces.into_iter().map(|(_, s)| s).collect(),
            ids: Arc::new(ids),
            trie,
            unk: unk.map(|u| u as u32),
            unk_score: min - UNK_PENALTY,
            bytes,
            cache_id: new_cache_id(),
        })
    }

    pub(crate) fn word(&self, s: &str, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        // best[end] = (score of the best path ending at `end`, its id, where it starts), start
        // u32::MAX while none.
        let best = &mut buffers.best;
        best.clear();
        best.resize(s.len() + 1, (0.0, 0, u32::MAX));
        let mut at = 0;
        let bytes = s.as_bytes();
        while at < s.len() {
            let here = best[at].0;
            let char_len = utf8_len(bytes[at]);
            let mut single = false;
            self.trie.prefixes(&bytes[at..], |id, len| {
                let score = here + self.scores[id as usize];
                let node = &mut best[at + len];
                if node.2 == u32::MAX || score > node.0 {
                    *node = (score, id, at as u32);
                }
                single |= len == char_len;
            });
            if !single {
                let score = here + self.unk_score;
                let node = &mut best[at + char_len];
                if node.2 == u32::MAX || score > node.0 {
                    let Some(unk) = self.unk else {
                        return Err("Unigram: a character outside the vocabulary, and no unknown token".into());
                    };
                    *node = (score, unk, at as u32);
                }
            }
            at += char_len;
        }
        // The best path, back to front; unknown pieces next to each other fuse into one.
        let first = ids.len();
        let mut end = s.len();
        let mut unk_end = None;
        let spans = &mut buffers.spans;
        spans.clear();
        while end > 0 {
            let (_, id, start) = best[end];
            let start = start as usize;
            if Some(id) == self.unk {
                unk_end.get_or_insert(end);
            } else {
                if let Some(e) = unk_end.take() {
                    spans.push((end, e, u32::MAX));
                }
                spans.push((start, end, id));
            }
            end = start;
        }
        if let Some(e) = unk_end {
            spans.push((0, e, u32::MAX));
        }
        for &(start, end, id) in spans.iter().rev() {
            if id != u32::MAX {
                ids.push(id);
                continue;
            }
            // An unknown span: its text looked up again, then its bytes, then the unknown token.
            let text = &s[start..end];
            if let Some(&id) = self.ids.get(text) {
                ids.push(id);
            } else if let Some(found) = self.bytes.as_ref().and_then(|b| text.bytes().map(|x| b[x as usize]).collect::<Option<Vec<u32>>>()) {
                ids.extend(found);
            } else {
                ids.push(self.unk.expect("an unknown span has an unknown token"));
            }
        }
        debug_assert!(ids.len() >= first);
        Ok(())
    }
}

/// The byte length of the UTF-8 character that starts with `b`.
pub(crate) fn utf8_len(b: u8) -> usize {
    match b {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}
