fn main() {
    // edo's split, under the same names: native (threads, blocking wrappers) vs the browser. A
    // WASI build (wasm32-wasip1) is neither: no threads, no GPU, but files and a clock.
    cfg_aliases::cfg_aliases! {
        web: { all(target_arch = "wasm32", target_os = "unknown") },
        native: { not(target_arch = "wasm32") },
    }
}
