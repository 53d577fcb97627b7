//! Static models: `.edo` model files, and model folders given as their three files' bytes (a
//! config.json, a tokenizer.json, a model.safetensors — what a browser fetches). Reading, then
//! tokenizing and encoding a few texts: none may panic, hang or allocate what the input cannot
//! back.
//!
//! Input: an `.edo` model file; and, split as `[config length u16 LE][tokenizer length u32 LE]
//! config tokenizer safetensors`, a folder's files.
#![no_main]

use edo::model::StaticModel;
use libfuzzer_sys::fuzz_target;

#[path = "peak.rs"]
mod peak;

#[path = "../../tests/common/mod.rs"]
mod common;

/// Bytes held at most while reading an input: FACTOR × its size + ALLOWANCE (a tokenizer's
/// normaliser and pre-tokenizer take up to ~0.9 MB whatever the input; the corpus peaks at 1.2 MB).
const FACTOR: usize = 16;
const ALLOWANCE: usize = 2 << 20;

const TEXTS: [&str; 4] = ["", "naïve café 東京 🙂", "the quick brown fox", "  \t\u{301}x"];

fn exercise(model: StaticModel) {
    let _ = model.encode(&TEXTS);
    let _ = model.to_edo().to_bytes();
}

/// `data` read as an `.edo` model file, and the model exercised if it is one.
fn edo_file(data: &[u8]) {
    if let Ok(model) = StaticModel::from_edo_bytes(data.to_vec()) {
        exercise(model);
    }
}

fuzz_target!(|data: &[u8]| {
    // An `.edo` model file with its header's checksum made right too, so that a mutated header
    // also reaches the checks past the checksum.
    if let Some(resigned) = common::resigned(data) {
        peak::bounded(&resigned, FACTOR, ALLOWANCE, edo_file);
    }
    peak::bounded(data, FACTOR, ALLOWANCE, |data| {
        edo_file(data);
        if data.len() >= 6 {
            let config_len = u16::from_le_bytes([data[0], data[1]]) as usize;
            let tokenizer_len = u32::from_le_bytes([data[2], data[3], data[4], data[5]]) as usize;
            let rest = &data[6..];
            if config_len <= rest.len() && tokenizer_len <= rest.len() - config_len {
                let (config, rest) = rest.split_at(config_len);
                let (tokenizer, safetensors) = rest.split_at(tokenizer_len);
                if let Ok(model) = StaticModel::from_bytes(config, tokenizer, safetensors) {
                    exercise(model);
                }
            }
        }
    });
});
