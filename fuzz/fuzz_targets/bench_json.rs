//! Benchmark results files (`edo bench compare` reads them from anywhere: another machine, a
//! browser's download, a peer script): reading, then every report — text, HTML with its charts,
//! Markdown — of the file alone and beside itself. None may panic or hang, whatever the numbers.
#![no_main]

use edo_bench::suite::{report, Results};
use libfuzzer_sys::fuzz_target;

#[path = "peak.rs"]
mod peak;

/// Bytes held at most while reading an input: FACTOR × its size + ALLOWANCE (the reports' HTML and
/// SVG grow with the file: the corpus peaks at 5 × its size).
const FACTOR: usize = 16;
const ALLOWANCE: usize = 256 << 10;

fuzz_target!(|data: &[u8]| {
    peak::bounded(data, FACTOR, ALLOWANCE, |data| {
        let Ok(text) = std::str::from_utf8(data) else { return };
        if let Ok(results) = Results::from_json(text) {
            let two = [results.clone(), results];
            for files in [&two[..1], &two[..]] {
                let _ = report::text(files);
                let _ = report::html(files);
                let _ = report::markdown(files);
            }
        }
    });
});
