//! The GatherBlockQuantized reader: safetensors files holding data, scales and zero points, read
//! as a triplet, turned into a table and decoded. None may panic, hang or allocate what the file
//! cannot back.
#![no_main]

use edo::file::gbq::Gbq;
use edo::file::import::{self, FileLayout};
use libfuzzer_sys::fuzz_target;

#[path = "peak.rs"]
mod peak;

/// Bytes held at most while reading an input: FACTOR × its size + ALLOWANCE (the corpus peaks at
/// 2.4 × its size, 22 KB).
const FACTOR: usize = 16;
const ALLOWANCE: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    peak::bounded(data, FACTOR, ALLOWANCE, |data| {
        if let Ok(g) = Gbq::from_safetensors(data) {
            if let Ok(table) = g.to_table() {
                let _ = Gbq::from_table(match &table {
                    import::Table::Packed(t) => t,
                    import::Table::Dense { .. } => return,
                });
            }
            let _ = g.decode();
            let _ = g.to_safetensors();
        }
        if let Ok(imported) = import::safetensors(data, None, FileLayout::Dense) {
            let _ = imported.values();
        }
    });
});
