//! Every reader of untrusted bytes: the .edo table file, .npy, safetensors import and text
//! import. None may panic, hang or allocate what a header claims without the bytes to back it.
#![no_main]

use edo::file::import::{self, FileLayout};
use edo::file::TableFile;
use libfuzzer_sys::fuzz_target;

#[path = "peak.rs"]
mod peak;

#[path = "../../tests/common/mod.rs"]
mod common;

/// Bytes held at most while reading an input: FACTOR × its size + ALLOWANCE (the corpus peaks at
/// 3.1 × its size).
const FACTOR: usize = 8;
const ALLOWANCE: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    // Each input as it is, and with its header's checksum made right, so that a mutated header
    // also reaches the checks past the checksum.
    let resigned = common::resigned(data);
    for data in std::iter::once(data).chain(resigned.as_deref()) {
        read(data);
    }
});

fn read(data: &[u8]) {
    peak::bounded(data, FACTOR, ALLOWANCE, |data| {
        if let Ok(file) = TableFile::from_bytes(data.to_vec()) {
            let _ = file.verify();
            let t = file.table();
            if t.rows() > 0 {
                let _ = file.verify_rows(t.rows() - 1..t.rows());
                let mut row = vec![0f32; t.dim()];
                t.decode_row_into(t.rows() - 1, &mut row);
            }
            if let Some(v) = file.vocab() {
                let _ = v.token(0);
            }
        }
        for layout in [FileLayout::Dense, FileLayout::Fbgemm8, FileLayout::Fbgemm4 { dim: None }, FileLayout::Packbits { dim: None }] {
            let _ = import::npy(data, layout);
            let _ = import::safetensors(data, None, layout);
        }
        let _ = import::text(data);
    });
}
