//! The GGUF reader: header parsing, tensor reading (whole and by rows) and decoding. None may
//! panic, hang or allocate what a header claims without the bytes to back it.
#![no_main]

use edo::file::gguf::Gguf;
use libfuzzer_sys::fuzz_target;

#[path = "peak.rs"]
mod peak;

/// Bytes held at most while reading an input: FACTOR × its size + ALLOWANCE (the corpus peaks at
/// 5.4 × its size, 11 KB).
const FACTOR: usize = 8;
const ALLOWANCE: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    peak::bounded(data, FACTOR, ALLOWANCE, |data| {
        let Ok(g) = Gguf::parse(data) else { return };
        for t in &g.tensors {
            let _ = t.type_name();
            if let Ok(imported) = g.table(data, &t.name) {
                let _ = imported.values();
            }
            let present = g.present_rows(t);
            if present > 0 {
                if let Ok(imported) = g.table_rows(data, &t.name, present - 1..present) {
                    let _ = imported.values();
                }
            }
        }
        for (_, v) in &g.metadata {
            let _ = v.to_string();
        }
    });
});
