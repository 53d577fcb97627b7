//! Encoding on the CPU path: texts tokenized by edo's own tokenizers and their rows pooled straight
//! into their vectors, a block of texts per core, as a SIMD kernel; and the token bags of the
//! other paths.

use super::*;

thread_local! {
    /// Each thread's buffers, which live on from call to call (a call of one text allocated more
    /// than it computed, and a BPE model's words are cached there), and its ids, their rows and
    /// weights, and row buffers.
    pub(super) static BUFFERS: std::cell::RefCell<EncodeBuffers> = Default::default();
}

/// A thread's tokenizer buffers, a text's token ids, their rows and weights, and a decoded row.
pub(super) type EncodeBuffers = (ThreadBuffers, Vec<u32>, Vec<(usize, f32)>, Vec<f32>);

/// Buffers one thread reuses from text to text, for either of edo's own tokenizers.
#[derive(Default)]
pub(super) struct ThreadBuffers {
    pub(super) scratch: edo_tokenizer::Scratch,
    pub(super) pipeline: edo_tokenizer::Buffers,
}

impl StaticModel {
    /// [`StaticModel::encode`] in one pass over blocks of texts, a block per core: each text
    /// tokenized by edo's own tokenizers and its rows pooled straight into its vector, then
    /// normalised. False when a text must go to `tokenizers` (then the bags path runs).
    pub(super) fn encode_fused(&self, texts: &[&str], out: &mut [f32]) -> Result<bool, Error> {
        if self.fast.is_none() && !self.has_own_tokenizer() {
            return Ok(false);
        }
        let dim = self.dim();
        // About 8 blocks a thread, of at least 4 texts, handed to whichever thread is free: texts
        // differ in length and a thread of a busy machine may be held up. Fewer than 16 texts
        // (a text takes a microsecond or two) are one block: not worth waking a pool thread for.
        let block_rows = if texts.len() < 16 { texts.len() } else { (texts.len() / (crate::par::threads() * 8)).max(4) };
        let stop = crate::par::for_each_block_balanced(out, dim.max(1), block_rows, |first, block| {
            BUFFERS.with_borrow_mut(|buffers| EncodeBlock { model: self, texts: &texts[first..first + block.len() / dim.max(1)], out: block, buffers }.encode())
        });
        match stop {
            None => Ok(true),
            Some(Stop::Fallback) => Ok(false),
            Some(Stop::Failed(e)) => Err(e),
        }
    }
}

/// Why [`EncodeBlock`] stopped short.
pub(super) enum Stop {
    /// A text must go to `tokenizers`.
    Fallback,
    Failed(Error),
}

/// A block of texts encoded into their vectors; each text's pooling and normalisation is
/// edo-core's [`pool_text`](crate::cpu::pool_text), which picks the CPU's widest vectors itself.
pub(super) struct EncodeBlock<'a> {
    model: &'a StaticModel,
    texts: &'a [&'a str],
    out: &'a mut [f32],
    buffers: &'a mut EncodeBuffers,
}

impl EncodeBlock<'_> {
    fn encode(self) -> Option<Stop> {
        let model = self.model;
        let dim = model.dim();
        let (limit, last) = model.token_limits();
        let (buffers, ids, rows, row) = self.buffers;
        for (text, dst) in self.texts.iter().zip(self.out.chunks_exact_mut(dim.max(1))) {
            dst.fill(0.0);
            ids.clear();
            let text = match model.cut(text) {
                Ok(text) => text,
                Err(e) => return Some(Stop::Failed(e)),
            };
            match model.encode_own(text, limit, buffers, ids) {
                Ok(true) => {
                    ids.truncate(limit);
                    keep_last(ids, 0, last);
                }
                Ok(false) => return Some(Stop::Fallback),
                Err(e) => return Some(Stop::Failed(e)),
            }
            if let Some(unk) = model.unk {
                ids.retain(|&id| id != unk);
            }
            rows.clear();
            for (index, &id) in ids.iter().enumerate() {
                match model.token_row(id, index) {
                    Ok(r) => rows.push(r),
                    Err(e) => return Some(Stop::Failed(e)),
                }
            }
            crate::cpu::pool_text(&model.table, rows, model.normalize, dst, row);
        }
        None
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

/// Keeps only the last `last` of the ids from `start` on (a tokenizer's truncation from the left).
pub(super) fn keep_last(ids: &mut Vec<u32>, start: usize, last: Option<usize>) {
    if let Some(n) = last {
        if ids.len() - start > n {
            ids.drain(start..ids.len() - n);
        }
    }
}
