fn main() {
    // The one split edo knows about: native (threads) vs wasm32 (one thread: a browser, WASI).
    cfg_aliases::cfg_aliases! {
        web: { target_arch = "wasm32" },
        native: { not(target_arch = "wasm32") },
    }
}
