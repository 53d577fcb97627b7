//! edo's own tokenizer: a `tokenizer.json` of the kinds static embedding models carry, run for
//! token ids only — the same ids as HF `tokenizers`, two to four times faster, in a few hundred
//! kilobytes of `.wasm`. `edo` decides which tokenizer runs a model (this one, or natively
//! `tokenizers` for what this one refuses) and turns a [`Refusal`] into its own error.
//!
//! Two ways in, one per kind of model:
//! - [`FastWordPiece`]: BERT's normaliser, pre-tokenizer and WordPiece, and nothing else — the
//!   tokenizer of model2vec's "potion" models, without the general pipeline's per-piece work;
//! - [`Pipeline`]: every other tokenizer it runs (see [`pipeline`]'s list), refusing the rest by
//!   name.
//!
//! Each thread keeps its own buffers ([`Scratch`], [`Buffers`]) from text to text.

#![warn(missing_docs)]

pub mod pipeline;
mod split_regex;
mod unicode_classes;
mod wordpiece;

pub use pipeline::{read_precompiled, Buffers, Parsed, Pipeline, Refusal};
pub use wordpiece::{FastWordPiece, Scratch};
