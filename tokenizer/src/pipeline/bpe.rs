//! The BPE model (`tokenizers`' `BPE` without dropout).

use super::*;

/// A BPE model (`tokenizers`' `BPE` without dropout; words are cached per thread, in a [`WordCache`]).
#[derive(Clone, Debug)]
pub(crate) struct Bpe {
    pub(crate) vocab: Arc<FxHashMap<String, u32>>,
    /// Pair of ids → (rank, merged id).
    pub(crate) merges: FxHashMap<(u32, u32), (u32, u32)>,
    /// The id of each byte's `<0xXX>` token, when byte fallback is on and all 256 exist.
    pub(crate) bytes: Option<Vec<Option<u32>>>,
    pub(crate) unk: Option<Result<u32, String>>,
    pub(crate) prefix: Option<String>,
    pub(crate) suffix: Option<String>,
    pub(crate) fuse_unk: bool,
    pub(crate) ignore_merges: bool,
    /// A character before which no merge joins across — every occurrence that follows another
    /// character starts a new word — when the model has one: `▁` in SentencePiece-style models
    /// (Llama's), which BPE over the whole text otherwise (they have no pre-tokenizer).
    pub(crate) split_before: Option<char>,
    /// Which model a thread's [`WordCache`] holds.
    pub(crate) cache_id: u64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Symbol {
    pub(crate) id: u32,
    pub(crate) prev: isize,
    pub(crate) next: isize,
    pub(crate) len: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Merge {
    pub(crate) pos: usize,
    pub(crate) rank: u32,
    pub(crate) new_id: u32,
}

impl Ord for Merge {
    // A min-heap on rank, then position.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.rank.cmp(&self.rank).then(other.pos.cmp(&self.pos))
    }
}
impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Bpe {
    pub(crate) fn new(vocab: Arc<FxHashMap<String, u32>>, merges: &[MergeJson], m: &ModelJson) -> Result<Bpe, Refusal> {
        let prefix_len = m.continuing_subword_prefix.as_ref().map_or(0, String::len);
        let mut map = FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        let mut rank = 0u32;
        // A merge whose right token starts with `▁` and whose left one ends with another
        // character would join across a `▁`.
        const METASPACE: char = '\u{2581}';
        let mut joins_across = false;
        let mut merged_token = String::new();
        for merge in merges {
            let (a, b): (&str, &str) = match merge {
                MergeJson::Pair(a, b) => (a, b),
                MergeJson::Line(line) => {
                    if line.starts_with("#version") {
                        continue;
                    }
                    // Byte by byte: a merge line is a few bytes, shorter than `split`'s searcher
                    // takes to set up (a tenth of a Llama tokenizer's load).
                    match line.bytes().position(|c| c == b' ').map(|i| line.split_at(i)) {
                        Some((a, b)) if !b[1..].bytes().any(|c| c == b' ') => (a, &b[1..]),
                        _ => return bad(format!("merge {} is not two tokens", rank + 1)),
                    }
                }
            };
            let id = |t: &str| vocab.get(t).copied().ok_or_else(|| Refusal::Bad(format!("the merge token {t:?} is not in the vocabulary")));
            let Some(tail) = b.get(prefix_len..) else {
                return bad(format!("the merge token {b:?} is shorter than the subword prefix"));
            };
            merged_token.clear();
            merged_token.push_str(a);
            merged_token.push_str(tail);
            let merged = id(&merged_token)?;
            joins_across |= b.starts_with(METASPACE) && !a.ends_with(METASPACE);
            map.insert((id(a)?, id(b)?), (rank, merged));
            rank += 1;
        }
        let bytes = m.byte_fallback.unwrap_or(false).then(|| (0..=255u8).map(|b| vocab.get(&format!("<0x{b:02X}>")).copied()).collect());
        Ok(Bpe {
            merges: map,
            bytes,
            unk: m.unk_token.as_ref().map(|t| vocab.get(t).copied().ok_or_else(|| format!("BPE: the unknown token {t:?} is not in the vocabulary"))),
            prefix: m.continuing_subword_prefix.clone(),
            suffix: m.end_of_word_suffix.clone(),
            fuse_unk: m.fuse_unk.unwrap_or(false),
            ignore_merges: m.ignore_merges.unwrap_or(false),
            // Split words are the same words only without a subword prefix or suffix (a split
            // word's first character would lose the prefix), merges ignored for whole-word
            // matches (the whole word would no longer be looked up), and `▁` a token of its own
            // (a `▁` by its bytes or in an unknown run could join its neighbours).
            split_before: (!joins_across
                && m.continuing_subword_prefix.is_none()
                && m.end_of_word_suffix.is_none()
                && !m.ignore_merges.unwrap_or(false)
                && vocab.contains_key(METASPACE.encode_utf8(&mut [0; 4]) as &str))
            .then_some(METASPACE),
            cache_id: new_cache_id(),
            vocab,
        })
    }

    /// Appends the ids of one pre-tokenized word: its pieces between `split_before`s, each from
    /// the thread's cache or merged.
    pub(crate) fn word(&self, w: &str, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        let merge = |w: &str, buffers: &mut Buffers, ids: &mut Vec<u32>| self.merge_word(w, buffers, ids);
        let mut start = 0;
        if let Some(c) = self.split_before {
            for (i, _) in w.match_indices(c) {
                if i > start && !w[..i].ends_with(c) {
                    cached_word(self.cache_id, &w[start..i], buffers, ids, merge)?;
                    start = i;
                }
            }
        }
        cached_word(self.cache_id, &w[start..], buffers, ids, merge)
    }

    /// `tokenizers`' BPE of one word: its characters (or their bytes) as symbols, merged by rank.
    fn merge_word(&self, w: &str, buffers: &mut Buffers, ids: &mut Vec<u32>) -> Result<(), String> {
        if self.ignore_merges {
            if let Some(&id) = self.vocab.get(w) {
                ids.push(id);
                return Ok(());
            }
        }
        let symbols = &mut buffers.symbols;
        symbols.clear();
        let add = |symbols: &mut Vec<Symbol>, id: u32, len: usize| {
            let n = symbols.len() as isize;
            symbols.push(Symbol { id, prev: n - 1, next: n + 1, len });
        };
        let mut unk: Option<(u32, usize)> = None;
        let mut key = String::new();
        let mut chars = w.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let last = chars.peek().is_none();
            let s = &w[i..i + c.len_utf8()];
            key.clear();
            if i > 0 {
                key.push_str(self.prefix.as_deref().unwrap_or(""));
            }
            key.push_str(s);
            if last {
                key.push_str(self.suffix.as_deref().unwrap_or(""));
            }
            if let Some(&id) = self.vocab.get(key.as_str()) {
                if let Some((u, len)) = unk.take() {
                    add(symbols, u, len);
                }
                add(symbols, id, s.len());
                continue;
            }
            if let Some(bytes) = &self.bytes {
                // `tokenizers` falls back on the bytes of the piece it looked up (prefix and
                // suffix included), each a one-byte symbol.
                if let Some(found) = key.bytes().map(|b| bytes[b as usize]).collect::<Option<Vec<u32>>>() {
                    for id in found {
                        add(symbols, id, 1);
                    }
                    continue;
                }
            }
            if let Some(u) = &self.unk {
                let u = u.clone()?;
                unk = match unk {
                    Some((id, len)) if self.fuse_unk => Some((id, len + s.len())),
                    Some((id, len)) => {
                        add(symbols, id, len);
                        Some((u, s.len()))
                    }
                    None => Some((u, s.len())),
                };
            }
        }
        if let Some((u, len)) = unk {
            add(symbols, u, len);
        }
        if let Some(last) = symbols.last_mut() {
            last.next = -1;
        }
        // Merge_all: the lowest-ranked pair first, the leftmost among equals.
        let heap = &mut buffers.heap;
        heap.clear();
        for (pos, pair) in symbols.windows(2).enumerate() {
            if let Some(&(rank, new_id)) = self.merges.get(&(pair[0].id, pair[1].id)) {
                heap.push(Merge { pos, rank, new_id });
            }
        }
        while let Some(top) = heap.pop() {
            let here = symbols[top.pos];
            if here.len == 0 || here.next == -1 {
                continue;
            }
            let next_pos = here.next as usize;
            let right = symbols[next_pos];
            if self.merges.get(&(here.id, right.id)).is_none_or(|&(_, id)| id != top.new_id) {
                continue;
            }
            symbols[top.pos].id = top.new_id;
            symbols[top.pos].len += right.len;
            symbols[top.pos].next = right.next;
            symbols[next_pos].len = 0;
            if right.next > -1 && (right.next as usize) < symbols.len() {
                symbols[right.next as usize].prev = top.pos as isize;
            }
            let current = symbols[top.pos];
            if current.prev >= 0 {
                let prev = symbols[current.prev as usize];
                if let Some(&(rank, new_id)) = self.merges.get(&(prev.id, current.id)) {
                    heap.push(Merge { pos: current.prev as usize, rank, new_id });
                }
            }
            if current.next >= 0 && (current.next as usize) < symbols.len() {
                let next = symbols[current.next as usize];
                if let Some(&(rank, new_id)) = self.merges.get(&(current.id, next.id)) {
                    heap.push(Merge { pos: top.pos, rank, new_id });
                }
            }
        }
        ids.extend(symbols.iter().filter(|s| s.len != 0).map(|s| s.id));
        Ok(())
    }
}
