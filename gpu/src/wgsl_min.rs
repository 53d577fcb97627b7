// Shared by build.rs (which writes the browser build's copies of `shaders/`) and tests/shaders.rs
// (which validates every kernel so written): included, not a module.

/// WGSL without its comments, indentation and blank lines: what the browser build ships in its
/// `.wasm` (WGSL has no string literals, so `//` always starts a comment).
#[allow(dead_code)]
fn strip_wgsl(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let code = line.find("//").map_or(line, |at| &line[..at]).trim();
        if !code.is_empty() {
            out.push_str(code);
            out.push('\n');
        }
    }
    out
}
