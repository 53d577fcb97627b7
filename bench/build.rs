fn main() {
    // native (threads, blocking wrappers) vs the browser. Unlike edo's and edo-core's `web` (any
    // wasm32), `web` here is the browser's target only: a WASI build (wasm32-wasip1) is neither —
    // no threads, no GPU, but files and std's clock.
    cfg_aliases::cfg_aliases! {
        web: { all(target_arch = "wasm32", target_os = "unknown") },
        native: { not(target_arch = "wasm32") },
    }
}
